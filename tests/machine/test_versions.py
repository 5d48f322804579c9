from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kitbench.errors import UsageError
from kitbench.machine.versions import capability_supported, parse_capability, parse_cuda, parse_driver


@pytest.mark.parametrize(
    ("text", "expected"),
    [("535.104.05", (535, 104, 5)), ("580", (580, 0, 0)), ("450.80.02", (450, 80, 2)), (" 525.60.13 ", (525, 60, 13))],
)
def test_parse_driver(text: str, expected: tuple[int, int, int]) -> None:
    assert parse_driver(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "535.104.05.1", "-1", "535..1", "v535"])
def test_parse_driver_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="malformed NVIDIA driver"):
        parse_driver(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.6", (8, 6)),
        ("sm_86", (8, 6)),
        ("86", (8, 6)),
        ("12.0", (12, 0)),
        ("120", (12, 0)),
        ("7", (7, 0)),
        ("10", (10, 0)),
        ("12", (12, 0)),
        ("sm_100", (10, 0)),
        ("100", (10, 0)),
        ("sm_90", (9, 0)),
        ("90", (9, 0)),
        ("sm_120", (12, 0)),
        ("sm_10", (1, 0)),
        ("35", (3, 5)),
    ],
)
def test_parse_capability(text: str, expected: tuple[int, int]) -> None:
    assert parse_capability(text) == expected


@pytest.mark.parametrize("text", ["", "8.", "8.66", "x8.6", "sm_", "1234"])
def test_parse_capability_refuses(text: str) -> None:
    with pytest.raises(UsageError, match="malformed compute capability"):
        parse_capability(text)


def test_parse_cuda() -> None:
    assert parse_cuda("12.6") == (12, 6)
    assert parse_cuda("cu118") == (11, 8)


def test_capability_supported_follows_cubin_and_ptx_rules() -> None:
    cu126 = ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"]
    assert capability_supported((8, 9), cu126)  # sm_86 cubin runs on 8.9
    assert not capability_supported((12, 0), cu126)  # Blackwell: the sm_120 trap
    assert capability_supported((12, 0), ["sm_90", "compute_120"])
    assert not capability_supported((6, 1), ["sm_70", "sm_80"])


@given(st.text(max_size=40))
def test_parsers_refuse_never_crash(text: str) -> None:
    for parser in (parse_driver, parse_capability, parse_cuda):
        with contextlib.suppress(UsageError):
            parser(text)


@given(st.lists(st.integers(0, 9999), min_size=1, max_size=3), st.sampled_from(["", " ", "\n"]))
def test_a_driver_version_of_up_to_three_numbers_parses_to_them(parts: list[int], space: str) -> None:
    """nvidia-smi's driver_version, as written: each number as it is (a leading zero, as in 535.104.05, drops),
    the missing ones 0."""
    text = space + ".".join(f"{n:02d}" if i else str(n) for i, n in enumerate(parts)) + space
    assert parse_driver(text) == (*parts, 0, 0)[:3]


@given(st.integers(1, 99), st.integers(0, 9), st.booleans())
def test_a_cuda_version_parses_from_either_spelling(major: int, minor: int, tag: bool) -> None:
    assert parse_cuda(f"cu{major}{minor}" if tag else f"{major}.{minor}") == (major, minor)


@given(st.integers(1, 99), st.integers(0, 9))
def test_a_capability_parses_from_its_dotted_form_and_from_sm(major: int, minor: int) -> None:
    assert parse_capability(f"{major}.{minor}") == (major, minor)
    if major >= 2:  # sm_10 to sm_13 read as sm_1x; see test_parse_capability for the short forms
        assert parse_capability(f"sm_{major}{minor}") == (major, minor)


def test_windows_device_managers_driver_version_is_translated_in_the_hint() -> None:
    """Device Manager shows NVIDIA's 572.16 as 32.0.15.7216; nvidia-smi shows 572.16."""
    with pytest.raises(UsageError, match=r"malformed NVIDIA driver version '32\.0\.15\.7216'") as refused:
        parse_driver("32.0.15.7216", "--driver")
    assert refused.value.hint == "that is Windows' form of NVIDIA's 572.16: --driver 572.16"
