"""The fleet: install advice and the suite on every node of a Slurm cluster, by Slurm itself.

One job array, one task per node (or per distinct GRES or feature set). The
array is submitted held, each task is pinned to its node (``scontrol update
JobId=J_i NodeList=...``), then released: Slurm runs and schedules everything,
kitbench only renders the job script, watches the tasks and gathers what they
wrote to ``results/fleet/<jobid>/<node>.*`` on shared storage.

Here the job runs start to end: the nodes chosen, the job planned (with the
environment, image or bundle it needs built first), submitted, watched, gathered.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kitbench import _files
from kitbench.environments.targets import Target
from kitbench.errors import Interrupted, KitbenchError, SlurmError, Terminated, UsageError
from kitbench.fleet import containers, slurm
from kitbench.fleet.jobscript import Plan, SlurmOptions, check_per, choose, fleet_root, plan_probe, plan_run
from kitbench.fleet.pythons import by_arch, describe_arches, probe_pythons, refuse_foreign, venv_pythons
from kitbench.fleet.results import TaskResult, gather, load_plan
from kitbench.machine.builds import build
from kitbench.rebuild import containers as suite_in_image
from kitbench.rebuild import images
from kitbench.records import record as records
from kitbench.suite import data

Log = Callable[[str], None]


def usable_nodes(per: str, options: SlurmOptions) -> list[str]:
    """The nodes the job runs on: each usable one, or one per distinct GRES or feature set.
    Slurm's options are checked before sinfo is asked anything."""
    options.lines()
    check_per(per)
    chosen = [n.name for n in choose(slurm.nodes(options.partition), per, options.constraint)]
    if not chosen:
        raise UsageError(
            "no usable node" + (f" in partition {options.partition!r}" if options.partition else ""),
            hint="sinfo --Node shows each node's state; down and drained nodes are left out",
        )
    return chosen


def _arches(nodes: Sequence[str], log: Log) -> dict[str, str | None]:
    arches = slurm.node_arches(nodes)
    if len(by_arch(arches)) > 1:  # one is in the probe's table; two change how the job runs
        log(describe_arches(arches))
    return arches


def plan_probe_job(
    nodes: Sequence[str], per: str, options: SlurmOptions, pythons: dict[str | None, Path], release: str, log: Log
) -> Plan:
    """The probe job: ``kitbench probe`` and ``install-cmd --release`` on each node, by the Python
    given for its architecture (``pythons[None]``: the plain one)."""
    arches = _arches(nodes, log)
    return plan_probe(nodes, per, options, probe_pythons(pythons, arches), ["--release", release])


def plan_run_job(
    nodes: Sequence[str],
    per: str,
    options: SlurmOptions,
    target: Target,
    run_args: Sequence[str],
    log: Log,
    *,
    venvs: Sequence[str] = (),
    runtime: str = "auto",
    image: str | None = None,
    dry_run: bool = False,
) -> Plan:
    """The job a run would submit, with what it runs in built first: a venv target's environment
    for each architecture, a docker target's image (and, for Slurm's OCI, its bundle). A dry run
    builds nothing: it shows the script with the names those would have."""
    if target.kind == "venv":
        pythons = venv_pythons(target.name, venvs, _arches(nodes, log), options, log, build=not dry_run)
        environment = {k: v for k, v in (("KITBENCH_DATA", os.environ.get("KITBENCH_DATA")),) if v}
        return plan_run(
            nodes,
            per,
            options,
            target.name,
            target.sha256,
            [str(next(iter(pythons.values())))],
            run_args,
            environment,
            pythons={arch: str(python) for arch, python in pythons.items()},
        )
    if target.kind != "docker":
        raise UsageError(
            f"target {target.name!r} is a {target.kind} target: it cannot run on a Slurm cluster",
            hint="fleet run takes venv and docker targets",
        )
    return _plan_docker(nodes, per, options, target, run_args, log, runtime, image, dry_run)


def _plan_docker(
    nodes: Sequence[str],
    per: str,
    options: SlurmOptions,
    target: Target,
    run_args: Sequence[str],
    log: Log,
    runtime: str,
    image: str | None,
    dry_run: bool,
) -> Plan:
    runtime = containers.detect(runtime)
    amd = build(target.compute).kind == "rocm"
    mnist = data.default_root().resolve()
    shared_data = mnist if (mnist / "MNIST" / "raw").is_dir() else None
    results = fleet_root()
    if dry_run:
        tag, image_id, base_id = images.image_tag(target), "<image id>", "<base image id>"
        log(f"dry run: the image {tag} is not built" + ("" if runtime == "pyxis" else ", nor its bundle exported"))
    else:
        built = images.build(target, log=log)
        tag, image_id, base_id = built.tag, built.image_id, images.base_image_id(built)
        if runtime != "pyxis" or image is None:
            refuse_foreign(slurm.node_arches(nodes), built.arch, f"the image {built.tag}")
    if runtime == "pyxis":
        where = image or f"dockerd://{tag}"
    elif dry_run:
        where = str(containers.bundle_folder(target.name, image_id, results))
    else:
        where = str(containers.bundle(image_id, target.name, results, shared_data, log, amd))
    environment = {
        "KITBENCH_TARGET": target.name,
        "KITBENCH_MANIFEST_SHA256": target.sha256,
        "KITBENCH_IMAGE": tag,
        "KITBENCH_IMAGE_ID": image_id,
        "KITBENCH_BASE_IMAGE_ID": base_id,
    }
    prefix = containers.command(runtime, where, environment, shared_data, results, amd)
    return plan_run(
        nodes,
        per,
        options,
        target.name,
        target.sha256,
        prefix,
        run_args,
        {},
        record_dir=f"{suite_in_image.RESULTS_INSIDE}/$SLURM_ARRAY_JOB_ID",
    )


def launch(
    plan: Plan,
    on_change: Callable[[slurm.TaskState], None],
    log: Log,
    *,
    timeout_s: float | None = None,
    verify: bool = False,
    reference: str | None = None,
) -> tuple[str, list[TaskResult]]:
    """Submit ``plan``, wait for its tasks (see ``wait``) and gather them: the job id and its rows."""
    job = submit(plan)
    log(f"submitted job {job}: {len(plan.nodes)} task(s) on {', '.join(plan.nodes)}; results in {plan.results / job}")
    states = wait(job, 1 if plan.span else len(plan.nodes), on_change, timeout_s=timeout_s)
    _, rows = gather(job, states, verify=verify, reference=reference)
    return job, rows


def gather_job(
    job: str, log: Log, *, verify: bool = False, reference: str | None = None
) -> tuple[dict[str, Any], list[TaskResult]]:
    """A finished or detached job gathered: its saved plan and a row per task. The records are on
    shared storage: a controller that is gone, or a machine without Slurm that mounts them, still
    gathers what the tasks wrote."""
    load_plan(job)  # an unknown job is said before Slurm is asked
    try:
        states = slurm.tasks(job)
    except SlurmError as error:
        log(f"note: Slurm did not answer ({error.message}); each task's state is read from the files it left")
        states = []
    return gather(job, states, verify=verify, reference=reference)


def submit(plan: Plan) -> str:
    """Write the job script beside the logs, submit it held, pin each task, release: the job id."""
    logs = plan.results / "logs"
    try:
        logs.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        script = logs / f"{stamp}-{plan.action}.sh"
    except OSError as exc:
        raise KitbenchError(
            f"cannot write the job script under {logs}: {exc.strerror or exc}",
            hint="KITBENCH_RESULTS must be a writable directory on storage every node shares",
        ) from None
    _files.write(script, plan.script)
    job = slurm.submit_held(str(script))
    try:
        for index, node in enumerate(() if plan.span else plan.nodes):
            slurm.pin(job, index, node)
        _write_plan(job, plan, script)
        slurm.release(job)
    except BaseException:
        _cancel_quietly(job)
        raise
    return job


def _write_plan(job: str, plan: Plan, script: Path) -> None:
    folder = plan.results / job
    folder.mkdir(parents=True, exist_ok=True)
    _files.write(
        folder / "fleet.json",
        json.dumps({"job": job, **plan.summary(), "script": str(script), "submitted_at": records.utc_now()}, indent=2)
        + "\n",
    )


def _cancel_quietly(job: str) -> None:
    with contextlib.suppress(SlurmError):
        slurm.cancel(job)


WAIT_GRACE_S = 600.0  # beyond the job's time limit: the queue, and the last files reaching shared storage
POLL_MAX_S = 30.0


def _launch_held(task: slurm.TaskState) -> bool:
    """Whether Slurm put the task back in the queue held after slurmd could not launch it: it starts again only
    when someone releases it, so waiting ends nothing (scontrol says launch_failed_requeued_held, squeue spaces)."""
    return not task.done and (task.reason or "").replace(" ", "_").lower() == "launch_failed_requeued_held"


def wait(
    job: str,
    count: int,
    on_change: Callable[[slurm.TaskState], None],
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    timeout_s: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> list[slurm.TaskState]:
    """Poll the array until every task has ended, reporting each change of state.

    Polls back off from ``poll_s`` to ``POLL_MAX_S`` while nothing changes. The wait is
    bounded by ``timeout_s``, else by the job's own time limit plus ``WAIT_GRACE_S``; past
    it the job is left running and ``SlurmError`` says how to gather it later. A task Slurm holds after a failed
    launch ends the wait once the rest have ended, as no wait would. Ctrl-C or
    SIGTERM cancels the array (scancel) and raises ``Interrupted``; the records that
    finished stay where they are."""
    seen: dict[int, str] = {}
    started = clock()
    delay = poll_s
    try:
        while True:
            states = slurm.tasks(job)
            changed = False
            for task in states:
                if seen.get(task.index) != task.state:
                    seen[task.index] = task.state
                    changed = True
                    on_change(task)
            if len(states) >= count and all(t.done for t in states):
                return states
            if not states and seen:
                return states  # forgotten by the controller, no accounting: the files say the rest
            held = [t for t in states if _launch_held(t)]
            if held and len(states) >= count and all(t.done or t in held for t in states):
                which = ", ".join(f"{t.index}{f' on {t.node}' if t.node else ''}" for t in held)
                raise SlurmError(
                    f"job {job} cannot end: Slurm held task{'s' if len(held) > 1 else ''} {which} after "
                    f"{'their' if len(held) > 1 else 'its'} launch failed (launch_failed_requeued_held); "
                    "it is left held",
                    hint=f"slurmd's log on the node says why; once mended, scontrol release {job} and kitbench fleet "
                    f"gather {job} (or scancel {job})",
                    command="fleet run",
                )
            limit = timeout_s
            if limit is None:
                limit = next((t.time_limit_s + WAIT_GRACE_S for t in states if t.time_limit_s is not None), None)
            waited = clock() - started
            if limit is not None and waited >= limit:
                raise SlurmError(
                    f"job {job} has not finished after {waited:.0f} s"
                    f"{' (--timeout)' if timeout_s is not None else ' (its time limit and a margin)'}; "
                    "it is left running",
                    hint=f"kitbench fleet gather {job} once it ends; scancel {job} stops it",
                    command="fleet run",
                )
            delay = poll_s if changed else min(delay * 2, POLL_MAX_S)
            sleep(delay if limit is None else max(0.0, min(delay, limit - waited)))
    except KeyboardInterrupt as stop:
        _cancel_quietly(job)
        code = Terminated.exit_code if isinstance(stop, Terminated) else 130
        raise Interrupted(
            f"interrupted: job {job} cancelled (scancel); finished records are kept",
            hint=f"kitbench fleet gather {job} shows what finished",
            exit_code=code,
        ) from None
