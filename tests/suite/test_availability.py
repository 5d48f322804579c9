"""The availability check's fix: when the installed build is why the GPU is unusable,
the hint is the exact command install-cmd gives for this machine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

torch = pytest.importorskip("torch")

from kitbench.machine import probe  # noqa: E402
from kitbench.suite.checks import availability  # noqa: E402
from kitbench.suite.checks.base import Context, NoProgress, Options  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _check(machine: probe.Probe, device: str = "auto") -> availability.AvailabilityResult:
    """The check as `kitbench run --device DEVICE` runs it here: on the CPU, the only device there is."""
    ctx = Context(device=torch.device("cpu"), machine=machine, options=Options(device=device), progress=NoProgress())
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
    # Worked out apart from the selector: driver 550 runs CUDA 12.x (12's floor is 525.60.13) but not 13.x
    # (580), so the fix is this release's newest CUDA 12 build as envs/releases lists its wheels.
    release = torch.__version__.partition("+")[0]
    series = yaml.safe_load((REPO / "envs" / "releases" / f"{'.'.join(release.split('.')[:2])}.yaml").read_text())
    wheels = next(r["wheels"] for r in series["releases"] if r["version"] == release)
    cuda12 = sorted((w for w in wheels if w.startswith("cu12")), key=lambda w: int(w[2:]))
    if not cuda12:
        pytest.skip(f"torch {release} has no CUDA 12 build: a 550 driver gets no CUDA command from it")
    assert result.fix is not None and f"torch=={release} " in result.fix
    assert result.fix.endswith(f" --index-url https://download.pytorch.org/whl/{cuda12[-1]}")
    assert f"fix: {result.fix}" in result.summary
    assert "is too old for this wheel's CUDA" in result.summary


def test_no_fitting_build_says_so_instead_of_a_command(cuda_wheel: str) -> None:
    result = _check(probe.override(probe.probe(), driver="418.39", gpu_capabilities=["7.0"]))
    assert result.status == "failed"
    assert result.fix is not None and result.fix.startswith("no build of torch")


def test_no_driver_is_not_the_build_s_fault() -> None:
    result = _check(probe.override(probe.probe(), no_gpu=True))
    assert result.fix is None
    assert result.status == "ok"


@pytest.fixture
def cpu_only_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """This torch as a +cpu wheel: the facts a CPU build reports (no CUDA compiled in)."""
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("KITBENCH_TARGET", raising=False)


@pytest.mark.usefixtures("cpu_only_build")
def test_a_cpu_build_beside_a_gpu_fails_when_nothing_asked_for_the_cpu() -> None:
    result = _check(probe.override(probe.probe(), driver="570.86.10", gpu_capabilities=["8.6"]))
    assert result.status == "failed"
    assert "CPU-only build" in result.summary and result.fix is not None and result.note is None


@pytest.mark.usefixtures("cpu_only_build")
@pytest.mark.parametrize("how", ["--device cpu", "the cpu target"])
def test_a_cpu_build_beside_a_gpu_is_a_note_when_the_cpu_was_asked_for(
    how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    machine = probe.override(probe.probe(), driver="570.86.10", gpu_capabilities=["8.6"])
    if how == "the cpu target":
        monkeypatch.setenv("KITBENCH_TARGET", "cpu")
    result = _check(machine, device="cpu" if how == "--device cpu" else "auto")
    assert result.status == "ok"
    assert result.note is not None and "CPU-only build" in result.note
    # The GPU's command is still given, as a way to use the GPU, not as a failure's fix.
    assert result.fix is not None and f"for the GPU: {result.fix}" in result.summary


@pytest.mark.usefixtures("cpu_only_build")
def test_a_target_name_that_is_no_target_asks_nothing_of_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_TARGET", "bench")
    result = _check(probe.override(probe.probe(), driver="570.86.10", gpu_capabilities=["8.6"]))
    assert result.status == "failed"


def test_cpu_asked_for_reads_the_target_s_compute() -> None:
    assert availability.cpu_asked_for("auto", target="cpu")
    assert not availability.cpu_asked_for("auto", target="cuda126")
    assert availability.cpu_asked_for("cpu", target="cuda126")
