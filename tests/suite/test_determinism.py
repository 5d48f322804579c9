"""determinism: the settings every record states, the mode that sets them and puts them back, and an
operation without a deterministic implementation named in the record."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kitbench.records import record as records
from kitbench.suite import checks, determinism
from kitbench.suite import runner as suite
from kitbench.suite.checks.base import Context, Options

torch = pytest.importorskip("torch")

# torch's own message (aten/src/ATen/Context.cpp, alertNotDeterministic) for an operation that has none, as a
# CUDA build raises it; no CPU operation in this torch raises it, so the check below raises it itself.
_TORCH_MESSAGE = (
    "index_add_cuda_ does not have a deterministic implementation, but you set "
    "'torch.use_deterministic_algorithms(True)'. You can turn off determinism just for this operation, "
    "or you can use the 'warn_only=True' option, if that's acceptable for your application."
)


def test_settings_use_torch_names_and_the_mode_puts_them_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    before = determinism.settings()
    assert {
        "deterministic_algorithms",
        "cudnn_benchmark",
        "cudnn_deterministic",
        "matmul_allow_tf32",
        "cudnn_allow_tf32",
        "float32_matmul_precision",
        "CUBLAS_WORKSPACE_CONFIG",
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "PYTORCH_ENABLE_MPS_FALLBACK",
        "CUDA_VISIBLE_DEVICES",
        "num_threads",
        "num_interop_threads",
    } <= set(before)
    with determinism.mode(True, threads=1):
        inside = determinism.settings()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert inside["deterministic_algorithms"] and not inside["deterministic_algorithms_warn_only"]
    assert inside["cudnn_deterministic"] and not inside["cudnn_benchmark"]
    assert not inside["matmul_allow_tf32"] and not inside["cudnn_allow_tf32"]
    assert (inside["float32_matmul_precision"], inside["num_threads"]) == ("highest", 1)
    assert determinism.settings() == before
    with determinism.mode(False, threads=1):
        assert determinism.settings() == before


def test_settings_name_what_else_changes_the_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HSA_OVERRIDE_GFX_VERSION", "10.3.0")  # what kitbench advises for an unlisted gfx
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE", raising=False)
    found = determinism.settings()
    assert (found["HSA_OVERRIDE_GFX_VERSION"], found["MKL_CBWR"], found["NVIDIA_TF32_OVERRIDE"]) == (
        "10.3.0",
        "COMPATIBLE",
        None,
    )
    assert {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS"} <= set(found)
    assert isinstance(found["allow_fp16_reduced_precision_reduction"], bool)
    assert isinstance(found["allow_bf16_reduced_precision_reduction"], bool)
    assert found["preferred_blas_library"] in ("Cublas", "Cublaslt", "Hipblaslt", "Ck", "Default")


def test_a_users_deterministic_cublas_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    with determinism.mode(True, threads=1):
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


def test_an_operation_without_a_deterministic_implementation_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def check(ctx: Context) -> None:
        assert torch.are_deterministic_algorithms_enabled()
        raise RuntimeError(_TORCH_MESSAGE)

    monkeypatch.setattr(checks, "get", lambda name: check)
    out = tmp_path / "r.json"
    suite.run(Options(checks=("availability",), device="cpu", deterministic=True), out)
    record = records.read(out)
    found = record["checks"]["availability"]
    assert record["status"] == "failed" and found["status"] == "failed"
    assert found["nondeterministic_op"] == "index_add_cuda_"
    assert found["summary"].startswith("index_add_cuda_ has no deterministic implementation on cpu")
    assert record["environment"]["settings"]["deterministic_algorithms"] is True
    assert not torch.are_deterministic_algorithms_enabled()  # put back after the run
    assert determinism.nondeterministic_op(RuntimeError("something else")) is None
