"""kitbench.advice.project_files: the project's files written, remembered and updated in place, a person's
own tables and entries kept."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

import pytest
import tomllib

from kitbench.advice import project_files
from kitbench.errors import KitbenchError, UsageError
from kitbench.machine.probe import Probe, override, saved

CI = saved.load(Path(__file__).resolve().parents[1] / "resources" / "project" / "ci-linux-x86_64.probe.json")
LAPTOP = override(CI, os="macos", arch="arm64", os_version="14.5", python_version="3.11")
H100 = override(CI, driver="570.86.10", gpu_capabilities=["9.0"], python_version="3.11")

# What a person adds to the generated file: an entry of their own among the dependencies, a table of their
# own in the middle, a key of their own in a table kitbench writes, an index of their own, a comment.
HAND_EDITS = (
    ("dependencies = [\n", 'dependencies = [\n    "rich>=13",\n'),
    ("[tool.uv]\n", '[project.scripts]\nteam = "team:main"  # our entry point\n\n[tool.uv]\npackage = false\n'),
)
OWN_TABLES = (
    "\n# our linter\n[tool.ruff]\nline-length = 100   # wide\n\n"
    '[[tool.uv.index]]\nname = "internal"\nurl = "https://pypi.internal/simple"\n'
)


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
    assert changed and all(
        ("torch==2.14" in line or "torchvision==0.29" in line or line[2:].startswith(("release = ", "release_spec = ")))
        for line in changed
    ), changed
    assert len([line for line in changed if line.startswith("+")]) == len(changed) // 2
    assert 'release_spec = "2.14.1"' in new


def test_drop_forgets_a_machine_and_its_build(tmp_path: Path) -> None:
    _write(tmp_path, ("laptop", LAPTOP), ("h100", H100), ("ci", CI))
    text = _write(tmp_path, drop=["h100"])
    assert "cu126" not in text and "[tool.kitbench.machines.h100]" not in text
    with pytest.raises(UsageError, match="--drop h100: no such machine"):
        project_files.write(tmp_path, [], drop=["h100"])


def test_a_person_s_entry_in_an_extra_of_kitbench_s_is_kept(tmp_path: Path) -> None:
    _team(tmp_path)
    path = tmp_path / "pyproject.toml"
    path.write_text(path.read_text().replace("cu126 = [\n", 'cu126 = [\n    "flash-attn>=2",  # ours\n'))
    text = _write(tmp_path, release_spec="2.14.0")
    assert 'cu126 = [\n    "flash-attn>=2",  # ours\n    "torch==2.14.0; ' in text
    # The extra no longer kitbench's (one build left on the platform): the person's entry stays in it.
    text = _write(tmp_path, drop=["ci"])
    assert tomllib.loads(text)["project"]["optional-dependencies"] == {"cu126": ["flash-attn>=2"]}


def test_an_extra_of_a_person_s_own_named_as_a_build_is_refused_not_taken(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "team"\n\n[project.optional-dependencies]\ncpu = ["onnxruntime"]\n'
    )
    with pytest.raises(UsageError, match="the extra 'cpu' is yours"):
        project_files.write(tmp_path, [("h100", H100), ("ci", CI)])
    assert (tmp_path / "pyproject.toml").read_text().endswith('cpu = ["onnxruntime"]\n')


def test_pixi_file_is_updated_in_place_too(tmp_path: Path) -> None:
    project_files.write(tmp_path, [("laptop", LAPTOP)], with_pixi=True)
    pixi = tmp_path / "pixi.toml"
    pixi.write_text(pixi.read_text() + '\n[tasks]\ntrain = "python train.py"  # ours\n')
    project_files.write(tmp_path, [("ci", CI)])  # pixi.toml is kitbench's: updated without --pixi
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
    text = _write(tmp_path, index="")  # back to PyTorch's own
    assert "other.example" not in text and 'url = "https://download.pytorch.org/whl/cpu"' in text


def test_the_release_asked_not_the_one_it_resolved_to_is_remembered(tmp_path: Path) -> None:
    text = _write(tmp_path, ("ci", CI))
    assert 'release_spec = "stable"' in text


@pytest.mark.parametrize(
    "index",
    [
        "https://m/{Compute}",
        "https://m/{0}",
        "https://m/{",
        "https://m/{compute.x}",
        "https://u:secret@m/{compute}",
        "file:///m/{compute}",
    ],
)
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


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
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
    ],
)
def test_a_table_or_key_of_the_wrong_shape_is_refused(tmp_path: Path, name: str, text: str, words: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError, match=words):
        project_files.write(tmp_path, [("ci", CI)], with_pixi=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def _team(folder: Path, **options: object) -> str:
    """Two machines on one platform and two builds: kitbench writes every kind of entry it has (pins in extras,
    sources by extra, two indexes, a conflict, its machines)."""
    return _write(folder, ("h100", H100), ("ci", CI), **options)


# A person's pyproject.toml, each with what kitbench must keep as it is: (the file, the parts kept byte for byte).
PERSONS_PYPROJECT = {
    "triple quotes in a one-line string": (
        '[project]\nname = "team"\ndescription = "uses \'\'\' quotes"\n\n[tool.mine]\nkeep = true\n',
        ["description = \"uses ''' quotes\"\n", "\n[tool.mine]\nkeep = true\n"],
    ),
    "triple quotes in a comment": (
        '# a """ in a comment\n[project]\nname = "team"\n\n[tool.mine]\nkeep = 1  # \'\'\'\n',
        ['# a """ in a comment\n', "[tool.mine]\nkeep = 1  # '''\n"],
    ),
    "a literal string of double quotes": (
        "[project]\nname = 'team'\nx = '\"\"\"'\n\n[tool.mine]\nkeep = true\n",
        ['x = \'"""\'\n', "\n[tool.mine]\nkeep = true\n"],
    ),
    "comments above and in the tables kitbench writes into": (
        "[tool.ruff]\nline-length = 100\n\n# why we do not package\n[tool.uv]\npackage = false  # an app\n\n"
        '# the project itself, second\n[project]\nname = "team"\n# pins we own\ndependencies = [\n'
        '    "numpy>=2",  # our own pin\n    "rich",\n]\n',
        [
            "# why we do not package\n[tool.uv]\npackage = false  # an app\n",
            "# the project itself, second\n[project]\n",
            "# pins we own\ndependencies = [\n",
            '    "numpy>=2",  # our own pin\n    "rich",\n',
        ],
    ),
    "a table with a quoted dotted key": (
        '[project]\nname = "team"\n\n[tool."kitbench.notes"]\nwho = "us"\n\n[tool.mine."a.b"]\nx = 1\n',
        ['[tool."kitbench.notes"]\nwho = "us"\n', '[tool.mine."a.b"]\nx = 1\n'],
    ),
    "a UTF-8 byte order mark": ('\ufeff[project]\nname = "team"\n', ['\ufeff[project]\nname = "team"\n']),
    "root dotted keys": (
        'project.name = "team"\nproject.dependencies = ["numpy"]\n\n[tool.mine]\nx = 1\n',
        ['project.name = "team"\n', "[tool.mine]\nx = 1\n"],
    ),
    "an inline [tool] uv": ('[project]\nname = "team"\n\n[tool]\nuv = { package = false }\n', ["package = false"]),
    "a person's torch source as a table": (
        '[project]\nname = "team"\ndependencies = ["torch"]\n\n[tool.uv.sources.torch]\nindex = "mine"\n\n'
        '[tool.uv.sources.mylib]\npath = "../mylib"\n',
        ['[tool.uv.sources.mylib]\npath = "../mylib"\n'],
    ),
    "an escaped DEL and a line separator in a comment": (
        '[project]\nname = "team"\ndescription = "a\\u007fb"\n# one \u2028 two\n\n[tool.mine]\nx = 1\n',
        ['description = "a\\u007fb"\n', "\n# one \u2028 two\n\n[tool.mine]\nx = 1\n"],
    ),
    "floats, dates and infinities in the tables kitbench writes into": (
        '[project]\nname = "team"\nx-rate = 0.5\nx-when = 1979-05-27T07:32:00Z\n\n[tool.uv]\nx-inf = inf\n'
        "x-nan = -nan\n",
        ["x-rate = 0.5\nx-when = 1979-05-27T07:32:00Z\n", "x-inf = inf\nx-nan = -nan\n"],
    ),
    "a comment among the torch pins kitbench replaces": (
        '[project]\nname = "team"\ndependencies = [\n    # ML\n    "torch>=2",\n    "numpy",\n    # end\n]\n',
        ["    # ML\n", '    "numpy",\n    # end\n]\n'],
    ),
    "an inline array of indexes": (
        '[project]\nname = "team"\n\n[tool.uv]\nindex = [{ name = "internal", url = "https://x/simple" }]\n',
        ['index = [{ name = "internal", url = "https://x/simple" }, '],
    ),
    "dotted keys in [tool]": (
        '[project]\nname = "team"\n\n[tool]\nuv.package = false  # an app\n',
        ["[tool]\nuv.package = false  # an app\n"],
    ),
    "[[tool.uv.index]] tables apart": (
        '[[tool.uv.index]]\nname = "a"\nurl = "https://a/simple"\n\n[tool.mine]\nx = 1\n\n[[tool.uv.index]]\n'
        'name = "b"\nurl = "https://b/simple"\n\n[project]\nname = "team"\n',
        [
            '[[tool.uv.index]]\nname = "a"\nurl = "https://a/simple"\n',
            '[tool.mine]\nx = 1\n\n[[tool.uv.index]]\nname = "b"\nurl = "https://b/simple"\n',
        ],
    ),
    "a UTF-8 byte order mark and CRLF": (
        '\ufeff[project]\r\nname = "team"\r\n',
        ['\ufeff[project]\r\nname = "team"\r\n'],
    ),
    "a person's own conflicts, a line each": (
        '[project]\nname = "team"\n\n[tool.uv]\nconflicts = [\n    [{ group = "a" }, { group = "b" }],  # ours\n]\n',
        ["conflicts = [\n", '    [{ group = "a" }, { group = "b" }],  # ours\n]\n'],
    ),
    "project tables apart, inline extras and sources": (
        '[project]\nname = "team"\noptional-dependencies = { dev = ["pytest"] }\n\n[tool.uv]\n'
        'sources = { mylib = { path = "../mylib" } }\n\n[project.urls]\nhome = "https://x"\n',
        [
            'optional-dependencies = { dev = ["pytest"]',
            'sources = { mylib = { path = "../mylib" }',
            '[project.urls]\nhome = "https://x"\n',
        ],
    ),
    "CRLF line ends": (
        '[project]\r\nname = "team"\r\ndependencies = [\r\n    "rich",  # ours\r\n]\r\n\r\n[tool.mine]\r\nx = 1\r\n',
        ['    "rich",  # ours\r\n', "[tool.mine]\r\nx = 1\r\n"],
    ),
}


@pytest.mark.parametrize("case", PERSONS_PYPROJECT)
def test_a_person_s_pyproject_keeps_every_byte_kitbench_does_not_own(tmp_path: Path, case: str) -> None:
    own, kept = PERSONS_PYPROJECT[case]
    path = tmp_path / "pyproject.toml"
    path.write_bytes(own.encode())
    before = tomllib.loads(own.removeprefix("\ufeff"))
    _team(tmp_path)
    text = path.read_bytes().decode()
    assert all(part in text for part in kept), text
    after = tomllib.loads(text.removeprefix("\ufeff"))
    # What the person wrote still means what it meant, the torch family's entries aside (kitbench's own).
    assert _same(_theirs(after, before), _theirs(before, before))
    assert {m["name"] for m in after["tool"]["uv"]["index"]} >= {"pytorch-cpu", "pytorch-cu126"}
    assert set(after["tool"]["kitbench"]["machines"]) == {"h100", "ci"}
    # Again: not one byte changes; a machine dropped: the person's part is still as it was.
    assert project_files.write(tmp_path, [])[1] == []
    _write(tmp_path, drop=["h100"])
    text = path.read_bytes().decode()
    assert all(part in text for part in kept), text
    assert _same(_theirs(tomllib.loads(text.removeprefix("\ufeff")), before), _theirs(before, before))


def _same(one: object, other: object) -> bool:
    # NaN, which a person may write, is not equal to itself.
    return json.dumps(one, sort_keys=True, default=repr) == json.dumps(other, sort_keys=True, default=repr)


def _theirs(data: dict[str, object], before: dict[str, object]) -> object:
    """``data`` at the keys ``before`` has, less the torch family's entries (and kitbench's indexes)."""
    if isinstance(before, dict) and isinstance(data, dict):
        return {k: _theirs(data.get(k), v) for k, v in before.items() if k not in project_files_family()}
    if isinstance(before, list) and isinstance(data, list):
        return [
            d
            for d in data
            if not (isinstance(d, list) and any(isinstance(g, dict) and "extra" in g for g in d))
            and not (
                (isinstance(d, str) and d.split("=")[0].split(">")[0] in project_files_family())
                or (isinstance(d, dict) and str(d.get("name")).startswith("pytorch-"))
            )
        ]
    return data


def project_files_family() -> tuple[str, ...]:
    return ("torch", "torchvision", "torchaudio")


def test_a_person_s_pixi_toml_keeps_its_comments_and_its_own_environments(tmp_path: Path) -> None:
    own = (
        '# our workspace\n[workspace]\nname = "team"  # short\nchannels = ["conda-forge"]\n'
        'platforms = ["linux-64"]  # where we run\n\n[dependencies]\npython = ">=3.11"  # ours\n'
        'numpy = "*"\n\n[feature.docs.dependencies]\nmkdocs = "*"\n\n[environments]\n# for the docs\n'
        'docs = ["docs"]  # built in CI\n'
    )
    (tmp_path / "pixi.toml").write_text(own)
    _team(tmp_path, with_pixi=True)
    text = (tmp_path / "pixi.toml").read_text()
    for part in (
        '# our workspace\n[workspace]\nname = "team"  # short\nchannels = ["conda-forge"]\n',
        'python = ">=3.11"  # ours\nnumpy = "*"\n',
        '[feature.docs.dependencies]\nmkdocs = "*"\n',
        '[environments]\n# for the docs\ndocs = ["docs"]  # built in CI\n',
    ):
        assert part in text, text
    data = tomllib.loads(text)
    assert data["environments"] == {"docs": ["docs"], "h100": ["h100"], "ci": ["ci"]}
    assert project_files.write(tmp_path, [])[1] == []


def test_a_pixi_toml_of_project_not_workspace_gets_the_platforms_added_after_its_own(tmp_path: Path) -> None:
    own = '# ws\n[project]\nname = "team"\nchannels = ["conda-forge"]\nplatforms = ["osx-arm64"]\n\n[tasks]\nt = "x"\n'
    (tmp_path / "pixi.toml").write_text(own)
    _team(tmp_path, with_pixi=True)
    text = (tmp_path / "pixi.toml").read_text()
    assert text.startswith(
        '# ws\n[project]\nname = "team"\nchannels = ["conda-forge"]\n'
        'platforms = ["osx-arm64", "linux-64"]\n\n[tasks]\nt = "x"\n'
    )
    assert "workspace" not in tomllib.loads(text)


def test_a_person_s_own_keys_in_a_machine_s_pixi_feature_are_kept_and_kitbench_s_follow_the_machine(
    tmp_path: Path,
) -> None:
    _team(tmp_path, with_pixi=True)
    pixi = tmp_path / "pixi.toml"
    pixi.write_text(
        pixi.read_text().replace(
            "[feature.h100.pypi-dependencies]\n", '[feature.h100.pypi-dependencies]\nflash-attn = "*"  # ours\n'
        )
        + '\n[feature.h100.tasks]\ntrain = "python train.py"\n'
    )
    # The H100's driver too old for any CUDA build now: a CPU build, no CUDA requirement.
    _write(tmp_path, ("h100", override(H100, driver="390.157")))
    data = tomllib.loads(pixi.read_text())["feature"]["h100"]
    assert 'flash-attn = "*"  # ours\n' in pixi.read_text() and data["tasks"] == {"train": "python train.py"}
    assert "system-requirements" not in data and data["pypi-dependencies"]["torch"]["index"].endswith("/cpu")


def test_a_person_s_pixi_environment_named_as_a_machine_is_refused_not_overwritten(tmp_path: Path) -> None:
    own = '[workspace]\nname = "team"\nchannels = []\nplatforms = []\n\n[environments]\nci = ["docs"]\n'
    (tmp_path / "pixi.toml").write_text(own)
    with pytest.raises(UsageError, match="the environment 'ci' is yours") as refused:
        _team(tmp_path, with_pixi=True)
    assert "rename" in (refused.value.hint or "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pixi.toml"]
    assert (tmp_path / "pixi.toml").read_text() == own


def test_a_refused_pixi_toml_leaves_pyproject_toml_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.toml"
    target.write_text('[workspace]\nname = "x"\n')
    folder = tmp_path / "team"
    folder.mkdir()
    (folder / "pixi.toml").symlink_to(target)
    with pytest.raises(KitbenchError, match="symlink"):
        _team(folder, with_pixi=True)
    assert sorted(p.name for p in folder.iterdir()) == ["pixi.toml"]
    (folder / "pyproject.toml").write_text('[project]\nname = "team"\n')
    with pytest.raises(KitbenchError, match="symlink"):
        _team(folder, with_pixi=True)
    assert (folder / "pyproject.toml").read_text() == '[project]\nname = "team"\n'


def test_a_comment_above_a_machine_s_tables_goes_with_the_machine_and_only_then(tmp_path: Path) -> None:
    _team(tmp_path, with_pixi=True)
    for name, header in (("pyproject.toml", "[tool.kitbench.machines.h100]"), ("pixi.toml", "[feature.h100]")):
        path = tmp_path / name
        path.write_text(path.read_text().replace(header, f"# the box in rack 4\n{header}"))
    _write(tmp_path, ("h100", override(H100, driver="580.65.06")))
    assert all("# the box in rack 4\n[" in (tmp_path / n).read_text() for n in ("pyproject.toml", "pixi.toml"))
    _write(tmp_path, drop=["h100"])
    assert not any("rack 4" in (tmp_path / n).read_text() for n in ("pyproject.toml", "pixi.toml"))


def test_a_failed_write_of_pixi_toml_puts_pyproject_toml_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kitbench import _files
    from kitbench.errors import RecordError

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "team"\n')
    write = _files.write

    def full_disk(path: Path, *args: object, **kwargs: object) -> None:
        if path.name == "pixi.toml":
            raise RecordError(f"cannot write the project to {path}: No space left on device")
        write(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_files, "write", full_disk)
    with pytest.raises(RecordError, match="No space left"):
        _team(tmp_path, with_pixi=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml"]
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "team"\n'
    (tmp_path / "pyproject.toml").unlink()
    with pytest.raises(RecordError, match="No space left"):
        _team(tmp_path, with_pixi=True)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("folder", "name"),
    [("My Project", "my-project"), ("über", "uber"), ("-dash", "dash"), ("a..b__c", "a-b-c"), ("Team_2", "team-2")],
)
def test_the_project_is_named_after_its_folder_as_a_valid_name(tmp_path: Path, folder: str, name: str) -> None:
    (tmp_path / folder).mkdir()
    _team(tmp_path / folder, with_pixi=True)
    assert tomllib.loads((tmp_path / folder / "pyproject.toml").read_text())["project"]["name"] == name
    assert tomllib.loads((tmp_path / folder / "pixi.toml").read_text())["workspace"]["name"] == name


def test_a_folder_with_no_usable_name_or_a_bad_name_is_refused(tmp_path: Path) -> None:
    (tmp_path / "项目").mkdir()
    with pytest.raises(UsageError, match="name") as refused:
        _team(tmp_path / "项目")
    assert "--name" in (refused.value.hint or "")
    assert _team(tmp_path / "项目", name="team").count('name = "team"') == 1
    for bad in ("my project", "-x", "a/b", ""):
        with pytest.raises(UsageError, match="--name"):
            _team(tmp_path, name=bad)
    assert not (tmp_path / "pyproject.toml").exists()


def test_a_name_given_is_not_put_over_a_person_s_own(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "ours"\n')
    with pytest.raises(UsageError, match="'ours'"):
        _team(tmp_path, name="theirs")
    assert 'name = "ours"' in _team(tmp_path, name="ours")


@pytest.mark.parametrize(
    "index",
    [
        "https://m/{compute}?private_token=abc",
        "https://m/{compute}#token=abc",
        "https://user@m/{compute}",
        "https://:pass@m/{compute}",
        "https://m/{compute}?",
    ],
)
def test_a_token_anywhere_in_the_mirror_s_url_is_refused(tmp_path: Path, index: str) -> None:
    with pytest.raises(UsageError, match="--index") as refused:
        _team(tmp_path, index=index)
    assert "abc" not in refused.value.message + (refused.value.hint or "")
    assert not list(tmp_path.iterdir())


def test_a_person_s_own_uv_environments_are_refused_not_replaced(tmp_path: Path) -> None:
    own = '[project]\nname = "team"\n\n[tool.uv]\nenvironments = ["sys_platform == \'linux\'"]\n'
    (tmp_path / "pyproject.toml").write_text(own)
    with pytest.raises(UsageError, match="environments"):
        _team(tmp_path)
    assert (tmp_path / "pyproject.toml").read_text() == own


def test_a_person_s_requires_python_older_than_the_team_s_is_kept_and_a_note_says_so(tmp_path: Path) -> None:
    # 10 of the corpus's 140 did not lock for this (uv: "the resolution failed for other Python versions").
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "team"\nrequires-python = ">=3.9"\n')
    team, _ = project_files.write(tmp_path, [("ci", CI)])
    assert 'requires-python = ">=3.9"' in (tmp_path / "pyproject.toml").read_text()
    assert any(
        note.startswith("requires-python '>=3.9' is yours and admits Python 3.9, older than the team's oldest (3.11)")
        for note in team.notes
    ), team.notes
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "team"\nrequires-python = ">=3.11"\n')
    assert not any("requires-python" in n for n in project_files.write(tmp_path, [("ci", CI)])[0].notes)


def test_dynamic_metadata_is_respected(tmp_path: Path) -> None:
    own = '[project]\nname = "team"\ndynamic = ["version"]\n'
    (tmp_path / "pyproject.toml").write_text(own)
    assert "version" not in tomllib.loads(_team(tmp_path))["project"]
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "team"\ndynamic = ["dependencies"]\n')
    with pytest.raises(UsageError, match="dynamic"):
        _team(tmp_path)


CORPUS = Path(__file__).resolve().parents[1] / "resources" / "pyproject-corpus"


def _without_kitbench(text: str, original: dict[str, Any], original_text: str) -> str:
    """``text`` less every entry kitbench writes (those ``[tool.kitbench]`` in it names, and the keys and
    tables the person's file, read as ``original``, did not have), by tomlkit: what is left is the person's,
    and must be their file to the byte."""
    import tomlkit

    from kitbench import _toml

    doc: Any = tomlkit.parse(text.removeprefix("\ufeff"))
    # Comments above a header are that table's, not the end of the table before (kitbench's, to be taken out).
    above = _toml._comments_to_headers(doc.body)
    ours = doc["tool"]["kitbench"]
    extras, indexes = list(ours["extras"]), list(ours["indexes"])

    def prune(path: tuple[str, ...]) -> None:
        # A table kitbench made and left empty by the deletions above (never one the person had).
        node, was = doc, original
        for key in path[:-1]:
            node, was = node[key], was.get(key, {})
        if path[-1] in node and not node[path[-1]] and path[-1] not in was:
            del node[path[-1]]

    del doc["tool"]["kitbench"]
    project = doc["project"]
    mine = original.get("project", {})
    deps = project.get("dependencies")
    for i in reversed(range(len(deps or []))):
        if project_files._family(deps[i]):
            del deps[i]
    for key in ("name", "version", "requires-python", "dependencies"):
        if key not in mine and key in project:
            del project[key]
    for extra in extras:
        project.get("optional-dependencies", {}).pop(extra, None)
    prune(("project", "optional-dependencies"))
    prune(("project",))
    uv = doc["tool"].get("uv", {})
    for key in ("environments", "required-environments"):
        if key not in original.get("tool", {}).get("uv", {}):
            uv.pop(key, None)
    for package in project_files_family():
        uv.get("sources", {}).pop(package, None)
    prune(("tool", "uv", "sources"))
    for key, kitbench_s in (
        ("conflicts", lambda g: any(x.get("extra") in extras for x in g)),
        ("index", lambda i: i.get("name") in indexes),
    ):
        entries = uv.get(key, [])
        for i in reversed(range(len(entries))):
            if kitbench_s(entries[i]):
                del entries[i]
        if key in uv and not uv[key] and key not in original.get("tool", {}).get("uv", {}):
            del uv[key]
    prune(("tool", "uv"))
    prune(("tool",))
    left = {id(table) for table in _toml._tables(doc.body)}
    for table, comments, _, cleared in above:
        if id(table) in left:
            table.trivia.indent = comments + table.trivia.indent
        else:  # above a table of kitbench's, taken out: the end of the person's table before, as written
            for body, i, item in cleared:
                body[i] = item
    theirs = doc.as_string()
    if "[tool.uv]" not in original_text and "[tool.uv]\n" in theirs:
        # The header tomlkit writes for a table the file left out ([tool.uv] of [tool.uv.exclude-newer-package])
        # once kitbench gave it a key.
        theirs = theirs.replace("[tool.uv]\n\n", "", 1).replace("[tool.uv]\n", "", 1)
    if "dependencies = []" in original_text:
        # A list kitbench filled and emptied again: tomlkit leaves it on two lines.
        theirs = theirs.replace("dependencies = [\n]", "dependencies = []", 1)
    return ("\ufeff" if text.startswith("\ufeff") else "") + theirs


@pytest.mark.parametrize("name", sorted(p.stem for p in CORPUS.glob("*.toml")))
def test_a_published_pyproject_keeps_every_byte_through_add_again_and_drop(tmp_path: Path, name: str) -> None:
    """Each of the corpus (PyPI's sdists' own pyproject.toml, tests/resources/pyproject-corpus/): a two-machine
    team added, the same again (not a byte changes), a machine dropped; each result read by tomllib, and the
    person's part of it, kitbench's entries taken out, their file to the byte. A project whose build backend
    makes its dependencies is refused, as docs/project.md says, and left as it was."""
    original = (CORPUS / f"{name}.toml").read_bytes()
    path = tmp_path / "pyproject.toml"
    path.write_bytes(original)
    before = tomllib.loads(original.decode().removeprefix("\ufeff"))
    if any(key in before.get("project", {}).get("dynamic", []) for key in ("dependencies", "optional-dependencies")):
        with pytest.raises(UsageError, match="are dynamic"):
            _team(tmp_path)
        assert path.read_bytes() == original
        return
    _team(tmp_path)
    added = path.read_bytes().decode()
    assert set(tomllib.loads(added.removeprefix("\ufeff"))["tool"]["kitbench"]["machines"]) == {"h100", "ci"}
    assert _kept(_without_kitbench(added, before, original.decode()), original.decode())
    assert project_files.write(tmp_path, [("h100", H100), ("ci", CI)])[1] == []
    assert path.read_bytes().decode() == added
    _write(tmp_path, drop=["h100"])
    dropped = path.read_bytes().decode()
    assert set(tomllib.loads(dropped.removeprefix("\ufeff"))["tool"]["kitbench"]["machines"]) == {"ci"}
    assert _kept(_without_kitbench(dropped, before, original.decode()), original.decode())


def _kept(theirs: str, original: str) -> bool:
    # tomlkit sets a table it appends apart by a blank line of the document's, which is left at the end.
    return theirs == original or (theirs.rstrip("\n") == original.rstrip("\n") and theirs.startswith(original))


def _lock(name: str, folder: Path, torch_index: str, pypi: str) -> tuple[str, str]:
    """The corpus file ``name`` with the two-machine team added (PyTorch's index at ``torch_index``), then
    ``uv lock --default-index pypi``: ("locked", "") or (what happened, uv's or kitbench's last line)."""
    import subprocess

    from .test_project import UV, _clean_env

    assert UV is not None
    (folder / "pyproject.toml").write_bytes((CORPUS / f"{name}.toml").read_bytes())
    try:
        _team(folder, index=torch_index.replace("/simple", "/whl/{compute}"))
    except KitbenchError as refused:
        return "refused by kitbench", refused.message
    done = subprocess.run(
        [UV, "lock", "--default-index", pypi],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**_clean_env(), "UV_PYTHON_DOWNLOADS": "never"},
        check=False,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    return ("locked", "") if done.returncode == 0 else ("uv lock failed", lines[-1] if lines else "")


# Three published projects, uv locks each with the team added, offline: its PyPI packages from the pages
# recorded for them (CORPUS/indexes, `record-locks`), the torch family from test_project's stand-in of
# PyTorch's index. mypy-extensions has no dependency of its own, annotated-doc dependency groups (mypy, ruff,
# pytest, ...), h11 no [project] at all (a setup.py project: kitbench adds one).
LOCKED_OFFLINE = ("mypy-extensions", "annotated-doc", "h11")
CORPUS_PAGES = CORPUS / "indexes"


@pytest.mark.parametrize("name", LOCKED_OFFLINE)
def test_a_published_pyproject_with_the_team_added_is_locked_by_uv(tmp_path: Path, name: str) -> None:
    from pytorch_index import everything, in_family, recorded, serving

    from .test_project import PAGES, UV

    if UV is None:
        pytest.skip("uv is not installed here: the project is resolved with it (nox -s tests installs it)")
    with serving(recorded(PAGES), in_family) as torch_index, serving(recorded(CORPUS_PAGES), everything) as pypi:
        assert _lock(name, tmp_path, torch_index, pypi) == ("locked", "")
    locked = tomllib.loads((tmp_path / "uv.lock").read_text())
    assert {p["name"] for p in locked["package"]} >= {"torch", "torchvision"}


def _lock_corpus() -> None:
    """``uv lock`` of every corpus file with the team added: the torch family from the stand-in of PyTorch's
    index (the recorded pages), everything else from PyPI itself (``python -m advice.test_project_files
    lock-corpus`` from tests/, with the repository root on PYTHONPATH and PyPI reachable).
    Prints each outcome and the counts; slow (a resolution per file), so the suite locks LOCKED_OFFLINE only."""
    import collections
    import tempfile

    from pytorch_index import PYPI_JSON, in_family, recorded, serving

    from .test_project import PAGES

    counts: collections.Counter[str] = collections.Counter()
    with serving(recorded(PAGES), in_family) as torch_index:
        for name in sorted(p.stem for p in CORPUS.glob("*.toml")):
            with tempfile.TemporaryDirectory() as folder:
                outcome, why = _lock(name, Path(folder), torch_index, PYPI_JSON)
            counts[outcome] += 1
            print(f"{name}\t{outcome}\t{why[:300]}", flush=True)
    print(dict(counts))


def _record_locks() -> None:
    """Rewrite CORPUS/indexes: PyPI's pages of every package uv locks for LOCKED_OFFLINE from PyPI itself,
    each trimmed to the versions locked."""
    import tempfile

    from pytorch_index import PYPI_JSON, in_family, record, recorded, serving

    from .test_project import PAGES

    wanted: dict[str, set[str]] = {}
    with serving(recorded(PAGES), in_family) as torch_index:
        for name in LOCKED_OFFLINE:
            with tempfile.TemporaryDirectory() as folder:
                assert _lock(name, Path(folder), torch_index, PYPI_JSON) == ("locked", "")
                for package in tomllib.loads((Path(folder) / "uv.lock").read_text())["package"]:
                    if package.get("source", {}).get("registry") == PYPI_JSON:
                        wanted.setdefault(package["name"], set()).add(package["version"])
    for path in record(wanted, CORPUS_PAGES):
        print(path)


def _record_corpus() -> None:
    """Rewrite the corpus: the top-level pyproject.toml of the newest sdist of each project SOURCES.tsv names,
    as published (the sdist checked against PyPI's SHA-256), and SOURCES.tsv with what was read."""
    import hashlib
    import io
    import tarfile
    import urllib.parse
    import urllib.request
    import zipfile

    rows = ["name\tversion\tsdist\tsdist_sha256"]
    for line in (CORPUS / "SOURCES.tsv").read_text().splitlines()[1:]:
        name = line.split("\t")[0]
        api = f"https://pypi.org/pypi/{name}/json"
        with urllib.request.urlopen(api, timeout=60) as response:
            release = json.load(response)
        sdist = next(f for f in release["urls"] if f["packagetype"] == "sdist")
        with urllib.request.urlopen(urllib.parse.urljoin(api, sdist["url"]), timeout=300) as response:
            data = response.read()
        if hashlib.sha256(data).hexdigest() != sdist["digests"]["sha256"]:
            raise SystemExit(f"ERROR: {sdist['filename']} is not the file PyPI's digest names")
        if sdist["filename"].endswith(".zip"):
            archive = zipfile.ZipFile(io.BytesIO(data))
            found = next(
                archive.read(n) for n in archive.namelist() if n.count("/") == 1 and n.endswith("/pyproject.toml")
            )
        else:
            with tarfile.open(fileobj=io.BytesIO(data)) as tar:
                member = next(
                    m
                    for m in tar.getmembers()
                    if m.name.count("/") == 1 and m.name.endswith("/pyproject.toml") and m.isfile()
                )
                found = tar.extractfile(member).read()  # type: ignore[union-attr]
        (CORPUS / f"{name}.toml").write_bytes(found)
        rows.append("\t".join([name, release["info"]["version"], sdist["filename"], sdist["digests"]["sha256"]]))
        print(name, release["info"]["version"], flush=True)
    (CORPUS / "SOURCES.tsv").write_text("\n".join(rows) + "\n")


if __name__ == "__main__":
    import sys

    commands = {"lock-corpus": _lock_corpus, "record-corpus": _record_corpus, "record-locks": _record_locks}
    if len(sys.argv) != 2 or sys.argv[1] not in commands:
        raise SystemExit(f"usage: python -m advice.test_project_files {{{','.join(commands)}}} (from tests/)")
    commands[sys.argv[1]]()
