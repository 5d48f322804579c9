"""install-cmd's answer on a grid of real machines (tests/resources/golden/machines.yaml): the release and
build that install and run there, or the CPU build and the reason; each answer is also checked against
the rules it must obey (its wheels install, its driver floor and kernels fit the GPU)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kitbench.advice import releases, selector, vendors, wheels
from kitbench.machine import probe
from kitbench.machine.probe import Probe

GOLDEN = yaml.safe_load((Path(__file__).resolve().parent.parent / "resources" / "golden" / "machines.yaml").read_text())
# A host with nothing of its own: every fact of a case comes from its arguments.
BARE = Probe(os="linux", os_version="6.8", arch="x86_64", python_arch="x86_64", python_version="3.12.3",
             rosetta=False, wsl=False, container=False, driver=None, gpus=(), rocm=None)
FLAGS = {"--os": "os", "--arch": "arch", "--python-arch": "python_arch", "--driver": "driver",
         "--python-version": "python_version", "--glibc": "glibc", "--os-version": "os_version"}


def _machine(args: str) -> Probe:
    words = args.split()
    given: dict[str, Any] = {"gpu_capabilities": [], "gpu_gfx": []}
    for flag, value in zip(words[::2], words[1::2], strict=True):
        if flag == "--gpu-cc":
            given["gpu_capabilities"].append(value)
        elif flag == "--gpu-gfx":
            given["gpu_gfx"].append(value)
        else:
            given[FLAGS[flag]] = value
    return probe.override(BARE, **given)


def _cases() -> list[tuple[str, str, str, str | None]]:
    grid = GOLDEN["nvidia"]
    cases = [(f"{gpu}, driver {driver}", f"{grid['base']} --driver {driver} --gpu-cc {cc}", answer, None)
             for driver, answers in grid["answers"].items()
             for (gpu, cc), answer in zip(grid["gpus"].items(), answers, strict=True)]
    return cases + [(m["name"], m["args"], m["answer"], m.get("because")) for m in GOLDEN["machines"]]


CASES = _cases()


@pytest.mark.parametrize(("name", "args", "answer", "because"), CASES, ids=[c[0] for c in CASES])
def test_the_answer_on_a_real_machine(name: str, args: str, answer: str, because: str | None) -> None:
    machine = _machine(args)
    chosen = selector.select(machine)
    assert f"{chosen.release} {chosen.compute}" == answer, (chosen.reasons, chosen.notes)
    rel = releases.release(chosen.release)
    arch = machine.python_arch
    assert wheels.refusal(rel.version, wheels.host_of(machine, arch)) is None
    if chosen.compute.startswith("cu"):
        assert selector._cuda_rejection(rel, machine, chosen.compute) is None
    elif chosen.compute.startswith("rocm"):
        assert set(machine.gfx) <= set(vendors.load().rocm_arches(chosen.compute) or ())
    elif machine.driver or machine.gfx:
        # The CPU build on a GPU machine: no release that installs here runs on it, and the answer says so.
        assert any(n.startswith("the CPU build: no release that installs here runs on this GPU")
                   for n in chosen.notes)
        host = wheels.host_of(machine, arch)
        assert all(wheels.refusal(r.version, host) for r in releases.newest_first() if r.key > rel.key)
    newest = releases.release("stable").version
    if chosen.release != newest and wheels.refusal(newest, wheels.host_of(machine, arch)) is None:
        # Not the newest release, though the newest installs: a note says why.
        assert chosen.notes[0].startswith(f"torch {chosen.release}, not the newest release")
    if because:
        assert any(because in line for line in chosen.notes + chosen.reasons), (chosen.reasons, chosen.notes)


def test_the_grid_covers_every_driver_branch_and_architecture() -> None:
    grid = GOLDEN["nvidia"]
    assert {d.split(".")[0] for d in grid["answers"]} == {"470", "525", "535", "550", "570", "575", "580"}
    assert set(grid["gpus"].values()) == {"6.1", "7.0", "7.5", "8.6", "8.9", "9.0", "10.0", "12.0"}
