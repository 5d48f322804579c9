"""envs/scripts/_shared.py, what the fact scripts share: whatever text a source sends, a value written by ``dump``
reads back as itself (or the write is refused in one line), and no header line leaves its comment."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kitbench.errors import ManifestError
from kitbench.records import manifest

import _shared


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.text(max_size=40), min_size=1, max_size=5), header=st.text(max_size=80))
def test_every_value_reads_back_as_itself_and_the_header_stays_comments(values: list[str], header: str) -> None:
    data = {"source": values[0], "rows": [{"torch": v, "pythons": {"torch": v}} for v in values], "n": 3}
    text = _shared.dump(data, header, flow=bool(len(values) % 2))
    assert all(line.startswith("# ") or line == "#" for line in text.split("\n")[: header.count("\n") + 1] if header)
    assert manifest.parse(text, Path("x.yaml"))[0] == data


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"source": "a\ud800b", "read": "2026-11-28", "releases": [{}]}, "invalid Unicode character escape"),
        ({"source": "x", "read": "2026-11-28", "releases": []}, "releases: "),
        ({"source": "x", "read": "28 Nov", "releases": [{}]}, "read: "),
    ],
)
def test_what_does_not_read_back_valid_is_refused_and_nothing_written(
    tmp_path: Path, data: dict[str, object], said: str
) -> None:
    """A lone surrogate (a JSON page's escape can make one) and a value the schema refuses alike."""
    path = tmp_path / "wheels.yaml"
    path.write_text("kept\n")
    with pytest.raises(ManifestError, match=said):
        _shared.write(path, _shared.dump(data), "wheels")
    assert path.read_text() == "kept\n" and [p.name for p in tmp_path.iterdir()] == ["wheels.yaml"]


@pytest.mark.parametrize(
    "name",
    [
        "torch-2.10.0+cpu-cp313%22-cp313-win_arm64.whl",
        "torch-2.10.0-cp313-cp313-.whl",
        "torch-2.10.0-cp313-cp313-win_arm64.whl.metadata",
        "torch-2.10.0.tar.gz",
        "t\u00f6rch-2.10.0-cp313-cp313-win_arm64.whl",
        "torch-x-cp313-cp313-any.whl",
        "torch-2.10.0-cp313..cp312-cp313-win_arm64.whl",
        "",
    ],
)
def test_a_name_that_is_no_wheel_s_is_none(name: str) -> None:
    assert _shared.wheel(name) is None


def test_a_wheel_s_name_reads_as_packaging_reads_it() -> None:
    name, version, build, tags = _shared.wheel("Torch-2.10.0+cpu-1-cp312.cp313-cp313-win_arm64.whl") or ((),) * 4
    assert (name, str(version), build) == ("torch", "2.10.0+cpu", (1, ""))
    assert sorted(str(t) for t in tags) == ["cp312-cp313-win_arm64", "cp313-cp313-win_arm64"]


@pytest.mark.parametrize(
    "text", ["\x1c>=3.10", ">=3.10\n", ">=3.10; os_name == 'nt'", ">=3.", "=>3.10", ">=3.10\u2028"]
)
def test_a_requires_python_that_is_no_specifier_set_is_refused(text: str) -> None:
    with pytest.raises(_shared.Refused, match="a Requires-Python that is no PEP 440 specifier set"):
        _shared.requires_python(text, "torch 2.10.0")
    assert _shared.requires_python(">=3.10, !=3.14.*", "torch 2.10.0") == ">=3.10, !=3.14.*"
