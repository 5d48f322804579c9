"""The training step captured whole: compiled here on the CPU (CUDA graphs need a GPU: the
accelerator run in docs/records is where that path ran)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.integration  # torch.compile builds and runs the training step

from kitbench.suite import models  # noqa: E402
from kitbench.suite.checks import steps  # noqa: E402


def _model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = models.build("fnn")
    return model, models.optimizer("fnn", list(model.parameters()))


def test_capture_leaves_the_model_and_optimizer_as_they_were() -> None:
    model, opt = _model()
    before = [p.detach().clone() for p in model.parameters()]
    x, y = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))
    captured = steps.capture(model, opt, torch.device("cpu"), x, y)
    assert captured.how == "torch.compile (inductor)" and captured.capture_s > 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(torch.count_nonzero(s["momentum_buffer"]) == 0 for s in opt.state.values())
    # From that same start, the captured step and the eager one take the same step.
    twin, twin_opt = _model()
    eager_loss = steps.eager(twin, twin_opt)(x, y)
    assert torch.allclose(captured.step(x, y), eager_loss, rtol=1e-5)
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_an_impossible_capture_is_a_reason_not_a_crash() -> None:
    model, opt = _model()
    with pytest.raises(steps.CaptureImpossible, match=r"Error"):
        steps.capture(model, opt, torch.device("cpu"), torch.randn(4, 3), torch.randint(0, 10, (4,)))
    assert all(torch.equal(a, b) for a, b in zip(_model()[0].parameters(), model.parameters(), strict=True))


def test_profile_counts_what_a_step_dispatches() -> None:
    model, opt = _model()
    batches = [(torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))) for _ in range(3)]
    found = steps.profile(steps.eager(model, opt), batches, torch.device("cpu"))
    assert found.steps == 3 and found.ops_per_step >= 5 and found.wall_s_per_step > 0
    assert found.kernels_per_step is None and found.host_overhead_s_per_step is None  # no GPU timeline on a CPU


class _FakeMpsRng:
    """torch.mps's random-state calls, for a machine without a Mac: MPS cannot exist here."""

    def __init__(self) -> None:
        self.state = torch.tensor([1], dtype=torch.uint8)

    def get_rng_state(self, device: object = "mps") -> torch.Tensor:
        return self.state.clone()

    def set_rng_state(self, state: torch.Tensor, device: object = "mps") -> None:
        self.state = state.clone()


def test_mps_trainers_get_their_own_random_stream(monkeypatch: pytest.MonkeyPatch) -> None:
    fake, real = _FakeMpsRng(), torch.get_device_module
    monkeypatch.setattr(torch, "get_device_module", lambda kind=None: fake if str(kind) == "mps" else real(kind))
    mps = torch.device("mps")
    assert steps.device_rng_state(torch.device("cpu")) is None
    with steps.fork_rng(mps):
        steps.set_device_rng_state(mps, torch.tensor([7], dtype=torch.uint8))  # a trainer's own stream
        inner = steps.device_rng_state(mps)
    assert inner is not None and inner.tolist() == [7]
    assert fake.state.tolist() == [1]  # put back for the next trainer, as on CUDA
