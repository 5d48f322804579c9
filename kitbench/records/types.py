"""Types shared across modules: the run record as readers see it, and as it is written.

These mirror ``kitbench/records/schemas/run.schema.json`` field for field. ``records.read``
validates a file against the schema before it hands one of these out, so code that reads a
record can index the required fields without checking them again. The writer builds the record,
its options and its environment as these types (mypy checks them); the checks' result dataclasses
use the same field types, ``float`` where a non-finite value reads back as None.

So a check's record (``MnistRun``, say) is declared three times: its result dataclass, its type
here, its part of the schema. None is derived from another because each holds what the others
cannot: the dataclass, what the check has in hand (a loss is a float, NaN included; a profile is a
``StepProfile``); this type, what a record read back may hold (a non-finite float read as None, a
field that /1 and /2 records lack NotRequired), which mypy needs spelled out as a class; the schema,
the bounds and patterns a file must meet, as JSON that fastjsonschema compiles and editors read.
Tests hold them together instead, each comparing whole declarations (no test lists fields), so a
field added to one and not the others fails, named by its path: tests/records/test_records.py walks
the schema from ``RunRecord`` down against these types (names, which are required, JSON types,
through list items, map values and nested objects), and tests/records/test_types.py holds each
result dataclass to its type here.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, TypedDict

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # a dependency on 3.10 only
    from typing_extensions import NotRequired

Status = Literal["ok", "failed", "interrupted", "diverged"]
CheckStatus = Literal["ok", "failed", "skipped"]
Direction = Literal["h2d", "d2h", "host_copy"]
Memory = Literal["pageable", "pinned"]


class RunOptions(TypedDict):
    seed: int
    epochs: int
    batch_size: int
    lr: float | None
    train_limit: int | None
    deterministic: NotRequired[bool]
    checks: NotRequired[list[str]]
    device: NotRequired[str]
    data: NotRequired[str | None]
    offline: NotRequired[bool]
    quick: NotRequired[bool]
    models: NotRequired[list[str]]
    loops: NotRequired[list[str]]
    sweep: NotRequired[list[int]]
    threads: NotRequired[int | None]
    nproc: NotRequired[int | None]
    nnodes: NotRequired[int | None]
    rdzv_endpoint: NotRequired[str | None]
    ddp_timeout: NotRequired[float]


class CpuIdentity(TypedDict, total=False):
    vendor: str | None
    model: str | None
    family: str | None
    model_number: str | None
    stepping: str | None
    implementer: str | None
    part: str | None
    variant: str | None
    revision: str | None
    isa: str | None
    cores_usable: int
    cores_online: int | None
    cores_affinity: int | None
    cores_cgroup_cpus: float | None


class GpuIdentity(TypedDict):
    name: str
    capability: str
    uuid: str | None


# Torch's names where torch has one; the environment variables under their own.
class Settings(TypedDict, total=False):
    deterministic_algorithms: bool
    deterministic_algorithms_warn_only: bool
    cudnn_benchmark: bool
    cudnn_deterministic: bool
    mkldnn_deterministic: bool
    fill_uninitialized_memory: bool
    matmul_allow_tf32: bool
    cudnn_allow_tf32: bool
    float32_matmul_precision: str
    num_threads: int
    num_interop_threads: int
    CUBLAS_WORKSPACE_CONFIG: str | None
    OMP_NUM_THREADS: str | None
    MKL_NUM_THREADS: str | None
    PYTORCH_ENABLE_MPS_FALLBACK: str | None
    CUDA_VISIBLE_DEVICES: str | None
    allow_fp16_reduced_precision_reduction: bool
    allow_bf16_reduced_precision_reduction: bool
    preferred_blas_library: str | None
    HSA_OVERRIDE_GFX_VERSION: str | None
    NVIDIA_TF32_OVERRIDE: str | None
    ONEDNN_MAX_CPU_ISA: str | None
    DNNL_MAX_CPU_ISA: str | None
    MKL_ENABLE_INSTRUCTIONS: str | None
    MKL_CBWR: str | None


class PythonBuild(TypedDict):
    """The interpreter beyond its X.Y.Z: which implementation, its build line, and whether it runs without the GIL."""

    implementation: str
    version: str
    free_threaded: bool


class Package(TypedDict):
    name: str
    version: str
    installer: NotRequired[str | None]
    source: NotRequired[str | None]  # index URL, direct URL or local path, where known
    hashes: NotRequired[list[str]]  # the lock's hashes for this pin


class LockInfo(TypedDict):
    path: str
    platform: str
    index: str
    sha256: str


class ReplayOf(TypedDict):
    path: str
    sha256: str


class Environment(TypedDict):
    kitbench: str
    python: str
    os: str
    arch: str
    cpu: str | None
    cpu_count: int | None
    torch: str | None
    gpus: list[str]
    target: NotRequired[str | None]
    torch_build: NotRequired[str | None]
    build_matches_target: NotRequired[bool | None]
    cuda: NotRequired[str | None]
    hip: NotRequired[str | None]
    xpu_devices: NotRequired[list[str]]
    cudnn: NotRequired[int | None]
    driver: NotRequired[str | None]
    threads: NotRequired[int | None]
    gpu_links: NotRequired[list[str | None]]
    image: NotRequired[str | None]
    image_id: NotRequired[str | None]
    manifest_sha256: NotRequired[str | None]
    os_version: NotRequired[str | None]
    cpu_identity: NotRequired[CpuIdentity]
    gpu_identity: NotRequired[list[GpuIdentity]]
    settings: NotRequired[Settings]
    base_image_id: NotRequired[str | None]
    packages: NotRequired[list[Package]]
    lock: NotRequired[LockInfo | None]
    lock_why: NotRequired[str | None]
    index_override: NotRequired[str | None]
    git_revision: NotRequired[str | None]
    python_arch: NotRequired[str]
    python_build: NotRequired[PythonBuild]
    platform: NotRequired[str | None]
    ram_bytes: NotRequired[int | None]
    container: NotRequired[bool]
    torchvision: NotRequired[str | None]
    interop_threads: NotRequired[int | None]


class Check(TypedDict):
    status: CheckStatus
    summary: str
    nondeterministic_op: NotRequired[str]


class Transfer(TypedDict):
    direction: Direction
    memory: Memory
    bytes: int
    gb_per_s: float
    gb_per_s_q1: float
    gb_per_s_q3: float
    samples: NotRequired[int]


class MovesCheck(Check):
    transfers: NotRequired[list[Transfer]]
    skipped: NotRequired[list[str]]


class MnistRun(TypedDict):
    device: str
    model: str
    loop: str
    batch_size: int
    epochs: int
    train_samples: int
    epoch_s: float
    epoch_s_all: list[float]
    samples_per_s: float
    data_s: float
    final_loss: float | None
    loss_curve: list[float | None]
    test_acc: float
    test_loss: float | None
    epoch_test_acc: list[float]
    dataset_load_s: float
    warmup_s: float
    floor_fraction: float
    epoch_losses: NotRequired[list[float | None]]
    diverged_at_step: NotRequired[int | None]
    step_s: NotRequired[float]
    params_sha256: NotRequired[str | None]
    tensor_sha256: NotRequired[dict[str, str]]
    eval_s: NotRequired[float]
    compute_floor_s: NotRequired[float | None]
    lr: NotRequired[float | None]
    steps: NotRequired[int]
    capture: NotRequired[str | None]
    capture_s: NotRequired[float | None]
    profile: NotRequired[dict[str, Any] | None]


class Crossover(TypedDict):
    model: str
    loop: str
    batch_size: int | None
    text: str


class MnistCheck(Check):
    sha256: NotRequired[dict[str, str]]  # each raw file the runs read
    runs: NotRequired[list[MnistRun]]
    crossovers: NotRequired[list[Crossover]]


class DdpScaling(TypedDict):
    model: str
    world_size: int
    global_batch: int
    epoch_s: float
    samples_per_s: float
    efficiency: float | None
    identical: bool
    params_sha256: NotRequired[list[str]]
    per_rank_batch: NotRequired[int]
    lr: NotRequired[float]
    test_acc: NotRequired[float]
    timed_steps: NotRequired[int]
    diverged_at_step: NotRequired[int | None]
    samples_per_s_all: NotRequired[list[float]]
    efficiency_noise: NotRequired[bool]


class DdpBus(TypedDict):
    world_size: int
    bytes: int
    busbw_gb_s: float
    algbw_gb_s: float


class DdpRun(TypedDict):
    backend: str
    device: str
    world_sizes: list[int]
    nodes: int
    scaling: list[DdpScaling]
    allreduce: list[DdpBus]


class DdpCheck(Check):
    runs: NotRequired[list[DdpRun]]
    skipped: NotRequired[list[str]]


class Checks(TypedDict, total=False):
    availability: Check
    moves: MovesCheck
    mnist: MnistCheck
    ddp: DdpCheck


class Failure(TypedDict):
    stage: Literal["data", "setup"]
    error: str  # kitbench's kind of error (DataError, DeviceUnavailableError, ...)
    message: str
    hint: str | None
    host: str | None  # the host that could not be reached, where that was the cause
    not_run: list[str]  # the checks it stopped


class RunRecord(TypedDict):
    schema: Literal["kitbench.run/1", "kitbench.run/2", "kitbench.run/3"]
    status: Status
    started_at: str
    ended_at: str | None
    argv: list[str]
    options: RunOptions
    device: str | None
    environment: Environment
    checks: Checks
    device_init_s: NotRequired[float | None]
    error: NotRequired[str | None]
    failure: NotRequired[Failure | None]
    nonfinite: NotRequired[list[str]]
    replay_of: NotRequired[ReplayOf | None]
    run_id: NotRequired[str]
