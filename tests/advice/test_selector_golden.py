"""install-cmd's answer on a grid of real machines (tests/resources/golden/machines.yaml): the release and
build that install and run there, or the CPU build and the reason; each answer is also checked against
the rules it must obey (its wheels install, its driver floor and kernels fit the GPU). Each expected answer
names the census rows that make it right; and across a whole grid of machines no default answer rests on a
fact known from docs or by inference alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kitbench.advice import releases, selector, vendors, wheels
from kitbench.advice.wording import summary
from kitbench.errors import SelectionError
from kitbench.machine import probe
from kitbench.machine.probe import Probe

GOLDEN = yaml.safe_load((Path(__file__).resolve().parent.parent / "resources" / "golden" / "machines.yaml").read_text())
# A host with nothing of its own: every fact of a case comes from its arguments.
BARE = Probe(
    os="linux",
    os_version="6.8",
    arch="x86_64",
    python_arch="x86_64",
    python_version="3.12.3",
    rosetta=False,
    wsl=False,
    container=False,
    driver=None,
    gpus=(),
    rocm=None,
    sources={},
)
FLAGS = {
    "--os": "os",
    "--arch": "arch",
    "--python-arch": "python_arch",
    "--driver": "driver",
    "--python-version": "python_version",
    "--glibc": "glibc",
    "--os-version": "os_version",
}


def _machine(args: str) -> Probe:
    words = args.split()
    given: dict[str, Any] = {"gpu_capabilities": [], "gpu_gfx": [], "intel_gpu": []}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag == "--gpu-cc":
            given["gpu_capabilities"].append(value)
        elif flag == "--gpu-gfx":
            given["gpu_gfx"].append(value)
        elif flag == "--intel-gpu":
            given["intel_gpu"].append(value)
        else:
            given[FLAGS[flag]] = value
    return probe.override(BARE, **given)


def _cases() -> list[tuple[str, str, str, str | None, str]]:
    grid = GOLDEN["nvidia"]
    cases = [
        (f"{gpu}, driver {driver}", f"{grid['base']} --driver {driver} --gpu-cc {cc}", answer, None, "stable")
        for driver, answers in grid["answers"].items()
        for (gpu, cc), answer in zip(grid["gpus"].items(), answers, strict=True)
    ]
    return cases + [
        (m["name"], m["args"], m["answer"], m.get("because"), m.get("release", "stable"))
        for m in GOLDEN["machines"]
        if "answer" in m
    ]


REFUSED = [(m["name"], m["args"], m["refused"]) for m in GOLDEN["machines"] if "refused" in m]


CASES = _cases()


def test_every_expected_answer_names_its_source() -> None:
    """Each expected answer cites the census: a row of envs/ or the evidence beside it."""
    grid = GOLDEN["nvidia"]
    assert {a for answers in grid["answers"].values() for a in answers} == set(grid["sources"])
    assert all(m.get("source") and ("answer" in m) != ("refused" in m) for m in GOLDEN["machines"])
    cited = [*grid["sources"].values(), *(m["source"] for m in GOLDEN["machines"] if "answer" in m)]
    assert all("envs/" in text or "tests/resources/published/" in text for text in cited), [
        text for text in cited if "envs/" not in text and "tests/resources/published/" not in text
    ]


@pytest.mark.parametrize(("name", "args", "refused"), REFUSED, ids=[c[0] for c in REFUSED])
def test_a_real_machine_no_release_installs_on_is_told_why(name: str, args: str, refused: str) -> None:
    """A machine no covered release installs on: the refusal (its message and hint) says what would install."""
    with pytest.raises(SelectionError) as caught:
        selector.select(_machine(args))
    assert refused in f"{caught.value.message}; {caught.value.hint}", (caught.value.message, caught.value.hint)


@pytest.mark.parametrize(("name", "args", "answer", "because", "spec"), CASES, ids=[c[0] for c in CASES])
def test_the_answer_on_a_real_machine(name: str, args: str, answer: str, because: str | None, spec: str) -> None:
    machine = _machine(args)
    chosen = selector.select(machine, release_spec=spec)
    assert f"{chosen.release} {chosen.compute}" == answer, (chosen.reasons, chosen.notes)
    rel = releases.release(chosen.release)
    arch = machine.python_arch
    assert wheels.refusal(rel.version, wheels.host_of(machine, arch)) is None
    if chosen.compute.startswith("cu"):
        # Read from the release's YAML, not asked of the selector: the build's kernels cover the GPU, where the
        # release records them. A cubin for X.y runs on X.z, z >= y (CUDA C++ Programming Guide, "Binary
        # Compatibility"): sm_86 serves an 8.9 GPU, sm_60 a 6.1.
        kernels = _kernels(chosen.release, chosen.compute)
        for cc in machine.capabilities:
            major, minor = (int(part) for part in cc.split("."))
            assert kernels is None or any(int(k[3:-1]) == major and int(k[-1]) <= minor for k in kernels), (cc, kernels)
    elif chosen.compute.startswith("rocm"):
        assert set(machine.gfx) <= set(vendors.load().rocm_arches(chosen.compute) or ())
    elif spec == "stable" and (machine.driver or machine.gfx):
        # The CPU build on a GPU machine: no release that installs here runs on it, and the answer says so.
        assert any(n.startswith("the CPU build: no release that installs here runs on this GPU") for n in chosen.notes)
        host = wheels.host_of(machine, arch)
        assert all(wheels.refusal(r.version, host) for r in releases.newest_first() if r.key > rel.key)
    newest = releases.release("stable").version
    if spec == "stable" and chosen.release != newest and wheels.refusal(newest, wheels.host_of(machine, arch)) is None:
        # Not the newest release, though the newest installs: a note says why.
        assert chosen.notes[0].startswith(f"torch {chosen.release}, not the newest release")
    if because:
        assert any(because in line for line in chosen.notes + chosen.reasons), (chosen.reasons, chosen.notes)


def test_the_grid_covers_every_driver_branch_and_architecture() -> None:
    grid = GOLDEN["nvidia"]
    assert {d.split(".")[0] for d in grid["answers"]} == {"470", "525", "535", "550", "570", "575", "580"}
    assert set(grid["gpus"].values()) == {"6.1", "7.0", "7.5", "8.6", "8.9", "9.0", "10.0", "12.0"}


def _kernels(release: str, compute: str, platform: str = "x86_64") -> set[str] | None:
    """The kernel list envs/releases/ records for a release's build, read from the YAML itself; None where
    none is recorded."""
    series = ".".join(release.split(".")[:2])
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "envs" / "releases" / f"{series}.yaml").read_text())
    rows = [
        row
        for row in data.get("kernels", ())
        if row["compute"] == compute
        and release in row.get("releases", [release])
        and row.get("platform", "x86_64") == platform
    ]
    return {arch for row in rows for arch in row["arches"]} if rows else None


ANSWERABLE = {"artifact", "code", "release-notes"}
ENVS = Path(__file__).resolve().parents[2] / "envs"


def _unanswerable_in_the_manifests() -> set[tuple[str, str, str]]:
    """(release, build, platform) triples the census rests on docs or an inference alone, read from the YAML
    itself ("" for every platform): a build without a provenance row rests on pytorch.org's page, docs."""
    found = set()
    for path in (ENVS / "releases").glob("*.yaml"):
        data = yaml.safe_load(path.read_text())
        for entry in data["releases"]:
            rows = [
                row for row in data.get("provenance", ()) if entry["version"] in row.get("releases", [entry["version"]])
            ]
            for build in [*entry["wheels"], "xpu"]:
                mine = [row for row in rows if build in row["builds"]]
                if not mine and build != "xpu":
                    found.add((entry["version"], build, ""))
                found |= {
                    (entry["version"], build, platform)
                    for row in mine
                    if row["kind"] not in ANSWERABLE
                    for platform in row.get("platforms", [""])
                }
    return found


def _mps_floors() -> list[tuple[tuple[int, ...], tuple[int, ...], str]]:
    """envs/pytorch.yaml's MPS rows as (since, macOS, kind), newest first, read from the YAML itself."""
    rows = yaml.safe_load((ENVS / "pytorch.yaml").read_text())["mps"]
    return [(_key(r["since"]), _key(r["macos"]), r["kind"]) for r in rows]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _grid() -> list[str]:
    """OS x arch x driver x GPU (NVIDIA compute capability or AMD gfx) x Python, as install-cmd's flags."""
    drivers = ["470.256.02", "535.247.01", "570.124.06", "575.57.08", "580.95.05"]
    nvidia = ["6.1", "7.0", "7.5", "8.6", "8.9", "9.0", "10.0", "12.0"]
    found = []
    for python in ("3.10", "3.13"):
        base = f"--python-version {python}"
        found += [
            f"--os linux --arch {arch} --glibc 2.35 {base} --driver {d} --gpu-cc {cc}"
            for arch in ("x86_64", "aarch64")
            for d in drivers
            for cc in nvidia
        ]
        found += [f"--os windows {base} --driver {d.split('.')[0]}.0 --gpu-cc {cc}" for d in drivers for cc in nvidia]
        found += [
            f"--os linux --glibc 2.35 {base} --gpu-gfx {gfx}"
            for gfx in ("gfx906", "gfx90a", "gfx942", "gfx1100", "gfx1151", "gfx1201")
        ]
        found += [f"--os {os} {base}" for os in ("linux --glibc 2.35", "windows")]
        # Windows on Arm's native Pythons: what PyTorch's index is recorded serving (3.10 has no win_arm64 CPython).
        found += [f"--os windows --arch aarch64 --python-arch aarch64 {base}"] if python != "3.10" else []
        found += [f"--os macos --arch arm64 --os-version {v} {base}" for v in ("11.7", "12.7", "13.6", "14.5", "15.1")]
        found += [f"--os {os} {base} --intel-gpu 56a0" for os in ("linux --glibc 2.35", "windows")]
    return found


def test_no_default_answer_rests_on_docs_or_an_inference() -> None:
    """Across the grid, the default answer's build rests on an artifact, code or the release notes: the selection's
    own record of it says so, and the census (read from the YAML itself) does not list that release's build as
    resting on docs or an inference there. An MPS answer's macOS meets every MPS floor on record for its release;
    a build pytorch.org never showed answers only where its kernel list is on record."""
    unanswerable = _unanswerable_in_the_manifests()
    assert ("2.15.0", "rocm7.14", "") in unanswerable and ("2.15.0", "xpu", "") in unanswerable  # or proves nothing
    seen, unchecked = set(), set()
    for args in _grid():
        machine = _machine(args)
        chosen = selector.select(machine)
        build = "cpu" if chosen.compute == "mps" else chosen.compute
        platform = f"{machine.os}-{machine.python_arch}"
        assert chosen.facts["build"]["kind"] in ANSWERABLE, (args, chosen.facts["build"])
        assert chosen.facts["wheels"].get("kind", "published") == "published", (args, chosen.facts["wheels"])
        assert not {(chosen.release, build, ""), (chosen.release, build, platform)} & unanswerable, args
        if chosen.compute == "mps":
            floors = [macos for since, macos, _ in _mps_floors() if since <= _key(chosen.release)]
            assert _key(machine.os_version) >= floors[0], args  # the newest row, whatever its kind
        # A CUDA answer whose build's kernel list is not in the YAML was checked against its toolkit's range only:
        # an inference, which the short answer says in one line.
        if "--gpu-cc" in args and build.startswith("cu"):
            kernels = _kernels(chosen.release, build, "aarch64" if "--arch aarch64" in args else "x86_64")
            assert kernels is not None or releases.release(chosen.release).provenance(build, platform).selector
            said = [n for n in summary(chosen.because, chosen.noted) if "kernel list is not on record" in n]
            assert bool(said) == (kernels is None), (args, chosen.notes)
            unchecked.add(kernels is None)
        seen.add(chosen.compute)
    assert {"cu126", "cu129", "cu132", "rocm7.14", "xpu", "cpu", "mps"} <= seen  # every kind of answer
    assert unchecked == {True, False}  # and CUDA answers of both kinds


def test_an_inferred_build_is_answered_when_named_with_one_line_on_what_would_confirm_it() -> None:
    machine = _machine("--os linux --python-version 3.12 --glibc 2.35 --gpu-gfx gfx1100")
    chosen = selector.select(machine, release_spec="2.15.0", compute="rocm7.14")
    assert chosen.command.endswith("/whl/rocm7.14") and chosen.facts["build"]["kind"] == "inferred"
    lines = [n for n in chosen.notes if n.startswith("unconfirmed: ")]
    assert len(lines) == 1 and "/whl/rocm7.14" in lines[0] and "kitbench facts refresh" in lines[0]
    # Not named: the same release answers with a build resting on an artifact, code or the release notes.
    assert selector.select(machine, release_spec="2.15.0").facts["build"]["kind"] in ANSWERABLE
