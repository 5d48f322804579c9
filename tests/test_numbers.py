"""kitbench._numbers: the one reader of whole numbers in text kitbench did not write."""

from __future__ import annotations

import pytest

from kitbench import _numbers


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("12", 12),
        ("570", 570),
        ("9" * 40, int("9" * 40)),
        ("", None),
        ("²", None),
        ("٣", None),
        ("\uff15", None),
        (" 7", None),
        ("7 ", None),
        ("1_0", None),
        ("+1", None),
        ("-1", None),
        ("1.0", None),
        ("9" * 41, None),
    ],
)
def test_only_ascii_digits_make_a_number(text: str, value: int | None) -> None:
    assert _numbers.whole(text) == value
    assert _numbers.is_whole(text) == (value is not None)


@pytest.mark.parametrize(("seconds", "text"), [(0.0004, "0 ms"), (0.012, "12 ms"), (0.1, "0.1 s"), (54.46, "54.5 s")])
def test_a_one_time_cost_reads_in_its_own_unit(seconds: float, text: str) -> None:
    assert _numbers.once(seconds) == text  # a CUDA graph's capture was printed "0.0 s" on an H200
