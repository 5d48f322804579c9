"""The availability check's fix: when the installed build is why the GPU is unusable,
the hint is the exact command install-cmd gives for this machine."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kitbench import probe, selector  # noqa: E402
from kitbench.checks import availability  # noqa: E402
from kitbench.checks.base import Context, NoProgress, Options  # noqa: E402


def _check(machine: probe.Probe) -> availability.AvailabilityResult:
    ctx = Context(device=torch.device("cpu"), machine=machine, options=Options(device="cpu"), progress=NoProgress())
    return availability.run(ctx)


@pytest.fixture
def cuda_wheel() -> str:
    if torch.version.cuda is None or torch.cuda.is_available():
        pytest.skip("needs this host's CUDA build of torch (PyPI's) without a GPU")
    return str(torch.version.cuda)


def test_a_wheel_too_new_for_the_driver_gets_the_command_that_fits(cuda_wheel: str) -> None:
    machine = probe.override(probe.probe(), driver="550.54.14", gpu_capabilities=["8.0"])
    result = _check(machine)
    assert result.status == "failed"
    expected = selector.select(machine, release_spec=torch.__version__.partition("+")[0])
    assert result.fix == expected.command and expected.compute.startswith("cu12")
    assert f"fix: {expected.command}" in result.summary
    assert "is too old for this wheel's CUDA" in result.summary


def test_no_fitting_build_says_so_instead_of_a_command(cuda_wheel: str) -> None:
    result = _check(probe.override(probe.probe(), driver="418.39", gpu_capabilities=["7.0"]))
    assert result.status == "failed"
    assert result.fix is not None and result.fix.startswith("no build of torch")


def test_no_driver_is_not_the_build_s_fault() -> None:
    result = _check(probe.override(probe.probe(), no_gpu=True))
    assert result.fix is None
    assert result.status == "ok"
