"""kitbench.advice.project and project_files: a team's machines as one uv project, resolved for real by uv
against stand-ins of PyTorch's index and PyPI (tests/pytorch_index.py, serving pages recorded for these
projects under tests/resources/project/indexes/), and as one pixi manifest, checked against pixi's published
schema (pixi itself is not on PyPI: PyPI's "pixi" is another program).

The builds expected here are worked out from published facts, each named where it is used, not read back
from kitbench: install-cmd's choice of release is the selector's (asked here, never re-implemented).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastjsonschema
import pytest
import tomllib
from packaging.markers import Marker
from packaging.utils import parse_wheel_filename
from pytorch_index import PYPI_JSON, everything, in_family, live, record, recorded, serving

from kitbench._cli import main
from kitbench.advice import project
from kitbench.advice.rejections import Refused
from kitbench.advice.selector import select
from kitbench.errors import SelectionError, UsageError
from kitbench.machine.probe import Probe, saved

RESOURCES = Path(__file__).resolve().parents[1] / "resources" / "project"
PAGES = RESOURCES / "indexes"
CI_PROBE = RESOURCES / "ci-linux-x86_64.probe.json"  # `kitbench probe --json` on a CPU-only Linux container
PIXI_SCHEMA = RESOURCES / "pixi-manifest.schema.json"
UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
needs_uv = pytest.mark.skipif(UV is None, reason="uv is not installed here: the project is resolved with it")

# The three machines of docs/project.md, as a team describes them: an M3 laptop (macOS 14), an H100 server
# on driver 570 and CPU-only CI (its own probe, taken on a real CPU-only container).
LAPTOP = "laptop=--os macos --arch arm64 --os-version 14.5 --python-version 3.11"
H100 = "h100=--os linux --arch x86_64 --driver 570.86.10 --gpu-cc 9.0 --python-version 3.11"
CI = f"ci={CI_PROBE}"
# A team no release serves: an Intel Mac beside an RTX 5090 (sm_120) on driver 575.
INTEL_MAC = "imac=--os macos --arch x86_64 --os-version 13.6 --python-version 3.11"
RTX5090 = "rtx5090=--os linux --arch x86_64 --driver 575.51.02 --gpu-cc 12.0 --python-version 3.11"

# PEP 508 environments of each platform (CPython's sys.platform and platform.machine() there).
ENVIRONMENTS = {
    "macos-arm64": {"sys_platform": "darwin", "platform_machine": "arm64", "platform_system": "Darwin"},
    "macos-x86_64": {"sys_platform": "darwin", "platform_machine": "x86_64", "platform_system": "Darwin"},
    "linux-x86_64": {"sys_platform": "linux", "platform_machine": "x86_64", "platform_system": "Linux"},
}
PYTORCH = "https://download.pytorch.org/whl"
# NVIDIA's CUDA toolkit release notes, table 3: driver 570.x runs CUDA up to 12.8, 575.x up to 12.9; CUDA 13
# needs 580 or newer.
DRIVER_570_CUDA = (12, 8)
DRIVER_575_CUDA = (12, 9)


def _generate(
    folder: Path,
    *machines: str,
    index: str | None = None,
    extra: tuple[str, ...] = (),
    capsys: pytest.CaptureFixture[str] | None = None,
) -> str:
    argv = ["project", str(folder), *(f"--machine={m}" for m in machines), *extra]
    if index:
        argv += ["--index", index]
    code = main(argv)
    out = capsys.readouterr() if capsys else None
    assert code == 0, out.err if out else code
    return out.out if out else ""


@pytest.fixture
def stand_ins() -> Iterator[tuple[str, str]]:
    """(PyTorch's index as a pattern with {compute}, PyPI), both on 127.0.0.1 from the recorded pages."""
    with serving(recorded(PAGES), in_family) as torch_index, serving(recorded(PAGES), everything) as pypi:
        yield torch_index.replace("/simple", "/whl/{compute}"), pypi


def _uv(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert UV is not None
    done = subprocess.run(
        [UV, *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        env={**_clean_env(), "UV_PYTHON_DOWNLOADS": "never"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _clean_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("UV_INDEX", "UV_DEFAULT_INDEX", "PIP_"))}


def _torch(folder: Path, extra: str | None, platform: str) -> dict[str, Any]:
    """The torch entry `uv export --format pylock.toml` names for a machine of ``platform`` syncing ``extra``."""
    args = ["export", "--frozen", "--no-emit-project", "--format", "pylock.toml"]
    if extra:
        args += ["--extra", extra]
    lock = tomllib.loads(_uv(folder, *args).stdout)
    env = {
        **ENVIRONMENTS[platform],
        "python_version": "3.11",
        "python_full_version": "3.11.7",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "os_name": "posix",
    }
    found = [
        p
        for p in lock["packages"]
        if p["name"] == "torch" and Marker(p.get("marker", "python_version > '0'")).evaluate(env)
    ]
    assert len(found) == 1, found
    entry: dict[str, Any] = found[0]
    return entry


def _installs(entry: dict[str, Any], platform: str) -> list[str]:
    """The wheels of ``entry`` a CPython 3.11 on ``platform`` installs (PEP 425 tags; the index lists every
    platform's wheels of a version, as PyTorch's does)."""
    os_name, arch = platform.split("-")
    prefix = {"macos": "macosx_", "linux": "manylinux"}[os_name]
    found = []
    for wheel in entry["wheels"]:
        name = wheel.get("name") or wheel["url"].rsplit("/", 1)[-1]
        if any(
            t.interpreter == "cp311" and t.platform.startswith(prefix) and t.platform.endswith(arch)
            for t in parse_wheel_filename(name)[3]
        ):
            found.append(name)
    return found


def _probe(spec: str) -> Probe:
    """A machine of these tests as the CLI reads it."""
    given = spec.partition("=")[2]
    if not given.startswith("-"):
        return saved.load(Path(given))
    from kitbench import _cli

    return _cli._project_machine(spec)[1]


@needs_uv
def test_three_machines_resolve_and_each_machine_s_export_pins_its_own_build(
    tmp_path: Path, stand_ins: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    torch_index, pypi = stand_ins
    started = time.perf_counter()
    out = _generate(tmp_path, LAPTOP, H100, CI, index=torch_index, extra=("--pixi",), capsys=capsys)
    generated = time.perf_counter() - started
    started = time.perf_counter()
    _uv(tmp_path, "lock", "--default-index", pypi)
    locked = time.perf_counter() - started
    print(f"generate {generated:.2f} s, uv lock {locked:.2f} s", file=sys.stderr)
    team = {
        m.name: m
        for m in project.plan([(n, _probe(s)) for n, s in (("laptop", LAPTOP), ("h100", H100), ("ci", CI))]).members
    }
    release = team["laptop"].chosen.release
    # One release for the team: each machine at the release the selector gives it there.
    assert {m.chosen.release for m in team.values()} == {release}
    for name, spec in (("laptop", LAPTOP), ("h100", H100), ("ci", CI)):
        assert select(_probe(spec), release_spec=release).compute == team[name].chosen.compute

    lines = dict(line.split(None, 1) for line in out.splitlines())
    # The Mac's wheel is PyPI's (pytorch.org's macOS command names no index): its platform decides, no extra.
    assert lines["laptop"].startswith("uv sync  ")
    laptop = _torch(tmp_path, None, "macos-arm64")
    assert laptop["version"] == release and laptop["index"] == pypi
    assert _installs(laptop, "macos-arm64")
    # The H100 and CI share linux-x86_64 but not a build: an extra each, conflicting.
    h100 = team["h100"].chosen.compute
    assert lines["h100"].startswith(f"uv sync --extra {h100} ")
    cuda = (int(h100[2:-1]), int(h100[-1]))
    assert h100.startswith("cu") and (12, 0) <= cuda <= DRIVER_570_CUDA  # sm_90 runs every CUDA 12 build
    server = _torch(tmp_path, h100, "linux-x86_64")
    assert server["version"] == release and server["index"] == torch_index.format(compute=h100)
    assert lines["ci"].startswith("uv sync --extra cpu ")
    ci = _torch(tmp_path, "cpu", "linux-x86_64")
    assert ci["version"] == release and ci["index"] == torch_index.format(compute="cpu")
    assert _installs(server, "linux-x86_64") and _installs(ci, "linux-x86_64")

    pyproject = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert pyproject["tool"]["uv"]["conflicts"] == [[{"extra": h100}, {"extra": "cpu"}]]
    assert [i["name"] for i in pyproject["tool"]["uv"]["index"]] == [f"pytorch-{h100}", "pytorch-cpu"]
    assert all(i["explicit"] for i in pyproject["tool"]["uv"]["index"])
    _valid_pixi(tmp_path / "pixi.toml")
    pixi = tomllib.loads((tmp_path / "pixi.toml").read_text())
    assert pixi["feature"]["h100"]["system-requirements"] == {"cuda": f"{cuda[0]}.{cuda[1]}"}
    assert (
        pixi["feature"]["laptop"]["platforms"] == ["osx-arm64"] and "system-requirements" not in pixi["feature"]["ci"]
    )
    assert pixi["environments"] == {"laptop": ["laptop"], "h100": ["h100"], "ci": ["ci"]}
    # The Mac's from PyPI there too; the others from their build's index (here, the stand-in's).
    assert pixi["feature"]["laptop"]["pypi-dependencies"]["torch"] == f"=={release}"
    assert pixi["feature"]["ci"]["pypi-dependencies"]["torch"] == {
        "version": f"=={release}",
        "index": torch_index.format(compute="cpu"),
    }


@needs_uv
def test_no_single_release_the_intel_mac_holds_the_team_back_and_each_gets_its_own(
    tmp_path: Path, stand_ins: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    torch_index, pypi = stand_ins
    code = main(["project", str(tmp_path), f"--machine={INTEL_MAC}", f"--machine={RTX5090}", "--index", torch_index])
    out = capsys.readouterr()
    assert code == 0, out.err
    # PyTorch's last macOS x86_64 wheels are 2.2.2 (pytorch/pytorch#114602: Intel Mac builds ended with 2.2);
    # the first build with sm_120 kernels (Blackwell GeForce) is 2.7.0 cu128 (PyTorch 2.7 release notes).
    assert "note: no single release serves every machine: imac holds the team back at 2.2.2" in out.err
    assert "rtx5090 gets cpu there" in out.err
    _uv(tmp_path, "lock", "--default-index", pypi)
    mac = _torch(tmp_path, None, "macos-x86_64")
    assert mac["version"] == "2.2.2" and mac["index"] == pypi
    assert _installs(mac, "macos-x86_64")
    gpu = _torch(tmp_path, None, "linux-x86_64")
    assert _installs(gpu, "linux-x86_64")
    chosen = select(_probe(RTX5090))
    assert gpu["version"] == chosen.release and tuple(int(p) for p in chosen.release.split(".")) >= (2, 7, 0)
    # Driver 575 runs CUDA 12.9 at most, and CUDA 12.6 has no sm_120 kernels: a 12.8 or 12.9 build.
    assert chosen.compute in ("cu128", "cu129") and (12, 8) <= (12, int(chosen.compute[-1])) <= DRIVER_575_CUDA
    assert gpu["index"] == torch_index.format(compute=chosen.compute)
    # Each on its own platform: routed by marker, no extra to choose.
    pyproject = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert "optional-dependencies" not in pyproject["project"] and "conflicts" not in pyproject["tool"]["uv"]
    assert [line.split()[1:3] for line in out.out.splitlines()] == [["uv", "sync"], ["uv", "sync"]]


def test_the_team_gets_the_newest_release_that_serves_every_machine_and_a_note_says_who_held_it() -> None:
    # Ubuntu 22.04's Python 3.10: a release stops shipping cp310 wheels some time after 3.10 (README's example).
    ci = saved.described(os="linux", no_gpu=True, python_version="3.10", glibc="2.35")
    laptop = saved.described(os="macos", arch="arm64", os_version="15.1", python_version="3.12")
    own = select(ci).release
    assert own != select(laptop).release, "the facts no longer hold a release without cp310 wheels"
    team = project.plan([("laptop", laptop), ("ci", ci)])
    assert team.release == own and all(m.chosen.release == own for m in team.members)
    assert [m.chosen.compute for m in team.members] == ["mps", "cpu"] and team.extras == []
    assert team.notes == [
        f"torch {own} is the newest release that serves every machine (ci's newest is {own}); "
        f"alone, laptop {select(laptop).release} mps would get a newer one"
    ]


def test_a_machine_named_twice_is_refused() -> None:
    ci = saved.load(CI_PROBE)
    with pytest.raises(UsageError, match="machine 'ci' is given twice"):
        project.plan([("ci", ci), ("ci", ci)])


def test_a_refused_machine_is_told_the_project_s_fix_not_install_cmd_s() -> None:
    """A refusal carries the fix its hint names as values (which flag, which value), and a project words it for its
    machine: the project's own --release, the machine's own flags inside its --machine (it read install-cmd's hint
    back and replaced words in it)."""
    linux = _probe("box=--os linux --python-version 3.14")
    with pytest.raises(Refused) as alone:
        select(linux, release_spec="2.5.0")
    assert alone.value.fix.kind == "installs_hint"
    newest = alone.value.fix.figures["newest"]
    assert alone.value.hint == f"the newest release that installs here is {newest}: --release {newest}"
    with pytest.raises(SelectionError) as refused:
        project.plan([("box", linux)], release_spec="2.5.0")
    assert (
        refused.value.hint == f"the newest release that installs here is {newest}: kitbench project --release {newest}"
    )
    arm = _probe("arm=--os windows --arch aarch64 --python-version 3.14")
    with pytest.raises(Refused) as alone:
        select(arm)
    assert (alone.value.fix.figures["newest"], alone.value.fix.figures["foreign"]) == (None, "x86_64")
    with pytest.raises(SelectionError) as refused:
        project.plan([("arm", arm)])
    said = "; an x86_64 Python runs on {} under emulation: "
    assert alone.value.hint and alone.value.hint.endswith(said.format("this machine") + "--python-arch x86_64")
    assert (
        refused.value.hint
        == alone.value.hint.removesuffix(said.format("this machine") + "--python-arch x86_64")
        + said.format("arm")
        + "add --python-arch x86_64 to --machine arm='...' (or probe it again from an x86_64 Python)"
    )


def test_an_x86_64_python_on_apple_silicon_is_told_the_machine_s_flag_not_install_cmd_s_command() -> None:
    mac = _probe("mac=--os macos --arch arm64 --python-arch x86_64 --python-version 3.13")
    with pytest.raises(Refused) as alone:
        select(mac)
    assert alone.value.fix.kind == "rosetta_hint"
    native = alone.value.fix.figures["native"]
    assert alone.value.hint == f"an arm64 Python gets torch {native} with MPS: {alone.value.fix.figures['command']}"
    assert alone.value.fix.figures["command"].startswith(f"pip install torch=={native} ")
    with pytest.raises(SelectionError) as refused:
        project.plan([("mac", mac)])
    assert refused.value.message == f"mac: {alone.value.message}"
    # No release named: the project's is its own, not the newest one install-cmd would name.
    assert refused.value.hint == (
        "an arm64 Python gets MPS: add --python-arch arm64 to --machine mac='...' (or probe it again from an arm64 "
        "Python)"
    )


def test_an_unknown_release_is_the_project_s_not_its_first_machine_s() -> None:
    with pytest.raises(SelectionError) as refused:
        project.plan([("ci", saved.load(CI_PROBE))], release_spec="9.9.9")
    assert refused.value.message == "unknown release '9.9.9'"
    assert refused.value.hint and refused.value.hint.startswith("covered releases: ")


def _valid_pixi(path: Path) -> None:
    schema = json.loads(PIXI_SCHEMA.read_text())
    fastjsonschema.compile(schema)(tomllib.loads(path.read_text()))


def _record() -> None:
    """Rewrite tests/resources/project/indexes/: every (name, version) uv locks for these tests' projects, read
    from PyPI (``python tests/advice/test_project.py record``, from the repository root, with PyPI reachable).
    The 2.14.1 team is the three machines once #38's release facts hold 2.15 to CUDA 13 builds."""
    import tempfile

    wanted: dict[str, set[str]] = {}
    teams: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
        ((LAPTOP, H100, CI), ()),
        ((LAPTOP, H100, CI), ("--release", "2.14.1")),
        ((INTEL_MAC, RTX5090), ()),
    ]
    with serving(live(), in_family) as torch_index:
        for machines, extra in teams:
            with tempfile.TemporaryDirectory() as folder:
                _generate(Path(folder), *machines, index=torch_index.replace("/simple", "/whl/{compute}"), extra=extra)
                _uv(Path(folder), "lock", "--default-index", PYPI_JSON)
                for package in tomllib.loads((Path(folder) / "uv.lock").read_text())["package"]:
                    if "version" in package and package.get("source", {}).get("virtual") is None:
                        wanted.setdefault(package["name"], set()).add(package["version"].partition("+")[0])
    for path in record(wanted, PAGES):
        print(path)


if __name__ == "__main__":
    if sys.argv[1:] == ["record"]:
        _record()
    else:
        raise SystemExit("usage: python tests/advice/test_project.py record")


def test_two_windows_on_arm_pythons_of_one_release_get_extras_named_after_what_they_install() -> None:
    """torch 2.10.0's torchvision has win_arm64 wheels for Python 3.12, not 3.11 (on record): the same build and
    release, torch alone on one machine. Its extra says so, not a release both share."""
    arm = {"os": "windows", "arch": "aarch64", "python_arch": "aarch64", "no_gpu": True}
    team = project.plan(
        [
            ("new", saved.described(**arm, python_version="3.12")),
            ("old", saved.described(**arm, python_version="3.11")),
        ],
        "2.10.0",
    )
    assert [(m.chosen.release, [p for p, _ in m.wheels.pins]) for m in team.members] == [
        ("2.10.0", ["torch", "torchvision"]),
        ("2.10.0", ["torch"]),
    ]
    assert [m.extra for m in team.members] == ["cpu", "cpu-torch"]
