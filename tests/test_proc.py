"""kitbench._proc: the one way kitbench runs a program."""

from __future__ import annotations

import sys
from pathlib import Path

from kitbench import _proc


def test_a_program_runs_in_the_folder_it_is_given(tmp_path: Path) -> None:
    done = _proc.run([sys.executable, "-c", "import os; print(os.getcwd())"], 60, cwd=tmp_path)
    assert (done.returncode, Path(done.stdout.strip()).resolve()) == (0, tmp_path.resolve())


def test_without_a_folder_it_runs_where_kitbench_runs() -> None:
    done = _proc.run([sys.executable, "-c", "import os; print(os.getcwd())"], 60)
    assert Path(done.stdout.strip()).resolve() == Path.cwd().resolve()
