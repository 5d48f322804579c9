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


def test_a_later_run_keeps_the_release_asked_and_the_mirror(tmp_path: Path) -> None:
    _write(tmp_path, ("ci", CI), release_spec="2.14.0", index="https://mirror.example/whl/{compute}")
    text = _write(tmp_path, ("h100", H100))
    assert "torch==2.14.0" in text and "torch==2.14.1" not in text
    assert 'release_spec = "2.14.0"' in text and 'url = "https://mirror.example/whl/cu126"' in text
    # Asked again: each replaces what was remembered.
    text = _write(tmp_path, release_spec="stable", index="https://other.example/{compute}/simple")
    assert 'release_spec = "stable"' in text and "mirror.example" not in text
    assert 'url = "https://other.example/cpu/simple"' in text
    text = _write(tmp_path, index="")       # back to PyTorch's own
    assert "other.example" not in text and 'url = "https://download.pytorch.org/whl/cpu"' in text


def test_the_release_asked_not_the_one_it_resolved_to_is_remembered(tmp_path: Path) -> None:
    text = _write(tmp_path, ("ci", CI))
    assert 'release_spec = "stable"' in text


@pytest.mark.parametrize("index", ["https://m/{Compute}", "https://m/{0}", "https://m/{", "https://m/{compute.x}",
                                   "https://u:secret@m/{compute}", "file:///m/{compute}"])
def test_an_unusable_mirror_is_refused_and_never_quoted(tmp_path: Path, index: str) -> None:
    with pytest.raises(UsageError, match="--index") as refused:
        project_files.write(tmp_path, [("ci", CI)], index=index)
    assert "secret" not in refused.value.message + (refused.value.hint or "")
    assert not list(tmp_path.iterdir())


def test_an_older_python_widens_kitbench_s_floor_and_a_person_s_is_kept(tmp_path: Path) -> None:
    text = _write(tmp_path, ("h100", H100), with_pixi=True)
    assert 'requires-python = ">=3.11"' in text
    text = _write(tmp_path, ("old", override(CI, python_version="3.10")))
    assert 'requires-python = ">=3.10"' in text
    assert 'python = ">=3.10"' in (tmp_path / "pixi.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(text.replace('requires-python = ">=3.10"', 'requires-python = ">=3.12"'))
    assert 'requires-python = ">=3.12"' in _write(tmp_path, ("ci", CI))


def test_a_person_s_index_or_feature_named_as_kitbench_s_is_refused_not_taken(tmp_path: Path) -> None:
    own = '[[tool.uv.index]]\nname = "pytorch-cpu"\nurl = "https://pypi.internal/simple"\n'
    (tmp_path / "pyproject.toml").write_text(own)
    with pytest.raises(UsageError, match="the index 'pytorch-cpu' is yours"):
        project_files.write(tmp_path, [("ci", CI)])
    assert (tmp_path / "pyproject.toml").read_text() == own
    (tmp_path / "pyproject.toml").unlink()
    (tmp_path / "pixi.toml").write_text('[feature.ci]\nplatforms = ["linux-64"]\n')
    with pytest.raises(UsageError, match="the feature 'ci' is yours"):
        project_files.write(tmp_path, [("ci", CI)], with_pixi=True)
    assert not (tmp_path / "pyproject.toml").exists()


@pytest.mark.parametrize(("name", "text", "words"), [
    ("pyproject.toml", "tool = 5\n", "tool is not a table"),
    ("pyproject.toml", '[tool.uv]\nsources = "x"\n', "tool.uv.sources is not a table"),
    ("pyproject.toml", '[tool.uv]\nindex = "x"\n', "tool.uv.index is not an array of tables"),
    ("pyproject.toml", "[tool.uv]\nconflicts = [1]\n", "tool.uv.conflicts is not a list of lists"),
    ("pyproject.toml", '[project]\ndependencies = "torch"\n', "project.dependencies is not a list of strings"),
    ("pyproject.toml", "[project]\ndependencies = [1]\n", "project.dependencies is not a list of strings"),
    ("pyproject.toml", "[tool.kitbench]\nrelease_spec = 3\n", "tool.kitbench.release_spec is not text"),
    ("pyproject.toml", "[project]\nname = 3\n", "project.name is not text"),
    ("pixi.toml", '[workspace]\nplatforms = "linux-64"\n', "workspace.platforms is not a list of strings"),
    ("pixi.toml", "environments = 3\n", "environments is not a table"),
])
def test_a_table_or_key_of_the_wrong_shape_is_refused(tmp_path: Path, name: str, text: str, words: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=words):
        project_files.write(tmp_path, [("ci", CI)], with_pixi=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
