"""kitbench.machine.drivers: the first driver of each GPU generation, beside the CUDA floors. Each value is
NVIDIA's, as envs/drivers.yaml cites it: Hopper's 520.61.05 (NVIDIA AI Enterprise 2.3 release notes, H100
support with that driver), HGX B200's 570.133.20 (NVIDIA's GPU Operator notes, NVIDIA/cloud-native-docs#184)."""

from __future__ import annotations

from kitbench.advice import selector
from kitbench.machine import drivers, probe
from kitbench.machine.probe import Probe

BARE = Probe(os="linux", os_version="6.8", arch="x86_64", python_arch="x86_64", python_version="3.12.3",
             rosetta=False, wsl=False, container=False, driver=None, gpus=(), rocm=None, sources={})


def test_the_published_floors_are_nvidia_s() -> None:
    table = drivers.load()
    hopper, b200 = table.generation("9.0"), table.generation("10.0")
    assert hopper is not None and hopper.published and hopper.floor("linux") == "520.61.05"
    assert b200 is not None and b200.published and b200.floor("linux") == "570.133.20"
    assert not hopper.allows("470.256.02", "linux") and hopper.allows("520.61.05", "linux")
    # No Windows floor was sourced: none is applied there.
    assert hopper.floor("windows") is None and hopper.allows("470.0", "windows")
    assert table.generation("8.6") is None


def test_an_inferred_floor_is_said_and_never_decides() -> None:
    blackwell = drivers.load().generation("12.0")
    assert blackwell is not None and not blackwell.published and blackwell.confirm
    machine = probe.override(BARE, driver="535.247.01", gpu_capabilities=["12.0"], glibc="2.35")
    chosen = selector.select(machine)
    assert chosen.compute.startswith("cu")     # the inferred R570 floor does not take the CUDA build away
    assert any(n.startswith("consumer Blackwell GPUs (compute capability 12.0) may need driver >= ")
               and "inferred" in n for n in chosen.notes)


def test_a_gpu_its_driver_cannot_drive_gets_the_cpu_build_and_the_driver_to_update_to() -> None:
    h100 = probe.override(BARE, driver="470.256.02", gpu_capabilities=["9.0"], glibc="2.35")
    chosen = selector.select(h100)
    assert chosen.compute == "cpu"
    assert any("cannot drive sm_90 (Hopper): update the driver to at least 520.61.05" in n for n in chosen.notes)
    asked = selector.select(h100, release_spec="2.7.1", compute="cu118")
    assert any(n.startswith("warning: cu118 will not run on this machine: driver 470.256.02 cannot drive sm_90")
               for n in asked.notes)
