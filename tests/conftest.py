from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import shlex
import shutil
import signal
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kitbench.suite.data import normalize_root

REPO = Path(__file__).resolve().parent.parent
RESOURCES = Path(__file__).resolve().parent / "resources"
# The one variable the README documents for MNIST, in any form the suite accepts (root, MNIST or MNIST/raw).
SHARED_MNIST = normalize_root(Path(os.environ.get("KITBENCH_DATA") or REPO.parent / "shared" / "data"))
# The fact scripts (envs/scripts/*.py) import what they share (_shared) from their own folder, which
# `python envs/scripts/x.py` puts first on sys.path; tests run them with runpy, which does not.
sys.path.insert(0, str(REPO / "envs" / "scripts"))


# A skip whose reason names what provides the missing piece is a prerequisite CI promises (.ci/run
# installs it, or nox -s tests does). Under KITBENCH_PREREQUISITES=required (.ci/run sets it), such a skip
# fails the test: a broken install step must not pass as a quietly skipped browser, engine or cluster.
_PROVIDERS = (".ci/run", "apt-get install", "nox -s tests installs")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or os.environ.get("KITBENCH_PREREQUISITES") != "required":
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if any(provider in reason for provider in _PROVIDERS):
        report.outcome = "failed"
        report.longrepr = f"a prerequisite CI provides is missing (KITBENCH_PREREQUISITES=required): {reason}"


# The two tiers (pyproject.toml's markers): a test that launches torchrun, Docker, Slurm or nox, or trains a
# model, is an integration test; the rest (-m "not integration") is the change-test loop. A Docker or an
# accelerator test is one by its marker. An unmarked test that starts any of them, itself or through a fixture
# it asks for, fails, naming what it started: before it starts it (a launch), or at the first epoch (training).
_LAUNCHERS = frozenset(
    {"torchrun", "nox", "docker", "dockerd", "srun", "sbatch", "salloc", "slurmctld", "slurmd", "munged"}
)
_LAUNCHER_MODULES = frozenset({"nox", "torch.distributed.run", "torch.distributed.launch"})
_KITBENCH_VERBS = frozenset({"replay", "container", "fleet"})  # build environments, images, or go through Slurm
_TRAINING_CHECKS = frozenset({"mnist", "ddp"})
_WRAPPERS = frozenset({"env", "timeout", "nice", "setsid", "stdbuf", "runuser"})
_INTEGRATION_MARKERS = ("docker", "accelerator")
_running: list[pytest.Item] = []  # the test being set up, run or torn down
_original: dict[str, Any] = {}


def _stand_in(program: str) -> bool:
    """A shell script a test wrote in place of the real program (every launcher above is a binary or Python)."""
    found = shutil.which(program)
    try:
        with open(found or program, "rb") as file:
            first = file.readline(200)
    except OSError:
        return False
    return first.startswith(b"#!") and first.split()[0].rsplit(b"/", 1)[-1] in (b"sh", b"bash", b"dash")


def launched(argv: Sequence[str]) -> str | None:
    """What of the integration tier ``argv`` starts, or None: a launcher (by its program or its ``-m`` module),
    or a kitbench command that trains (``run`` naming the mnist or ddp check, or its default checks and a data
    folder) or builds (replay, container, fleet)."""
    argv = list(argv)
    if not argv or _stand_in(argv[0]):
        return None
    program = Path(argv[0]).name
    if program in _LAUNCHERS:
        return program
    if program in _WRAPPERS:  # env -u X A=1 torchrun ..., timeout 60 nox ...: what they run
        return next(filter(None, (launched(argv[i:]) for i in range(1, len(argv)))), None)
    kitbench: list[str] | None = argv[1:] if program == "kitbench" else None
    if "-m" in argv[:-1]:
        module = argv[argv.index("-m") + 1]
        if module in _LAUNCHER_MODULES:
            return module
        if module == "kitbench":
            kitbench = argv[argv.index("-m") + 2 :]
    verb = next((a for a in kitbench or () if not a.startswith("-")), None)
    if kitbench is None or verb is None:
        return None
    if verb in _KITBENCH_VERBS:
        return f"kitbench {verb}"
    if verb != "run" or {"-h", "--help"} & set(kitbench):
        return None
    pairs = list(itertools.pairwise(kitbench))
    given = dict(pairs)
    checks = {value for flag, value in pairs if flag == "--check"}
    checks |= {a.removeprefix("--check=") for a in kitbench if a.startswith("--check=")}
    # Its default checks train on the data it is given; a refusal of a bad argument trains nothing.
    if checks & _TRAINING_CHECKS or (not checks and Path(given.get("--data", "/nonexistent")).is_dir()):
        return "kitbench run (it trains)"
    return None


def _refuse_in_the_fast_tier(what: str) -> None:
    if _running and not _running[-1].get_closest_marker("integration"):
        pytest.fail(
            f"{_running[-1].nodeid} {what}: mark it @pytest.mark.integration (its module: pytestmark)", pytrace=False
        )


def _argv(args: Any) -> list[str]:
    """Popen's ``args`` as words: a string is a shell's command line (or one program), bytes and paths decoded."""
    if isinstance(args, (str, bytes, os.PathLike)):
        text = os.fsdecode(args)
        try:
            return shlex.split(text)
        except ValueError:  # unbalanced quotes: the shell will say so; the first word still names the program
            return text.split()
    return [os.fsdecode(a) for a in args]


class _FastTierPopen(subprocess.Popen):  # type: ignore[type-arg]
    def __init__(self, args: Any, *rest: Any, **options: Any) -> None:
        if _running:
            what = launched(_argv(args))
            if what is not None:
                _refuse_in_the_fast_tier(f"starts {what}")
        super().__init__(args, *rest, **options)


def _guarded_get(name: str) -> Any:
    """checks.get, with the MNIST trainer's epoch refusing to run in an unmarked test."""
    found = _original["get"](name)
    training = sys.modules.get("kitbench.suite.checks.mnist_training")
    if training is not None and getattr(training._epoch, "__name__", "") != "_guarded_epoch":
        epoch = training._epoch

        def _guarded_epoch(*args: Any, **kwargs: Any) -> Any:
            _refuse_in_the_fast_tier("trains a model")
            return epoch(*args, **kwargs)

        training._epoch = _guarded_epoch
    return found


# nox -s tests runs the tests in parallel (pytest-xdist, --dist loadgroup): a group runs whole on one worker.
# A module is one group, so that its module-scoped fixtures (a DDP launch, an MNIST sweep, a built wheel) are
# made once; the modules that ask for one of these session-wide fixtures are that fixture's group instead, so
# the real Slurm cluster (fixed ports: one per host) starts on one worker only, and the shared runs train once.
_SHARED = ("slurm_cluster", "runs")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    shared: dict[str, str] = {}  # module -> the session fixture whose group it is in
    for item in items:
        if any(item.get_closest_marker(name) for name in _INTEGRATION_MARKERS):
            item.add_marker(pytest.mark.integration)
        for name in _SHARED:
            if name in getattr(item, "fixturenames", ()):
                shared.setdefault(_module(item), name)
    groups = {item: shared.get(_module(item), _module(item)) for item in items}
    slow = {groups[item] for item in items if item.get_closest_marker("integration")}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    # The groups with integration tests first (a worker takes the groups in this order): the fast ones fill in
    # behind them, where a DDP module started last would leave one worker running it alone at the end.
    items.sort(key=lambda item: groups[item] not in slow)


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    _running.append(item)
    try:
        yield
    finally:
        _running.pop()


def pytest_sessionstart() -> None:
    from kitbench.suite import checks

    subprocess.Popen = _FastTierPopen  # type: ignore[misc]
    _original["get"], checks.get = checks.get, _guarded_get


@pytest.fixture
def resources() -> Path:
    return RESOURCES


@pytest.fixture(scope="session")
def mnist_root() -> Path:
    """The real MNIST beside the checkout (../shared/data); never downloaded."""
    if not (SHARED_MNIST / "MNIST" / "raw" / "train-images-idx3-ubyte").is_file():
        pytest.skip(f"real MNIST not found at {SHARED_MNIST} (set KITBENCH_DATA)")
    return SHARED_MNIST


@pytest.fixture(scope="session")
def runs(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Records of real CPU runs, shared by every test that reads one: twice the same (a, b), then another seed
    and another learning rate."""
    from kitbench.suite import runner as suite
    from kitbench.suite.checks.base import Options

    base = dict(
        checks=("moves", "mnist"),
        device="cpu",
        data=mnist_root,
        offline=True,
        quick=True,
        loops=("resident",),
        train_limit=1500,
        epochs=2,
        threads=1,
    )
    made = {}
    for name, changes in (("a", {}), ("b", {}), ("seed", {"seed": 1}), ("lr", {"lr": 0.05})):
        out = tmp_path_factory.mktemp(name) / f"{name}.json"
        suite.run(Options(**{**base, **changes}), out)
        made[name] = out
    return made


@pytest.fixture
def envs_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of envs/ that KITBENCH_ENVS points the kit at."""
    copy = tmp_path / "envs"
    shutil.copytree(REPO / "envs", copy)
    monkeypatch.setenv("KITBENCH_ENVS", str(copy))
    return copy


@pytest.fixture
def write_lock(envs_copy: Path) -> Callable[..., Path]:
    """Writes a lock of a target on linux-x86_64-py3.11 into the envs/ copy: the lock a stand-in of PyTorch's
    cpu index gave (tests/resources/locks/), its torch's version replaced by ``torch`` and its CUDA packages
    dropped unless ``cuda``: a lock of the target's build where ``torch`` carries its tag."""
    recorded = RESOURCES / "locks" / "pylock.cpu-linux-x86_64-py311.toml"

    def write(target: str, torch: str, cuda: bool = False, python: str = "3.11") -> Path:
        text = recorded.read_text().replace('target = "cpu"', f'target = "{target}"')
        text = text.replace('name = "torch"\nversion = "2.14.1"', f'name = "torch"\nversion = "{torch}"')
        text = text.replace('platform = "linux-x86_64-py3.11"', f'platform = "linux-x86_64-py{python}"')
        blocks = text.split("\n[[packages]]\n")
        kept = [b for b in blocks[1:] if cuda or not b.startswith(('name = "nvidia-', 'name = "cuda-'))]
        path = envs_copy / "locks" / f"pylock.{target}-linux-x86_64-py{python.replace('.', '')}.toml"
        path.write_text("\n[[packages]]\n".join([blocks[0], *kept]))
        return path

    return write


def write_idx(raw: Path, prefix: str, count: int, seed: int = 0) -> None:
    """Write a tiny IDX image/label pair the way the MNIST files are laid out."""
    import random

    rng = random.Random(seed)
    labels = bytes(i % 10 for i in range(count))
    # Each image is its label's digit drawn as a band, so a model can learn it.
    pixels = bytearray()
    for label in labels:
        image = bytearray(rng.randrange(0, 30) for _ in range(28 * 28))
        for row in range(label * 2 + 2, label * 2 + 6):
            image[row * 28 : (row + 1) * 28] = bytes([250] * 28)
        pixels += image
    (raw / f"{prefix}-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 2051, count, 28, 28) + bytes(pixels))
    (raw / f"{prefix}-labels-idx1-ubyte").write_bytes(struct.pack(">II", 2049, count) + labels)


@pytest.fixture
def tiny_mnist(tmp_path: Path, envs_copy: Path) -> Path:
    """A 300/100-image MNIST written here, with envs/mnist.yaml naming its digests."""
    root = tmp_path / "tiny"
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    write_idx(raw, "train", 300)
    write_idx(raw, "t10k", 100, seed=1)
    lines = ["files:"]
    for path in sorted(raw.iterdir()):
        lines.append(f"  {path.name}: {hashlib.sha256(path.read_bytes()).hexdigest()}")
    (envs_copy / "mnist.yaml").write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(autouse=True)
def _no_user_fact_cache(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """The user's own fact cache (kitbench facts refresh) never reaches a test's answers: in-process, the
    cache is an empty folder (XDG_CACHE_HOME itself stays, for uv). tests/test_facts.py uses the real lookup."""
    from kitbench.advice import facts

    empty = tmp_path_factory.getbasetemp() / "no-fact-cache"
    monkeypatch.setattr(facts, "cache_dir", lambda: empty)
    # Nor is its cache of validators and manifests written by the tests' own manifests.
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path_factory.getbasetemp() / "kitbench-cache"))


@pytest.fixture(autouse=True)
def _records_written_are_valid(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every record any test makes kitbench write is checked against kitbench.run/1 as it is written."""
    import json

    from kitbench.records import record as records

    write = records.write_atomic

    def checked(path: Path, record: object) -> None:
        write(path, record)  # type: ignore[arg-type]
        if isinstance(record, dict) and record.get("schema") == records.SCHEMA:
            records.validate(json.loads(path.read_text()), path)

    monkeypatch.setattr(records, "write_atomic", checked)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real 3-node Slurm cluster on this host (tests/slurm_local.py), for the whole session;
    SLURM_CONF points every Slurm command at it. Stopped by its PIDs at the end."""
    import slurm_local

    why = slurm_local.missing()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("kitlab")
    cluster = slurm_local.up(root, oci=True)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield root
    finally:
        slurm_local.down(root)
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start a process (in its own session, so a Ctrl-C meant for pytest reaches it only
    through here) and stop it, and all it started, when the test ends however it ends:
    an interrupted test must not leave a training job running."""
    started: list[subprocess.Popen[str]] = []

    def start(args: Sequence[str], **options: Any) -> subprocess.Popen[str]:
        options = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True, **options}
        proc = subprocess.Popen(list(args), start_new_session=True, **options)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        # SIGTERM first: kitbench then stops what it launched in sessions of its own (torchrun).
        for stop, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 30)):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, stop)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=grace)


def _another_run(source: Path, dest: Path) -> Path:
    import datetime
    import json

    from kitbench.records import record as records

    data = json.loads(source.read_text())
    data["run_id"] = records.new_run_id()
    # Another run started at another moment too: a record of the first schema has no run id to tell it apart.
    started = datetime.datetime.fromisoformat(data["started_at"]) + datetime.timedelta(seconds=1)
    data["started_at"] = started.isoformat()
    dest.write_text(json.dumps(data, indent=2))
    return dest


@pytest.fixture
def another_run() -> Callable[[Path, Path], Path]:
    """Writes ``source``'s record to ``dest`` as another run with the same numbers would (a new run id): a
    copy of the file is the same run, which verify, compare and report refuse to count twice."""
    return _another_run
