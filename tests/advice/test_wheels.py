"""Wheel facts (envs/wheels.yaml, read from PyPI) and the install advice checked against them.

The golden grid asks ``selector.select`` every release for every Python 3.8-3.15 on each
platform the issue lists, and checks each answer against the raw file names in
envs/wheels.yaml with an oracle written here, apart from kitbench.advice.wheels' own rules.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from kitbench._cli import main
from kitbench.advice import releases, selector, wheels
from kitbench.advice.wording import summary
from kitbench.errors import ManifestError, SelectionError
from kitbench.machine.probe import Gpu, Probe
from kitbench.records import manifest

RESOURCES = Path(__file__).resolve().parent.parent / "resources" / "published"
RAW = yaml.safe_load((Path(__file__).resolve().parents[2] / "envs" / "wheels.yaml").read_text())
BASE = Probe(
    os="linux",
    os_version="6.1",
    arch="x86_64",
    python_arch="x86_64",
    python_version="3.11",
    rosetta=False,
    wsl=False,
    container=False,
    driver=None,
    gpus=(),
    rocm=None,
    sources={},
    libc="glibc",
    libc_version="2.35",
)
# The issue's platforms: name -> what the probe says there (the oracle below reads the name).
PLATFORMS: dict[str, dict[str, str | None]] = {
    "manylinux-glibc2.17": {"libc": "glibc", "libc_version": "2.17"},
    "manylinux-glibc2.28": {"libc": "glibc", "libc_version": "2.28"},
    "musl": {"libc": "musl", "libc_version": "1.2"},
    "macos11-arm64": {"os": "macos", "os_version": "11.7", "arch": "arm64", "python_arch": "arm64"},
    "macos13-arm64": {"os": "macos", "os_version": "13.6", "arch": "arm64", "python_arch": "arm64"},
    "macos14-arm64": {"os": "macos", "os_version": "14.5", "arch": "arm64", "python_arch": "arm64"},
    "macos13-x86_64": {"os": "macos", "os_version": "13.6", "arch": "x86_64", "python_arch": "x86_64"},
    "windows-x86_64": {"os": "windows", "os_version": "10", "libc": None, "libc_version": None},
}
# The free-threaded builds (3.13t from 3.13) take cpXYt wheels only.
PYTHONS = [f"3.{minor}" for minor in range(8, 16)] + ["3.13t", "3.14t", "3.15t"]
REASON = {
    "manylinux-glibc2.17": ("glibc", "Python"),
    "manylinux-glibc2.28": ("Python",),
    "musl": ("musl",),
    "macos11-arm64": ("macOS 14.0", "Python"),
    "macos13-arm64": ("macOS 14.0", "Python"),
    "macos14-arm64": ("Python",),
    "macos13-x86_64": ("macOS x86_64", "Python"),
    "windows-x86_64": ("Python",),
}


def _machine(platform: str, python: str) -> Probe:
    return BASE._replace(python_version=python, **PLATFORMS[platform])  # type: ignore[arg-type]


def _tag_fits(tag: str, platform: str) -> bool:
    """Would pip on ``platform`` take a wheel with platform tag ``tag``? (PEP 600, PEP 656, macOS rules)"""
    if platform.startswith("manylinux"):
        glibc = int(platform.rsplit(".", 1)[1])
        legacy = {"manylinux1_x86_64": 5, "manylinux2010_x86_64": 12, "manylinux2014_x86_64": 17}
        match = re.fullmatch(r"manylinux_2_(\d+)_x86_64", tag)
        floor = legacy.get(tag, int(match.group(1)) if match else None)
        return floor is not None and floor <= glibc
    if platform == "musl":
        return tag.startswith("musllinux") and tag.endswith("x86_64")
    if platform == "windows-x86_64":
        return tag == "win_amd64"
    macos, arch = platform[5:].split("-")
    match = re.fullmatch(r"macosx_(\d+)_\d+_(\w+)", tag)
    return match is not None and int(match.group(1)) <= int(macos) and match.group(2) in (arch, "universal2")


def _python_fits(tags: str, requires: str, python: str) -> bool:
    # Every Requires-Python in the facts is a lower bound (plus !=3.14.1, a patch release).
    low = re.search(r">=\s*(\d+)\.(\d+)", requires)
    ok = low is None or tuple(map(int, python.rstrip("t").split("."))) >= (int(low.group(1)), int(low.group(2)))
    return ok and bool({"cp" + python.replace(".", ""), "py3"} & set(tags.split()))


def _installs(version: str, platform: str, python: str) -> bool:
    entry = next(e for e in RAW["releases"] if e["torch"] == version)
    for package in entry["wheels"]:  # torch, torchvision, and torchaudio where the release had one
        found = dict(entry["wheels"][package])
        requires = found.pop("requires_python")
        if not any(_tag_fits(t, platform) and _python_fits(p, requires, python) for t, p in found.items()):
            return False
    return True


def _version_of(command: str) -> str:
    match = re.search(r"torch==([0-9.]+)", command)
    assert match, command
    return match.group(1)


def test_the_facts_cover_every_release_kitbench_knows_and_say_where_and_when_they_were_read() -> None:
    facts = wheels.load()
    assert list(facts.releases) == list(releases.releases())
    assert facts.source.startswith("https://pypi.org/simple/") and re.fullmatch(r"\d{4}-\d\d-\d\d", facts.read)
    for version, packages in facts.releases.items():
        assert packages["torchvision"].version == releases.releases()[version].torchvision


@pytest.mark.parametrize("platform", list(PLATFORMS))
@pytest.mark.parametrize("version", [*releases.releases(), "nightly"])
def test_golden_grid_each_answer_installs_or_is_refused_with_its_reason(version: str, platform: str) -> None:
    checked = list(releases.releases())[-1] if version == "nightly" else version
    for python in PYTHONS:
        machine = _machine(platform, python)
        if _installs(checked, platform, python):
            fmt = "selector" if version == "nightly" else "pinned"
            assert selector.select(machine, release_spec=version, fmt=fmt).release == version
        else:
            with pytest.raises(SelectionError) as caught:
                selector.select(machine, release_spec=version)
            assert any(word in str(caught.value) for word in REASON[platform]), (python, str(caught.value))
            newest = [v for v in releases.releases() if _installs(v, platform, python)]
            assert (f"--release {newest[-1]}" in (caught.value.hint or "")) if newest else True
            # The same refusal whatever the package and the form asked for.
            for package, fmt in (("uv", "pinned"), ("conda", "pinned"), ("pip", "selector")):
                with pytest.raises(SelectionError) as other:
                    selector.select(machine, release_spec=version, package=package, fmt=fmt)
                assert str(other.value) == str(caught.value), (package, fmt)


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def mps_held(chosen: selector.Selection) -> bool:
    """Whether the answer is an older release for MPS's sake, not for its wheels'."""
    held = {"older_release", "older_mac_release", "no_build_here"}  # the notes on a release not the newest
    return chosen.compute == "mps" and any(n.kind in held for n in chosen.noted)


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_golden_grid_stable_is_the_newest_release_that_installs(platform: str) -> None:
    for python in PYTHONS:
        fits = [v for v in releases.releases() if _installs(v, platform, python)]
        machine = _machine(platform, python)
        if not fits:
            with pytest.raises(SelectionError):
                selector.select(machine)
            continue
        # Apple Silicon: the newest release whose MPS runs on this macOS, where one installs. MPS checks for macOS
        # 12.3 to 2.4, 13.0 from 2.5, 14.0 from 2.9 (each wheel's MPSDevice: tests/resources/published/census/
        # mps-macos-floor.md), and 2.15's docs say 15.0, which no answer goes below.
        if machine.arch == "arm64" and machine.os == "macos":
            floors = {(2, 15): (15, 0), (2, 9): (14, 0), (2, 5): (13, 0), (0,): (12, 3)}
            mps = [
                v
                for v in fits
                if _key(machine.os_version or "0") >= next(floor for since, floor in floors.items() if _key(v) >= since)
            ]
            fits = mps or fits
        for package in ("pip", "uv"):
            chosen = selector.select(machine, package=package)
            assert _version_of(chosen.command) == chosen.release == fits[-1], (python, package)
            stable = list(releases.releases())[-1]
            if not mps_held(chosen):
                moved = [n.figures["newest"] for n in chosen.noted if n.kind == "stable_moved"]
                assert moved == ([fits[-1]] if fits[-1] != stable else []), (python, package)


@pytest.mark.parametrize(
    ("changes", "newest"),
    [
        ({"python_version": "3.10", "libc_version": "2.35"}, "2.14.1"),  # Ubuntu 22.04
        ({"python_version": "3.9"}, "2.8.0"),
        ({"python_version": "3.8"}, "2.4.1"),
        ({"libc_version": "2.17"}, "2.6.0"),  # CentOS 7 / RHEL 7, x86_64
        ({"libc_version": "2.27"}, "2.6.0"),  # Ubuntu 18.04
        ({"libc_version": "2.17", "arch": "aarch64", "python_arch": "aarch64"}, "2.5.1"),  # aarch64 moved at 2.6.0
        # 2.11.0 is the newest that installs on macOS 13.6; MPS checks for macOS 14.0 from 2.9, 13.0 in 2.8.0's wheel.
        ({"os": "macos", "os_version": "13.6", "arch": "arm64", "python_arch": "arm64"}, "2.8.0"),
    ],
)
def test_the_issues_examples_checked_against_the_facts(changes: dict[str, str], newest: str) -> None:
    assert selector.select(BASE._replace(**changes)).release == newest  # type: ignore[arg-type]


def test_musl_is_refused_for_every_release() -> None:
    with pytest.raises(SelectionError, match=r"no wheel for musl \(Alpine\)"):
        selector.select(BASE._replace(libc="musl", libc_version="1.2.4"))


def _published_macos() -> list[tuple[str, str, str, str]]:
    """(release, package, format, command) of every macOS command pytorch.org published."""
    rows = []
    for name in ("selector.tsv", "selector-generated.tsv"):
        for line in (RESOURCES / name).read_text().splitlines():
            cells = line.split("\t")
            if line and not line.startswith("#") and cells[1] == "macos":
                rows.append((cells[0], cells[2], "selector", cells[4]))
    for line in (RESOURCES / "previous-versions.tsv").read_text().splitlines():
        cells = line.split("\t")
        if line and not line.startswith("#") and cells[2] == "osx":
            rows.append((cells[0], cells[1], "pinned", cells[4]))
    return rows


@pytest.mark.parametrize("row", _published_macos(), ids=lambda r: "-".join(r[:3]))
def test_macos_cpu_gives_pytorch_orgs_published_command_verbatim(row: tuple[str, str, str, str]) -> None:
    version, package, fmt, published = row
    mac = _machine("macos14-arm64", "3.11")
    for machine in (mac, mac._replace(arch="x86_64", python_arch="x86_64")):
        if machine.arch == "x86_64" and not releases.release(version).macos_x86_64:
            continue
        chosen = selector.select(machine, release_spec=version, package=package, compute="cpu", fmt=fmt)
        assert chosen.command == published
        assert ("mps_default" in [n.kind for n in chosen.noted]) == (machine.arch == "arm64")


def test_builds_from_pytorchs_own_index_are_marked_as_assumed_from_pypi() -> None:
    cpu = selector.select(BASE, compute="cpu")
    assert "--index-url" in cpu.command and cpu.facts["wheels"]["assumed_from"] == "pypi"
    plain = selector.select(BASE, compute=releases.release("stable").pypi_linux, fmt="selector")
    assert "--index-url" not in plain.command and plain.facts["wheels"]["assumed_from"] is None


def test_an_old_gpu_on_stable_names_the_newest_release_whose_build_runs_on_it() -> None:
    pascal = BASE._replace(driver="470.82.01", gpus=(Gpu(0, "(given)", "6.1", None),))
    chosen = selector.select(pascal)
    newest = releases.release("stable").version
    assert (chosen.release, chosen.compute) == ("2.7.1", "cu118")
    held = chosen.noted[0]
    assert (held.kind, held.figures["rel"].version, held.figures["newest"].version) == (
        "older_release",
        "2.7.1",
        newest,
    )
    assert [(r.build, r.cause) for r in held.figures["passed"]] == [("cu132", "no kernels"), ("cu130", "no kernels")]
    # An explicit release keeps its own best build, and names the newest release that would use the GPU.
    pinned = selector.select(pascal, release_spec=newest)
    assert pinned.compute == "cpu"
    named = [(n.figures["newest"].version, n.figures["compute"]) for n in pinned.noted if n.kind == "newer_gpu_release"]
    assert named == [("2.7.1", "cu118")]
    # Asked for the CPU build, the GPU's builds are no concern of the answer.
    on_the_gpu = {"older_release", "newer_gpu_release", "first_gpu_release", "cpu_fallback"}
    assert on_the_gpu.isdisjoint(n.kind for n in selector.select(pascal, compute="cpu").noted)


def test_torchaudio_wheels_are_recorded_and_checked_like_torchvisions() -> None:
    facts = wheels.load()
    for version, rel in releases.releases().items():
        assert ("torchaudio" in facts.releases[version]) == (rel.torchaudio is not None), version
        if rel.torchaudio:
            assert facts.releases[version]["torchaudio"].version == rel.torchaudio
    audio = facts.releases["2.9.1"]["torchaudio"]
    trimmed = audio._replace(tags={p: t for p, t in audio.tags.items() if p.os != "windows"})
    assert wheels._refusal(trimmed, "torchaudio", wheels.Host("windows", "x86_64", (3, 12))) == (
        "torchaudio 2.9.1 has no Windows x86_64 wheels: the last is torchaudio 2.11.0"
    )


@pytest.mark.parametrize(
    ("tags", "python", "free", "fits"),
    [
        ("cp313 cp313t", (3, 13), True, True),
        ("cp313 cp314 cp314t", (3, 13), True, False),
        ("cp313t", (3, 13), False, False),
        ("py3", (3, 13), True, True),
        ("cp39-abi3", (3, 12), False, True),
        ("cp39-abi3", (3, 8), False, False),
        ("cp39-abi3", (3, 13), True, False),  # the stable ABI is the default build's
    ],
)
def test_free_threaded_and_abi3_tags(tags: str, python: tuple[int, int], free: bool, fits: bool) -> None:
    assert wheels._python_ok(tuple(tags.split()), ">=3.8", python, free) is fits


def test_free_threaded_pythons_are_told_apart() -> None:
    ft = BASE._replace(python_version="3.13.1t")
    assert wheels.host_of(ft).free_threaded and not wheels.host_of(BASE).free_threaded
    # cp313t wheels stop at 2.12.0: stable for a 3.13t Python is 2.12.0, with why 2.12.1 does not install.
    chosen = selector.select(ft)
    assert chosen.release == "2.12.0"
    moved = [n.figures for n in chosen.noted if n.kind == "stable_moved"]
    assert [f["newest"] for f in moved] == ["2.12.0"]
    assert "has no wheel for a free-threaded Python 3.13t (it has free-threaded 3.14" in moved[0]["why"]
    assert selector.select(BASE._replace(python_version="3.14t")).release == list(releases.releases())[-1]
    with pytest.raises(SelectionError, match=r"no wheel for a free-threaded Python 3.13t \(it has free-threaded"):
        selector.select(ft, release_spec="2.13.0")


def test_abi3_wheel_names_are_recorded_with_their_abi() -> None:
    from kitbench.advice import indexes

    wheel = indexes.parse_wheel("torchaudio-9.9.0-cp39-abi3-manylinux_2_28_x86_64.whl")
    assert wheel is not None and wheel.pythons == ("cp39-abi3",)
    assert indexes.parse_wheel("torch-2.15.0-cp315-cp315t-win_amd64.whl").pythons == ("cp315t",)  # type: ignore[union-attr]
    ordered = ["py3", "cp39-abi3", "cp310", "cp313t"]
    assert sorted(["cp310", "cp39-abi3", "cp313t", "py3"], key=indexes.tag_key) == ordered
    assert wheels.python_of_tag("cp39-abi3") == ((3, 9), "abi3") and wheels.python_of_tag("py3") is None


def test_windows_on_arm_has_one_architecture_name() -> None:
    from kitbench.machine import probe

    assert wheels.platform("win_arm64").arches == ("aarch64",) and wheels.platform("win_amd64").arches == ("x86_64",)
    assert probe.normalize_arch("ARM64", "windows") == "aarch64"
    assert probe.override(BASE, os="windows", arch="arm64").arch == "aarch64"
    arm = wheels.Wheels("2.99.0", ">=3.10", {wheels.platform("win_arm64"): ("cp312",)})
    assert wheels._refusal(arm, "torch", wheels.Host("windows", "aarch64", (3, 12))) is None
    # Windows on Arm has no CUDA build, whatever Linux aarch64 has.
    rel = releases.release("2.9.1")
    assert rel.aarch64_cuda and releases.computes(rel, "windows", "aarch64", "pip") == ["cpu"]
    # No release on PyPI has win_arm64 wheels, and PyTorch's index is recorded serving none for Python 3.14: an
    # arm64 Windows is told which Pythons have them, and of its x64 emulation.
    with pytest.raises(SelectionError) as caught:
        selector.select(probe.override(BASE, os="windows", arch="arm64", python_version="3.14"))
    assert "no Windows arm64 wheels on record" in str(caught.value)
    assert "; one does on Python 3.11 to 3.13; " in (caught.value.hint or "")
    assert "--python-arch x86_64" in (caught.value.hint or "")
    emulated = selector.select(
        probe.override(BASE, os="windows", arch="arm64", python_arch="x86_64", python_version="3.12")
    )
    assert emulated.arch == "x86_64" and emulated.compute == "cpu" and emulated.release == list(releases.releases())[-1]
    free = selector.select(probe.override(BASE, os="windows", python_version="3.14t"))
    assert free.release == list(releases.releases())[-1]  # cp314t wheels on win_amd64


ARM = wheels.Host("windows", "aarch64", (3, 12))


def test_windows_on_arm_installs_what_pytorchs_index_is_recorded_serving() -> None:
    """PyPI has no win_arm64 wheel: envs/index_tags.yaml's published facts decide, torch's alone where its
    companions are not recorded there; an inferred fact never makes the newest release."""
    assert wheels.index_only("2.13.0", ARM) and not wheels.index_only("2.13.0", wheels.Host("windows", "x86_64"))
    assert wheels.newest(ARM) == "2.13.0" and wheels.named("2.13.0", ARM) == ("torch",)
    assert wheels.named("2.13.0", wheels.Host("windows", "x86_64", (3, 12))) is None  # PyPI's: every package
    assert wheels.refusal("2.15.0", ARM) == (
        "torch 2.15.0 has no Windows arm64 wheels on record: PyPI has none, and PyTorch's index is on record serving "
        "torch 2.7.0, 2.8.0, 2.10.0, 2.12.0, 2.12.1, 2.13.0 (envs/index_tags.yaml)"
    )
    # 2.10.0's torchvision 0.25.0 was installed from the index on 3.12 and 3.13, not (on record) on 3.11.
    assert wheels.named("2.10.0", ARM) == ("torch", "torchvision")
    assert wheels.named("2.10.0", ARM._replace(python=(3, 11))) == ("torch",)
    assert wheels.newest(ARM, ("torchvision",)) == "2.10.0"
    # 2.9.1's are inferred: not for the newest release, nor published, but there for a release asked by name.
    assert wheels.refusal("2.9.1", ARM) is not None and wheels.source_of("2.9.1", ARM, "torch") is None
    row = wheels.source_of("2.9.1", ARM, "torch", inferred=True)
    assert row is not None and not row.published and "pytorch/test-infra#8224" in row.source and row.confirm
    assert wheels.refusal("2.13.0", ARM._replace(python=(3, 14))) == (
        "torch 2.13.0 has no wheel for Python 3.14 (it has Python 3.11 to 3.13)"
    )
    assert wheels.other_pythons(ARM._replace(python=(3, 14))) == [(3, 11), (3, 12), (3, 13)]
    assert wheels.other_pythons(wheels.Host("linux", "x86_64", (3, 12), libc="musl")) == []  # no Python helps


def test_a_release_s_windows_arm64_wheels_are_data(envs_copy: Path) -> None:
    """A listing of 2.15.0's win_arm64 wheels, torch's and torchvision's, is a row of envs/index_tags.yaml: the
    answer moves to it, torchvision named, with no code changed; the schema refuses an inferred row without what
    would confirm it."""
    path = envs_copy / "index_tags.yaml"
    row = (
        '  - {torch: "2.15.0", platform: win_arm64, kind: published, read: "2026-12-01", '
        'pythons: {torch: "cp312", torchvision: "cp312"}, source: "a listing"}\n'
    )
    path.write_text(path.read_text() + row)
    chosen = selector.select(
        BASE._replace(
            os="windows", arch="aarch64", python_arch="aarch64", python_version="3.12", libc=None, libc_version=None
        )
    )
    assert chosen.command == (
        "pip install torch==2.15.0 torchvision==0.29.2 --index-url https://download.pytorch.org/whl/cpu"
    )
    assert chosen.facts["wheels"]["source"] == "a listing (envs/index_tags.yaml)"
    path.write_text(path.read_text() + row.replace("published", "inferred"))
    with pytest.raises(ManifestError):
        wheels.index_tags()


def test_pytorchs_manylinux1_wheels_need_glibc_2_17_whatever_the_tag_says() -> None:
    old = BASE._replace(libc_version="2.12", python_version="3.10")
    with pytest.raises(SelectionError) as caught:
        selector.select(old, release_spec="2.6.0")
    assert str(caught.value).startswith(
        "torch 2.6.0's Linux x86_64 wheels need glibc 2.17 or newer "
        "(manylinux1_x86_64, tagged for glibc 2.5: pytorch/pytorch#6607"
    )
    with pytest.raises(SelectionError) as stable:
        selector.select(old)  # stable: no release installs on glibc 2.12
    assert (stable.value.hint or "").startswith("no release from 2.0.0 to")
    assert wheels.platform("linux_x86_64") == wheels.Platform("linux_x86_64", "linux", ("x86_64",), None, None)
    assert wheels.index_tags().glibc["linux_x86_64"][0] == (2, 17)


def _gpu_box(glibc: str) -> Probe:
    return BASE._replace(
        libc_version=glibc, python_version="3.10", driver="570.86.10", gpus=(Gpu(0, "(given)", "8.6", None),)
    )


def test_a_builds_recorded_index_tags_decide_over_pypis() -> None:
    # 2.6.0's cu126 wheels are manylinux_2_28 on PyTorch's index (its PyPI wheels say manylinux1).
    centos7 = selector.select(_gpu_box("2.17"), release_spec="2.6.0")
    assert centos7.compute == "cu124"
    refused = [r for r in centos7.passed if r.build == "cu126"]
    assert [r.cause for r in refused] == ["install"]
    assert refused[0].detail.startswith(
        "torch 2.6.0+cu126's Linux x86_64 wheels need glibc 2.28 or newer (manylinux_2_28_x86_64)"
    )
    assert refused[0].listing.startswith("download.pytorch.org/whl/cu126/")  # the recorded listing decided
    assert centos7.facts["wheels"]["assumed_from"] == "recorded index listing"
    rhel8 = selector.select(_gpu_box("2.28"), release_spec="2.6.0")
    assert rhel8.compute == "cu126" and rhel8.facts["wheels"]["assumed_from"] == "recorded index listing"
    forced = selector.select(_gpu_box("2.17"), release_spec="2.6.0", compute="cu126")
    warnings = [n.figures for n in forced.noted if n.kind == "will_not_install"]
    assert [w["compute"] for w in warnings] == ["cu126"]
    assert warnings[0]["why"].startswith("torch 2.6.0+cu126's")
    assert warnings[0]["listing"].startswith("download.pytorch.org/whl/cu126/")
    # The short answer keeps the warning and leaves the listing it cites to --explain.
    warned = "warning: cu126 will not install on this machine: torch 2.6.0+cu126's"
    short = summary(forced.because, forced.noted)
    assert short[-1].startswith(warned) and short[-1].endswith("this machine has glibc 2.17 (--explain: the listing)")


def test_a_build_assumed_to_carry_pypis_tags_says_so_when_that_decides_it() -> None:
    def assumed(chosen: selector.Selection) -> list[tuple[str, str]]:
        return [(n.figures["rel"].version, n.figures["compute"]) for n in chosen.noted if n.kind == "assumed_tags"]

    # glibc 2.17: older than 2.28, where an index build's own tag may differ from its PyPI wheels'.
    old = selector.select(_gpu_box("2.17"), release_spec="2.5.1")
    assert old.compute.startswith("cu") and assumed(old) == [("2.5.1", old.compute)]
    assert old.facts["wheels"]["assumed_from"] == "pypi"
    # A new glibc, the release asked for installs: the assumption decided nothing.
    assert assumed(selector.select(_gpu_box("2.35"), release_spec="2.5.1")) == []
    # Stable moved by the wheel facts (Python 3.10 has no 2.15.0 wheel): it decided the release.
    moved = selector.select(_gpu_box("2.35"))
    assert moved.release != list(releases.releases())[-1] and assumed(moved) == [(moved.release, moved.compute)]


# --- what torch pulls in on Linux (envs/runtime_tags.yaml) ------------------------------------------------------


def _h200(glibc: str, python: str = "3.12") -> Probe:
    return BASE._replace(
        libc_version=glibc, python_version=python, driver="580.159.04", gpus=(Gpu(0, "(given)", "9.0", None),)
    )


def _plant(envs: Path, version: str, package: str, glibc: str, builds: tuple[dict[str, object], ...] = ()) -> None:
    """Give ``package`` in every x86_64 row of ``version``'s PyPI wheels the floor ``glibc``; with ``builds``, those
    recorded index builds in place of the real ones."""
    path = envs / "runtime_tags.yaml"
    data = yaml.safe_load(path.read_text())
    for row in data["releases"]:
        for requirement in row["requires"] if (row["torch"], row["arch"]) == (version, "x86_64") else ():
            if requirement["requirement"].startswith(package):
                requirement["glibc"] = glibc
                row["needs"] = (
                    max(row["needs"], glibc, key=lambda v: tuple(map(int, v.split("."))))
                    if glibc != "no wheel"
                    else row["needs"]
                )
    data["builds"] = list(builds) or data["builds"]
    path.write_text(yaml.safe_dump(data))


def test_the_reading_found_no_runtime_package_raising_the_glibc_torch_s_own_wheels_need() -> None:
    """What envs/runtime_tags.yaml's header says: from manylinux1 to 2.6.0 triton, NCCL, cuDNN... are manylinux2014,
    2.17, which torch's own binaries need already (envs/index_tags.yaml); from 2.7.0 all of it fits 2.28. So the
    dependencies changed no answer, and the golden grid stands as it was."""
    raw = yaml.safe_load((Path(__file__).resolve().parents[2] / "envs" / "runtime_tags.yaml").read_text())
    for row in raw["releases"] + raw["builds"]:  # needs: the highest of torch's own and every package's
        floors = [row["glibc"], *(r["glibc"] for r in row["requires"] if r["glibc"][0].isdigit())]
        assert row["needs"] == max(floors, key=wheels.parse_version)
    table = wheels.runtime_tags()
    for (version, arch), rows in table.releases.items():
        own = [
            wheels._glibc_need(p)[0] or ()
            for p in wheels.load().releases[version]["torch"].tags
            if p.os == "linux" and arch in p.arches
        ]
        assert all((floor or ()) <= min(own) for row in rows for _, _, floor in row.requires), (version, arch)
        assert all(floor is not None for row in rows for _, _, floor in row.requires)
    recorded = table.builds["2.11.0", "cu130", "x86_64"][0]
    assert recorded.pythons == ("cp312",) and "real install" in recorded.source
    assert [r[0].split("=")[0] for r in recorded.requires[:7]] == [
        r[0].split("=")[0] for r in table.releases["2.11.0", "x86_64"][0].requires[:7]
    ]


def test_a_runtime_package_needing_a_newer_glibc_than_torch_passes_its_build_over(envs_copy: Path) -> None:
    """A planted row: triton needs glibc 2.35 beside 2.15.0's manylinux_2_28 torch. A glibc 2.31 machine is not
    told the CUDA builds install (the package named, and that their pins are PyPI's, taken as theirs); their CPU
    build still does, and stable walks back to the newest release whose CUDA build installs."""
    _plant(envs_copy, "2.15.0", "triton", "2.35")
    asked = selector.select(_h200("2.31"), release_spec="2.15.0")
    assert asked.compute == "cpu"
    said = (
        "torch 2.15.0+cu132 pulls in triton~=3.9.0, whose Linux x86_64 wheels need glibc 2.35 or newer; "
        "this machine has glibc 2.31 (envs/runtime_tags.yaml: PyPI's torch wheels' Requires-Dist, read "
    )
    refused = [r for r in asked.passed if r.build == "cu132"]
    assert [(r.cause, r.listing) for r in refused] == [("install", "")]  # what it pulls in, no listing, refuses it
    assert refused[0].detail.startswith(said)
    assert refused[0].detail.endswith(
        "no record of torch 2.15.0+cu132's own requirements, so they are taken to be its PyPI wheels')"
    )
    stable = selector.select(_h200("2.31"))
    assert stable.release == "2.14.1" and stable.compute.startswith("cu")
    forced = selector.select(_h200("2.31"), release_spec="2.15.0", compute="cu130")
    warnings = [n.figures for n in forced.noted if n.kind == "will_not_install"]
    assert [w["compute"] for w in warnings] == ["cu130"]
    assert warnings[0]["why"].startswith("torch 2.15.0+cu130 pulls in triton")
    # glibc 2.35 meets it: the answer is as without the plant.
    assert selector.select(_h200("2.35")).compute == "cu132"


def test_a_build_s_own_record_decides_over_its_release_s_pypi_wheels(envs_copy: Path) -> None:
    recorded = {
        "torch": "2.15.0",
        "compute": "cu130",
        "arch": "x86_64",
        "pythons": "cp312",
        "glibc": "2.28",
        "needs": "2.28",
        "requires": [{"requirement": "triton==3.9.0", "glibc": "2.27"}],
        "source": "a real install (test)",
    }
    _plant(envs_copy, "2.15.0", "triton", "2.35", (recorded,))
    chosen = selector.select(_h200("2.31"), release_spec="2.15.0")
    assert chosen.compute == "cu130"
    assert (chosen.passed[0].build, chosen.passed[0].cause) == ("cu132", "install")
    assert chosen.passed[0].detail.startswith("torch 2.15.0+cu132 pulls in triton")
    # Recorded for Python 3.12 only: on 3.13 the PyPI wheels' pins are taken, and refuse it.
    assert selector.select(_h200("2.31", "3.13"), release_spec="2.15.0").compute == "cpu"
    recorded["requires"] = [{"requirement": "triton==3.9.0", "glibc": "2.33"}]
    _plant(envs_copy, "2.15.0", "triton", "2.35", (recorded,))
    refused = wheels.build_refusal("2.15.0", "cu130", wheels.host_of(_h200("2.31")))
    assert refused == (
        "torch 2.15.0+cu130 pulls in triton==3.9.0, whose Linux x86_64 wheels need glibc 2.33 or "
        "newer; this machine has glibc 2.31 (a real install (test))",
        "",  # no listing of its index tags: what it pulls in refuses it
    )


def test_a_runtime_package_with_no_wheel_for_the_python_passes_the_build_over(envs_copy: Path) -> None:
    _plant(envs_copy, "2.15.0", "nvidia-cudnn-cu13", "no wheel")
    chosen = selector.select(_h200("2.39"), release_spec="2.15.0")
    assert chosen.compute == "cpu"
    refused = [r for r in chosen.passed if r.build == "cu132"]
    assert [r.cause for r in refused] == ["install"]
    assert refused[0].detail.startswith(
        "torch 2.15.0+cu132 pulls in nvidia-cudnn-cu13==9.26.0.51, which has no Linux x86_64 wheel for Python 3.12 ("
    )


def test_an_unknown_python_is_refused_only_where_every_python_s_row_refuses(envs_copy: Path) -> None:
    # 2.5.0's cp313 wheel pulls in no triton (its marker: python_version < "3.13"), its other Pythons' do.
    _plant(envs_copy, "2.5.0", "triton", "2.35")
    host = wheels.host_of(_h200("2.31", "3.12"))
    assert "pulls in triton==3.1.0" in (wheels.runtime_refusal("2.5.0", "cu124", host) or "")
    assert wheels.runtime_refusal("2.5.0", "cu124", host._replace(python=(3, 13))) is None
    assert wheels.runtime_refusal("2.5.0", "cu124", host._replace(python=None)) is None
    # Not a CUDA build: PyPI's CUDA runtime packages are not what it pulls in.
    assert wheels.runtime_refusal("2.5.0", "cpu", host) is None
    assert wheels.runtime_refusal("2.5.0", "rocm6.2", host) is None


def test_the_runtime_table_is_read_only_for_a_linux_answer_with_a_known_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    def unread() -> None:
        raise AssertionError("envs/runtime_tags.yaml read")

    monkeypatch.setattr(wheels, "runtime_tags", unread)
    selector.select(_h200("2.35")._replace(libc=None, libc_version=None))
    selector.select(_h200("2.35")._replace(os="windows", os_version="10", libc=None, libc_version=None))
    selector.select(BASE._replace(driver=None))  # no GPU: the CPU build, nothing pulled in
    with pytest.raises(AssertionError):
        selector.select(_h200("2.35"))


def test_requires_python_clauses() -> None:
    assert wheels.python_allowed(">=3.10,!=3.14.1", (3, 14))
    assert not wheels.python_allowed(">=3.11", (3, 10))
    assert wheels.python_allowed(">=3.9.0", (3, 9))
    assert not wheels.python_allowed("<3.12", (3, 12))


@pytest.mark.parametrize(
    ("spec", "python", "allowed"),
    [
        (">=3.10,!=3.14.*", (3, 14), False),  # a whole minor excluded (the hand reader skipped the clause)
        (">=3.10,!=3.14.*", (3, 13), True),
        ("~=3.9", (4, 0), False),  # compatible release: 3.9 and later 3.x only
        ("~=3.9", (3, 13), True),
        ("~=3.9.2", (3, 10), False),
        ("==3.11.*", (3, 11), True),
        ("==3.11.*", (3, 12), False),
        (">3.10", (3, 10), False),
        ("", (3, 8), True),
        (">=3.", (3, 8), True),  # not PEP 440: constrains nothing, as pip ignores it
    ],
)
def test_requires_python_as_packaging_reads_it(spec: str, python: tuple[int, int], allowed: bool) -> None:
    assert wheels.python_allowed(spec, python) is allowed


def test_platform_tags() -> None:
    assert wheels.platform("manylinux1_x86_64").floor == (2, 5)
    assert wheels.platform("manylinux_2_28_aarch64").arches == ("aarch64",)
    assert wheels.platform("macosx_11_0_universal2").arches == ("arm64", "x86_64")
    assert wheels.platform("musllinux_1_2_x86_64").libc == "musl"


def test_the_facts_are_validated_on_load(tmp_path: Path) -> None:
    bad = tmp_path / "wheels.yaml"
    bad.write_text(
        'source: x\nread: "2026-11-24"\nreleases:\n  - {torch: "2.0.0", torchvision: "0.15.1", '
        'wheels: {torch: {requires_python: "", linux_x86_64: cp311}, torchvision: {}}}\n'
    )
    with pytest.raises(ManifestError):
        manifest.load(bad, "wheels")


def test_cli_explicit_release_that_cannot_install_exits_2_with_one_error_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["install-cmd", "--release", "2.15.0", "--os", "linux", "--python-version", "3.10"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines()[0] == "ERROR: torch 2.15.0 has no wheel for Python 3.10 (it has Python 3.11 to 3.15)"
    assert "--release 2.14.1" in err


def test_cli_ubuntu_22_04_worked_example(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["install-cmd", "--os", "linux", "--python-version", "3.10", "--glibc", "2.35", "--no-gpu", "--explain"])
        == 0
    )
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==2.14.1 torchvision==0.29.1")
    assert "# python_version: 3.10  [--python-version]" in err
    assert "# libc_version: 2.35  [--glibc]" in err
    assert "assumed_from pypi" in err
    assert "2.14.1 is the newest release that installs here" in err


def test_the_availability_fix_never_names_a_wheel_that_cannot_install() -> None:
    pytest.importorskip("torch", reason="the availability check imports torch")
    from kitbench.suite.checks.availability import install_fix

    ubuntu = BASE._replace(python_version="3.10.12", driver="580.65.06", gpus=(Gpu(0, "(given)", "8.6", None),))
    assert install_fix(ubuntu, "2.15.0+cu132").startswith("pip install torch==2.14.1 ")


def test_the_availability_fix_on_a_machine_no_wheel_installs_on_says_so() -> None:
    pytest.importorskip("torch", reason="the availability check imports torch")
    from kitbench.suite.checks.availability import install_fix

    alpine = BASE._replace(
        libc="musl", libc_version="1.2.4", driver="580.65.06", gpus=(Gpu(0, "(given)", "8.6", None),)
    )
    assert install_fix(alpine, "2.15.0").startswith("no release's wheel installs on this machine: ")
    assert "musl" in install_fix(alpine, "2.15.0")


def test_a_release_named_in_a_hint_or_note_installs_here_too() -> None:
    # Python 3.14: conda's last release (2.5.1) has no cp314 wheel, so only pip or uv is offered.
    with pytest.raises(SelectionError) as caught:
        selector.select(BASE._replace(python_version="3.14"), package="conda")
    assert caught.value.hint == "use --package pip or uv"
    with pytest.raises(SelectionError) as caught:
        selector.select(BASE, package="conda")
    assert caught.value.hint == "use --package pip or uv (or --release 2.5.1)"
    # Python 3.8 ends at 2.4.1, whose ROCm builds lack gfx1201: no newer ROCm release is named.
    from kitbench.machine.probe.amd import AmdGpu

    rdna4 = BASE._replace(python_version="3.8", amd_gpus=(AmdGpu(0, "gfx1201", None),))
    old = selector.select(rdna4)
    assert [n.kind for n in old.noted] == ["stable_moved", "cpu_fallback", "assumed_tags"]  # no other_rocm_release
    # 2.5.1's ROCm 6.1 and 6.2 builds lack it too: the note names a newer release, one that installs here.
    py312 = rdna4._replace(python_version="3.12")
    named = [n.figures for n in selector.select(py312, release_spec="2.5.1").noted if n.kind == "other_rocm_release"]
    assert [(f["version"], f["compute"]) for f in named] == [("2.14.1", "rocm7.14")]
    assert wheels.refusal(named[0]["version"], wheels.host_of(py312)) is None
