"""Deterministic mode (``kitbench run --deterministic``), and the numerics settings every
record states whether or not the mode was asked for.

The mode is what PyTorch's reproducibility notes prescribe, and no more: deterministic
algorithms (an operation without a deterministic implementation raises, naming itself:
the check fails with that name, nothing falls back silently), cuBLAS's fixed workspace
(``CUBLAS_WORKSPACE_CONFIG``, read when CUDA creates its first cuBLAS handle), cuDNN's
autotuner off and its (and oneDNN's) deterministic algorithms on, TF32 off for matmuls and convolutions,
float32 matmuls at "highest" precision, and a fixed intra-op thread count (a reduction
split over other threads adds in another order). These settings are process-wide:
``mode`` puts every one back as it found it, so a library caller's own settings survive.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from kitbench.errors import UsageError

CUBLAS_WORKSPACE = ":4096:8"
# The values cuBLAS documents as deterministic; a user's own choice among them is kept.
_CUBLAS_DETERMINISTIC = (":4096:8", ":16:8")
# Environment variables that change which kernels run or on how many threads; recorded as they were.
ENVIRONMENT = (
    "CUBLAS_WORKSPACE_CONFIG",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "CUDA_VISIBLE_DEVICES",
    # Each changes the numbers: which ROCm kernels load (kitbench recommends it for unlisted gfx), TF32
    # forced on or off under torch's back, and which instruction set oneDNN and MKL dispatch to (MKL_CBWR
    # pins MKL's code path, its results then equal across CPUs).
    "HSA_OVERRIDE_GFX_VERSION",
    "NVIDIA_TF32_OVERRIDE",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
)
_NO_DETERMINISTIC = re.compile(r"^(\S+?)\(?\)? does not have a deterministic implementation")


def settings() -> dict[str, Any]:
    """Every setting that decides which kernels run, under torch's own names, as it is now."""
    import torch

    matmul = torch.backends.cuda.matmul
    return {
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "deterministic_algorithms_warn_only": torch.is_deterministic_algorithms_warn_only_enabled(),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "mkldnn_deterministic": bool(torch.backends.mkldnn.deterministic),
        "fill_uninitialized_memory": bool(torch._C._get_deterministic_fill_uninitialized_memory()),
        "matmul_allow_tf32": bool(matmul.allow_tf32),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "allow_fp16_reduced_precision_reduction": bool(matmul.allow_fp16_reduced_precision_reduction),
        "allow_bf16_reduced_precision_reduction": bool(matmul.allow_bf16_reduced_precision_reduction),
        "preferred_blas_library": str(torch.backends.cuda.preferred_blas_library()).rpartition(".")[2],
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        **{name: os.environ.get(name) for name in ENVIRONMENT},
    }


def nondeterministic_op(exc: BaseException) -> str | None:
    """The operation torch named when it refused to run without a deterministic implementation."""
    match = _NO_DETERMINISTIC.match(str(exc).strip())
    return match.group(1) if match else None


@contextmanager
def mode(enabled: bool, threads: int) -> Iterator[None]:
    """Deterministic mode for the block, with ``threads`` intra-op threads; a no-op when not
    ``enabled``. Call before CUDA initialises: cuBLAS reads its workspace setting once."""
    if not enabled:
        yield
        return
    before_env = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    if before_env not in _CUBLAS_DETERMINISTIC:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    import torch

    cuda_up: bool = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
    if cuda_up and before_env not in _CUBLAS_DETERMINISTIC:
        _restore_env(before_env)
        raise UsageError(
            "CUDA was initialised before CUBLAS_WORKSPACE_CONFIG could be set: cuBLAS "
            "would not be deterministic in this process",
            hint=f"set CUBLAS_WORKSPACE_CONFIG={CUBLAS_WORKSPACE} before starting Python",
        )
    saved = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
        torch.backends.cudnn.benchmark,
        torch.backends.cudnn.deterministic,
        torch.backends.mkldnn.deterministic,
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
        torch.get_num_threads(),
    )
    try:
        torch.use_deterministic_algorithms(True, warn_only=False)
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        # oneDNN's convolutions on the CPU: the twin of cuDNN's switch (typed as its descriptor in torch's stubs).
        torch.backends.mkldnn.deterministic = True  # type: ignore[assignment]
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
        torch.set_num_threads(threads)
        yield
    finally:
        torch.use_deterministic_algorithms(saved[0], warn_only=saved[1])
        (
            torch.backends.cudnn.benchmark,
            torch.backends.cudnn.deterministic,
            torch.backends.mkldnn.deterministic,
            torch.backends.cuda.matmul.allow_tf32,
            torch.backends.cudnn.allow_tf32,
        ) = saved[2:7]
        torch.set_float32_matmul_precision(saved[7])
        torch.set_num_threads(saved[8])
        _restore_env(before_env)


def _restore_env(value: str | None) -> None:
    if value is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = value
