from __future__ import annotations

import dataclasses

import pytest

from kitbench.suite import devices
from kitbench.suite.devices import CudaFacts, MpsFacts

CUDA = CudaFacts(
    torch_version="2.9.1+cu126",
    built_cuda="12.6",
    built_hip=None,
    visible_devices=None,
    driver="560.35.03",
    os="linux",
    in_container=False,
    wsl=False,
    available=False,
    device_count=0,
    init_warning=None,
)
MPS = MpsFacts(os="macos", os_version="14.5", arch="arm64", python_arch="arm64", built=True, available=False)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"torch_version": "2.9.1+cpu", "built_cuda": None}, "CPU-only build (2.9.1+cpu)"),
        ({"visible_devices": ""}, "hidden by CUDA_VISIBLE_DEVICES=''"),
        ({"visible_devices": "-1"}, "hidden by CUDA_VISIBLE_DEVICES='-1'"),
        ({"driver": None}, "no NVIDIA driver found"),
        ({"driver": None, "in_container": True}, "container started without GPUs"),
        ({"driver": None, "wsl": True}, "WSL 2 uses the Windows NVIDIA driver"),
        ({"driver": "470.57.02"}, "driver 470.57.02 is too old for this wheel's CUDA 12.6 (needs >= 525.60.13)"),
        ({"built_cuda": "13.0", "driver": "570.26"}, "too old for this wheel's CUDA 13.0 (needs >= 580)"),
        (
            {"init_warning": "CUDA initialization: Unexpected error from cudaGetDeviceCount()"},
            "CUDA initialization failed: CUDA initialization: Unexpected error",
        ),
    ],
)
def test_cuda_reasons(changes: dict[str, object], expected: str) -> None:
    reason = devices.cuda_unavailable_reason(dataclasses.replace(CUDA, **changes))  # type: ignore[arg-type]
    assert reason is not None and expected in reason


def test_cuda_usable_has_no_reason() -> None:
    assert devices.cuda_unavailable_reason(dataclasses.replace(CUDA, available=True, device_count=2)) is None


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"os": "linux"}, "only on macOS"),
        ({"python_arch": "x86_64"}, "x86_64 Python under Rosetta"),
        ({"arch": "x86_64", "python_arch": "x86_64"}, "needs Apple Silicon"),
        ({"os_version": "12.1"}, "macOS 12.1 is older than 12.3"),
        # The floor of the torch installed, from its own wheel's check (envs/pytorch.yaml): 2.9 and later need 14.0.
        (
            {"os_version": "13.6", "torch": "2.11.0"},
            "macOS 13.6 is older than 14.0, the first whose MPS torch 2.11.0 runs on",
        ),
        ({"os_version": "13.6", "torch": "2.8.0"}, "torch.backends.mps.is_available() is False"),
        ({"built": False}, "built without MPS"),
    ],
)
def test_mps_reasons(changes: dict[str, object], expected: str) -> None:
    reason = devices.mps_unavailable_reason(dataclasses.replace(MPS, **changes))  # type: ignore[arg-type]
    assert reason is not None and expected in reason


def test_resolve_refuses_unavailable_devices_with_the_reason() -> None:
    import torch

    from kitbench.errors import DeviceUnavailableError, UsageError
    from kitbench.machine.probe import probe

    machine = probe()
    assert devices.resolve("cpu", machine) == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailableError) as caught:
            devices.resolve("cuda:0", machine)
        assert caught.value.reason == devices.cuda_unavailable_reason(devices.cuda_facts(machine))
    if not torch.backends.mps.is_available():
        with pytest.raises(DeviceUnavailableError, match="MPS"):
            devices.resolve("mps", machine)
    with pytest.raises(UsageError, match="unknown device 'tpu'"):
        devices.resolve("tpu", machine)
    with pytest.raises(UsageError, match="bad device"):
        devices.resolve("cuda:x", machine)
