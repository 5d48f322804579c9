"""kitbench.advice.project_files: the project's files written, remembered and updated in place, a person's
own tables and entries kept."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from kitbench.advice import project_files
from kitbench.errors import UsageError
from kitbench.machine.probe import Probe, override, saved

CI = saved.load(Path(__file__).resolve().parents[1] / "resources" / "project" / "ci-linux-x86_64.probe.json")
LAPTOP = override(CI, os="macos", arch="arm64", os_version="14.5", python_version="3.11")
H100 = override(CI, driver="570.86.10", gpu_capabilities=["9.0"], python_version="3.11")

# What a person adds to the generated file: an entry of their own among the dependencies, a table of their
# own in the middle, a key of their own in a table kitbench writes, an index of their own, a comment.
HAND_EDITS = (('dependencies = [\n', 'dependencies = [\n    "rich>=13",\n'),
              ("[tool.uv]\n",
               '[project.scripts]\nteam = "team:main"  # our entry point\n\n[tool.uv]\npackage = false\n'))
OWN_TABLES = ('\n# our linter\n[tool.ruff]\nline-length = 100   # wide\n\n'
              '[[tool.uv.index]]\nname = "internal"\nurl = "https://pypi.internal/simple"\n')


def _write(folder: Path, *machines: tuple[str, Probe], **options: object) -> str:
    project_files.write(folder, machines, **options)  # type: ignore[arg-type]
    return (folder / "pyproject.toml").read_text()


def _hand_edited(folder: Path) -> str:
    text = (folder / "pyproject.toml").read_text()
    for old, new in HAND_EDITS:
        assert old in text
        text = text.replace(old, new, 1)
    text += OWN_TABLES
    (folder / "pyproject.toml").write_text(text)
    return text


def test_a_new_machine_changes_kitbench_s_entries_only_and_keeps_a_person_s_own(tmp_path: Path) -> None:
    _write(tmp_path, ("laptop", LAPTOP), ("ci", CI))
    edited = _hand_edited(tmp_path)
    # Only the new machine is given: the file remembers the others.
    updated = _write(tmp_path, ("h100", H100))
    assert "# our linter\n[tool.ruff]\nline-length = 100   # wide\n" in updated
    assert '[project.scripts]\nteam = "team:main"  # our entry point\n' in updated
    assert '[[tool.uv.index]]\nname = "internal"\nurl = "https://pypi.internal/simple"\n' in updated
    assert '    "rich>=13",\n' in updated and "package = false\n" in updated
    # The same three machines written afresh: the update holds exactly kitbench's part of that file.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "pyproject.toml").write_text(edited)
    assert _write(fresh, ("laptop", LAPTOP), ("ci", CI), ("h100", H100)) == updated
    assert "h100" in project_files.remembered([("pyproject.toml", updated)])


def test_run_again_with_the_same_machines_the_file_is_not_rewritten(tmp_path: Path) -> None:
    _write(tmp_path, ("laptop", LAPTOP), ("h100", H100), ("ci", CI), with_pixi=True)
    _hand_edited(tmp_path)
    before = {p.name: p.read_text() for p in tmp_path.iterdir()}
    team, written = project_files.write(tmp_path, [])
    assert written == [] and [m.name for m in team.members] == ["laptop", "h100", "ci"]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == before


def test_a_new_release_changes_the_pins_and_nothing_else(tmp_path: Path) -> None:
    old = _write(tmp_path, ("laptop", LAPTOP), ("ci", CI), release_spec="2.14.0")
    new = _write(tmp_path, release_spec="2.14.1")
    changed = [line for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:1] in "+-"]
    # torchvision 0.29.0 pairs with torch 2.14.0 and 0.29.1 with 2.14.1 (PyPI: each requires its torch).
    assert changed and all(("torch==2.14" in line or "torchvision==0.29" in line
                            or line[2:].startswith(("release = ", "release_spec = "))) for line in changed), changed
    assert len([line for line in changed if line.startswith("+")]) == len(changed) // 2
    assert 'release_spec = "2.14.1"' in new


def test_drop_forgets_a_machine_and_its_build(tmp_path: Path) -> None:
    _write(tmp_path, ("laptop", LAPTOP), ("h100", H100), ("ci", CI))
    text = _write(tmp_path, drop=["h100"])
    assert "cu126" not in text and "[tool.kitbench.machines.h100]" not in text
    with pytest.raises(UsageError, match="--drop h100: no such machine"):
        project_files.write(tmp_path, [], drop=["h100"])


def test_an_extra_of_a_person_s_own_named_as_a_build_is_refused_not_taken(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "team"\n\n[project.optional-dependencies]\n'
                                             'cpu = ["onnxruntime"]\n')
    with pytest.raises(UsageError, match="the extra 'cpu' is yours"):
        project_files.write(tmp_path, [("h100", H100), ("ci", CI)])
    assert (tmp_path / "pyproject.toml").read_text().endswith('cpu = ["onnxruntime"]\n')


def test_pixi_file_is_updated_in_place_too(tmp_path: Path) -> None:
    project_files.write(tmp_path, [("laptop", LAPTOP)], with_pixi=True)
    pixi = tmp_path / "pixi.toml"
    pixi.write_text(pixi.read_text() + '\n[tasks]\ntrain = "python train.py"  # ours\n')
    project_files.write(tmp_path, [("ci", CI)])        # pixi.toml is kitbench's: updated without --pixi
    text = pixi.read_text()
    assert '[tasks]\ntrain = "python train.py"  # ours\n' in text
    assert "[feature.ci.pypi-dependencies]" in text and "[feature.laptop]" in text
    assert 'ci = ["ci"]' in text and 'laptop = ["laptop"]' in text
