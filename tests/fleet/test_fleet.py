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
from kitbench.errors import SlurmError, UsageError
from kitbench.fleet import runner as fleet
from kitbench.fleet import slurm

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


def test_fleet_probe_table_and_gather_later(slurm_cluster: Path, results: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["fleet", "probe", "--per", "gres"]) == 0       # every node has the same (no) GRES: one task
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
    task, = json.loads(captured.out)["tasks"]
    assert (task["node"], task["state"], task["exit_code"]) == ("n1", "COMPLETED", 0)
    assert captured.err.startswith("note: Slurm did not answer (scontrol is not on PATH")
    assert main(["fleet", "gather", "999999"]) == 2             # an unknown job, said before Slurm is asked
    assert capsys.readouterr().err.startswith("ERROR: no fleet job 999999 under")


def test_fleet_run_cpu_on_three_nodes(slurm_cluster: Path, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fleet", "run", "cpu", "--venv", sys.prefix, "--verify", "--json", "--",
                 "--quick", "--check", "availability", "--check", "moves"])
    out = _json(capsys)
    assert code == 0, out
    assert [t["node"] for t in out["tasks"]] == NODES
    for task in out["tasks"]:
        assert task["record"]["status"] == "ok"
        assert list(task["record"]["checks"]) == ["availability", "moves"]
        assert task["record"]["environment"]["target"] == "cpu"
        assert Path(task["record_path"]) == results / out["job"] / f"{task['node']}.json"
    assert [t["verdict"] for t in out["tasks"]] == ["reference", *["n/a: no MNIST run to compare"] * 2]
    page = (results / out["job"] / "report.html").read_text()     # the job's report, beside its records
    assert all(f"{node}.json" in page for node in NODES) and '<section id="transfers">' in page


def test_a_task_that_exits_1_is_a_row_with_its_stderr(slurm_cluster: Path, results: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA works here, so --device cuda does not fail")
    assert main(["fleet", "run", "cpu", "--venv", sys.prefix, "--per", "gres", "--",
                 "--check", "availability", "--device", "cuda"]) == 1
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
def long_run(results: Path, mnist_root: Path, spawn: Callable[..., subprocess.Popen[str]],
             ) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """A fleet run whose tasks train for minutes (time enough to cancel them); whatever the
    test does, its Slurm jobs are cancelled at the end, and ``spawn`` stops the client."""

    def start(*extra: str) -> subprocess.Popen[str]:
        return spawn([sys.executable, "-m", "kitbench", "fleet", "run", "cpu", "--venv", sys.prefix, *extra,
                      "--", "--check", "mnist", "--epochs", "50", "--offline", "--data", str(mnist_root)],
                     env={**os.environ, "KITBENCH_RESULTS": str(results.parent)})

    yield start
    for plan in results.glob("*/fleet.json"):
        with contextlib.suppress(SlurmError):
            slurm.cancel(plan.parent.name)


def test_a_cancelled_job_is_a_row_saying_so(slurm_cluster: Path, results: Path,
                                            long_run: Callable[..., subprocess.Popen[str]]) -> None:
    proc = long_run("--per", "gres")
    job = _running(results, 1)
    record = results / job / "n1.json"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (record.exists() and record.stat().st_size):
        time.sleep(0.1)      # kitbench writes the record before it imports torch
    slurm.cancel(job)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "task 0 on n1: cancelled" in stderr
    assert "cancelled" in stdout and "NOT ok: 0 of 1 task(s) ok" in stdout
    written = json.loads(record.read_text())
    assert written["status"] == "interrupted"        # scancel sends SIGTERM: the record says so


def test_ctrl_c_cancels_the_array(slurm_cluster: Path, results: Path,
                                  long_run: Callable[..., subprocess.Popen[str]]) -> None:
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


def test_a_missing_partition_is_slurms_refusal_translated(slurm_cluster: Path, results: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "probe", "--partition", "nosuch"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("ERROR: Slurm refused the partition 'nosuch'") and "hint: " in err


def test_an_unknown_constraint_is_slurms_refusal_translated(slurm_cluster: Path, results: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "probe", "--constraint", "nosuchfeature"]) == 1
    assert capsys.readouterr().err.startswith("ERROR: Slurm refused the constraint")
    assert not list(results.glob("*/fleet.json"))


def test_dry_run_prints_the_script_and_submits_nothing(slurm_cluster: Path, results: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "run", "cpu", "--venv", sys.prefix, "--dry-run", "--partition", "debug",
                 "--time", "10", "--sbatch-arg=--mem=100M", "--", "--quick"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --array=0-2", "#SBATCH --partition=debug", "#SBATCH --time=10", "#SBATCH --mem=100M",
                 "export KITBENCH_TARGET=cpu", "-m kitbench run --force --out \"$out/$node.json\" --quick"):
        assert line in script
    assert not results.exists() or not list(results.glob("*/fleet.json"))


def test_dry_run_builds_nothing(slurm_cluster: Path, results: Path, tmp_path: Path,
                                capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither the venv a run would build with nox, nor the image, nor its OCI bundle."""
    from kitbench.records import manifest

    checkout = tmp_path / "checkout"
    (checkout / "envs").mkdir(parents=True)
    monkeypatch.setenv("KITBENCH_ENVS", str(manifest.envs_dir()))     # the kit's targets, read from wherever
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


def test_no_controller_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "absent.conf"))
    assert main(["fleet", "probe"]) == 1
    assert capsys.readouterr().err.startswith(f"ERROR: SLURM_CONF={tmp_path / 'absent.conf'} does not exist")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("SLURM_CONF")
    assert main(["fleet", "probe"]) == 1
    assert "is not on PATH: this machine is not a Slurm submit host" in capsys.readouterr().err


# --- without a cluster: the parsers and the script ---

def test_scontrol_records_parse_into_tasks() -> None:
    text = ("JobId=7 ArrayJobId=5 ArrayTaskId=2 JobName=x JobState=TIMEOUT Reason=TimeLimit ExitCode=0:15 "
            "NodeList=n3 Command=/a b\n"
            "JobId=5 ArrayJobId=5 ArrayTaskId=0 JobState=COMPLETED Reason=None ExitCode=1:0 NodeList=n1 "
            "TimeLimit=01:00:00\n"
            "JobId=6 ArrayJobId=5 ArrayTaskId=1 JobState=PENDING Reason=Resources ExitCode=0:0 NodeList=(null)\n")
    tasks = slurm.parse_scontrol(text)
    assert [(t.index, t.state, t.exit_code, t.node, t.reason) for t in tasks] == [
        (0, "COMPLETED", 1, "n1", None), (1, "PENDING", None, None, "Resources"), (2, "TIMEOUT", 0, "n3", "TimeLimit")]
    assert tasks[2].signal == 15 and tasks[2].done and not tasks[1].done
    assert (tasks[0].time_limit_s, tasks[1].time_limit_s) == (3600, None)


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 1800), ("5:30", 330), ("2:00:00", 7200), ("1-2", 93600), ("1-0:30", 88200), ("1-00:00:05", 86405),
    ("UNLIMITED", None), ("INFINITE", None), ("", None)])
def test_slurm_durations(text: str, seconds: float | None) -> None:
    assert slurm.duration_s(text) == seconds


def _node_text(resources: Path) -> str:
    return (resources / "slurm" / "scontrol-show-node-oneliner-22.05.8.txt").read_text()


def test_node_arches_from_scontrol_and_a_foreign_node_is_refused(resources: Path) -> None:
    text = _node_text(resources)
    assert slurm.parse_node_arches(text) == {"n1": "x86_64", "n2": "x86_64", "n3": "x86_64"}
    fleet.refuse_foreign(slurm.parse_node_arches(text), "amd64", "the image t")      # Docker's name for it
    # The same record as a Grace (aarch64) n3 and an unregistered n2 would report it.
    mixed = text.replace("NodeName=n3 Arch=x86_64", "NodeName=n3 Arch=aarch64").replace(
        "NodeName=n2 Arch=x86_64", "NodeName=n2 Arch=(null)")
    arches = slurm.parse_node_arches(mixed)
    assert arches == {"n1": "x86_64", "n2": None, "n3": "aarch64"}
    with pytest.raises(UsageError) as caught:
        fleet.refuse_foreign(arches, "x86_64", "cpu's environment (/shared/.nox/cpu/bin/python)")
    assert caught.value.message == ("cpu's environment (/shared/.nox/cpu/bin/python) is built for x86_64, "
                                    "but these nodes are not: n3 aarch64")
    assert caught.value.hint and "venv target" in caught.value.hint
    fleet.refuse_foreign(arches, None, "an image of unknown architecture")         # nothing to check against
    assert fleet.by_arch(arches) == {"x86_64": ["n1", "n2"], "aarch64": ["n3"]}
    assert fleet.describe_arches(arches) == "architectures: x86_64 (n1, n2); aarch64 (n3)"


def test_per_architecture_paths_are_parsed_once() -> None:
    assert fleet.per_arch(["/shared/venv", "arm64=/shared/arm"], "--venv") == (
        Path("/shared/venv"), {"aarch64": Path("/shared/arm")})          # Docker's name, one spelling
    assert fleet.per_arch(["/a=b/venv"], "--venv") == (Path("/a=b/venv"), {})      # a path with = in it
    for twice in (["/a", "/b"], ["aarch64=/a", "arm64=/b"]):
        with pytest.raises(UsageError):
            fleet.per_arch(twice, "--venv")


def test_two_architectures_one_job_each_node_its_own_environment(tmp_path: Path) -> None:
    """A Grace Hopper partition beside x86 nodes: one job; each task picks the environment built for
    its own architecture by uname -m, and a node of a third says so and fails (tried with a fake uname)."""
    pythons = {"x86_64": "/shared/.nox/cpu/bin/python", "aarch64": "/shared/.nox/aarch64/cpu/bin/python"}
    plan = fleet.plan_run(NODES, "node", fleet.SlurmOptions(), "cpu", "9ad5", [pythons["x86_64"]], ["--quick"], {},
                          pythons=pythons)
    assert ('case "$(uname -m)" in aarch64) py=/shared/.nox/aarch64/cpu/bin/python;; x86_64) '
            'py=/shared/.nox/cpu/bin/python;;') in plan.script
    assert '"$py" -m kitbench run --force --out "$out/$node.json" --quick' in plan.script
    dispatch = fleet.arch_dispatch(pythons)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for machine in ("aarch64", "x86_64", "ppc64le"):
        (bin_dir / "uname").write_text(f"#!/bin/sh\necho {machine}\n")
        (bin_dir / "uname").chmod(0o755)
        done = subprocess.run(["bash", "-c", dispatch + 'echo "$py"'], capture_output=True, text=True, check=False,
                              env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
        if machine == "ppc64le":
            assert done.returncode == 3
            assert done.stderr == "kitbench: no environment built for ppc64le (built: aarch64, x86_64)\n"
        else:
            assert (done.returncode, done.stdout) == (0, pythons[machine] + "\n")
    # One architecture: the job script is as before, no dispatch.
    one = fleet.plan_run(NODES, "node", fleet.SlurmOptions(), "cpu", "9ad5", [pythons["x86_64"]], ["--quick"], {},
                         pythons={"x86_64": pythons["x86_64"]})
    assert "uname" not in one.script


def test_the_other_architecture_s_environment_is_built_on_one_of_its_nodes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through Slurm itself (srun on an aarch64 node, nox there); what it built must be of that architecture."""
    from kitbench.records import manifest

    monkeypatch.setattr(manifest, "checkout_root", lambda: tmp_path)
    asked: list[list[str]] = []
    monkeypatch.setattr(slurm, "run", lambda args, timeout=0: asked.append(list(args)) or "")
    local = Path(sys.executable)
    arches: dict[str, str | None] = {"n1": fleet.arch_name(os.uname().machine), "n3": "aarch64"}
    with pytest.raises(Exception, match="the environment built on n3 is not aarch64"):   # nothing was built here
        fleet.venv_pythons("cpu", [str(local.parent.parent)], arches, fleet.SlurmOptions(partition="grace"),
                           lambda line: None)
    assert asked == [["srun", "--nodelist=n3", "--nodes=1", "--ntasks=1", "--partition=grace", "python3", "-m", "nox",
                      "--envdir", str(tmp_path / ".nox" / "aarch64"), "-s", "cpu", "--install-only", "-f",
                      str(tmp_path / "noxfile.py")]]
    # An aarch64 Python there (its ELF header says so) is used as it is, without building again.
    built = tmp_path / ".nox" / "aarch64" / "cpu" / "bin" / "python"
    built.parent.mkdir(parents=True)
    header = bytearray(local.resolve().read_bytes()[:64])
    header[18:20] = (0xB7).to_bytes(2, "little")
    built.write_bytes(bytes(header))
    built.chmod(0o755)
    asked.clear()
    found = fleet.venv_pythons("cpu", [str(local.parent.parent)], arches, fleet.SlurmOptions(), lambda line: None)
    assert found == {fleet.arch_name(os.uname().machine): local.parent.parent.absolute() / "bin" / "python",
                     "aarch64": built.absolute()} and asked == []


def test_executable_arch_reads_the_elf_header(tmp_path: Path) -> None:
    import platform

    assert fleet.executable_arch(Path(sys.executable)) == fleet.arch_name(platform.machine())
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert fleet.executable_arch(tmp_path / "script") is None
    assert fleet.executable_arch(tmp_path / "absent") is None


def _states(*states: str, limit: float | None = None) -> list[slurm.TaskState]:
    return [slurm.TaskState(i, state, 0 if state == "COMPLETED" else None, None, None, None, limit)
            for i, state in enumerate(states)]


def test_wait_backs_off_and_resets_on_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    polls = iter([_states("PENDING")] * 8 + [_states("RUNNING")] * 3 + [_states("COMPLETED")])
    monkeypatch.setattr(slurm, "tasks", lambda job: next(polls))
    slept: list[float] = []
    now = [0.0]

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    seen: list[str] = []
    final = fleet.wait("5", 1, lambda t: seen.append(t.state), clock=lambda: now[0], sleep=sleep)
    assert [t.state for t in final] == ["COMPLETED"] and seen == ["PENDING", "RUNNING", "COMPLETED"]
    assert slept == [1, 2, 4, 8, 16, 30, 30, 30, 1, 2, 4]


def test_wait_is_bounded_by_the_job_time_limit_or_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm, "tasks", lambda job: _states("RUNNING", limit=60.0))
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(SlurmError) as caught:
        fleet.wait("5", 1, lambda t: None, clock=lambda: now[0], sleep=sleep)
    assert now[0] == 60 + fleet.WAIT_GRACE_S
    assert caught.value.message == ("job 5 has not finished after 660 s (its time limit and a margin); "
                                    "it is left running")
    assert caught.value.hint == "kitbench fleet gather 5 once it ends; scancel 5 stops it"
    now[0] = 0.0
    with pytest.raises(SlurmError, match=r"after 45 s \(--timeout\)"):
        fleet.wait("5", 1, lambda t: None, clock=lambda: now[0], sleep=sleep, timeout_s=45)


def test_sacct_json_parses_into_tasks() -> None:
    text = json.dumps({"jobs": [{"array": {"task_id": 1}, "state": {"current": "NODE_FAIL", "reason": "None"},
                                 "exit_code": {"return_code": 0, "signal": {"signal_id": 9}}, "nodes": "n2"}]})
    (task,) = slurm.parse_sacct(text)
    assert (task.index, task.state, task.node, task.signal) == (1, "NODE_FAIL", "n2", 9)


@pytest.mark.parametrize(("value", "words"), [("a\nb", "cannot be an sbatch option value"), ("", "cannot be")])
def test_option_values_cannot_inject_lines(value: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        fleet.SlurmOptions(partition=value).lines()
    with pytest.raises(UsageError, match="is not an sbatch option"):
        fleet.SlurmOptions(extra=("rm -rf /",)).lines()


def test_choose_one_node_per_type() -> None:
    nodes = [slurm.Node("a1", ("p",), "gpu:a100:4", "a100,ib", "idle"),
             slurm.Node("a2", ("p",), "gpu:a100:4", "a100,ib", "mixed"),
             slurm.Node("h1", ("p",), "gpu:h100:8", "h100,ib", "idle"),
             slurm.Node("h2", ("p",), "gpu:h100:8", "h100,ib", "down*")]
    assert [n.name for n in fleet.choose(nodes, "node")] == ["a1", "a2", "h1"]
    assert [n.name for n in fleet.choose(nodes, "gres")] == ["a1", "h1"]
    assert [n.name for n in fleet.choose(nodes, "node", "h100")] == ["h1"]
    assert [n.name for n in fleet.choose(nodes, "node", "nosuch")] == ["a1", "a2", "h1"]     # Slurm will refuse it


def test_slurm_refusals_are_translated() -> None:
    for stderr, words in (("sbatch: error: Batch job submission failed: Invalid qos specification", "the QOS"),
                          ("sbatch: error: Batch job submission failed: Invalid account or account/partition "
                           "combination specified", "the account"),
                          ("sinfo: error: Unable to contact slurm controller (connect failure)",
                           "cannot reach a Slurm controller")):
        error = slurm._translate("sbatch", stderr)
        assert isinstance(error, SlurmError) and words in error.message and error.hint
    # Unknown words: the first line is the message, the rest the hint; nothing was printed "above".
    error = slurm._translate("sbatch", "sbatch: error: something new\nsbatch: error: and why\n")
    assert (error.message, error.hint) == ("sbatch failed: sbatch: error: something new",
                                           "Slurm went on: sbatch: error: and why")
    assert slurm._translate("squeue", "squeue: odd").hint == ("that is all squeue said; scontrol ping shows "
                                                             "whether the controller answers")


# --- docker targets: pyxis or Slurm's OCI support ---

def test_the_container_commands_are_exact(tmp_path: Path) -> None:
    from kitbench.fleet import containers as fleet_containers

    env = {"KITBENCH_TARGET": "cuda126", "KITBENCH_IMAGE": "kitbench/cuda126:abc"}
    data = tmp_path / "data"
    pyxis = fleet_containers.command("pyxis", "dockerd://kitbench/cuda126:abc", env, data, tmp_path / "fleet")
    assert pyxis == ["srun", "--container-image=dockerd://kitbench/cuda126:abc",
                     f"--container-mounts={tmp_path}/fleet:/results,{data}:/data:ro", "--container-workdir=/tmp",
                     "env", "KITBENCH_TARGET=cuda126", "KITBENCH_IMAGE=kitbench/cuda126:abc",
                     "KITBENCH_RESULTS=/results", "HOME=/tmp", "KITBENCH_DATA=/data", "/opt/venv/bin/python"]
    oci = fleet_containers.command("oci", "/shared/bundles/cuda126-1ff995446493", env, None, tmp_path)
    assert oci == ["srun", "--container=/shared/bundles/cuda126-1ff995446493", "env", "KITBENCH_TARGET=cuda126",
                   "KITBENCH_IMAGE=kitbench/cuda126:abc", "KITBENCH_RESULTS=/results", "HOME=/tmp",
                   "/opt/venv/bin/python"]
    plan = fleet.plan_run(NODES, "node", fleet.SlurmOptions(gres="gpu:1"), "cuda126", "9ad5", oci, ["--quick"], {},
                          record_dir="/results/$SLURM_ARRAY_JOB_ID")
    assert ('srun --container=/shared/bundles/cuda126-1ff995446493 env KITBENCH_TARGET=cuda126 '
            'KITBENCH_IMAGE=kitbench/cuda126:abc KITBENCH_RESULTS=/results HOME=/tmp /opt/venv/bin/python -m kitbench '
            'run --force --out "/results/$SLURM_ARRAY_JOB_ID/$node.json" --quick') in plan.script
    assert "#SBATCH --gres=gpu:1" in plan.script


def test_the_oci_spec_suits_a_batch_task(tmp_path: Path) -> None:
    import shutil

    from kitbench.fleet import containers as fleet_containers

    if shutil.which("runc") is None:
        pytest.skip("runc is not installed (apt-get install runc)")
    config = fleet_containers.spec(["PATH=/opt/venv/bin:/usr/bin"], tmp_path / "fleet", tmp_path / "data")
    assert config["process"]["terminal"] is False and config["root"] == {"path": "rootfs", "readonly": False}
    assert "HOME=/tmp" in config["process"]["env"] and "PATH=/opt/venv/bin:/usr/bin" in config["process"]["env"]
    assert "network" not in {n["type"] for n in config["linux"]["namespaces"]}
    binds = {m["destination"]: m for m in config["mounts"] if m["type"] == "bind"}
    assert binds["/results"]["source"] == str(tmp_path / "fleet") and "rw" in binds["/results"]["options"]
    assert "ro" in binds["/data"]["options"]
    assert "/dev/kfd" not in binds


def test_a_rocm_target_gets_the_amd_devices_under_the_fleet(tmp_path: Path) -> None:
    """As `kitbench container` gives them to Docker: /dev/kfd and /dev/dri, with pyxis and with runc."""
    import shutil

    from kitbench.fleet import containers as fleet_containers

    pyxis = fleet_containers.command("pyxis", "dockerd://kitbench/rocm64:abc", {}, None, tmp_path, amd=True)
    assert pyxis[2] == f"--container-mounts={tmp_path}:/results,/dev/kfd:/dev/kfd,/dev/dri:/dev/dri"
    if shutil.which("runc") is None:
        pytest.skip("runc is not installed (apt-get install runc)")
    devices = tmp_path / "devices"      # /proc/devices of a ROCm node (kfd's major is the kernel's choice)
    devices.write_text("Character devices:\n  1 mem\n226 drm\n510 kfd\n\nBlock devices:\n  8 sd\n")
    config = fleet_containers.spec([], tmp_path, None, amd=True, proc_devices=devices)
    binds = {m["destination"]: m for m in config["mounts"] if m["type"] == "bind"}
    assert binds["/dev/kfd"]["source"] == "/dev/kfd" and binds["/dev/dri"]["source"] == "/dev/dri"
    allowed = [(r["major"], r["access"]) for r in config["linux"]["resources"]["devices"] if r["allow"]]
    assert (226, "rwm") in allowed and (510, "rwm") in allowed


@pytest.mark.docker
def test_a_docker_target_runs_for_real_through_slurms_oci_support(slurm_cluster: Path, results: Path,
                                                                   capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    docker = pytest.importorskip("docker")
    # The image .ci/run built: the same base and network, so the build here is all cache.
    base = os.environ.get("KITBENCH_TEST_BASE_IMAGE", "kitbench-ci/debian:bookworm")
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", base)
    monkeypatch.setenv("KITBENCH_DOCKER_NETWORK", "host")
    from kitbench.environments import targets
    from kitbench.rebuild import images

    # Both, as the sibling docker tests ask: the build (all cache) starts from the base image.
    for image, why in ((base, "the build starts from it (.ci/run makes it with debootstrap)"),
                       (images.image_tag(targets.get("cuda126")), "a bundle is exported from it")):
        try:
            docker.from_env().images.get(image)
        except Exception as exc:
            pytest.skip(f"image {image} is not here ({type(exc).__name__}): {why}")
    if not (slurm_cluster / "oci.conf").is_file():
        pytest.skip("runc is not installed, so the local cluster has no oci.conf")
    code = main(["fleet", "run", "cuda126", "--containers", "oci", "--per", "gres", "--json", "--",
                 "--quick", "--check", "availability", "--check", "moves"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    (task,) = out["tasks"]
    record = task["record"]
    assert record["status"] == "ok" and record["environment"]["target"] == "cuda126"
    assert record["environment"]["image_id"].startswith("sha256:")
    assert record["environment"]["base_image_id"].startswith("sha256:")     # the base it was built from, too
    assert (results / "bundles").is_dir()


def test_ddp_spans_the_job_s_nodes(slurm_cluster: Path, results: Path, mnist_root: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["fleet", "run", "cpu", "--venv", sys.prefix, "--json", "--", "--check", "ddp", "--quick",
                 "--nproc", "1", "--offline", "--data", str(mnist_root), "--limit", "2000"])
    out = _json(capsys)
    assert code == 0, out
    assert out["plan"]["span"] is True
    for task in out["tasks"]:
        (gloo,) = task["record"]["checks"]["ddp"]["runs"]
        assert (gloo["nodes"], gloo["world_sizes"]) == (3, [1])        # 1 process on each of 3 nodes
        (row,) = gloo["scaling"]
        assert row["world_size"] == 3 and row["identical"]
    script = Path(json.loads((results / out["job"] / "fleet.json").read_text())["script"]).read_text()
    assert "#SBATCH --nodes=3" in script and "#SBATCH --nodelist=n1,n2,n3" in script
    assert "--array" not in script and "srun --ntasks-per-node=1 --kill-on-bad-exit=1" in script
