from __future__ import annotations

import pytest

from kitbench.environments import preflight, targets
from kitbench.errors import PreflightError
from kitbench.machine.probe import Gpu, Probe

LINUX = Probe(
    os="linux",
    os_version="6.1",
    arch="x86_64",
    python_arch="x86_64",
    python_version="3.11.7",
    rosetta=False,
    wsl=False,
    container=False,
    driver=None,
    gpus=(),
    rocm=None,
    sources={},
)
MAC = LINUX._replace(os="macos", os_version="14.5", arch="arm64", python_arch="arm64")


def _none(tool: str) -> None:
    return None


def test_cpu_fits_every_common_host() -> None:
    cpu = targets.get("cpu")
    for machine in (LINUX, MAC, LINUX._replace(arch="aarch64", python_arch="aarch64")):
        assert preflight.host_reasons(cpu, machine, which=_none) == []


def test_mps_on_linux_names_cpu_instead() -> None:
    with pytest.raises(PreflightError) as caught:
        preflight.check(targets.get("mps"), LINUX)
    assert caught.value.reason == "it is made for macos, this host runs linux"
    assert caught.value.alternative == "cpu"


def test_mps_needs_conda_an_arm64_python_and_the_macos_its_wheel_needs() -> None:
    mps = targets.get("mps")
    assert preflight.host_reasons(mps, MAC, which=_none) == ["none of micromamba, mamba, conda is installed"]
    assert preflight.host_reasons(mps, MAC, which=lambda tool: "/opt/bin/" + tool) == []
    rosetta = MAC._replace(python_arch="x86_64", rosetta=True)
    assert "(Rosetta)" in preflight.host_reasons(mps, rosetta, which=lambda t: t)[0]
    # MPS runs from macOS 12.3, but torch 2.14.1's only macOS wheel is macosx_14_0_arm64 (envs/wheels.yaml).
    old = MAC._replace(os_version="13.6")
    assert preflight.host_reasons(mps, old, which=lambda t: t) == [
        "torch 2.14.1's macOS arm64 wheels need macOS 14.0 or newer (macosx_14_0_arm64); this machine has macOS 13.6"
    ]


def test_cuda118_without_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_GPUS", raising=False)
    with pytest.raises(PreflightError) as caught:
        preflight.check(targets.get("cuda118"), LINUX)
    assert caught.value.reason == "no NVIDIA driver found (CUDA 11.8 needs >= 450.80.02)"
    assert caught.value.alternative == "cpu"


def test_driver_floor_picks_the_cuda_target_that_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_GPUS", raising=False)
    old_box = LINUX._replace(driver="470.57.02", gpus=(Gpu(0, "V100", "7.0", 16160),))
    reasons = preflight.host_reasons(targets.get("cuda126"), old_box)
    assert reasons == ["NVIDIA driver 470.57.02 is older than 525.60.13, the floor for CUDA 12.6"]
    assert preflight.alternative(old_box, exclude="cuda126") == "cuda118"
    new_box = old_box._replace(driver="560.35.03")
    assert preflight.alternative(new_box, exclude="cpu") == "cuda126"


def test_gpus_none_skips_the_driver_check_for_images(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_GPUS", "none")
    assert preflight.host_reasons(targets.get("cuda126"), LINUX) == []


def test_gpus_none_builds_every_accelerator_target_without_its_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """KITBENCH_GPUS=none: NVIDIA, AMD and Intel targets, images and venvs alike, are built and run on
    the CPU; what decides whether they can be built at all (OS, chip, Python, wheels) still counts."""
    accelerated = [t for t in targets.load_all().values() if t.compute not in ("cpu", "mps")]
    assert {"rocm", "xpu", "rocm64", "cuda126"} <= {t.name for t in accelerated}
    monkeypatch.delenv("KITBENCH_GPUS", raising=False)
    assert all(preflight.host_reasons(t, LINUX) for t in accelerated)  # no GPU of any vendor here
    monkeypatch.setenv("KITBENCH_GPUS", "none")
    assert {t.name: preflight.host_reasons(t, LINUX) for t in accelerated} == {t.name: [] for t in accelerated}
    assert preflight.host_reasons(targets.get("rocm"), MAC) == ["it is made for linux, this host runs macos"]
    old_glibc = LINUX._replace(libc="glibc", libc_version="2.17")
    assert preflight.host_reasons(targets.get("xpu"), old_glibc) == [
        "torch 2.14.1's Linux x86_64 wheels need glibc 2.28 or newer (manylinux_2_28_x86_64); "
        "this machine has glibc 2.17"
    ]
    arm = LINUX._replace(arch="aarch64", python_arch="aarch64")
    assert preflight.host_reasons(targets.get("rocm64"), arm) == [
        "it is made for x86_64 on linux, this host is aarch64"
    ]


def test_rocm_is_not_refused_for_a_ryzen_igpu_beside_the_card() -> None:
    from kitbench.machine.probe import amd

    def box(*gfx: str) -> Probe:
        return LINUX._replace(amd_gpus=tuple(amd.AmdGpu(i, g, None) for i, g in enumerate(gfx)))

    # rocm6.4 has no gfx1036 (Raphael's iGPU) kernels: the RX 7900 XTX decides.
    assert preflight.host_reasons(targets.get("rocm64"), box("gfx1036", "gfx1100")) == []
    # It fits, and is told which GPU was left out and how to hide it from PyTorch.
    (note,) = preflight.check(targets.get("rocm64"), box("gfx1036", "gfx1100"))
    assert note.startswith("gfx1036 (HIP device 0): an integrated GPU that rocm6.4 has no kernels for, left out")
    assert "HIP_VISIBLE_DEVICES=1 " in note
    assert preflight.check(targets.get("rocm64"), box("gfx1100")) == []
    assert preflight.host_reasons(targets.get("rocm64"), box("gfx1036", "gfx1032")) == [
        "its rocm6.4 build has no kernels for gfx1032 (gfx1036, HIP device 0, an integrated GPU it has no "
        "kernels for either, was left out: it does not decide)"
    ]
    # An integrated GPU alone is what there is: it decides.
    assert preflight.host_reasons(targets.get("rocm64"), box("gfx1036")) == [
        "its rocm6.4 build has no kernels for gfx1036"
    ]
