"""kitbench replay: a record rebuilt for real (uv, the cpu target under KITBENCH_INDEX_URL=default),
refusals with exit 2, an interrupted build that leaves nothing behind, and /1 records still read."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kitbench import _cli, _proc
from kitbench.environments import installer, locks
from kitbench.errors import ReplayError
from kitbench.machine.probe import probe
from kitbench.reading import envdiff, verify
from kitbench.rebuild import planning, replay
from kitbench.records import record as records
from kitbench.suite.data import default_root

REPO = Path(__file__).resolve().parents[2]
# The kept records written before schema /2 (the H200's are /2): what older kitbenches left behind.
OLD_RECORDS = sorted(
    p for p in (REPO / "docs" / "records").glob("*.json") if json.loads(p.read_text())["schema"] == "kitbench.run/1"
)
needs_uv = pytest.mark.skipif(shutil.which("uv") is None, reason="replay builds its venvs with uv here")


@pytest.fixture(scope="module")
def cpu_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real cpu-target record (tiny MNIST run) from this interpreter, naming a lock of its packages."""
    out = tmp_path_factory.mktemp("record") / "cpu.json"
    env = {
        **os.environ,
        "KITBENCH_TARGET": "cpu",
        "KITBENCH_INDEX_URL": "default",
        locks.LOCK_VARIABLE: str(REPO / "tests" / "resources" / "locks" / "pylock.cpu-linux-x86_64-py311.toml"),
    }
    subprocess.run(
        [sys.executable, "-m", "kitbench", "run", "--check", "mnist", "--limit", "300", "--offline", "--out", str(out)],
        env=env,
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    return out


def _edited(source: Path, dest: Path, **environment: Any) -> Path:
    data = json.loads(source.read_text())
    data["environment"].update(environment)
    records.validate(data)
    dest.write_text(json.dumps(data))
    return dest


@pytest.mark.integration
@needs_uv
def test_a_cpu_record_is_replayed_for_real(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    out = tmp_path / "replayed.json"
    assert _cli.main(["replay", str(cpu_record), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"reproduced ({out})" in printed
    # What was compared, said: verify's quantities in one line, all equal.
    assert re.search(
        r"^compared: MNIST: (\d+) quantities: \1 agree \(.*bitwise.*\), 0 differ$", printed, re.MULTILINE
    ), printed
    new, old = records.read(out), records.read(cpu_record)
    assert new["replay_of"] is not None and new["replay_of"]["path"] == str(cpu_record)
    # The same options but for the data: this user's (KITBENCH_DATA, with --offline), never the record's.
    assert {**new["options"], "data": None} == {**old["options"], "data": None}
    assert new["argv"][-5:] == ["--data", str(default_root()), "--offline", "--out", str(out)]
    versions = {p["name"]: p["version"] for p in new["environment"].get("packages", [])}
    assert all(
        versions.get(p["name"]) == p["version"]
        for p in old["environment"].get("packages", [])
        if p["name"] != "kitbench"
    )
    assert [e.name for e in (tmp_path / "cache").iterdir()] == [replay.key(planning.plan(cpu_record, probe()))]
    # The same plan again: the cached environment, nothing rebuilt.
    said: list[str] = []
    python = replay.build(planning.plan(cpu_record, probe()), said.append, tmp_path / "cache")
    assert python.is_file() and said == [f"reusing {python.parent.parent}"]


@pytest.mark.integration
@needs_uv
def test_a_version_no_index_serves_cannot_be_rebuilt(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    bad = _edited(cpu_record, tmp_path / "bad.json", packages=[{"name": "numpy", "version": "0.0.999"}])
    assert _cli.main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1].startswith("ERROR: cannot install the recorded versions:") and "numpy" in err[-1]
    assert list((tmp_path / "cache").iterdir()) == []  # nothing half-built left


@pytest.mark.integration
@needs_uv
def test_a_python_this_machine_cannot_provide_is_refused(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    future = _edited(cpu_record, tmp_path / "future.json", python="3.99.0")
    assert _cli.main(["replay", str(future)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith("ERROR: no Python 3.99 here: looked in PATH, pyenv (")
    assert "; No interpreter found for Python 3.99" in err[-2]  # not uv's hint
    assert err[-1].startswith("hint: the record ran on Python 3.99.0: install a Python 3.99")
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize(
    "source",
    [
        "file:///work/main/.whl/fastjsonschema-2.22.3-py3-none-any.whl",
        "fastjsonschema-2.22.3-py3-none-any.whl",
        "/opt/w/fastjsonschema-2.22.3.whl",
    ],
)
def test_a_package_from_a_local_file_is_planned_by_name_version_and_hash(source: str, tmp_path: Path) -> None:
    """Where the file came from is no part of its identity (the README's H200 records named a file:// wheel
    of the machine that made them): the same name, version and hash from any index."""
    digest = "sha256:" + "ab" * 32
    local = _edited(
        OLD_RECORDS[0],
        tmp_path / "local.json",
        os="linux",
        arch="x86_64",
        packages=[{"name": "fastjsonschema", "version": "2.22.3", "source": source, "hashes": [digest]}],
    )
    chosen = planning.plan(local, probe())
    assert chosen.requirements == [f"fastjsonschema==2.22.3 --hash={digest}"]
    assert any(note.startswith("fastjsonschema came from a local file") for note in chosen.notes)


# Two small wheels PyPI serves, and their sha256 (pip's and uv's "Got ..." for each).
SIX = "sha256:4721f391ed90541fddacab5acf947aa0d3dc7d27b2e1e8eda2be8970586c3274"
INICONFIG = "sha256:b6a85871a79d2e3b22d2d1b94ac2824226a63c6b741c88f7ae975f18b6778374"


def _hashed_and_one_local(
    tmp_path: Path, count: int = 198, local: str = "fastjsonschema-2.22.3-py3-none-any.whl"
) -> Path:
    """The README's H200 record with ``count`` of its packages carrying a hash, and fastjsonschema (a wheel file on
    its machine) none: the record of issue 47."""
    data = json.loads((REPO / "docs" / "records" / "h200-suite.json").read_text())
    packages = [p for p in data["environment"]["packages"] if p["name"] not in ("fastjsonschema", "kitbench")]
    packages = [*packages, *({"name": f"extra-{n}", "version": "1.0"} for n in range(count - len(packages)))][:count]
    for n, package in enumerate(packages):
        package["hashes"] = [f"sha256:{n:064x}"]
    data["environment"]["packages"] = [*packages, {"name": "fastjsonschema", "version": "2.22.3", "source": local}]
    records.validate(data)
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    "local",
    [
        "fastjsonschema-2.22.3-py3-none-any.whl",
        "/opt/w/fastjsonschema-2.22.3.whl",
        "file:///work/main/.whl/fastjsonschema-2.22.3-py3-none-any.whl",
        "C:\\wheels\\fastjsonschema-2.22.3-py3-none-any.whl",
    ],
)
def test_a_local_file_without_a_hash_is_never_fetched_by_name_unless_asked(
    local: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A name is all an unhashed local wheel leaves: an index's package of that name may be anyone's (dependency
    confusion). Refused before anything is built, the hint naming the option that takes it by name anyway."""
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    record = _hashed_and_one_local(tmp_path, local=local)
    assert _cli.main(["replay", str(record)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2].startswith(
        f"ERROR: {record}: fastjsonschema 2.22.3 came from a local file on the record's machine and carries no hash"
    ) and "Traceback" not in "\n".join(err)
    assert err[-1].startswith("hint: pass --local-by-name to install it by name and version from the index anyway")
    assert not (tmp_path / "cache").exists()
    chosen = planning.plan(record, probe(), local_by_name=True)
    assert any(
        note.startswith("fastjsonschema came from a local file") and "(--local-by-name)" in note
        for note in chosen.notes
    )


def test_local_by_name_reaches_the_build_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kitbench replay RECORD --local-by-name`: planned, the local package by name, and on to the build."""
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    planned: list[planning.Plan] = []

    def build(chosen: planning.Plan, log: Callable[[str], None], root: Path | None = None) -> Path:
        planned.append(chosen)
        raise ReplayError("stopped before the build, as this test asks")

    monkeypatch.setattr(replay, "build", build)
    monkeypatch.setattr(replay, "_check_data", lambda root: None)
    assert _cli.main(["replay", str(_hashed_and_one_local(tmp_path)), "--local-by-name"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "ERROR: stopped before the build, as this test asks"
    assert planned[0].requirements[-1] == "fastjsonschema==2.22.3"


def test_one_package_without_a_hash_leaves_every_other_hash_checked(tmp_path: Path) -> None:
    """198 hashed packages and one without: 198 lines hash-checked (not 0), and the note counts them."""
    chosen = planning.plan(_hashed_and_one_local(tmp_path), probe(), local_by_name=True)
    assert sum(" --hash=sha256:" in line for line in chosen.requirements) == 198
    assert chosen.requirements[-1] == "fastjsonschema==2.22.3"
    assert (
        "198 of 199 packages hash-checked; 1 (fastjsonschema) carry no hash (no lock, or not in the lock that "
        "built the environment): pinned by version only"
    ) in chosen.notes
    fully = planning.plan(_hashed_and_one_local(tmp_path, count=0), probe(), local_by_name=True)
    assert "0 of 1 packages hash-checked; 1 (fastjsonschema) carry no hash" in " ".join(fully.notes)


@pytest.mark.parametrize("uv", [True, False])
def test_the_hashed_lines_are_one_install_with_require_hashes_and_the_others_another(
    uv: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip's hash checking is all or nothing per install (one hashed line turns it on for every line, and an
    unhashed one is then refused): the hashed lines go in one install with --require-hashes, the rest apart."""
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    chosen = planning.plan(_hashed_and_one_local(tmp_path, count=3), probe(), local_by_name=True)
    calls: list[list[str]] = []

    def fake_call(command: list[str], what: str, env: dict[str, str] | None = None, reach: object = None) -> None:
        calls.append(command)
        if "venv" in command:
            Path(command[-1]).mkdir()

    monkeypatch.setattr(replay, "_call", fake_call)
    monkeypatch.setattr(replay, "_uv", lambda: "uv" if uv else None)
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    files: list[str] = []
    real_write = installer.Install.write

    def write(self: installer.Install, folder: Path, tool: str) -> list[str]:
        args: list[str] = real_write(self, folder, tool)
        files.append(Path(args[-1]).read_text())
        return args

    monkeypatch.setattr(installer.Install, "write", write)
    replay.build(chosen, lambda line: None, tmp_path / "cache")
    installs = [c for c in calls if "install" in c]
    assert len(installs) == 2
    assert installs[0][-4:-1] == ["--no-deps", "--require-hashes", "-r"]
    assert installs[1][-3:-1] == ["--no-deps", "-r"] and "--require-hashes" not in installs[1]
    assert files[0].count("--hash=sha256:") == 3 and "fastjsonschema" not in files[0]
    assert files[1] == "fastjsonschema==2.22.3\n"


def _six_and_iniconfig(tmp_path: Path, six: str) -> Path:
    return _edited(
        OLD_RECORDS[0],
        tmp_path / "two.json",
        os="linux",
        arch="x86_64",
        packages=[{"name": "six", "version": "1.17.0", "hashes": [six]}, {"name": "iniconfig", "version": "2.0.0"}],
    )


@pytest.mark.parametrize("tool", ["uv", "pip"])
def test_a_hashed_line_beside_an_unhashed_one_is_checked_by_the_real_installers(
    tool: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For real, against the index pip and uv read here: six's hash right, both install; six's hash wrong, the
    install is refused though iniconfig has none (before the split, both went in unchecked)."""
    if tool == "uv" and shutil.which("uv") is None:
        pytest.skip("no uv on PATH")
    recorded = json.loads(OLD_RECORDS[0].read_text())["environment"]["python"]
    python = "python" + ".".join(recorded.split(".")[:2])
    if tool == "pip" and shutil.which(python) is None:
        pytest.skip(f"no {python} on PATH for pip's venv")
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    if tool == "pip":
        monkeypatch.setattr(replay, "_uv", lambda: None)
    good = replay.build(
        planning.plan(_six_and_iniconfig(tmp_path, SIX), probe()), lambda line: None, tmp_path / "cache"
    )
    listed = subprocess.run(
        [str(good), "-c", "import six, iniconfig; print(six.__version__)"], capture_output=True, text=True, check=True
    ).stdout
    assert listed.strip() == "1.17.0"
    wrong = _six_and_iniconfig(tmp_path, "sha256:" + "0" * 64)
    with pytest.raises(ReplayError, match="cannot install the recorded versions"):
        replay.build(planning.plan(wrong, probe()), lambda line: None, tmp_path / "cache")


def test_the_readmes_records_name_no_path_of_their_machine() -> None:
    for path in (REPO / "docs" / "records").glob("*.json"):
        for package in json.loads(path.read_text())["environment"].get("packages") or []:
            assert "/" not in str(package.get("source") or "").removeprefix("https://"), (path.name, package)


def test_a_record_from_a_platform_its_target_does_not_serve_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mac = _edited(OLD_RECORDS[0], tmp_path / "mac.json", os="macos", arch="arm64", target="mps")
    assert _cli.main(["replay", str(mac)]) == 2
    assert capsys.readouterr().err.startswith(
        "ERROR: the record ran on macos-arm64 with target mps, which does not run on linux-x86_64"
    )


@pytest.mark.parametrize(
    ("environment", "named"),
    [
        ({"packages": [{"name": "numpy\n--index-url http://evil.invalid/simple\n#", "version": "2.0"}]}, "package"),
        ({"packages": [{"name": "numpy", "version": "2.0 --extra-index-url=http://evil.invalid"}]}, "version"),
        ({"packages": [{"name": "numpy", "version": "2.0", "hashes": ["sha256:00\n-e ."]}]}, "hash"),
        ({"python": "/bin/sh"}, "python"),
    ],
)
def test_a_record_naming_options_instead_of_packages_is_refused_before_a_build(
    environment: dict[str, Any],
    named: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A package name, version, hash or Python from a record becomes a line of a requirements file or an
    argument; a newline or an option there would be obeyed (another index), so it is refused."""
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    bad = _edited(OLD_RECORDS[0], tmp_path / "bad.json", **{"os": "linux", "arch": "x86_64", **environment})
    assert _cli.main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and named in err.splitlines()[0]
    assert "which no index serves" in err and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("kind", ["symlink", "fifo", "foreign file"])
def test_a_bad_out_is_refused_before_the_environment_is_built(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    record = _edited(OLD_RECORDS[0], tmp_path / "r.json", os="linux", arch="x86_64")
    out = tmp_path / "out.json"
    (tmp_path / "notes.txt").write_text("keep")
    if kind == "symlink":
        out.symlink_to(tmp_path / "notes.txt")
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        out.write_text("keep")
    assert _cli.main(["replay", str(record), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: will not write {out}")
    assert "hint: give another --out" in err and "--force" not in err  # replay takes no --force
    assert not (tmp_path / "cache").exists() and (tmp_path / "notes.txt").read_text() == "keep"


def test_out_naming_a_directory_puts_the_record_inside_it_or_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "r.json"
    (tmp_path / "folder").mkdir()
    for given in (str(tmp_path / "folder"), str(tmp_path / "folder") + "/"):
        inside = replay.out_path(given, source)
        assert inside.parent == tmp_path / "folder" and inside.name.startswith("r-replay-")
    with pytest.raises(ReplayError, match="names a directory, and there is none"):
        replay.out_path(str(tmp_path / "nowhere") + "/", source)
    assert not (tmp_path / "nowhere").exists()
    assert replay.out_path(str(tmp_path / "x.json"), source) == tmp_path / "x.json"


@pytest.mark.integration
def test_a_mac_record_is_planned_for_this_platform_and_says_so(cpu_record: Path, tmp_path: Path) -> None:
    mac = _edited(cpu_record, tmp_path / "mac.json", os="macos", arch="arm64", torch="2.14.1")
    plan = planning.plan(mac, probe())
    assert not plan.exact and plan.requirements[:2] == ["torch==2.14.1", "torchvision==0.29.1"]
    said = "platforms differ: the record ran on macos-arm64, this is linux-x86_64"
    assert any(n.startswith(said) for n in plan.notes)


def test_a_v1_record_is_planned_from_its_torch_and_the_targets_pins() -> None:
    plan = planning.plan(OLD_RECORDS[0], probe())
    assert plan.record["schema"] == "kitbench.run/1"
    assert plan.requirements[:2] == ["torch==2.14.1", "torchvision==0.29.1"] and not plan.exact
    assert "numpy==2.4.6" in plan.requirements  # the suite's pin stands in for what /1 does not name
    assert any("records name only torch and torchvision" in n for n in plan.notes)
    assert "--out" not in plan.run_args and plan.run_args[:2] == ["--check", "mnist"]


@pytest.mark.integration
@pytest.mark.parametrize("old", OLD_RECORDS, ids=lambda p: p.name)
def test_v1_records_are_still_compared_and_verified(
    old: Path,
    cpu_record: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    another_run: Callable[[Path, Path], Path],
) -> None:
    assert records.read(old)["schema"] == "kitbench.run/1"
    assert _cli.main(["compare", str(old), str(cpu_record)]) == 0
    out = capsys.readouterr().out.splitlines()
    differs = [line for line in out if line.startswith("  ") and " in 1 of 1: " in line]
    assert differs and not any(line.startswith("  package ") for line in differs)  # /1 lists no packages
    if verify._runs(records.read(old)):
        assert _cli.main(["verify", str(old), str(another_run(old, tmp_path / "again.json"))]) == 0


@pytest.mark.integration
def test_the_replayed_run_gets_this_kitbench_and_nothing_else_of_the_callers(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed kitbench's parent folder is site-packages: on PYTHONPATH, the caller's torch and numpy
    would come before the rebuilt environment's."""
    seen: dict[str, Any] = {}

    def fake_run(command: list[str], timeout: float, env: dict[str, str], **kwargs: Any) -> None:
        folder = Path(env["PYTHONPATH"].split(os.pathsep)[0])
        seen.update(folder=folder, entries=[p.name for p in folder.iterdir()], package=(folder / "kitbench").resolve())

    monkeypatch.setattr(_proc, "run", fake_run)
    with pytest.raises(ReplayError, match="wrote no record"):
        replay.run(planning.plan(cpu_record, probe()), Path(sys.executable), tmp_path / "new.json", lambda line: None)
    assert seen["entries"] == ["kitbench"] and seen["package"] == REPO / "kitbench"
    assert not seen["folder"].exists()  # gone with the run


def _fake_uv(
    monkeypatch: pytest.MonkeyPatch, envs: list[dict[str, str] | None] | None = None, find: bool = False
) -> list[list[str]]:
    """replay's build with uv's calls recorded instead of run (the venv folder made, as uv would); the
    environment each is given, in ``envs``."""
    calls: list[list[str]] = []

    def fake_call(command: list[str], what: str, env: dict[str, str] | None = None, reach: Any = None) -> None:
        calls.append(command)
        if envs is not None:
            envs.append(env)
        if command[1] == "venv":
            Path(command[-1]).mkdir()

    monkeypatch.setattr(replay, "_call", fake_call)
    monkeypatch.setattr(replay, "_uv", lambda: "uv")
    monkeypatch.setattr(replay._reach, "first_unresolved", lambda urls: None)  # nothing is reached
    if not find:
        _no_interpreters(monkeypatch)
    return calls


def _no_interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Python of any version found where people keep them: uv is asked for one (as a bare X.Y)."""
    monkeypatch.setattr(
        replay.interpreters,
        "find",
        lambda version, uv=None: replay.interpreters.Search(None, ("PATH", "pyenv (/nowhere)"), ()),
    )


@pytest.mark.integration
def test_the_build_installs_into_the_venvs_own_interpreter_on_windows(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = planning.plan(cpu_record, probe())
    calls = _fake_uv(monkeypatch)
    monkeypatch.setattr(sys, "platform", "win32")
    python = replay.build(chosen, lambda line: None, tmp_path)
    assert python.relative_to(tmp_path).parts[1:] == ("Scripts", "python.exe")
    assert calls[1][calls[1].index("--python") + 1].endswith(str(Path("venv", "Scripts", "python.exe")))


@pytest.mark.integration
@pytest.mark.parametrize(
    ("override", "index"),
    [
        (None, {"UV_INDEX": "https://download.pytorch.org/whl/cpu", "UV_INDEX_STRATEGY": "unsafe-best-match"}),
        ("https://mirror.example/simple", {"UV_DEFAULT_INDEX": "https://mirror.example/simple"}),
    ],
)
def test_the_recorded_set_installs_from_any_layout_of_indexes_hash_checked(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, override: str | None, index: dict[str, str]
) -> None:
    """The record names packages and hashes, not hosts: PyTorch's index beside PyPI, or a mirror of
    both, serve the same files, and uv takes each from whichever has it."""
    monkeypatch.delenv("KITBENCH_PYTORCH_INDEX", raising=False)
    if override is None:
        monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)
    else:
        monkeypatch.setenv("KITBENCH_INDEX_URL", override)
    data = json.loads(cpu_record.read_text())
    for package in data["environment"]["packages"]:
        package.setdefault("hashes", ["sha256:" + "0" * 64])
    hashed = tmp_path / "hashed.json"
    hashed.write_text(json.dumps(data))
    chosen = planning.plan(hashed, probe())
    envs: list[dict[str, str] | None] = []
    calls = _fake_uv(monkeypatch, envs)
    replay.build(chosen, lambda line: None, tmp_path / "cache")
    install = calls[1]
    assert install[install.index("--python") + 2 :] == ["--no-deps", "--require-hashes", "-r", install[-1]]
    assert envs[1] == index  # the indexes as uv's variables: a URL's token never on a command line


def _with_argv(source: Path, dest: Path, argv: list[str]) -> Path:
    data = json.loads(source.read_text())
    data["argv"] = argv
    data["environment"].update(os="linux", arch="x86_64")
    dest.write_text(json.dumps(data))
    return dest


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--check", "mnist", "--forc", "--ou", "/shared/x.json", "--quick"],
        ["run", "--out=/shared/x.json", "--fo", "--js", "--check", "mnist", "--quick"],
        ["--check", "mnist", "--out", "/x.json", "--force", "--quick"],
        ["run", "--check", "mnist", "--quick", "--json", "--ou=/shared/x.json", "--force"],
    ],
)
def test_out_force_and_json_are_dropped_however_abbreviated(argv: list[str], tmp_path: Path) -> None:
    """kitbench run's own parser finds them: an abbreviation argparse accepts must not reach the rerun."""
    chosen = planning.plan(_with_argv(OLD_RECORDS[0], tmp_path / "r.json", argv), probe())
    assert chosen.run_args == ["--check", "mnist", "--quick"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "--o", "/shared/x.json"], "ambiguous option"),
        (["run", "--bogus"], "unknown option"),
        (["run", "-h"], "unknown option '-h'"),
        (["run", "--he"], "unknown option '--he'"),  # help is no run
        (["run", "--sweep", "--batch-size", "8"], "cannot combine"),
        (["run", "--check", "moves", "--loop", "resident"], "only act on the MNIST check"),
    ],
)
def test_a_command_line_run_would_refuse_is_refused_before_a_build(
    argv: list[str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    assert _cli.main(["replay", str(_with_argv(OLD_RECORDS[0], tmp_path / "r.json", argv))]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("ERROR: ") and words in captured.err, captured.err
    assert "command line is not one this kitbench's run takes" in captured.err and "did you mean" not in captured.err
    assert not (tmp_path / "cache").exists()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs a moment after its session was killed: SIGKILL lands when the kernel next
    schedules it, which on a loaded machine (the tests run on every core) is not at once."""
    deadline = time.monotonic() + 5
    while True:
        try:
            running = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
        except OSError:
            return False
        if not running or time.monotonic() > deadline:
            return running
        time.sleep(0.05)


def _fake(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


@pytest.mark.integration
@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for uv")
def test_an_installer_s_output_is_bounded_and_decoded_and_its_time_limited(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """uv through kitbench._proc: 8 MB of invalid UTF-8 and escapes is one escaped ERROR line; a uv that
    never ends is stopped at the limit with everything it started, and nothing is left in the cache."""
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    loud = _fake(
        tmp_path,
        "head -c 8000000 /dev/zero | tr '\\0' '\\377' >&2\n"
        "printf '\\nerror: Because \\033[2J\\377 no wheel\\n' >&2\nexit 1\n",
    )
    monkeypatch.setattr(replay, "_uv", lambda: str(loud))
    _no_interpreters(monkeypatch)
    assert _cli.main(["replay", str(cpu_record)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-2] == (
        "ERROR: no Python 3.11 here: looked in PATH, pyenv (/nowhere); Because \\x1b[2J\ufffd no wheel"
    ), err[-300:]
    assert "Traceback" not in err and list((tmp_path / "cache").iterdir()) == []
    hung = _fake(tmp_path, f"sleep 300 & echo $! > {tmp_path}/child\nwait\n")
    monkeypatch.setattr(replay, "_uv", lambda: str(hung))
    monkeypatch.setattr(replay, "INSTALL_TIMEOUT_S", 1.0)
    started = time.monotonic()
    assert _cli.main(["replay", str(cpu_record)]) == 2
    assert time.monotonic() - started < 30
    assert "did not finish within 1 s and was stopped" in capsys.readouterr().err
    assert not _alive(int((tmp_path / "child").read_text())) and list((tmp_path / "cache").iterdir()) == []


@pytest.mark.integration
@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for the rebuilt Python")
def test_the_replayed_run_streams_its_progress_escaped_and_stops_with_everything_it_started(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM first (the replayed kitbench stops its own DDP ranks), then its whole session."""
    python = _fake(
        tmp_path,
        f"trap 'echo term > {tmp_path}/term; exit 143' TERM\n"
        f"sleep 300 & echo $! > {tmp_path}/child\n"
        "printf 'mnist: epoch 1 \\033]0;title\\007\\n' >&2\nwait\n",
    )
    monkeypatch.setattr(replay, "_run_limit", lambda record: 2.0)
    said: list[str] = []
    with pytest.raises(ReplayError, match="did not finish within 2 s"):
        replay.run(planning.plan(cpu_record, probe()), python, tmp_path / "new.json", said.append)
    assert said[1] == "mnist: epoch 1 \\x1b]0;title\\x07"
    assert (tmp_path / "term").read_text() == "term\n"
    assert not _alive(int((tmp_path / "child").read_text()))


@pytest.mark.integration
def test_compare_lists_each_package_and_setting_difference_once(cpu_record: Path) -> None:
    env = records.read(cpu_record)["environment"]
    other = json.loads(json.dumps(env))
    other["packages"] = [p if p["name"] != "numpy" else {**p, "version": "2.4.5"} for p in other["packages"]]
    other["packages"].append({"name": "extra", "version": "1.0"})
    env["settings"], other["settings"] = {"OMP_NUM_THREADS": None}, {"OMP_NUM_THREADS": "4"}
    assert envdiff.diff(env, other) == [
        "package extra: absent -> 1.0",
        "package numpy: 2.4.6 -> 2.4.5",
        "setting OMP_NUM_THREADS: None -> 4",
    ]


@pytest.mark.integration
@needs_uv
def test_sigterm_mid_build_leaves_no_half_built_environment(cpu_record: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "KITBENCH_INDEX_URL": "default",
        replay.CACHE_VARIABLE: str(cache),
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
    }  # a cold uv cache: the build lasts long enough
    child = subprocess.Popen(
        [sys.executable, "-m", "kitbench", "replay", str(cpu_record)],
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (cache.is_dir() and any((cache / d / "venv").exists() for d in os.listdir(cache))):
            assert time.monotonic() < deadline and child.poll() is None, "the build never started"
            time.sleep(0.05)
        time.sleep(0.5)
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, err
    assert "terminated (SIGTERM)" in err
    assert list(cache.iterdir()) == []


@pytest.mark.integration
@needs_uv
def test_a_wheel_whose_hash_differs_from_the_records_is_refused(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    forged = _edited(
        cpu_record,
        tmp_path / "forged.json",
        packages=[{"name": "numpy", "version": "2.4.6", "hashes": ["sha256:" + "0" * 64]}],
    )
    assert _cli.main(["replay", str(forged)]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "ERROR: cannot install the recorded versions: cause: Hash mismatch for `numpy==2.4.6`"
    )
    assert list((tmp_path / "cache").iterdir()) == []


# --- container records: replayed in their image on the real engine ---


@pytest.fixture(scope="module")
def container_record(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A real record of the cuda126 image run on the CPU (.ci/run built the image: the build is all cache).
    Its results folder is pytest's, of mode 700 and owned by this user: the image's user (uid 1000)
    writes into the target's folder, mounted on its own, without entering the root."""
    docker = pytest.importorskip("docker")
    base = os.environ.get("KITBENCH_TEST_BASE_IMAGE", "kitbench-ci/debian:bookworm")
    try:
        docker.from_env().images.get(base)
    except Exception as exc:
        pytest.skip(f"no Docker engine with the base image {base} here ({type(exc).__name__}): .ci/run makes it")
    results = tmp_path_factory.mktemp("results")
    env = {
        **os.environ,
        "KITBENCH_RESULTS": str(results),
        "KITBENCH_BASE_IMAGE": base,
        "KITBENCH_GPUS": "none",
        "KITBENCH_DOCKER_NETWORK": "host",
        "KITBENCH_INDEX_URL": "default",
    }
    # MNIST, briefly: a replay's verdict is verify's, which compares the MNIST runs (a record without is refused).
    subprocess.run(
        [
            sys.executable,
            "-m",
            "kitbench",
            "container",
            "cuda126",
            "--",
            "--quick",
            "--offline",
            "--check",
            "mnist",
            "--loop",
            "resident",
            "--limit",
            "1000",
        ],
        env=env,
        check=True,
        capture_output=True,
        cwd=REPO,
        timeout=3600,
    )
    (record,) = (results / "cuda126").glob("*.json")
    return record, env


def _replay(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> int:
    for name in (
        "KITBENCH_RESULTS",
        "KITBENCH_BASE_IMAGE",
        "KITBENCH_GPUS",
        "KITBENCH_DOCKER_NETWORK",
        "KITBENCH_INDEX_URL",
    ):
        monkeypatch.setenv(name, env[name])
    return _cli.main(["replay", *args])


@pytest.mark.integration
@pytest.mark.docker
def test_a_container_record_is_replayed_in_its_own_image(
    container_record: tuple[Path, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, env = container_record
    out = tmp_path / "replayed.json"
    assert _replay([str(source), "--out", str(out)], env, monkeypatch) == 0
    captured = capsys.readouterr()
    assert (
        f"reproduced ({out})" in captured.out and "replay: reusing the recorded image kitbench/cuda126:" in captured.err
    )
    new, old = records.read(out), records.read(source)
    assert new["replay_of"] == {"path": str(source), "sha256": planning.plan(source, probe()).sha256}
    assert new["environment"]["image_id"] == old["environment"]["image_id"]
    # What was measured is the same; where MNIST came from (and whether a download was allowed) is this user's.
    assert {k: v for k, v in new["options"].items() if k != "offline"} == {
        k: v for k, v in old["options"].items() if k != "offline"
    }
    assert list((Path(env["KITBENCH_RESULTS"]) / "cuda126").glob("replay-*")) == []  # moved, not copied
    assert _replay([str(source), "--out", str(out)], env, monkeypatch) == 2  # never clobbered: refused up front
    assert "a file is already there" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.docker
def test_a_container_record_whose_image_is_gone_is_rebuilt_and_says_so(
    container_record: tuple[Path, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, env = container_record
    gone = _edited(source, tmp_path / "gone.json", image_id="sha256:" + "0" * 64)
    assert _replay([str(gone), "--out", str(tmp_path / "new.json")], env, monkeypatch) == 0
    captured = capsys.readouterr()
    assert "is not here: building cuda126's" in captured.err
    assert "note: the record's image (sha256:000000000000) is not on this machine: rebuilt as sha256:" in captured.out
    assert "environment differs: image_id: sha256:0000" in captured.out


@pytest.mark.parametrize(
    ("edits", "words"),
    [
        ({"torch": "2.0.0"}, "target cuda126 pins torch"),
        ({"target": "cpu"}, "of target 'cpu', which is not a docker target of this kitbench"),
        ({"arch": "aarch64"}, "the record ran in a linux-aarch64 container, this is linux-x86_64"),
    ],
)
@pytest.mark.integration
def test_a_container_record_that_cannot_be_rebuilt_is_refused_before_docker(
    cpu_record: Path, edits: dict[str, str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench.environments import targets
    from kitbench.rebuild import images

    cuda = targets.get("cuda126")
    record = _edited(
        cpu_record,
        tmp_path / "c.json",
        **{
            "target": "cuda126",
            "image": images.image_tag(cuda),
            "image_id": "sha256:" + "1" * 64,
            "torch": cuda.torch,
            "torchvision": cuda.torchvision,
            **edits,
        },
    )
    assert _cli.main(["replay", str(record)]) == 2
    assert words in capsys.readouterr().err.splitlines()[0]


# --- a record is a stranger's file: replay obeys nothing in it but its validated packages ---


def _v1(source: Path, dest: Path, **environment: Any) -> Path:
    """``source`` as a /1 record (torch and torchvision named, no packages), with ``environment`` changed."""
    data = json.loads(source.read_text())
    data["schema"] = "kitbench.run/1"
    data["environment"].pop("packages", None)
    data["environment"].pop("lock", None)
    data["environment"].update(environment)
    dest.write_text(json.dumps(data))
    return dest


@pytest.mark.integration
@pytest.mark.parametrize("second", ["http://127.0.0.1:{port}/evil-0.1.tar.gz", "--index-url http://127.0.0.1:{port}/"])
@pytest.mark.parametrize("field", ["torch", "torchvision"])
def test_a_version_that_is_not_one_is_refused_and_no_host_is_reached(
    field: str,
    second: str,
    cpu_record: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A version's second line would be a requirement (an sdist whose setup.py runs) or an option (another
    index) to pip: refused before anything is built, and the loopback server hears nothing."""
    import http.server
    import threading

    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_error(404)

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
        monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
        hostile = _v1(
            cpu_record, tmp_path / "r.json", **{field: "2.14.1\n" + second.format(port=server.server_address[1])}
        )
        assert _cli.main(["replay", str(hostile)]) == 2
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: {hostile} names {field} version '2.14.1\\n") and "which no index serves" in err
    assert len(err.splitlines()) == 2 and asked == [] and not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("environment", "shown"),
    [
        ({"target": "cpu\x1b]0;pwned\x07"}, "target 'cpu\\x1b]0;pwned\\x07'"),
        ({"target": "cpu\x00"}, "target 'cpu\\x00'"),
        ({"os": "linux\r\nreproduced"}, "os 'linux\\r\\nreproduced'"),
        ({"python": "3.11\n--index-url x"}, "python '3.11\\n--index-url x'"),
        ({"image_id": "sha256:zz"}, "image_id 'sha256:zz'"),
    ],
)
@pytest.mark.integration
def test_record_words_are_checked_in_one_place_and_shown_escaped(
    environment: dict[str, str],
    shown: str,
    cpu_record: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    assert _cli.main(["replay", str(_edited(cpu_record, tmp_path / "r.json", **environment))]) == 2
    err = capsys.readouterr().err
    assert shown in err and len(err.splitlines()) == 2 and not any(c in err for c in "\x1b\x07\x00\r")
    assert not (tmp_path / "cache").exists()


def test_only_options_that_change_what_is_measured_are_taken(tmp_path: Path) -> None:
    argv = [
        "run",
        "--check",
        "mnist",
        "--data",
        "/elsewhere",
        "--offline",
        "--json",
        "--check",
        "ddp",
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        "10.0.0.1:29400",
        "--nproc",
        "2",
        "--seed",
        "7",
        "--quick",
        "--batch-size",
        "16,64",
        "--lr",
        "0.05",
        "--deterministic",
        "--out",
        "/x.json",
        "--force",
    ]
    chosen = planning.plan(_with_argv(OLD_RECORDS[0], tmp_path / "r.json", argv), probe())
    assert chosen.run_args == [
        "--check",
        "mnist",
        "--check",
        "ddp",
        "--quick",
        "--batch-size",
        "16,64",
        "--seed",
        "7",
        "--lr",
        "0.05",
        "--deterministic",
        "--nproc",
        "2",
    ]
    assert any("DDP is replayed standalone" in note and "--rdzv-endpoint" in note for note in chosen.notes)
    assert chosen.data is not None  # this user's MNIST, given with --offline, where the run trains
    moves = planning.plan(_with_argv(OLD_RECORDS[0], tmp_path / "m.json", ["run", "--check", "moves"]), probe())
    assert moves.run_args == ["--check", "moves"] and moves.data is None  # run refuses --data without MNIST
    with pytest.raises(ReplayError, match="names the device"):
        planning.plan(_with_argv(OLD_RECORDS[0], tmp_path / "d.json", ["run", "--device", "cuda\n--data=/x"]), probe())


def test_a_record_with_nothing_to_compare_is_refused_before_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record whose checks never ran (interrupted at once): nothing a replay could compare."""
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    data = json.loads((REPO / "docs" / "records" / "cpu-bench-ddp.json").read_text())
    data["checks"], data["status"] = {}, "interrupted"
    records.validate(data)
    (tmp_path / "r.json").write_text(json.dumps(data))
    assert _cli.main(["replay", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "holds neither MNIST runs nor the availability, moves or DDP checks" in err
    assert not (tmp_path / "cache").exists()


@pytest.fixture(scope="module")
def quick_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first record a new user makes: no MNIST (``run --check availability --check moves --quick``)."""
    out = tmp_path_factory.mktemp("quick") / "quick.json"
    env = {
        **os.environ,
        "KITBENCH_TARGET": "cpu",
        "KITBENCH_INDEX_URL": "default",
        locks.LOCK_VARIABLE: str(REPO / "envs" / "locks" / "pylock.cpu-linux-x86_64-py3.11.toml"),
    }
    subprocess.run(
        [
            sys.executable,
            "-m",
            "kitbench",
            "run",
            "--check",
            "availability",
            "--check",
            "moves",
            "--quick",
            "--out",
            str(out),
        ],
        env=env,
        check=True,
        capture_output=True,
        cwd=REPO,
    )
    return out


@pytest.fixture(scope="module")
def quick_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("quick-cache")  # one build for the quick record and its GPU twin


@pytest.mark.integration
@needs_uv
def test_a_record_without_mnist_is_replayed_and_says_what_was_compared(
    quick_record: Path,
    quick_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(quick_cache))
    out = tmp_path / "replayed.json"
    assert _cli.main(["replay", str(quick_record), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    compared = [line for line in printed if line.startswith("compared: ")]
    for quantity in (
        "availability: torch version and build",
        "availability: usable devices",
        "availability: the matmul kernel against float64 on cpu",
        "moves: status",
        "moves: a tensor on the wrong device is refused",
    ):
        assert any(line.startswith("compared: equal (") and quantity in line for line in compared), quantity
    assert any(line.startswith("not compared: ") and "MNIST (the record has no MNIST runs)" in line for line in printed)
    assert printed[-1] == f"reproduced ({out})"
    assert records.read(out)["checks"].keys() == {"availability", "moves"}


def _on_a_gpu(source: Path, dest: Path) -> Path:
    """``source`` as the same run on an H200 would have written it (the README's h200-suite.json's values)."""
    data = json.loads(source.read_text())
    data["device"] = "cuda:0"
    data["argv"] = ["run", "--device", "cuda", *data["argv"][1:]]
    data["environment"]["gpus"] = ["NVIDIA H200"]
    availability = data["checks"]["availability"]
    availability.update(
        selected_device="cuda:0",
        devices=[
            {
                "index": 0,
                "name": "NVIDIA H200",
                "capability": "9.0",
                "kernels_in_wheel": True,
                "total_memory_mib": 143155,
                "free_memory_mib": 142535,
                "multiprocessors": 132,
            }
        ],
    )
    availability["kernel"]["device"] = "cuda:0"
    data["checks"]["moves"]["mismatch_error"] = "Expected all tensors to be on the same device"
    records.validate(data)
    dest.write_text(json.dumps(data))
    return dest


def test_a_gpu_record_on_a_machine_without_it_is_planned_for_the_cpu_and_says_so() -> None:
    """The README's own H200 record, planned on a machine with no NVIDIA GPU: before anything is built."""
    without = probe()._replace(gpus=())
    chosen = planning.plan(REPO / "docs" / "records" / "h200-suite.json", without, local_by_name=True)
    assert chosen.missing == "NVIDIA H200"
    assert chosen.run_args[chosen.run_args.index("--device") + 1] == "cpu" and "cuda" not in chosen.run_args
    assert chosen.here is not None and chosen.here.startswith("this machine has no NVIDIA H200 (the record's cuda:0)")
    assert "compared: the checks' status; the torch build and the kernel check against float64" in chosen.here


def test_without_the_gpu_a_records_cpu_runs_are_verified_and_its_gpu_runs_said_not_compared(tmp_path: Path) -> None:
    """h200-suite.json ran each model and loop on the H200 and on its CPU: a CPU-only rerun (here its own CPU
    runs, as a rerun on that CPU would give them) reproduces the CPU runs; the 6 GPU runs are not compared."""
    source = REPO / "docs" / "records" / "h200-suite.json"
    chosen = planning.plan(source, probe()._replace(gpus=()), local_by_name=True)
    assert chosen.here is not None and "the record's MNIST runs on the CPU, by verify's rules" in chosen.here
    old = json.loads(source.read_text())
    runs = old["checks"]["mnist"]["runs"]
    new = {
        **old,
        "device": "cpu",
        "checks": {
            **old["checks"],
            "mnist": {**old["checks"]["mnist"], "runs": [r for r in runs if r["device"] == "cpu"]},
        },
    }
    outcome = replay.check(chosen, new, tmp_path / "new.json")
    assert outcome.reproduced and outcome.verdict == "reproduced what a machine without NVIDIA H200 can show"
    assert len(outcome.mnist) > 0 and all(c.equal and " on cpu" in c.quantity for c in outcome.mnist)
    assert "the record's 6 MNIST runs on NVIDIA H200 (not here)" in outcome.not_compared


@pytest.mark.integration
@needs_uv
def test_a_gpu_record_on_a_machine_without_it_compares_what_the_cpu_can_show(
    quick_record: Path,
    quick_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if probe().gpus:
        pytest.skip("this machine has an NVIDIA GPU: the record's H200 could be here")
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(quick_cache))
    out = tmp_path / "replayed.json"
    assert _cli.main(["replay", str(_on_a_gpu(quick_record, tmp_path / "gpu.json")), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    said = [line for line in captured.err.splitlines() if not line.startswith("replay: ...")]
    assert said[0].startswith("replay: this machine has no NVIDIA H200 (the record's cuda:0): rebuilding")
    assert "--device cpu" in next(line for line in said if line.startswith("replay: running:"))
    printed = captured.out.splitlines()
    assert (
        "compared: equal (each within its tolerance 0.0001): availability: the matmul kernel against float64 "
        "on cuda:0 vs cpu" in "\n".join(printed)
    )
    compared = [line for line in printed if line.startswith("compared")]
    assert not any("usable devices" in line or "wrong device" in line for line in compared)
    assert printed[-1] == f"reproduced what a machine without NVIDIA H200 can show ({out})"


@pytest.mark.integration
def test_missing_mnist_or_an_unusable_cache_is_cannot_rebuild_never_a_verdict(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = os.environ.get("KITBENCH_DATA")
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setenv("KITBENCH_DATA", str(tmp_path / "empty"))
    assert _cli.main(["replay", str(cpu_record)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: cannot rebuild the run: MNIST file missing") and "never from a path" in err
    assert not (tmp_path / "cache").exists() and not (tmp_path / "empty").exists()
    if real is None or not Path(real, "MNIST").is_dir():
        pytest.skip("needs MNIST in KITBENCH_DATA to get past the data check")
    monkeypatch.setenv("KITBENCH_DATA", real)
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "file" / "cache"))
    assert _cli.main(["replay", str(cpu_record)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: cannot rebuild the run: the replay cache ") and "KITBENCH_REPLAY_CACHE" in err
    assert "KITBENCH_RESULTS" not in err


@pytest.mark.integration
def test_a_refusal_of_verify_or_a_failed_rerun_is_exit_2_never_reproduced(cpu_record: Path, tmp_path: Path) -> None:
    chosen = planning.plan(cpu_record, probe())
    twice = json.loads(cpu_record.read_text())
    twice["checks"]["mnist"]["runs"].append(twice["checks"]["mnist"]["runs"][0])
    with pytest.raises(
        ReplayError, match="cannot be compared with the record: the candidate holds two MNIST runs"
    ) as refused:
        replay.check(chosen, twice, tmp_path / "new.json")
    assert refused.value.exit_code == 2
    failed = {**json.loads(cpu_record.read_text()), "status": "failed", "error": "no MNIST", "checks": {}}
    with pytest.raises(ReplayError, match="the replayed run failed before its MNIST runs: no MNIST"):
        replay.check(chosen, failed, tmp_path / "new.json")


def test_a_ddp_record_is_verified_by_its_replicas_being_identical(tmp_path: Path) -> None:
    """The kept DDP record (gloo, fnn and cnn at world sizes 1 and 2, every replica identical), against a
    rerun where the cnn's two ranks drifted apart."""
    source = REPO / "docs" / "records" / "cpu-bench-ddp.json"
    chosen = planning.plan(source, probe())
    old = json.loads(source.read_text())
    same = replay.check(chosen, old, tmp_path / "new.json")
    assert same.reproduced and [c.quantity for c in same.compared] == [
        "ddp: status",
        "ddp: gloo fnn x1: replicas identical",
        "ddp: gloo cnn x1: replicas identical",
        "ddp: gloo fnn x2: replicas identical",
        "ddp: gloo cnn x2: replicas identical",
    ]
    drifted = json.loads(source.read_text())
    drifted["checks"]["ddp"]["runs"][0]["scaling"][-1]["identical"] = False
    assert drifted["checks"]["ddp"]["runs"][0]["scaling"][-1]["model"] == "cnn"
    outcome = replay.check(chosen, drifted, tmp_path / "new.json")
    assert not outcome.reproduced and outcome.first_divergence == "ddp: gloo cnn x2: replicas identical: True -> False"


def test_the_manifest_hash_a_replay_never_reads_is_no_difference(tmp_path: Path) -> None:
    """A replay is built from the record, not from its target's manifest: the rerun's record has no manifest
    hash, and that is not a difference of the run (it was listed on every replay)."""
    source = REPO / "docs" / "records" / "cpu-bench-fnn.json"
    old = json.loads(source.read_text())
    assert old["environment"]["manifest_sha256"] is not None
    chosen = planning.plan(source, probe())
    new = {**old, "environment": {**old["environment"], "manifest_sha256": None}}
    outcome = replay.check(chosen, new, tmp_path / "new.json")
    assert outcome.reproduced and not any("manifest_sha256" in line for line in outcome.differences)


_UV_OFFLINE = """error: No interpreter found for Python 3.12 in managed installations or search path
  Caused by: Failed to download https://github.com/astral-sh/python-build-standalone/releases/download/x.tar.gz
  cause: error sending request for url (https://github.com/astral-sh/python-build-standalone/x.tar.gz)
  cause: client error (Connect)
  cause: dns error
  cause: failed to lookup address information: Name or service not known
"""


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for uv")
@pytest.mark.parametrize(
    ("uv", "first"),
    [
        (
            True,
            "ERROR: no Python 3.12 here: looked in PATH, pyenv (/nowhere); uv could not download one: cannot reach "
            "github.com (failed to lookup address information: Name or service not known)",
        ),
        (False, "ERROR: no Python 3.12 here: looked in PATH, pyenv (/nowhere); no uv to provide one"),
    ],
)
def test_a_python_that_is_not_here_is_named_with_how_to_get_one(
    uv: bool, first: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The light install replaying a Python 3.12 record where no 3.12 is found: uv cannot download one (its
    output as seen on a machine without DNS: the host it could not reach is named, not "offline"), or no uv."""
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    record = _edited(OLD_RECORDS[0], tmp_path / "r.json", os="linux", arch="x86_64", python="3.12.3")
    _no_interpreters(monkeypatch)
    if uv:
        fake = _fake(tmp_path, f"test \"$UV_HTTP_RETRIES\" = 0 || exit 3\ncat >&2 <<'EOF'\n{_UV_OFFLINE}EOF\nexit 2\n")
        monkeypatch.setattr(replay, "_uv", lambda: str(fake))
    else:
        monkeypatch.setattr(replay, "_uv", lambda: None)
    monkeypatch.setattr(replay, "_check_data", lambda root: None)
    assert _cli.main(["replay", str(record)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-2] == first
    assert err[-1].startswith(
        "hint: the record ran on Python 3.12.3: install a Python 3.12, with uv (`uv python install 3.12`"
    ) and err[-1].endswith("nothing was built")
    assert ("where github.com is reachable" in err[-1]) == uv
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.integration
@pytest.mark.skipif(sys.platform == "win32", reason="shell scripts stand in for the Pythons")
def test_a_python_is_found_in_pyenv_where_the_shim_on_path_has_none_selected(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pyenv's shim on PATH fails (no 3.12 selected), a file named python3.12 that is another Python is passed
    over, and pyenv's installed 3.12.1 is the one the environment is made with: each candidate is asked its
    version by running it."""
    from kitbench.machine import interpreters

    shims, root = tmp_path / "shims", tmp_path / "pyenv"
    shims.mkdir()
    (shims / "python3.12").write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    for version, says in (("3.12.1", "3.12.1"), ("3.12.9", "3.11.9")):
        folder = root / "versions" / version / "bin"
        folder.mkdir(parents=True)
        (folder / "python3.12").write_text(f"#!/bin/sh\necho {says}\n")
    for script in [shims / "python3.12", *root.glob("versions/*/bin/python3.12")]:
        script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYENV_ROOT", str(root))
    monkeypatch.setattr(interpreters, "PREFIXES", ())
    monkeypatch.setattr(interpreters, "CONDA_HOMES", ())
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    search = interpreters.find("3.12")
    assert search.found == interpreters.Found(root / "versions" / "3.12.1" / "bin" / "python3.12", "3.12.1", "pyenv")
    assert search.refused == (
        f"{shims / 'python3.12'}: did not run",
        f"{root / 'versions' / '3.12.9' / 'bin' / 'python3.12'}: Python 3.11.9",
    )
    calls = _fake_uv(monkeypatch, find=True)
    chosen = planning.plan(_edited(cpu_record, tmp_path / "r.json", python="3.12.3"), probe())
    said: list[str] = []
    replay.build(chosen, said.append, tmp_path / "cache")
    assert calls[0][calls[0].index("--python") + 1] == str(root / "versions" / "3.12.1" / "bin" / "python3.12")
    assert f"Python 3.12.1: {root / 'versions' / '3.12.1' / 'bin' / 'python3.12'} (pyenv)" in said


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for pip")
def test_a_hash_mismatch_names_its_package(tmp_path: Path) -> None:
    pip = _fake(
        tmp_path,
        "cat >&2 <<'EOF'\nERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS "
        "FILE.\n    numpy==2.4.6 from https://files.example/numpy.whl:\n        Expected sha256 "
        f"{'0' * 64}\n             Got        4721f391{'a' * 56}\nEOF\nexit 1\n",
    )
    with pytest.raises(ReplayError, match=r"cannot install: numpy==2\.4\.6: Got +4721f391"):
        replay._call([str(pip)], "cannot install")


@pytest.mark.integration
def test_a_multi_node_record_replays_standalone_and_joins_no_rendezvous(
    cpu_record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The record names a rendezvous (a listener here) and a data folder: the replay (this interpreter
    standing in for the rebuilt one) runs DDP standalone on this user's MNIST, verifies, and no
    connection ever reaches the listener, nor is the folder made."""
    import socket

    if not Path(os.environ.get("KITBENCH_DATA", "/nonexistent"), "MNIST").is_dir():
        pytest.skip("needs MNIST in KITBENCH_DATA (the replay never downloads it)")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    chosen = tmp_path / "chosen"
    data = json.loads(cpu_record.read_text())
    data["argv"] = [
        "run",
        "--check",
        "mnist",
        "--limit",
        "300",
        "--offline",
        "--data",
        str(chosen),
        "--check",
        "ddp",
        "--nnodes",
        "2",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--nproc",
        "1",
    ]
    record = tmp_path / "multi.json"
    record.write_text(json.dumps(data))
    monkeypatch.setattr(replay, "build", lambda plan, log: Path(sys.executable))
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    out = tmp_path / "replayed.json"
    try:
        code = _cli.main(["replay", str(record), "--out", str(out)])
        captured = capsys.readouterr()
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert code == 0, captured.err[-2000:]
    assert f"reproduced ({out})" in captured.out and "DDP is replayed standalone" in captured.out
    assert not chosen.exists()
    argv = records.read(out)["argv"]
    assert "--rdzv-endpoint" not in argv and "--nnodes" not in argv and argv[argv.index("--data") + 1] != str(chosen)


def test_identical_pins_reuse_one_environment_and_an_incomplete_one_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache follows XDG_CACHE_HOME; two records with the same pins share one environment, found complete
    by the file written last; one without that file is rebuilt; another index in force is another environment."""
    for name in (replay.CACHE_VARIABLE, "KITBENCH_CACHE", "KITBENCH_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert replay.cache_root() == tmp_path / "xdg" / "kitbench" / "replay"
    calls = _fake_uv(monkeypatch)
    made = replay._call

    def venv_with_python(command: list[str], what: str, env: dict[str, str] | None = None, reach: Any = None) -> None:
        made(command, what, env, reach)
        if command[1] == "venv":
            (Path(command[-1]) / "bin").mkdir()
            (Path(command[-1]) / "bin" / "python").touch()

    monkeypatch.setattr(replay, "_call", venv_with_python)
    first = _edited(OLD_RECORDS[0], tmp_path / "a.json", os="linux", arch="x86_64")
    second = _edited(OLD_RECORDS[0], tmp_path / "b.json", os="linux", arch="x86_64", cpu="another CPU")
    said: list[str] = []
    python = replay.build(planning.plan(first, probe()), said.append)
    folder = python.parent.parent
    assert folder.parent == replay.cache_root() and len(calls) == 2
    complete = json.loads((folder / replay.COMPLETE).read_text())
    assert complete["requirements"] == planning.plan(first, probe()).requirements
    assert replay.build(planning.plan(second, probe()), said.append) == python and len(calls) == 2
    assert said[-1] == f"reusing {folder}"
    (folder / replay.COMPLETE).unlink()  # as a build of an older kitbench, or one half deleted, leaves it
    assert replay.build(planning.plan(first, probe()), said.append) == python and len(calls) == 4
    assert f"{folder} was not complete: rebuilt" in said and (folder / replay.COMPLETE).is_file()
    assert [p.name for p in replay.cache_root().iterdir()] == [folder.name]  # nothing left beside it
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://mirror.invalid/simple")
    assert replay.build(planning.plan(first, probe()), said.append) != python and len(calls) == 6


@needs_uv
def test_a_real_environment_of_a_tiny_pure_python_package_is_built_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv for real, with a pin of six from PyPI (or the configured index) standing in for a record's torch."""
    import dataclasses

    from kitbench import _reach

    if _reach.first_unresolved(["https://pypi.org/simple"]) is not None and not os.environ.get("UV_DEFAULT_INDEX"):
        pytest.skip("PyPI does not resolve here and no UV_DEFAULT_INDEX names another index")
    for name in ("KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX"):
        monkeypatch.delenv(name, raising=False)
    chosen = dataclasses.replace(
        planning.plan(_edited(OLD_RECORDS[0], tmp_path / "r.json", os="linux", arch="x86_64"), probe()),
        python=f"{sys.version_info[0]}.{sys.version_info[1]}",
        requirements=["six==1.17.0"],
        exact=True,
        index=None,
    )
    said: list[str] = []
    started = time.monotonic()
    python = replay.build(chosen, said.append, tmp_path / "cache")
    built_s = time.monotonic() - started
    assert (
        subprocess.run(
            [str(python), "-c", "import six; print(six.__version__)"], capture_output=True, text=True, check=True
        ).stdout
        == "1.17.0\n"
    )
    started = time.monotonic()
    assert replay.build(chosen, said.append, tmp_path / "cache") == python
    assert said[-1] == f"reusing {python.parent.parent}" and time.monotonic() - started < built_s


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for uv")
@pytest.mark.parametrize("resolved", [False, True])
def test_an_index_out_of_reach_is_named_with_the_records_override_as_a_hint(
    resolved: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replay without the override of a record built from PyPI's simple index: the host that could not be
    reached is named, in seconds where it does not resolve (before the installer's retries), else from the
    installer's own output; the hint offers the record's index_override as a command, and nothing obeys it."""
    for name in ("KITBENCH_INDEX_URL", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KITBENCH_PYTORCH_INDEX", "https://whl.invalid/whl")
    monkeypatch.setenv(replay.CACHE_VARIABLE, str(tmp_path / "cache"))
    record = _edited(
        OLD_RECORDS[0],
        tmp_path / "r.json",
        os="linux",
        arch="x86_64",
        target="cpu",
        index_override="https://pypi.org/simple",
    )
    uv = _fake(
        tmp_path,
        'if [ "$1" = venv ]; then mkdir -p "$(eval echo \\${$#})"; exit 0; fi\n'
        f'echo "$UV_DEFAULT_INDEX" > {tmp_path}/default\n'
        "cat >&2 <<'EOF'\nerror: Failed to fetch: `https://whl.invalid/whl/cpu/torch/`\n"
        "  Caused by: dns error: failed to lookup address information: Name or service not known\n"
        "EOF\nexit 2\n",
    )
    monkeypatch.setattr(replay, "_uv", lambda: str(uv))
    monkeypatch.setattr(replay, "_check_data", lambda root: None)
    _no_interpreters(monkeypatch)
    if resolved:  # as where a resolver answers for the host and the connection fails later
        monkeypatch.setattr(replay._reach, "first_unresolved", lambda urls: None)
    started = time.monotonic()
    assert _cli.main(["replay", str(record)]) == 2
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err.splitlines()
    cause = (
        "dns error: failed to lookup address information: Name or service not known)"
        if resolved
        else "it does not resolve: "
    )
    assert err[-2].startswith(f"ERROR: cannot install the recorded versions: cannot reach whl.invalid ({cause}")
    assert err[-1] == (
        "hint: KITBENCH_PYTORCH_INDEX=https://whl.invalid/whl is in force and names it: check that mirror; or the "
        "record's environment was built from https://pypi.org/simple (its index_override): "
        f"`KITBENCH_INDEX_URL=https://pypi.org/simple kitbench replay {record}` installs from there, if you trust "
        "that index (kitbench never takes it by itself); or set KITBENCH_INDEX_URL to an index this machine "
        "reaches, or to default for your pip or uv configuration (a mirror, a proxy): "
        f"`KITBENCH_INDEX_URL=default kitbench replay {record}`"
    )
    # Never obeyed: the installer was given no index of the record's (uv's default stays its own).
    assert not resolved or (tmp_path / "default").read_text() == "\n"
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize(
    ("recorded", "offered"),
    [
        ("https://user:secret@mirror.invalid/simple", "https://mirror.invalid/simple"),  # never the token
        ("https://pypi.org/simple\n--index-url http://evil.invalid/", None),  # not a URL: not offered
        ("default", "default"),
        (None, None),
    ],
)
def test_a_records_index_override_is_offered_only_as_a_clean_url(
    recorded: str | None, offered: str | None, tmp_path: Path
) -> None:
    data = json.loads(OLD_RECORDS[0].read_text())
    data["environment"]["index_override"] = recorded
    assert replay._recorded_index(data) == offered
