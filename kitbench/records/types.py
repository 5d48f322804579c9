"""The run record's one declaration: its shape as readers see it and the writer builds it, with the bounds
and patterns a file must meet.

``kitbench/records/schemas/run.schema.json`` is written from these classes by ``envs/scripts/run_schema.py``
(each field's type, whether it is required, and the ``Json`` words beside it) and
``tests/records/test_run_schema.py`` fails when the file is not what they say. ``records.read`` validates a
file against that schema before it hands one of these out, so code that reads a record can index the required
fields without checking them again. The writer builds the record, its options and its environment as these
types (mypy checks them).

The checks' result dataclasses are a second declaration, of what a check has in hand (a loss is a float, NaN
included; a profile is a ``StepProfile``), which a record read back cannot hold: a non-finite float is written
as null, and a field that /1 and /2 records lack is NotRequired here. tests/records/test_types.py holds each
result dataclass to its type here, name by name and type by type.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # a dependency on 3.10 only
    from typing_extensions import NotRequired


@dataclass(frozen=True)
class Json:
    """What a field's JSON must meet beyond its type, in JSON Schema's words (``minimum``, ``maxLength``,
    ``pattern``, ``description``, ...), which envs/scripts/run_schema.py writes beside the type. A word whose
    value is a type (``additionalProperties=Check``) is written as that type's schema."""

    words: tuple[tuple[str, object], ...]

    def __init__(self, **words: object) -> None:
        object.__setattr__(self, "words", tuple(words.items()))


# The largest integer every JSON reader holds exactly (a double's 53 bits); the seed alone may be larger.
_JSON_INT = 2**53

Count = Annotated[int, Json(minimum=0, maximum=_JSON_INT)]
Positive = Annotated[int, Json(minimum=1, maximum=_JSON_INT)]
Amount = Annotated[float, Json(minimum=0)]  # seconds, rates, ratios: never below zero
Fraction = Annotated[float, Json(minimum=0, maximum=1)]
Name = Annotated[str, Json(maxLength=64)]
Tag = Annotated[str, Json(maxLength=16)]
Line = Annotated[str, Json(maxLength=200)]
Sha256 = Annotated[str, Json(pattern="^[0-9a-f]{64}$")]
# Text the machine or the person gave (a path, a version, an identifier), or null where there is none.
Text = Annotated[str | None, Json(maxLength=4096)]

Status = Literal["ok", "failed", "interrupted", "diverged"]
CheckStatus = Literal["ok", "failed", "skipped"]
Direction = Literal["h2d", "d2h", "host_copy"]
Memory = Literal["pageable", "pinned"]


class RunOptions(TypedDict):
    seed: Annotated[int, Json(minimum=0, maximum=2**63 - 2)]
    epochs: Count
    batch_size: Count
    lr: Amount | None
    train_limit: Count | None
    deterministic: NotRequired[bool]
    checks: NotRequired[list[str]]
    device: NotRequired[str]
    data: NotRequired[Text]
    offline: NotRequired[bool]
    quick: NotRequired[bool]
    models: NotRequired[list[str]]
    loops: NotRequired[list[str]]
    sweep: NotRequired[list[Count]]
    threads: NotRequired[Count | None]
    nproc: NotRequired[Count | None]
    nnodes: NotRequired[Count | None]
    rdzv_endpoint: NotRequired[Text]
    ddp_timeout: NotRequired[Amount]


class CpuIdentity(TypedDict, total=False):
    vendor: Text
    model: Text
    family: Text
    model_number: Text
    stepping: Text
    implementer: Text
    part: Text
    variant: Text
    revision: Text
    isa: Text
    cores_usable: Positive
    cores_online: Count | None
    cores_affinity: Count | None
    cores_cgroup_cpus: Amount | None


class GpuIdentity(TypedDict):
    name: Annotated[str, Json(maxLength=256)]
    capability: Tag
    uuid: Text


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
    float32_matmul_precision: Tag
    num_threads: Count
    num_interop_threads: Count
    CUBLAS_WORKSPACE_CONFIG: Text
    OMP_NUM_THREADS: Text
    MKL_NUM_THREADS: Text
    PYTORCH_ENABLE_MPS_FALLBACK: Text
    CUDA_VISIBLE_DEVICES: Text
    allow_fp16_reduced_precision_reduction: bool
    allow_bf16_reduced_precision_reduction: bool
    preferred_blas_library: Text
    HSA_OVERRIDE_GFX_VERSION: Text
    NVIDIA_TF32_OVERRIDE: Text
    ONEDNN_MAX_CPU_ISA: Text
    DNNL_MAX_CPU_ISA: Text
    MKL_ENABLE_INSTRUCTIONS: Text
    MKL_CBWR: Text


class PythonBuild(TypedDict):
    """The interpreter beyond its X.Y.Z: which implementation, its build line, and whether it runs without the GIL."""

    implementation: str
    version: Annotated[str, Json(maxLength=4096)]
    free_threaded: bool


class Package(TypedDict):
    name: str
    version: str
    installer: NotRequired[Text]
    source: NotRequired[Text]  # index URL, direct URL or local path, where known
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
    cpu: Text
    cpu_count: Count | None
    torch: Text
    gpus: list[str]
    target: NotRequired[Text]
    torch_build: NotRequired[Text]
    build_matches_target: NotRequired[bool | None]
    cuda: NotRequired[Text]
    hip: NotRequired[Text]
    xpu_devices: NotRequired[list[str]]
    cudnn: NotRequired[Count | None]
    driver: NotRequired[Text]
    threads: NotRequired[Count | None]
    gpu_links: NotRequired[list[Text]]
    image: NotRequired[Text]
    image_id: NotRequired[Text]
    manifest_sha256: NotRequired[Text]
    os_version: NotRequired[Text]
    cpu_identity: NotRequired[
        Annotated[
            CpuIdentity,
            Json(
                description="kitbench.cpus.identity, with the ISA torch dispatches to (isa); cores_usable is the "
                "affinity mask and cgroup quota's count"
            ),
        ]
    ]
    gpu_identity: NotRequired[list[GpuIdentity]]
    settings: NotRequired[
        Annotated[
            Settings,
            Json(
                description="kitbench.determinism.settings: what decides which kernels run, under torch's names, "
                "as the run had them"
            ),
        ]
    ]
    base_image_id: NotRequired[Text]
    packages: NotRequired[
        Annotated[
            list[Package],
            Json(description="every distribution in the interpreter that ran the suite (importlib.metadata)"),
        ]
    ]
    lock: NotRequired[
        Annotated[
            LockInfo | None,
            Json(description="the lock the environment was installed from; null and lock_why when none"),
        ]
    ]
    lock_why: NotRequired[Text]
    index_override: NotRequired[
        Annotated[
            Text,
            Json(
                description="KITBENCH_INDEX_URL when the environment was installed (an index URL without its "
                "credentials, or default: the user's own configuration): every package came from there, so the "
                "target may hold another build than it names; null when the target's own indexes were used"
            ),
        ]
    ]
    git_revision: NotRequired[Text]
    python_arch: NotRequired[str]
    python_build: NotRequired[
        Annotated[
            PythonBuild,
            Json(
                description="the interpreter: implementation (sys.implementation.name), build (sys.version), and "
                "whether it is free-threaded (sysconfig Py_GIL_DISABLED)"
            ),
        ]
    ]
    platform: NotRequired[Text]
    ram_bytes: NotRequired[Count | None]
    container: NotRequired[bool]
    torchvision: NotRequired[Text]
    interop_threads: NotRequired[Count | None]


class Check(TypedDict):
    status: CheckStatus
    summary: str
    nondeterministic_op: NotRequired[Line]


class Transfer(TypedDict):
    direction: Direction
    memory: Memory
    bytes: Positive
    gb_per_s: Amount
    gb_per_s_q1: Amount
    gb_per_s_q3: Amount
    samples: NotRequired[Count]


class MovesCheck(Check):
    transfers: NotRequired[list[Transfer]]
    skipped: NotRequired[list[str]]


class MnistRun(TypedDict):
    device: Name
    model: Name
    loop: Name
    batch_size: Positive
    epochs: Positive
    train_samples: Positive
    epoch_s: Amount
    epoch_s_all: Annotated[list[Amount], Json(minItems=1)]
    samples_per_s: Amount
    data_s: Amount
    final_loss: float | None
    loss_curve: list[float | None]
    test_acc: Fraction
    test_loss: float | None
    epoch_test_acc: list[Fraction]
    dataset_load_s: Amount
    warmup_s: Amount
    floor_fraction: Amount
    epoch_losses: NotRequired[list[float | None]]
    diverged_at_step: NotRequired[Count | None]
    step_s: NotRequired[Amount]
    params_sha256: NotRequired[Sha256 | None]
    tensor_sha256: NotRequired[dict[str, Annotated[str, Json(pattern="^[0-9a-f]{16}$")]]]
    eval_s: NotRequired[Amount]
    compute_floor_s: NotRequired[Amount | None]
    lr: NotRequired[Amount | None]
    steps: NotRequired[Count]
    capture: NotRequired[Text]
    capture_s: NotRequired[Amount | None]
    profile: NotRequired[
        Annotated[
            dict[str, Any] | None, Json(description="what one step dispatches (kitbench.checks.steps.StepProfile)")
        ]
    ]


class Crossover(TypedDict):
    model: Name
    loop: Name
    batch_size: Count | None
    text: Line


class MnistCheck(Check):
    sha256: NotRequired[
        Annotated[
            dict[str, Sha256],
            Json(description="the SHA-256 of each raw MNIST file the runs read: verify demands equal data"),
        ]
    ]
    runs: NotRequired[list[MnistRun]]
    crossovers: NotRequired[list[Crossover]]


class DdpScaling(TypedDict):
    model: Name
    world_size: Positive
    global_batch: Count
    epoch_s: Amount
    samples_per_s: Amount
    efficiency: Amount | None
    identical: bool
    params_sha256: NotRequired[list[Sha256]]
    per_rank_batch: NotRequired[Count]
    lr: NotRequired[Amount]
    test_acc: NotRequired[Fraction]
    timed_steps: NotRequired[Count]
    diverged_at_step: NotRequired[Count | None]
    samples_per_s_all: NotRequired[list[Amount]]
    efficiency_noise: NotRequired[bool]


class DdpBus(TypedDict):
    world_size: Count
    bytes: Positive
    busbw_gb_s: Amount
    algbw_gb_s: Amount


class DdpRun(TypedDict):
    backend: Tag
    device: Tag
    world_sizes: list[Positive]
    nodes: Positive
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
    error: Name  # kitbench's kind of error (DataError, DeviceUnavailableError, ...)
    message: str
    hint: str | None
    host: Annotated[str, Json(maxLength=300)] | None  # the host that could not be reached, where that was the cause
    not_run: list[str]  # the checks it stopped


class RunRecord(TypedDict):
    schema: Literal["kitbench.run/1", "kitbench.run/2", "kitbench.run/3"]
    status: Status
    started_at: Name
    ended_at: Name | None
    argv: list[str]
    options: RunOptions
    device: Name | None
    environment: Environment
    # A check a later kitbench adds is still a check, to a reader that does not know its name.
    checks: Annotated[Checks, Json(additionalProperties=Check)]
    device_init_s: NotRequired[Amount | None]
    error: NotRequired[str | None]
    failure: NotRequired[
        Annotated[
            Failure | None,
            Json(
                description="what stopped the run (kitbench.run/3): where (data: MNIST could not be had, after the "
                "checks that need none ran; setup: before or around the checks), kitbench's kind of error, its "
                "message and hint, the host that could not be reached where that was the cause, and the checks it "
                "left unrun"
            ),
        ]
    ]
    nonfinite: NotRequired[list[str]]
    replay_of: NotRequired[
        Annotated[
            ReplayOf | None,
            Json(
                description="the record this run replays (kitbench replay): its path as given and the sha256 of "
                "its bytes"
            ),
        ]
    ]
    run_id: NotRequired[
        Annotated[
            str,
            Json(
                pattern="^[0-9a-f]{32}$",
                description="the run's identity (32 hex digits, records from 2026-11 on): a copy of a record is the "
                "same run, never its reproduction",
            ),
        ]
    ]


# The schema's shared parts ($defs), each written once and referred to by name where a field has its type.
SHARED: dict[str, Any] = {
    "text": Text,
    "environment": Environment,
    "check": Check,
    "moves": MovesCheck,
    "mnist": MnistCheck,
    "mnist_run": MnistRun,
    "ddp": DdpCheck,
}
