"""The command line: argument parsing and output only. All work is in the library.

Every ``KitbenchError`` becomes ``ERROR: <message>`` and ``hint: <hint>`` on
stderr with the error's exit code, here and nowhere else.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from kitbench import __version__
from kitbench._signals import sigterm_raises
from kitbench.suite import runargs

if TYPE_CHECKING:
    from kitbench.fleet import runner as fleet

from kitbench.errors import (
    OPTIONAL_HINTS,
    KitbenchError,
    MissingDependency,
    SlurmError,
    Terminated,
    UsageError,
    clean,
    optional_hint,
)

_EPILOG_RUN = """\
examples:
  kitbench run                                  all checks on the best device found
  kitbench run --check mnist --model cnn --loop resident --epochs 2
  kitbench run --device cpu --quick --json      a fast run, the record on stdout
  kitbench run --data ~/datasets --offline      never download; fail if MNIST is absent

The record is written to --out, default a new results/<target>/<UTC time>-<id>.json
(KITBENCH_RESULTS moves the root; KITBENCH_TARGET names the target).
MNIST is read from --data, default KITBENCH_DATA or ~/.cache/kitbench/data.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(_did_you_mean(self, message), hint=f"see: {self.prog} --help")


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """argparse's message, or for a typo in a command or flag, the nearest right one."""
    import difflib
    import re

    choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if choice:
        word, known = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        kind = "command"
    else:
        flags = re.match(r"unrecognized arguments: (\S+)", message)
        if not flags or not flags.group(1).startswith("--"):
            return message
        word, kind = flags.group(1).partition("=")[0], "option"
        known = sorted({flag for p in _parsers(parser) for flag in p._option_string_actions if flag.startswith("--")})
        owners = [p.prog for p in _parsers(parser) if word in p._option_string_actions]
        if owners:      # another command's flag: "did you mean" would only name the word back
            return f"unknown option {word!r} for this command; it is an option of {', '.join(owners[:3])}"
    close = difflib.get_close_matches(word, known, n=1)
    return f"unknown {kind} {word!r}" + (f"; did you mean {close[0]!r}?" if close else f" ({message})")


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's, to name a flag that any of them takes."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kitbench", description="Reproducible PyTorch acceleration checks: what to install, "
                     "whether acceleration works, how fast.")
    parser.add_argument("--version", action="version", version=f"kitbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the suite (availability, tensor moves, MNIST) and write a record",
                         description="Run the kitbench suite and write one JSON record.", epilog=_EPILOG_RUN,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    runargs.add_arguments(run)

    install = sub.add_parser(
        "install-cmd", help="print the PyTorch install command for this machine (no torch needed)",
        description="Print the command that installs PyTorch with the best acceleration this machine can use, "
                    "the way pytorch.org's selector does, but detected, explained and pinned. Only the command "
                    "goes to stdout (pipe it to a shell); notes go to stderr.",
        epilog="examples:\n"
               "  kitbench install-cmd --explain                      what fits here, and why\n"
               "  kitbench install-cmd --release 2.4.0 --format selector --os windows --compute cu121\n"
               "  kitbench install-cmd --driver 535.104.05 --gpu-cc 6.1   answer for another machine\n"
                "  kitbench install-cmd --gpu-gfx gfx942 --explain       an AMD MI300X; --intel-gpu: an Intel GPU\n"
                "  kitbench install-cmd --os linux --python-version 3.10 --glibc 2.35   Ubuntu 22.04\n"
               "  eval \"$(kitbench install-cmd --package uv)\"\n"
               "environment (as uv's --torch-backend=auto reads them): UV_AMD_GPU_ARCHITECTURE=gfx1100 (or a\n"
               "comma-separated list) replaces the AMD GPUs found, UV_CUDA_DRIVER_VERSION the NVIDIA driver",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    install.add_argument("--release", default="stable",
                         help="X.Y.Z, stable or nightly (a dated record, Start Locally form) (default: stable)")
    install.add_argument("--package", default="pip", help="pip, conda or uv (default: pip)")
    install.add_argument("--compute", default="auto",
                         help="auto (detect), cpu, mps, cuXYZ, rocmX.Y or xpu (default: auto)")
    install.add_argument("--format", default="pinned", dest="fmt",
                         help="pinned (the previous-versions page: exact versions) or selector (Start Locally)")
    install.add_argument("--json", action="store_true", help="print command, compute, reasons, ... as JSON")
    install.add_argument("--explain", action="store_true",
                         help="show each probed fact with its source and each rejected alternative")
    install.add_argument("--refresh", action="store_true",
                         help="read the wheel and build facts from the indexes first (kitbench facts refresh)")
    machine = install.add_argument_group("answer for another machine")
    machine.add_argument("--os", help="linux, macos or windows")
    machine.add_argument("--arch", help="x86_64, aarch64 or arm64")
    machine.add_argument("--python-arch", help="the Python interpreter's arch (x86_64 under Rosetta)")
    machine.add_argument("--driver", help="NVIDIA driver version, e.g. 535.104.05")
    machine.add_argument("--gpu-cc", action="append", default=[], metavar="MAJOR.MINOR",
                         help="a GPU's compute capability: 8.6, 10.0, sm_86, sm_100, or 10 (a bare number "
                              "under 20 is a major version) (repeatable)")
    machine.add_argument("--gpu-gfx", action="append", default=[], metavar="GFX",
                         help="an AMD GPU's architecture, e.g. gfx942 (repeatable)")
    machine.add_argument("--intel-gpu", nargs="?", const=True, action="append", default=[], metavar="DEVICE_ID",
                         help="answer as if there were an Intel GPU; with its PCI device id (lspci -nn's 8086:XXXX, "
                              "e.g. 56a0), checked against the GPUs the XPU builds support (repeatable: an Arc "
                              "card beside a UHD iGPU)")
    machine.add_argument("--no-gpu", action="store_true", help="answer as if there were no GPU")
    machine.add_argument("--python", metavar="PATH", dest="python_path",
                         help="the interpreter torch goes into (default: the one running kitbench)")
    machine.add_argument("--python-version", metavar="X.Y[t]",
                         help="that Python's version, for another machine (3.13t: a free-threaded build)")
    machine.add_argument("--glibc", metavar="X.Y", help="the machine's glibc version (Linux)")
    machine.add_argument("--os-version", metavar="X.Y", help="the machine's macOS version")

    container = sub.add_parser(
        "container", help="build a docker target's image and run the suite in it",
        description="Build docker/Dockerfile for a docker target of envs/targets/ (cached: a change to kitbench's "
                    "code reuses the torch layers) and run `kitbench run` inside it with all GPUs.",
        epilog="arguments after -- go to `kitbench run` inside the container. "
               "environment: KITBENCH_BASE_IMAGE replaces the base image, KITBENCH_INDEX_URL the package index, "
               "KITBENCH_CA_BUNDLE adds a CA bundle for pip during the build (TLS-re-signing proxies), "
               "KITBENCH_GPUS=none runs without GPUs, KITBENCH_DOCKER_NETWORK sets the build and run network.")
    container.add_argument("target", help="a docker target, e.g. cuda126")
    container.add_argument("--build-only", action="store_true", help="build the image, do not run it")

    compare = sub.add_parser(
        "compare", help="compare run records: a table (or markdown, csv, json) and a plot",
        description="One row per record: target, machine, torch build, device, the MNIST epoch on CPU and on "
                    "the accelerator, the speedup, test accuracy and peak pinned bandwidth; beside it, what "
                    "differs in each environment from the first record's.",
        epilog="examples:\n  kitbench compare results/\n  kitbench compare 'results/*/*.json' --format markdown "
               "--plot compare.png", formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("inputs", nargs="+", metavar="RECORD_OR_DIR", help="record files, directories or globs")
    compare.add_argument("--format", default="table", dest="fmt", help="table, markdown, csv or json")
    compare.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw epoch times and bandwidth curves")
    compare.add_argument("--force", action="store_true", help="replace a file already at --plot")

    verify = sub.add_parser(
        "verify", help="did CANDIDATE reproduce REF? exit 0 if so, 1 if not, 2 if they cannot be compared",
        description="Compare every MNIST run of two records, paired by model, loop, device and batch size: the "
                    "parameter digests bit for bit where both ran deterministically on the same build and "
                    "hardware, loss curves and accuracies exactly on the same CPU build and threads, within a "
                    "stated tolerance elsewhere. Each pair's rule, and what was not compared, is printed.")
    verify.add_argument("reference", type=Path, metavar="REF")
    verify.add_argument("candidate", type=Path, metavar="CANDIDATE")
    verify.add_argument("--json", action="store_true", help="print the verdict as JSON")

    report = sub.add_parser(
        "report", help="one self-contained page (HTML or markdown) for any set of run records",
        description="Machines, availability, transfers, MNIST, the batch-size sweep, DDP, environments and "
                    "every record's file, sha256 and command line; a section appears when a record holds its "
                    "data. The HTML has inline SVG plots and needs no network, script or extra.",
        epilog="examples:\n  kitbench report results/\n  kitbench report results/fleet/1234 --format markdown "
               "-o report.md", formatter_class=argparse.RawDescriptionHelpFormatter)
    report.add_argument("inputs", nargs="+", metavar="RECORD_OR_DIR", help="record files, directories or globs")
    report.add_argument("-o", "--out", help="the page to write, or a directory to put it in (default report.html or "
                                            "report.md)")
    report.add_argument("--format", default="html", dest="fmt", help="html or markdown")
    report.add_argument("--force", action="store_true", help="replace a file that is not a kitbench report")

    _fleet_parser(sub)

    replay = sub.add_parser(
        "replay", help="rebuild RECORD's environment here, rerun its checks, verify: exit 0 reproduced, 1 not, "
                       "2 cannot rebuild", description="Rebuild a record's environment (exact versions, its "
                       "Python, hashes where known) in a fresh cached venv, run the same checks with the same "
                       "options and seed, write a new record naming the old one, and verify the two.")
    replay.add_argument("record", type=Path, metavar="RECORD")
    replay.add_argument("--out", help="the new record, or a directory to put it in (default: "
                                      "results/replay/<name>-replay-<time>.json)")

    probe = sub.add_parser("probe", help="print this machine's facts (no torch needed)",
                           description="Read OS, chip, Python arch, NVIDIA driver, GPUs, ROCm, WSL and "
                                       "container facts without importing torch.")
    probe.add_argument("--json", action="store_true", help="print JSON")

    facts = sub.add_parser("facts", help="the wheel and build facts install-cmd answers from",
                           description="install-cmd answers from facts baked into kitbench (envs/wheels.yaml, "
                                       "envs/releases/) and from a cache of the indexes themselves "
                                       "($XDG_CACHE_HOME/kitbench/facts/), which refresh fills.")
    verbs = facts.add_subparsers(dest="facts_command", required=True, parser_class=_Parser)
    verbs.add_parser("refresh", help="read PyPI (where pip reads) and PyTorch's index (KITBENCH_PYTORCH_INDEX) "
                                     "for torch, torchvision and torchaudio into the cache")
    return parser


def _once(values: Sequence[str] | None, default: Sequence[str]) -> tuple[str, ...]:
    """Repeated values run once, in the order first given."""
    return tuple(dict.fromkeys(values or default))


def _slurm_options(parser: argparse.ArgumentParser) -> None:
    slurm = parser.add_argument_group("Slurm (written into the job script as #SBATCH lines)")
    for name in ("partition", "account", "time", "gres", "constraint", "qos"):
        slurm.add_argument(f"--{name}", metavar=name.upper())
    slurm.add_argument("--sbatch-arg", dest="sbatch_args", action="append", default=[], metavar="ARG",
                       help="any other sbatch option, e.g. --sbatch-arg=--mem=4G (repeatable)")
    slurm.add_argument("--per", default="node", help="one task per node, or per distinct gres or feature set "
                                                     "(default: node)")
    slurm.add_argument("--timeout", type=float, metavar="SECONDS", help="stop waiting (the job runs on) after "
                       "this long (default: the job's time limit and 10 minutes)")
    slurm.add_argument("--dry-run", action="store_true", help="print the job script and submit nothing")
    slurm.add_argument("--json", action="store_true", help="print the gathered results as JSON")


def _fleet_parser(sub: Any) -> None:
    fleet = sub.add_parser(
        "fleet", help="install advice and the suite on every node of a Slurm cluster",
        description="Submit one Slurm job array (one task per node, or per node type), wait for it and gather "
                    "what every node wrote into one table. Results go to $KITBENCH_RESULTS/fleet/<jobid>/ "
                    "(default results/fleet/), which must be on storage every node shares.")
    verbs = fleet.add_subparsers(dest="fleet_command", required=True, parser_class=_Parser)
    probe = verbs.add_parser("probe", help="kitbench probe and install-cmd on every node (no torch needed)")
    probe.add_argument("--release", default="stable", help="the torch release to advise on (default: stable)")
    probe.add_argument("--python", action="append", default=[], metavar="[ARCH=]PATH",
                       help="the Python that runs kitbench on the nodes (default: this one; it must exist on every "
                            "node); ARCH=PATH for the nodes of another architecture")
    _slurm_options(probe)
    run = verbs.add_parser("run", help="a target's suite on every node; arguments after -- go to kitbench run",
                           epilog="example: kitbench fleet run cpu --partition gpu -- --quick --check availability")
    run.add_argument("target", help="a target of envs/targets/, e.g. cpu or cuda126")
    run.add_argument("--venv", action="append", default=[], metavar="[ARCH=]PATH",
                     help="a venv target's environment on shared storage (default: the checkout's .nox/<target>, "
                          "built once with nox if missing); ARCH=PATH for the nodes of another architecture "
                          "(default: built once through Slurm on one of them, in .nox/<arch>/<target>)")
    run.add_argument("--verify", action="store_true", help="check every record against the reference node's "
                                                          "(kitbench verify's rules)")
    run.add_argument("--reference", metavar="NODE", help="the reference node for --verify (default: the first ok)")
    run.add_argument("--containers", default="auto", help="a docker target's container support: pyxis "
                                                          "(srun --container-image), oci (srun --container, a bundle "
                                                          "exported from the image) or auto (default)")
    run.add_argument("--image", metavar="REF", help="with pyxis: the image enroot imports (default: "
                                                     "dockerd://<the image kitbench builds>)")
    _slurm_options(run)
    gather = verbs.add_parser("gather", help="gather a finished or detached fleet job")
    gather.add_argument("job", help="the Slurm job id")
    gather.add_argument("--verify", action="store_true")
    gather.add_argument("--reference", metavar="NODE")
    gather.add_argument("--json", action="store_true")


def _cmd_fleet(args: argparse.Namespace) -> int:
    from kitbench import _ui
    from kitbench.fleet import runner as fleet
    from kitbench.fleet import slurm

    if args.fleet_command == "gather":
        fleet.load_plan(args.job)       # an unknown job is said before Slurm is asked
        try:
            states = slurm.tasks(args.job)
        except SlurmError as error:
            # The records are on shared storage: a controller that is gone, or a machine
            # without Slurm that mounts them, still gathers what the tasks wrote.
            _ui.stderr_line(f"note: Slurm did not answer ({error.message}); each task's state is read from "
                            "the files it left")
            states = []
        summary, rows = fleet.gather(args.job, states, verify=args.verify, reference=args.reference)
        code = _ui.fleet_results(args.job, summary, rows, fleet.majority_notes(rows), args.json)
        _fleet_report(args.job, rows)
        return code
    # Every local input is checked before Slurm is asked anything: a refusal after sinfo (or a
    # build of minutes) is one a user waited for in vain.
    if args.fleet_command == "run":
        _check_fleet_run_local(args)
    else:
        from kitbench.advice import releases

        releases.release(args.release)      # the nodes' install-cmd would refuse it, each in its own row
        plain, named = fleet.per_arch(args.python, "--python")
        args.python = {**{arch: fleet.given_python(path, arch, "--python") for arch, path in named.items()},
                       None: fleet.probe_python(plain)}
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, not {args.timeout}",
                         hint="for example --timeout 3600")
    options = fleet.SlurmOptions(args.partition, args.account, args.time, args.gres, args.constraint, args.qos,
                                 tuple(args.sbatch_args))
    options.lines()         # refuse a bad value before asking Slurm anything
    if args.per not in fleet.PER:
        raise UsageError(f"unknown --per {args.per!r}", hint=f"choose one of: {', '.join(fleet.PER)}")
    chosen = [n.name for n in fleet.choose(slurm.nodes(args.partition), args.per, args.constraint)]
    if not chosen:
        raise UsageError("no usable node" + (f" in partition {args.partition!r}" if args.partition else ""),
                         hint="sinfo --Node shows each node's state; down and drained nodes are left out")
    log = _ui.stderr_line
    plan: fleet.Plan
    if args.fleet_command == "probe":
        arches = slurm.node_arches(chosen)
        if len(fleet.by_arch(arches)) > 1:      # one is in the probe's table; two change how the job runs
            log(fleet.describe_arches(arches))
        plan = fleet.plan_probe(chosen, args.per, options, fleet.probe_pythons(args.python, arches),
                                ["--release", args.release])
    else:
        plan = _fleet_run_plan(args, chosen, options, log, dry_run=args.dry_run)
    if args.dry_run:
        print(plan.script, end="")
        return 0
    job = fleet.submit(plan)
    log(f"submitted job {job}: {len(chosen)} task(s) on {', '.join(chosen)}; results in {plan.results / job}")
    states = fleet.wait(job, 1 if plan.span else len(chosen), _ui.fleet_task_line(["all nodes"] if plan.span
                                                                                   else chosen),
                        timeout_s=args.timeout)
    _, rows = fleet.gather(job, states, verify=getattr(args, "verify", False),
                           reference=getattr(args, "reference", None))
    code = _ui.fleet_results(job, plan.summary(), rows, fleet.majority_notes(rows), args.json)
    _fleet_report(job, rows)
    return code


def _fleet_report(job: str, rows: list[fleet.TaskResult]) -> None:
    """The job's report beside its records; a page that cannot be written never fails the job."""
    from kitbench.fleet import runner as fleet

    try:
        path = fleet.write_report(job, rows)
    except KitbenchError as error:
        print(f"note: no report written: {error.message}", file=sys.stderr)
        return
    if path is not None:
        print(f"report: {clean(path)}", file=sys.stderr)


def _fleet_run_plan(args: argparse.Namespace, chosen: list[str], options: fleet.SlurmOptions,
                    log: Callable[[str], None], dry_run: bool) -> fleet.Plan:
    """The job a run would submit. A dry run builds nothing (no environment, no image, no
    bundle): it shows the script with the names those would have."""
    from kitbench.environments import targets
    from kitbench.fleet import runner as fleet
    from kitbench.fleet import slurm

    target = targets.get(args.target)
    if target.kind == "venv":
        arches = slurm.node_arches(chosen)
        if len(fleet.by_arch(arches)) > 1:      # one is in the probe's table; two change how the job runs
            log(fleet.describe_arches(arches))
        pythons = fleet.venv_pythons(target.name, args.venv, arches, options, log, build=not dry_run)
        environment = {k: v for k, v in (("KITBENCH_DATA", os.environ.get("KITBENCH_DATA")),) if v}
        return fleet.plan_run(chosen, args.per, options, target.name, target.sha256,
                              [str(next(iter(pythons.values())))], args.run_args, environment,
                              pythons={arch: str(python) for arch, python in pythons.items()})
    if target.kind != "docker":
        raise UsageError(f"target {target.name!r} is a {target.kind} target: it cannot run on a Slurm cluster",
                         hint="fleet run takes venv and docker targets")
    from kitbench.fleet import containers as fleet_containers
    from kitbench.rebuild import containers
    from kitbench.suite import data

    runtime = fleet_containers.detect(args.containers)
    amd = target.compute.startswith("rocm")
    mnist = data.default_root().resolve()
    shared_data = mnist if (mnist / "MNIST" / "raw").is_dir() else None
    results = fleet.fleet_root()
    if dry_run:
        tag, image_id, base_id = containers.image_tag(target), "<image id>", "<base image id>"
        log(f"dry run: the image {tag} is not built" + ("" if runtime == "pyxis" else ", nor its bundle exported"))
    else:
        built = containers.build(target, log=log)
        tag, image_id, base_id = built.tag, built.image_id, containers.base_image_id(built)
        if runtime != "pyxis" or args.image is None:
            fleet.refuse_foreign(slurm.node_arches(chosen), built.arch, f"the image {built.tag}")
    if runtime == "pyxis":
        where = args.image or f"dockerd://{tag}"
    elif dry_run:
        where = str(fleet_containers.bundle_folder(target.name, image_id, results))
    else:
        where = str(fleet_containers.bundle(image_id, target.name, results, shared_data, log, amd))
    environment = {"KITBENCH_TARGET": target.name, "KITBENCH_MANIFEST_SHA256": target.sha256,
                   "KITBENCH_IMAGE": tag, "KITBENCH_IMAGE_ID": image_id, "KITBENCH_BASE_IMAGE_ID": base_id}
    prefix = fleet_containers.command(runtime, where, environment, shared_data, results, amd)
    return fleet.plan_run(chosen, args.per, options, target.name, target.sha256, prefix, args.run_args, {},
                          record_dir=f"{containers.RESULTS_INSIDE}/$SLURM_ARRAY_JOB_ID")


def _cmd_run(args: argparse.Namespace) -> int:
    from kitbench import _ui
    from kitbench.records import record as records
    from kitbench.suite import runner as suite
    from kitbench.suite.checks import DEFAULT_CHECKS
    from kitbench.suite.checks.base import DEFAULT_LOOPS, SWEEP, Options

    runargs.refuse_combinations(args)
    sizes = args.batch_size or (64,)
    options = Options(
        checks=_once(args.checks, DEFAULT_CHECKS), device=args.device, data=args.data,
        offline=args.offline, quick=args.quick, models=_once(args.models, ("fnn",)),
        loops=_once(args.loops, DEFAULT_LOOPS), epochs=args.epochs, batch_size=sizes[0],
        sweep=SWEEP if args.sweep else (sizes if len(sizes) > 1 else ()), seed=args.seed,
        threads=args.threads, train_limit=args.limit if args.limit is not None else (6000 if args.quick else None),
        lr=args.lr, nproc=args.nproc, nnodes=args.nnodes, rdzv_endpoint=args.rdzv_endpoint,
        ddp_timeout=args.ddp_timeout, deterministic=args.deterministic)
    finished = suite.run(options, args.out, progress=_ui.progress(), force=args.force)
    if args.json:
        print(records.to_json(finished.record), end="")
    else:
        _ui.run_summary(finished.record, str(finished.path))
    return 0 if finished.record["status"] == "ok" else 1


def _check_fleet_run_local(args: argparse.Namespace) -> None:
    """fleet run's inputs that need no cluster: the target, the arguments after --, and the
    options that belong to the target's kind (a venv's --venv, a docker target's --containers)."""
    from kitbench.environments import targets
    from kitbench.fleet import containers as fleet_containers
    from kitbench.fleet import runner as fleet

    _check_fleet_run_args(args.run_args)
    target = targets.get(args.target)
    if args.containers not in fleet_containers.RUNTIMES:
        raise UsageError(f"unknown --containers {args.containers!r}",
                         hint=f"choose one of: {', '.join(fleet_containers.RUNTIMES)}")
    if target.kind == "venv":
        given = [flag for flag, value in (("--containers", args.containers != "auto"), ("--image", args.image))
                 if value]
        if given:
            raise UsageError(f"{' and '.join(given)} only act{'' if len(given) > 1 else 's'} on docker targets; "
                             f"{target.name} is a venv target",
                             hint="drop them, or name a docker target such as cuda126")
        plain, _ = fleet.per_arch(args.venv, "--venv")
        fleet.venv_folder(target.name, plain)
    elif target.kind != "docker":
        raise UsageError(f"target {target.name!r} is a {target.kind} target: it cannot run on a Slurm cluster",
                         hint="fleet run takes venv and docker targets")
    elif args.venv:
        raise UsageError(f"--venv only acts on venv targets; {target.name} is a docker target",
                         hint="drop it (a docker target runs in its image), or name a venv target such as cpu")
    elif args.containers == "oci" and args.image is not None:
        raise UsageError("--image only acts with pyxis; Slurm's OCI support runs a bundle kitbench exports",
                         hint="drop --image, or use --containers pyxis")


def _check_fleet_run_args(run_args: Sequence[str]) -> None:
    """Arguments after -- are checked by `kitbench run`'s own parser before Slurm is asked anything;
    the fleet owns where records go and how ranks meet, so those options are refused."""
    parsed = _build_parser().parse_args(["run", *run_args])
    runargs.refuse_combinations(parsed)
    owned = [flag for flag, value in (("--out", parsed.out), ("--force", parsed.force), ("--nnodes", parsed.nnodes),
                                      ("--rdzv-endpoint", parsed.rdzv_endpoint)) if value]
    if owned:
        raise UsageError(f"fleet run sets {', '.join(owned)} itself; after -- they are refused",
                         hint="each node's record is results/fleet/<job>/<node>.json; drop them after --")


def _cmd_container(args: argparse.Namespace) -> int:
    from kitbench.environments import targets
    from kitbench.rebuild import containers

    target = targets.get(args.target)
    if target.kind != "docker":
        raise UsageError(f"target {target.name!r} is a {target.kind} target, not a docker one",
                         hint=f"run it with: nox -s {target.name}")
    if not args.build_only:
        containers.host_data(args.run_args)     # no MNIST and --offline: said before a build of minutes
    result = containers.build(target, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(f"image {result.tag} ({result.image_id[:19]}, {result.size_bytes / 2**30:.2f} GiB) "
          f"from {result.base_image}", file=sys.stderr)
    if args.build_only:
        return 0
    return containers.run(target, result, args.run_args, log=lambda line: print(line, flush=True))


def _cmd_install(args: argparse.Namespace) -> int:
    import dataclasses

    from kitbench.advice import facts, selector, wheels
    from kitbench.errors import NetworkError
    from kitbench.machine import probe

    for name, value, choices in (("--os", args.os, selector.OSES), ("--arch", args.arch, selector.ARCHES),
                                 ("--python-arch", args.python_arch, selector.ARCHES)):
        if value is not None:
            selector.check_choice(name, value, choices)
    if args.refresh or facts.due():
        try:
            _refresh()
        except NetworkError as error:
            # Advice from the facts at hand beats none: the refresh's failure is a note, not the answer.
            print(f"note: the facts were not refreshed: {error.message}; answering from those at hand",
                  file=sys.stderr)
    machine = probe.override(probe.probe(), os=args.os, arch=args.arch, python_arch=args.python_arch,
                             driver=args.driver, gpu_capabilities=args.gpu_cc, no_gpu=args.no_gpu,
                             gpu_gfx=args.gpu_gfx, intel_gpu=args.intel_gpu,
                             python_path=args.python_path, python_version=args.python_version, glibc=args.glibc,
                             os_version=args.os_version)
    chosen = selector.select(machine, release_spec=args.release, package=args.package, compute=args.compute,
                             fmt=args.fmt)
    origin = next((d.origin for d in facts.derived() if d.version == chosen.release), None)
    if origin is not None:
        # Not envs/wheels.yaml: this release's tags and builds were read into the cache by a refresh.
        chosen.facts["derived_from"] = {"index": origin["index"], "read": origin["read"]}
        chosen.facts["wheels"].update(source=f"{origin['wheels_from']} (the fact cache)", read=origin["wheels_read"])
    stale = facts.stale_note(wheels.load().read)
    if stale:
        chosen.notes.append(stale)
    if args.json:
        print(json.dumps(dataclasses.asdict(chosen), indent=2))
        return 0
    if args.explain:
        sources = chosen.facts["sources"]
        for key in ("os", "os_version", "arch", "python_arch", "python_version", "libc", "libc_version", "driver",
                    "gpu_capabilities", "rocm", "amd_gpus", "intel_gpus", "wsl", "container"):
            if key.startswith("libc") and chosen.os != "linux":
                continue
            value = chosen.facts[key]
            shown = ", ".join(value) if isinstance(value, list) else value
            where = sources.get({"gpu_capabilities": "gpus", "libc_version": "libc"}.get(key, key), "probe")
            print(f"# {key}: {shown if shown not in (None, '') else 'none'}  [{where}]", file=sys.stderr)
        wheel_facts = chosen.facts["wheels"]
        assumed = " (this build is not on PyPI: assumed_from pypi, the same release's PyPI wheels)" \
            if wheel_facts["assumed_from"] else ""
        print(f"# wheels: {wheel_facts['source']}, read {wheel_facts['read']}{assumed}", file=sys.stderr)
        for line in chosen.rejected:
            print(f"# rejected {line}", file=sys.stderr)
    for line in chosen.reasons:
        print(f"# {line}", file=sys.stderr)
    for line in chosen.notes:
        print(f"note: {line}", file=sys.stderr)
    print(chosen.command)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import dataclasses

    from kitbench import _ui
    from kitbench.reading import compare

    if args.fmt not in ("table", "markdown", "csv", "json"):
        raise UsageError(f"unknown format {args.fmt!r}", hint="choose one of: table, markdown, csv, json")
    if args.plot:
        from kitbench.reading import plots

        plots.check_target(args.plot, args.force)
    skipped: list[Path] = []
    loaded = compare.load(args.inputs, skipped)
    if args.plot:
        plots.check_count(len(loaded))      # before any output: nothing half done
    if skipped:
        print(f"note: skipped {len(skipped)} *.json file(s) that are not run records (fleet plans, probe and "
              f"install JSON, image bundles), e.g. {clean(skipped[0])}", file=sys.stderr)
    table = compare.rows(loaded)
    if args.fmt == "json":
        print(json.dumps([dataclasses.asdict(r) for r in table], indent=2))
    else:
        _ui.comparison(table, args.fmt)
    if args.plot:
        plots.comparison(loaded, table, args.plot, args.force)
        print(f"plot: {clean(args.plot)}", file=sys.stderr)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    import dataclasses

    from kitbench.reading import compare
    from kitbench.records import record as records

    (reference, ref_sha), (candidate, cand_sha) = (records.read_hashed(p) for p in (args.reference, args.candidate))
    compare.refuse_same_run([compare.Loaded(args.reference, reference, ref_sha),
                             compare.Loaded(args.candidate, candidate, cand_sha)])
    verdict = compare.verify(reference, candidate)
    if args.json:
        print(json.dumps({**dataclasses.asdict(verdict), "reproduced": verdict.reproduced}, indent=2))
    else:
        # Model names, packages and settings come from the records: data, shown escaped.
        print(verdict.verdict.upper() if not verdict.reproduced else verdict.verdict,
              f": {clean(verdict.first_divergence)}" if verdict.first_divergence else "", sep="")
        for c in verdict.comparisons:
            detail = f": {c.detail}" if c.detail else ""
            print(clean(f"  {'equal' if c.equal else 'DIFFERS'} ({c.rule}): {c.quantity}{detail}"))
        for line in verdict.differences:
            print(f"  environment differs: {clean(line)}")
        for line in verdict.rules:
            print(f"  rule: {clean(line)}")
        print(clean(f"  not compared: {'; '.join(verdict.not_compared)}"))
    return 0 if verdict.reproduced else 1


def _cmd_replay(args: argparse.Namespace) -> int:
    from kitbench.machine.probe import probe
    from kitbench.rebuild import replay

    outcome = replay.replay(args.record, args.out, probe(), lambda line: print(f"replay: {line}", file=sys.stderr))
    for note in outcome.notes:
        print(f"note: {clean(note)}")
    for line in outcome.differences:
        print(f"environment differs: {clean(line)}")
    print(clean(f"{outcome.verdict if outcome.reproduced else outcome.verdict.upper()}"
                f"{f': {outcome.first_divergence}' if outcome.first_divergence else ''} ({outcome.record})"))
    return 0 if outcome.reproduced else 1


def _cmd_report(args: argparse.Namespace) -> int:
    from kitbench import _files
    from kitbench.reading import report

    built = report.build(args.inputs, args.fmt)
    out = _files.destination(args.out, report.default_name(args.fmt), UsageError) if args.out else \
        Path(report.default_name(args.fmt))
    report.write(out, built.text, args.force)
    if built.skipped:
        print(f"note: skipped {len(built.skipped)} *.json file(s) that are not run records, "
              f"e.g. {clean(built.skipped[0])}", file=sys.stderr)
    print(f"report: {clean(out)} ({built.records} records, sections: {', '.join(built.sections)})")
    return 0


def _refresh() -> None:
    from kitbench import _http
    from kitbench.advice import facts, indexes

    def report(done: indexes.Outcome) -> None:
        state = "unchanged (304)" if done.status == 304 else f"{done.releases} releases"
        where = _http.shown(done.source.url)        # an index URL may carry a token, as pip takes it
        print(f"# {done.source.kind} {done.source.package}: {state}, {done.seconds:.2f} s  [{where}]", file=sys.stderr)

    indexes.refresh(done=report)
    for rel in facts.derived():
        print(f"# torch {rel.version} with torchvision {rel.torchvision}: {', '.join(rel.computes) or 'no builds'}"
              " (derived from the index)", file=sys.stderr)
    print(f"facts: {facts.cache_dir()}", file=sys.stderr)


def _cmd_facts(args: argparse.Namespace) -> int:
    _refresh()
    return 0


def _cmd_probe(args: argparse.Namespace) -> int:
    import dataclasses

    from kitbench.machine.probe import probe

    facts = dataclasses.asdict(probe())
    if args.json:
        print(json.dumps(facts, indent=2))
        return 0
    sources = facts.pop("sources")
    for key, value in facts.items():
        if key == "gpus":
            value = ", ".join(f"{g['index']}: {g['name']} (sm {g['capability']})" for g in value) or "none"
        elif key == "amd_gpus":
            value = ", ".join(f"{g['index']}: {g['gfx'] or 'gfx unknown'}"
                              + (f" (PCI {g['device_id']})" if g["device_id"] else "") for g in value) or "none"
        elif key == "intel_gpus":
            value = ", ".join(f"{g['address']}: {g['device_id'] or '?'}" for g in value) or "none"
        where = sources.get("libc" if key == "libc_version" else key)
        note = f"  [{where}]" if where else ""
        print(f"{key:15} {value}{note}")
    return 0


def _install_hint(hint: str) -> str:
    """The hint with this machine's install-cmd answer in it."""
    from kitbench.advice import selector
    from kitbench.errors import INSTALL_CMD_WORDS
    from kitbench.machine.probe import probe

    try:
        command = selector.select(probe()).command
    except KitbenchError:
        return hint
    return hint.replace(INSTALL_CMD_WORDS, f"`{command}` (install-cmd's answer for this machine)")


_COMMANDS: dict[str, Any] = {"run": _cmd_run, "probe": _cmd_probe, "container": _cmd_container, "fleet": _cmd_fleet,
                             "install-cmd": _cmd_install, "compare": _cmd_compare, "verify": _cmd_verify,
                             "replay": _cmd_replay, "report": _cmd_report, "facts": _cmd_facts}


_MAX_ARGUMENT = 4096        # PATH_MAX: no name, path or value kitbench takes is longer


EXIT_PIPE = 141         # 128 + SIGPIPE, as a shell reports a reader that went away (git does the same)
EXIT_IO = 74            # sysexits' EX_IOERR: neither of verify's meanings (0 same, 1 different)


def main(argv: Sequence[str] | None = None) -> int:
    with sigterm_raises():
        try:
            code = _main(argv)
            sys.stdout.flush()      # here, not at interpreter exit, where an error would be a traceback
            return code
        except BrokenPipeError:
            # The reader went away (`kitbench compare ... | head -1`): nothing to say, and nowhere to say it.
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_PIPE
        except OSError as exc:
            # The library turns every OSError of its own into a KitbenchError: one reaching here is
            # writing the output (stdout on a full disk, /dev/full, a revoked terminal).
            with contextlib.suppress(OSError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            with contextlib.suppress(OSError):
                print(f"ERROR: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_IO
        except KeyboardInterrupt as stop:
            code = Terminated.exit_code if isinstance(stop, Terminated) else 130
            words = list(sys.argv[1:] if argv is None else argv)
            command = next((w for w in words if not w.startswith("-")), "")
            # Only `run` writes a record (one that exists already says so itself, via Interrupted).
            what = " before a record was written" if command == "run" else f": kitbench {command}".rstrip(": ")
            print(f"ERROR: {'terminated (SIGTERM)' if code == 143 else 'interrupted'}{what}", file=sys.stderr)
            return code


def _main(argv: Sequence[str] | None) -> int:
    error: KitbenchError
    words = list(sys.argv[1:] if argv is None else argv)
    # Only `container` and `fleet run` take arguments after "--" (for the `kitbench run` they start).
    passed = words[words.index("--") + 1:] if "--" in words else []
    words = words[:words.index("--")] if "--" in words else words
    try:
        for word in words + passed:
            if len(word) > _MAX_ARGUMENT:
                raise UsageError(f"an argument of {len(word):,} characters ({word[:40]!r}...) is longer than any "
                                 f"kitbench takes ({_MAX_ARGUMENT})")
        args = _build_parser().parse_args(words)
        takes_run_args = args.command == "container" or (args.command == "fleet" and args.fleet_command == "run")
        if passed and not takes_run_args:
            raise UsageError(f"unexpected arguments after --: {' '.join(passed)[:200]}")
        args.run_args = passed
        code: int = _COMMANDS[args.command](args)
        return code
    except ModuleNotFoundError as missing:
        root = (missing.name or "").partition(".")[0]
        if root not in OPTIONAL_HINTS:
            raise
        error = MissingDependency(root, f"kitbench {words[0] if words else ''}".strip(), optional_hint(root))
    except KitbenchError as caught:
        error = caught
    except OSError as failed:       # a results root that cannot be written, a full disk: never a traceback
        if isinstance(failed, BrokenPipeError) or not failed.filename:
            raise       # writing the output itself (a closed pipe, /dev/full): main's to answer, with its codes
        error = KitbenchError(f"{failed.filename}: {failed.strerror or failed}", hint="check that the folder "
                              "exists, is writable and has room (KITBENCH_RESULTS moves the results, KITBENCH_DATA "
                              "the data)")
    if isinstance(error, MissingDependency) and error.module in ("torch", "torchvision"):
        error.hint = _install_hint(error.hint or "")
    # Messages quote records, paths and programs' words: data, escaped here for every error at once.
    print(f"ERROR: {clean(error.message)}", file=sys.stderr)
    if error.hint:
        print(f"hint: {clean(error.hint)}", file=sys.stderr)
    return error.exit_code
