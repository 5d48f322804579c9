"""kitbench fleet on a real Slurm cluster: three nodes on this host (tests/slurm_local.py).

Everything here goes through Slurm for real: sbatch, the held array pinned task by
task, the tasks running kitbench on n1, n2 and n3, scancel. Only the parsers of
Slurm's output and the job script's rendering are also tested without a cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kitbench._cli import main
from kitbench.errors import SlurmError
from kitbench.fleet import slurm

pytestmark = pytest.mark.integration  # a real Slurm cluster (tests/slurm_local.py)
NODES = ["n1", "n2", "n3"]


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Shared storage for the fleet: on one host, any directory is."""
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    return tmp_path / "fleet"


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out)


# --- against the real cluster ---


def test_fleet_probe_gathers_every_node(slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "probe", "--json"]) == 0
    out = _json(capsys)
    assert out["ok"] and [t["node"] for t in out["tasks"]] == NODES
    for task in out["tasks"]:
        assert task["state"] == "COMPLETED" and task["exit_code"] == 0
        assert task["probe"]["os"] == "linux"
        assert task["install"]["command"].startswith("pip install torch==")
    job = out["job"]
    assert sorted(p.name for p in (results / job).glob("*.probe.json")) == [f"{n}.probe.json" for n in NODES]
    script = Path(json.loads((results / job / "fleet.json").read_text())["script"])
    assert "#SBATCH --array=0-2" in script.read_text()


def test_fleet_probe_table_and_gather_later(
    slurm_cluster: Path,
    results: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert main(["fleet", "probe", "--per", "gres"]) == 0  # every node has the same (no) GRES: one task
    captured = capsys.readouterr()
    assert "kitbench fleet probe (job" in captured.out and "ok: 1 of 1 task(s) ok" in captured.out
    assert "task 0 on n1: pending" in captured.err and "task 0 on n1: completed, exit 0" in captured.err
    job = captured.err.split("submitted job ")[1].split(":")[0]
    assert main(["fleet", "gather", job, "--json"]) == 0
    assert [t["node"] for t in _json(capsys)["tasks"]] == ["n1"]
    # Without Slurm (the controller gone, or a workstation that mounts the shared storage):
    # the states come from the files the tasks left.
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["fleet", "gather", job, "--json"]) == 0
    captured = capsys.readouterr()
    (task,) = json.loads(captured.out)["tasks"]
    assert (task["node"], task["state"], task["exit_code"]) == ("n1", "COMPLETED", 0)
    assert captured.err.startswith("note: Slurm did not answer (scontrol is not on PATH")
    assert main(["fleet", "gather", "999999"]) == 2  # an unknown job, said before Slurm is asked
    assert capsys.readouterr().err.startswith("ERROR: no fleet job 999999 under")


def test_fleet_run_cpu_on_three_nodes(slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "fleet",
            "run",
            "cpu",
            "--venv",
            sys.prefix,
            "--verify",
            "--json",
            "--",
            "--quick",
            "--check",
            "availability",
            "--check",
            "moves",
        ]
    )
    out = _json(capsys)
    assert code == 0, out
    assert [t["node"] for t in out["tasks"]] == NODES
    for task in out["tasks"]:
        assert task["record"]["status"] == "ok"
        assert list(task["record"]["checks"]) == ["availability", "moves"]
        assert task["record"]["environment"]["target"] == "cpu"
        assert Path(task["record_path"]) == results / out["job"] / f"{task['node']}.json"
    assert [t["verdict"] for t in out["tasks"]] == ["reference", *["n/a: no MNIST run to compare"] * 2]
    page = (results / out["job"] / "report.html").read_text()  # the job's report, beside its records
    assert all(f"{node}.json" in page for node in NODES) and '<section id="transfers">' in page


def test_a_task_that_exits_1_is_a_row_with_its_stderr(
    slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA works here, so --device cuda does not fail")
    assert (
        main(
            [
                "fleet",
                "run",
                "cpu",
                "--venv",
                sys.prefix,
                "--per",
                "gres",
                "--",
                "--check",
                "availability",
                "--device",
                "cuda",
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert "failed (exit 1)" in out and "NOT ok: 0 of 1 task(s) ok" in out
    assert "n1 (task 0) stderr, last lines:" in out and "ERROR: device 'cuda' is not usable here" in out


def _running(results: Path, count: int) -> str:
    """The job id of the fleet job under ``results`` once ``count`` of its tasks are running."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        found = list(results.glob("*/fleet.json"))
        if found:
            job = found[0].parent.name
            if sum(t.state == "RUNNING" for t in slurm.tasks(job)) >= count:
                return job
        time.sleep(0.2)
    raise AssertionError("the fleet job's tasks did not start")


@pytest.fixture
def long_run(
    results: Path,
    mnist_root: Path,
    spawn: Callable[..., subprocess.Popen[str]],
) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """A fleet run whose tasks train for minutes (time enough to cancel them); whatever the
    test does, its Slurm jobs are cancelled at the end, and ``spawn`` stops the client."""

    def start(*extra: str) -> subprocess.Popen[str]:
        return spawn(
            [
                sys.executable,
                "-m",
                "kitbench",
                "fleet",
                "run",
                "cpu",
                "--venv",
                sys.prefix,
                *extra,
                "--",
                "--check",
                "mnist",
                "--epochs",
                "50",
                "--offline",
                "--data",
                str(mnist_root),
            ],
            env={**os.environ, "KITBENCH_RESULTS": str(results.parent)},
        )

    yield start
    for plan in results.glob("*/fleet.json"):
        with contextlib.suppress(SlurmError):
            slurm.cancel(plan.parent.name)


def test_a_cancelled_job_is_a_row_saying_so(
    slurm_cluster: Path, results: Path, long_run: Callable[..., subprocess.Popen[str]]
) -> None:
    proc = long_run("--per", "gres")
    job = _running(results, 1)
    record = results / job / "n1.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (record.exists() and record.stat().st_size):
        time.sleep(0.1)  # kitbench writes the record before it imports torch
    slurm.cancel(job)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "task 0 on n1: cancelled" in stderr
    assert "cancelled" in stdout and "NOT ok: 0 of 1 task(s) ok" in stdout
    written = json.loads(record.read_text())
    assert written["status"] == "interrupted"  # scancel sends SIGTERM: the record says so


def test_ctrl_c_cancels_the_array(
    slurm_cluster: Path, results: Path, long_run: Callable[..., subprocess.Popen[str]]
) -> None:
    proc = long_run("--per", "gres")
    job = _running(results, 1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert f"ERROR: interrupted: job {job} cancelled (scancel)" in stderr
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(t.done for t in slurm.tasks(job)):
        time.sleep(0.5)
    assert {t.state for t in slurm.tasks(job)} == {"CANCELLED"}


def test_a_missing_partition_is_slurms_refusal_translated(
    slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fleet", "probe", "--partition", "nosuch"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: Slurm refused the partition 'nosuch'") and "hint: " in err


def test_an_unknown_constraint_is_slurms_refusal_translated(
    slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["fleet", "probe", "--constraint", "nosuchfeature"]) == 1
    assert capsys.readouterr().err.startswith("ERROR: Slurm refused the constraint")
    assert not list(results.glob("*/fleet.json"))


def test_dry_run_prints_the_script_and_submits_nothing(
    slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "fleet",
                "run",
                "cpu",
                "--venv",
                sys.prefix,
                "--dry-run",
                "--partition",
                "debug",
                "--time",
                "10",
                "--sbatch-arg=--mem=100M",
                "--",
                "--quick",
            ]
        )
        == 0
    )
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n")
    for line in (
        "#SBATCH --array=0-2",
        "#SBATCH --partition=debug",
        "#SBATCH --time=10",
        "#SBATCH --mem=100M",
        "export KITBENCH_TARGET=cpu",
        '-m kitbench run --force --out "$out/$node.json" --quick',
    ):
        assert line in script
    assert not results.exists() or not list(results.glob("*/fleet.json"))


def test_dry_run_builds_nothing(
    slurm_cluster: Path,
    results: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Neither the venv a run would build with nox, nor the image, nor its OCI bundle."""
    from kitbench.records import manifest

    checkout = tmp_path / "checkout"
    (checkout / "envs").mkdir(parents=True)
    monkeypatch.setenv("KITBENCH_ENVS", str(manifest.envs_dir()))  # the kit's targets, read from wherever
    monkeypatch.setattr("kitbench.records.manifest.checkout_root", lambda: checkout)
    assert main(["fleet", "run", "cpu", "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert f"{checkout}/.nox/cpu/bin/python -m kitbench run" in captured.out
    assert "dry run: cpu's environment would be built in" in captured.err
    assert not (checkout / ".nox").exists()
    monkeypatch.setattr("kitbench.rebuild.images.build", lambda *a, **k: pytest.fail("a dry run built an image"))
    for runtime, where in (("oci", f"{results}/bundles/cuda126-<image id>"), ("pyxis", "dockerd://kitbench/cuda126:")):
        assert main(["fleet", "run", "cuda126", "--containers", runtime, "--dry-run"]) == 0
        captured = capsys.readouterr()
        assert where in captured.out and "'KITBENCH_IMAGE_ID=<image id>'" in captured.out, captured.out
        assert "'KITBENCH_BASE_IMAGE_ID=<base image id>'" in captured.out
        assert "dry run: the image kitbench/cuda126:" in captured.err
    assert not results.exists() or not list(results.iterdir())


def test_no_controller_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    assert main(["fleet", "probe"]) == 1
    assert capsys.readouterr().err.startswith(f"ERROR: SLURM_CONF={tmp_path / 'absent.conf'} does not exist")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SLURM_CONF")
    assert main(["fleet", "probe"]) == 1
    assert "is not on PATH: this machine is not a Slurm submit host" in capsys.readouterr().err


@pytest.mark.docker
def test_a_docker_target_runs_for_real_through_slurms_oci_support(
    slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    docker = pytest.importorskip("docker")
    # The image .ci/run built: the same base and network, so the build here is all cache.
    base = os.environ.get("KITBENCH_TEST_BASE_IMAGE", "kitbench-ci/debian:bookworm")
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", base)
    monkeypatch.setenv("KITBENCH_DOCKER_NETWORK", "host")
    from kitbench.environments import targets
    from kitbench.rebuild import images

    # Both, as the sibling docker tests ask: the build (all cache) starts from the base image.
    for image, why in (
        (base, "the build starts from it (.ci/run makes it with debootstrap)"),
        (images.image_tag(targets.get("cuda126")), "a bundle is exported from it"),
    ):
        try:
            docker.from_env().images.get(image)
        except Exception as exc:
            pytest.skip(f"image {image} is not here ({type(exc).__name__}): {why}")
    if not (slurm_cluster / "oci.conf").is_file():
        pytest.skip("runc is not installed, so the local cluster has no oci.conf")
    code = main(
        [
            "fleet",
            "run",
            "cuda126",
            "--containers",
            "oci",
            "--per",
            "gres",
            "--json",
            "--",
            "--quick",
            "--check",
            "availability",
            "--check",
            "moves",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    (task,) = out["tasks"]
    record = task["record"]
    assert record["status"] == "ok" and record["environment"]["target"] == "cuda126"
    assert record["environment"]["image_id"].startswith("sha256:")
    assert record["environment"]["base_image_id"].startswith("sha256:")  # the base it was built from, too
    assert (results / "bundles").is_dir()


def test_ddp_spans_the_job_s_nodes(
    slurm_cluster: Path, results: Path, mnist_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "fleet",
            "run",
            "cpu",
            "--venv",
            sys.prefix,
            "--json",
            "--",
            "--check",
            "ddp",
            "--quick",
            "--nproc",
            "1",
            "--offline",
            "--data",
            str(mnist_root),
            "--limit",
            "2000",
        ]
    )
    out = _json(capsys)
    assert code == 0, out
    assert out["plan"]["span"] is True
    for task in out["tasks"]:
        (gloo,) = task["record"]["checks"]["ddp"]["runs"]
        assert (gloo["nodes"], gloo["world_sizes"]) == (3, [1])  # 1 process on each of 3 nodes
        (row,) = gloo["scaling"]
        assert row["world_size"] == 3 and row["identical"]
    script = Path(json.loads((results / out["job"] / "fleet.json").read_text())["script"]).read_text()
    assert "#SBATCH --nodes=3" in script and "#SBATCH --nodelist=n1,n2,n3" in script
    assert "--array" not in script and "srun --ntasks-per-node=1 --kill-on-bad-exit=1" in script
