"""envs/scripts/build_matrix.py on a small git history of test-infra's matrix file made here: each series from its
best channel's last commit; a value that would break the TSV (a tab, a line break, a word), no clone, or a git that
fails is one ERROR line and the file left as it was."""

from __future__ import annotations

import runpy
import subprocess
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "envs" / "scripts" / "build_matrix.py"
MATRIX = "tools/scripts/generate_binary_build_matrix.py"


def _clone(tmp_path: Path, *versions: str) -> Path:
    """A git repository whose matrix file was committed once per text in ``versions``."""
    clone = tmp_path / "test-infra"
    (clone / MATRIX).parent.mkdir(parents=True)

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    for text in versions:
        (clone / MATRIX).write_text(text)
        git("add", MATRIX)
        git("commit", "-q", "-m", "matrix")
    return clone


GOOD = (
    'CURRENT_STABLE_VERSION = "2.14.1"\nCURRENT_NIGHTLY_VERSION = "2.15.0"\n'
    'CUDA_ARCHES_DICT = {"release": ["12.6", "13.0"], "nightly": ["13.0", "13.2"]}\n'
    'ROCM_ARCHES_DICT = {"release": ["7.2"], "nightly": ["7.2", "7.14"]}\n'
)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    module: dict[str, Any] = runpy.run_path(str(SCRIPT))
    with pytest.raises(SystemExit) as done:
        module["_shared"].run(lambda: module["main"](*map(Path, argv)))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return int(done.value.code or 0), captured.out, captured.err


def test_each_series_is_written_from_its_best_channel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "build-matrix.tsv"
    code, said, _ = _run(capsys, str(_clone(tmp_path, GOOD)), str(out))
    assert code == 0 and said == f"wrote {out} (2 series)\n"
    rows = [line.split("\t") for line in out.read_text().splitlines() if not line.startswith("#")]
    assert [(r[0], r[1], r[4], r[5]) for r in rows] == [
        ("2.14", "release", "12.6 13.0", "7.2"),
        ("2.15", "nightly", "13.0 13.2", "7.2 7.14"),
    ]


@pytest.mark.parametrize(
    "odd",
    [
        'CUDA_ARCHES_DICT = {"release": ["12.6\\t13.9", "13.0"]}\n',
        'CUDA_ARCHES_DICT = {"release": ["12.6\\n2.99\\trelease"]}\n',
        'ROCM_ARCHES_DICT = {"release": ["7.2; rm -rf"]}\n',
        'CUDA_ARCHES_NO_GETTING_STARTED = {"12.6": True}\n',
    ],
)
def test_a_value_that_is_no_version_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], odd: str
) -> None:
    out = tmp_path / "build-matrix.tsv"
    out.write_text("kept\n")
    code, _, err = _run(capsys, str(_clone(tmp_path, GOOD + odd)), str(out))
    lines = err.splitlines()
    assert code == 1 and len(lines) == 2 and lines[0].startswith("ERROR: series 2.14 at ")
    assert "is not in the form its column takes" in lines[0]
    assert out.read_text() == "kept\n"


def test_a_commit_no_parser_reads_is_passed_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nesting past the parser's stack, a null byte, an unhashable key: that commit's values are not read."""
    broken = [
        "X = " + "[1," * 3000 + "]" * 3000 + "\n",
        "X = 1\x00\n",
        'CURRENT_STABLE_VERSION = "2.16.0"\nCUDA_ARCHES_DICT = {["release"]: ["13.0"]}\n',
    ]
    out = tmp_path / "build-matrix.tsv"
    code, said, _ = _run(capsys, str(_clone(tmp_path, GOOD, *broken)), str(out))
    assert code == 0 and said == f"wrote {out} (3 series)\n"
    assert "2.16\trelease\t" in out.read_text() and "\t\t\t" in out.read_text().split("2.16\t")[1]


def test_no_clone_or_a_failing_git_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # git looks for a repository in every folder above; a temporary folder inside one (CI's run found one) is not
    # the case this test is about.
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    out = tmp_path / "build-matrix.tsv"
    code, _, err = _run(capsys, str(tmp_path / "nowhere"), str(out))
    assert code == 1 and err.startswith("ERROR: ") and "is no clone of pytorch/test-infra" in err
    not_git = tmp_path / "copy"
    (not_git / MATRIX).parent.mkdir(parents=True)
    (not_git / MATRIX).write_text(GOOD)
    code, _, err = _run(capsys, str(not_git), str(out))
    assert code == 1 and err.startswith("ERROR: git log in ") and len(err.splitlines()) == 2
    assert not out.exists()
