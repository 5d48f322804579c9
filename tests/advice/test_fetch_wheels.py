"""envs/scripts/fetch_wheels.py against a PyPI stand-in on 127.0.0.1 (tests/pytorch_index.py) whose pages list the
wheels envs/wheels.yaml records: what it writes reads as the file does; a Requires-Python that packaging would
strip into something else (U+001C first), or that is no specifier set, or two of them, writes nothing and says so in
one ERROR line."""

from __future__ import annotations

import runpy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytorch_index import everything, serving

from kitbench.records import manifest

SCRIPT = Path(__file__).resolve().parents[2] / "envs" / "scripts" / "fetch_wheels.py"
RECORDED = Path(__file__).resolve().parents[2] / "envs" / "wheels.yaml"


def _tags(python: str) -> str:
    """envs/wheels.yaml's Python tag as a file name's interpreter-abi pair."""
    if python == "py3":
        return "py3-none"
    if python.endswith("-abi3"):
        return python
    return f"{python.rstrip('t')}-{python}"


class PyPI:
    """PEP 691 pages of torch, torchvision and torchaudio holding the wheels envs/wheels.yaml records."""

    def __init__(self) -> None:
        self.files: dict[str, list[dict[str, Any]]] = {"torch": [], "torchvision": [], "torchaudio": []}
        for row in yaml.safe_load(RECORDED.read_text())["releases"]:
            for package, facts in row["wheels"].items():
                self.add(package, row[package], facts)

    def add(self, package: str, version: str, facts: dict[str, str]) -> None:
        requires = facts["requires_python"]
        for platform, pythons in facts.items():
            if platform == "requires_python":
                continue
            for python in pythons.split():
                name = f"{package}-{version}-{_tags(python)}-{platform}.whl"
                self.files[package].append(
                    {
                        "filename": name,
                        "url": f"/files/{name}",
                        "hashes": {},
                        **({"requires-python": requires} if requires else {}),
                    }
                )

    def page(self, name: str) -> dict[str, Any] | None:
        files = self.files.get(name)
        return None if files is None else {"meta": {"api-version": "1.1"}, "name": name, "files": files}


@pytest.fixture
def pypi(monkeypatch: pytest.MonkeyPatch) -> Iterator[PyPI]:
    stand = PyPI()
    with serving(stand.page, everything) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        yield stand


@pytest.fixture
def out(tmp_path: Path) -> Path:
    """Where the script writes: a copy of the recorded file, so that a refusal can be seen to leave it alone."""
    path = tmp_path / "wheels.yaml"
    path.write_bytes(RECORDED.read_bytes())
    return path


def _main(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The script as `python envs/scripts/fetch_wheels.py` runs it, writing ``out``."""
    module = runpy.run_path(str(SCRIPT))
    shared = module["_shared"]
    with pytest.raises(SystemExit) as done:
        shared.run(lambda: module["main"](out))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return int(done.value.code or 0), captured.out, captured.err


def test_what_pypi_lists_is_written_as_the_file_records_it(
    pypi: PyPI, out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said, _ = _main(out, capsys)
    assert code == 0 and said.startswith(f"wrote {out} (")
    written, recorded = manifest.load(out, "wheels").data, manifest.load(RECORDED, "wheels").data
    assert written["releases"] == recorded["releases"]
    assert written["source"].startswith("http://127.0.0.1:") and written["source"].endswith(
        "/simple/{torch,torchvision,torchaudio}/ (PEP 691 JSON), yanked files left out"
    )

    # In the form the file is kept in, byte for byte, but for where and when it was read.
    def undated(text: str) -> list[str]:
        return [line for line in text.splitlines() if not line.startswith(("source: ", "read: "))]

    assert undated(out.read_text()) == undated(RECORDED.read_text())


@pytest.mark.parametrize(
    "requires",
    [
        "\x1c>=3.10",  # the sweep's: packaging strips it, YAML does not take it raw
        ">=3.10\x1f",
        ">=3.10,<3.15\x85",
        ">=3.10, <3.15 \u2028",
    ],
)
def test_a_requires_python_packaging_would_strip_writes_nothing(
    pypi: PyPI, out: Path, capsys: pytest.CaptureFixture[str], requires: str
) -> None:
    for entry in pypi.files["torch"]:
        if entry["filename"].startswith("torch-2.12.0-"):
            entry["requires-python"] = requires
    before = out.read_bytes()
    code, _, err = _main(out, capsys)
    assert code == 1 and out.read_bytes() == before
    lines = err.splitlines()
    assert (
        len(lines) == 2
        and lines[0].startswith("ERROR: torch 2.12.0: a Requires-Python that is no PEP 440 specifier set")
        and lines[1].startswith("hint: ")
    )


def test_two_requires_python_values_or_no_wheel_write_nothing(
    pypi: PyPI, out: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = out.read_bytes()
    pypi.files["torchvision"][-1]["requires-python"] = ">=3.99"
    code, _, err = _main(out, capsys)
    assert code == 1 and err.startswith("ERROR: torchvision ") and "2 Requires-Python values" in err
    pypi.files["torchvision"] = [
        e for e in pypi.files["torchvision"] if not e["filename"].startswith("torchvision-0.15.1-")
    ]
    code, _, err = _main(out, capsys)
    assert code == 1 and err.startswith("ERROR: torchvision 0.15.1: 0 platforms on PyPI")
    assert out.read_bytes() == before


def test_an_index_that_does_not_answer_is_one_line(
    out: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    before = out.read_bytes()
    code, _, err = _main(out, capsys)
    assert code == 1 and err.startswith("ERROR: cannot reach 127.0.0.1:9") and out.read_bytes() == before
