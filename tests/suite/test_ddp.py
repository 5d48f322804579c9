"""--check ddp, launched through torchrun for real: gloo on this host's CPU.

No timing is asserted: only that the figures exist, follow their definitions,
and that the replicas are identical after training.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kitbench.suite import runner as suite
from kitbench.suite.checks.base import Options

pytest.importorskip("torch")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


_TAG = "KITBENCH_TEST_TREE"


@pytest.fixture
def tree() -> dict[str, str]:
    """An environment for this test's processes: a marker every descendant inherits (torchrun's ranks
    included, even once reparented), so the test finds and signals its own processes and nobody else's."""
    return {**os.environ, _TAG: uuid.uuid4().hex}


def _pids(env: dict[str, str], pattern: str) -> list[int]:
    marker = f"{_TAG}={env[_TAG]}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isascii() or not proc.name.isdigit():
            continue
        try:
            if marker in (proc / "environ").read_bytes().split(b"\0") and pattern.encode() in (
                proc / "cmdline"
            ).read_bytes().replace(b"\0", b" "):
                found.append(int(proc.name))
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def _workers(env: dict[str, str]) -> list[int]:
    """The ranks torchrun started (its own command line names the module too)."""
    return _pids(env, "-u -m kitbench.suite.ddp_worker")


def _anything_left(env: dict[str, str]) -> list[int]:
    return _pids(env, "kitbench.suite.ddp_worker")


@pytest.fixture(scope="module")
def ddp_record(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("ddp") / "r.json"
    options = Options(
        checks=("ddp",), device="cpu", data=mnist_root, offline=True, quick=True, train_limit=2000, nproc=2
    )
    return dict(suite.run(options, out).record)


@pytest.mark.integration
def test_gloo_with_one_and_two_processes(ddp_record: dict) -> None:
    ddp = ddp_record["checks"]["ddp"]
    assert ddp["status"] == "ok", ddp["summary"]
    (gloo,) = ddp["runs"]
    assert (gloo["backend"], gloo["device"], gloo["world_sizes"], gloo["nodes"]) == ("gloo", "cpu", [1, 2], 1)
    rows = {r["world_size"]: r for r in gloo["scaling"]}
    assert rows[1]["efficiency"] == 1.0
    assert rows[2]["efficiency"] == pytest.approx(rows[2]["samples_per_s"] / (2 * rows[1]["samples_per_s"]))
    assert rows[2]["global_batch"] == 2 * rows[2]["per_rank_batch"] == 128
    assert rows[2]["lr"] == 2 * rows[1]["lr"]  # the linear scaling rule
    assert all(r["identical"] for r in gloo["scaling"])
    # Each replica's digest (digests.parameters, as the MNIST runs record theirs): two equal ones at world size 2.
    assert [len(r["params_sha256"]) for r in gloo["scaling"]] == [1, 2]
    assert len(set(rows[2]["params_sha256"])) == 1 and len(rows[2]["params_sha256"][0]) == 64
    assert all(0.0 < r["test_acc"] <= 1.0 for r in gloo["scaling"])
    # Interleaved repeats (1, 2, 1, 2): medians; above 100 % is flagged as noise, never reported as a result.
    assert all(len(r["samples_per_s_all"]) == 2 for r in gloo["scaling"])
    assert rows[2]["samples_per_s"] == pytest.approx(
        sorted(rows[2]["samples_per_s_all"])[0] / 2 + sorted(rows[2]["samples_per_s_all"])[1] / 2
    )
    assert rows[2]["efficiency_noise"] == (rows[2]["efficiency"] > 1.0)
    assert ("noise between repeats" in ddp["summary"]) == rows[2]["efficiency_noise"]


@pytest.mark.integration
def test_all_reduce_bus_bandwidth_follows_nccl_tests(ddp_record: dict) -> None:
    (gloo,) = ddp_record["checks"]["ddp"]["runs"]
    sizes = [b["bytes"] for b in gloo["allreduce"]]
    assert sizes == [1024 * 4**i for i in range(8)]  # 1 KiB .. 16 MiB with --quick
    for row in gloo["allreduce"]:
        assert row["world_size"] == 2
        assert row["algbw_gb_s"] == pytest.approx(row["bytes"] / row["time_s"] / 1e9)
        assert row["busbw_gb_s"] == pytest.approx(row["algbw_gb_s"] * 2 * (2 - 1) / 2)
    assert "gloo" in gloo["reference"]


@pytest.mark.integration
def test_without_gpus_the_multi_gpu_part_says_why(ddp_record: dict) -> None:
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("two GPUs here: the multi-GPU part runs")
    (line,) = ddp_record["checks"]["ddp"]["skipped"]
    assert line.startswith("multi-GPU (NCCL): skipped: ")


def _ddp_cli(*args: str, data: Path, out: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "kitbench",
        "run",
        "--check",
        "ddp",
        "--device",
        "cpu",
        "--quick",
        "--offline",
        "--data",
        str(data),
        "--limit",
        "2000",
        "--out",
        str(out),
        *args,
    ]


@pytest.mark.integration
def test_two_nodes_over_loopback(mnist_root: Path, tmp_path: Path, spawn: Callable[..., subprocess.Popen[str]]) -> None:
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = [
        spawn(
            _ddp_cli(
                "--nnodes",
                "2",
                "--rdzv-endpoint",
                endpoint,
                "--nproc",
                "1",
                "--ddp-timeout",
                "120",
                data=mnist_root,
                out=tmp_path / f"node{i}.json",
            )
        )
        for i in range(2)
    ]
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    for i in range(2):
        ddp = json.loads((tmp_path / f"node{i}.json").read_text())["checks"]["ddp"]
        (gloo,) = ddp["runs"]
        assert (gloo["nodes"], gloo["world_sizes"]) == (2, [1])  # 1 process on each of 2 nodes
        (row,) = gloo["scaling"]
        assert row["world_size"] == 2 and row["identical"]
        assert [b["world_size"] for b in gloo["allreduce"]] == [2] * 8


@pytest.mark.integration
def test_a_crashed_rank_fails_the_check_and_leaves_no_process(
    mnist_root: Path, tmp_path: Path, tree: dict[str, str], spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    out = tmp_path / "r.json"
    # The full training set: world size 2 trains for seconds, time to kill one of its ranks. A rendezvous
    # endpoint launches world size 2 alone, with no world size 1 to wait through first.
    proc = spawn(_full(mnist_root, out, "--nnodes", "1", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}"), env=tree)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_workers(tree)) < 2:
        time.sleep(0.1)
    victims = _workers(tree)
    assert len(victims) == 2, "world size 2 never started"
    time.sleep(1.5)
    os.kill(victims[-1], signal.SIGKILL)
    proc.communicate(timeout=300)
    assert proc.returncode == 1
    ddp = json.loads(out.read_text())["checks"]["ddp"]
    assert ddp["status"] == "failed"
    assert "gloo: world size 2: rank" in ddp["summary"] and "signal 9" in ddp["summary"]
    assert _anything_left(tree) == []


@pytest.mark.integration
def test_a_port_held_by_another_program_is_one_line(mnist_root: Path, tmp_path: Path, tree: dict[str, str]) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        endpoint = f"127.0.0.1:{squatter.getsockname()[1]}"
        out = tmp_path / "r.json"
        done = subprocess.run(
            _ddp_cli(
                "--nnodes",
                "1",
                "--rdzv-endpoint",
                endpoint,
                "--nproc",
                "1",
                "--ddp-timeout",
                "5",
                data=mnist_root,
                out=out,
            ),
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env=tree,
        )
    assert done.returncode == 1
    ddp = json.loads(out.read_text())["checks"]["ddp"]
    assert ddp["status"] == "failed"
    # Said before torchrun starts, which would join the squatter as a client and wait out the watchdog.
    assert f"at rendezvous {endpoint}: the port is held by another program on this host" in ddp["summary"]
    assert "no rank was started" in ddp["summary"]
    assert _anything_left(tree) == []


def test_a_port_is_held_where_torch_s_store_could_not_listen_on_it() -> None:
    """As torch's store binds (every address, SO_REUSEADDR): a port another program holds on another address of this
    host is held too (torch's store failed there, and the run waited out its watchdog); one in TIME_WAIT, one held
    on IPv6's loopback alone, and one of another host are not (torch 2.14's store started on the first two)."""
    from kitbench.suite.checks import ddp

    with socket.socket() as elsewhere:
        elsewhere.bind(("127.0.0.2", 0))  # Linux's loopback is all of 127/8
        elsewhere.listen()
        assert ddp._held(f"127.0.0.1:{elsewhere.getsockname()[1]}")
    if socket.has_ipv6:
        with contextlib.suppress(OSError), socket.socket(socket.AF_INET6) as six:
            six.bind(("::1", 0))
            six.listen()
            assert not ddp._held(f"127.0.0.1:{six.getsockname()[1]}")

    with socket.socket() as used:
        used.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's store binds
        used.bind(("127.0.0.1", 0))
        used.listen()
        endpoint = f"127.0.0.1:{used.getsockname()[1]}"
        assert ddp._held(endpoint)
        with socket.create_connection(used.getsockname()), used.accept()[0]:
            pass  # the server's side closes first: its port goes to TIME_WAIT
    assert not ddp._held(endpoint)
    assert not ddp._held("192.0.2.1:29500")  # TEST-NET-1: never an address of this host


@pytest.mark.parametrize(
    ("answers", "words"),
    [
        (True, "no run within 35 s at rendezvous 192.0.2.1:29500: the port answers but no rendezvous completed"),
        (False, "no rendezvous within 35 s: nothing answers at 192.0.2.1:29500 (the node that hosts it"),
    ],
)
def test_a_launch_past_its_watchdog_says_whether_the_rendezvous_answered(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, answers: bool, words: str
) -> None:
    """torchrun's c10d client waits on a rendezvous that answers and never completes, past join_timeout; the
    watchdog's line says which of the two it was (a real squatter held this host's port, which is said at once)."""
    import torch

    from kitbench.machine import probe
    from kitbench.suite.checks import ddp
    from kitbench.suite.checks.base import Context, NoProgress

    def hang(command: list[str], limit: float, **_: Any) -> None:
        raise subprocess.TimeoutExpired(command, limit)

    monkeypatch.setattr(ddp._proc, "run", hang)
    monkeypatch.setattr(ddp, "_answers", lambda endpoint: answers)
    options = Options(checks=("ddp",), nnodes=2, rdzv_endpoint="192.0.2.1:29500", ddp_timeout=5)
    ctx = Context(
        device=torch.device("cpu"), machine=probe.probe(), options=options, progress=NoProgress(), data_root=tmp_path
    )
    with pytest.raises(ddp.LaunchFailed, match=re.escape(words)):
        ddp._launch(2, ctx, tmp_path / "r.json", "gloo", 0)


def test_the_launcher_is_stopped_where_there_are_no_process_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows has no os.killpg: the launcher is still ended, not left running. (SIGKILL stays: here
    the POSIX Popen.kill this falls back to needs it; Windows' own Popen.kill does not.)"""
    from kitbench.suite.checks import ddp

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], text=True)
    try:
        monkeypatch.delattr(os, "killpg")
        started = time.monotonic()
        ddp._stop(proc, "no-marker")
        assert proc.returncode is not None and time.monotonic() - started < 30
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _full(data: Path, out: Path, *args: str) -> list[str]:
    """Two processes on the full training set (unless --limit): seconds of training, time to act on it."""
    return [
        sys.executable,
        "-m",
        "kitbench",
        "run",
        "--check",
        "ddp",
        "--device",
        "cpu",
        "--quick",
        "--offline",
        "--data",
        str(data),
        "--nproc",
        "2",
        "--out",
        str(out),
        *args,
    ]


@pytest.mark.integration
def test_sigterm_during_ddp_leaves_no_rank_and_nothing_in_tmp(
    mnist_root: Path, tmp_path: Path, tree: dict[str, str], spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    out, scratch = tmp_path / "r.json", tmp_path / "tmp"
    scratch.mkdir()
    # Through spawn: a failed assertion before the SIGTERM must not leave the training run behind.
    proc = spawn(
        _full(mnist_root, out, "--nnodes", "1", "--rdzv-endpoint", f"127.0.0.1:{_free_port()}"),
        env={**tree, "TMPDIR": str(scratch)},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_workers(tree)) < 2:
        time.sleep(0.1)
    assert len(_workers(tree)) == 2, "world size 2 never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert _anything_left(tree) == []
    # Nothing of the launch: its folder and torchrun's (torch's own compile cache may stay, as anywhere).
    assert [p.name for p in scratch.iterdir() if not p.name.startswith("torchinductor_")] == []
    assert json.loads(out.read_text())["status"] == "interrupted"


# One rank (one launch, not the four of --nproc 2 --quick): what is judged is each rank's own training, and
# world size 2 is the crash and SIGTERM tests' (two minutes more on CI's 2 cores, no more coverage).
@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ("--lr", "1e30", "--limit", "2000", "--nproc", "1"),
            "gloo: fnn at world size 1 diverged: the training loss is not finite",
        ),
        (("--limit", "64", "--batch-size", "64", "--nproc", "1"), "gloo: fnn at world size 1 timed nothing"),
    ],
)
@pytest.mark.integration
def test_a_ddp_run_that_measured_nothing_sound_is_not_ok(
    mnist_root: Path, tmp_path: Path, tree: dict[str, str], args: tuple[str, ...], words: str
) -> None:
    out = tmp_path / "r.json"
    done = subprocess.run(
        _full(mnist_root, out, *args), capture_output=True, text=True, timeout=300, check=False, env=tree
    )
    assert done.returncode == 1, done.stderr
    ddp = json.loads(out.read_text())["checks"]["ddp"]
    assert ddp["status"] == "failed"
    assert words in ddp["summary"]
    assert _anything_left(tree) == []


def test_deterministic_mode_reaches_every_rank(
    mnist_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each rank is a process of its own: --deterministic is passed to it and set there, before CUDA could start."""
    import torch

    from kitbench.suite import ddp_worker
    from kitbench.suite.checks import ddp

    commands: list[list[str]] = []
    others = ddp._proc.run  # the record's own programs (git) run as they do

    def launch(command: list[str], limit: float, **kwargs: Any) -> object:
        if "torch.distributed.run" not in command:
            return others(command, limit, **kwargs)
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, stdout="")

    monkeypatch.setattr(ddp._proc, "run", launch)
    suite.run(
        Options(
            checks=("ddp",),
            device="cpu",
            data=mnist_root,
            offline=True,
            quick=True,
            train_limit=2000,
            nproc=1,
            deterministic=True,
        ),
        tmp_path / "r.json",
    )
    assert commands and all(c[-1] == "--deterministic" for c in commands)
    seen: list[bool] = []
    monkeypatch.setattr(ddp_worker, "_main", lambda args: seen.append(torch.are_deterministic_algorithms_enabled()))
    monkeypatch.setattr(sys, "argv", ["ddp_worker", "--out", "x", "--data", "y", "--deterministic"])
    ddp_worker.main()
    monkeypatch.setattr(sys, "argv", ["ddp_worker", "--out", "x", "--data", "y"])
    ddp_worker.main()
    assert seen == [True, False] and not torch.are_deterministic_algorithms_enabled()
