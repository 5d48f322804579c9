"""The command line: dispatch and output only. The words it takes are ``_parser``'s; all work is in
the library.

Every ``KitbenchError`` becomes ``ERROR: <message>`` and ``hint: <hint>`` on
stderr with the error's exit code, here and nowhere else.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kitbench import _parser
from kitbench._signals import sigterm_raises

if TYPE_CHECKING:
    from kitbench.fleet.results import TaskResult

from kitbench import _installed
from kitbench.errors import (
    KitbenchError,
    MissingDependency,
    Terminated,
    UsageError,
    clean,
)


def _cmd_fleet(args: argparse.Namespace) -> int:
    from kitbench import _ui
    from kitbench.fleet import pythons
    from kitbench.fleet import runner as fleet
    from kitbench.fleet.jobscript import PER, SlurmOptions
    from kitbench.fleet.results import majority_notes

    log = _ui.stderr_line
    if args.fleet_command == "gather":
        summary, rows = fleet.gather_job(args.job, log, verify=args.verify, reference=args.reference)
        code = _ui.fleet_results(args.job, summary, rows, majority_notes(rows), args.json)
        _fleet_report(args.job, rows)
        return code
    # Every local input is checked before Slurm is asked anything: a refusal after sinfo (or a
    # build of minutes) is one a user waited for in vain.
    if args.fleet_command == "run":
        _check_fleet_run_local(args)
    else:
        from kitbench.advice import releases

        releases.release(args.release)  # the nodes' install-cmd would refuse it, each in its own row
        given = pythons.probe_given(args.python)
    if args.timeout is not None and not 0 < args.timeout < float("inf"):
        raise UsageError(
            f"--timeout must be a positive number of seconds, not {args.timeout}", hint="for example --timeout 3600"
        )
    options = SlurmOptions(
        args.partition, args.account, args.time, args.gres, args.constraint, args.qos, tuple(args.sbatch_args)
    )
    options.lines()  # its refusals come before --per's, as before Slurm is asked anything
    if args.per not in PER:
        raise UsageError(f"unknown --per {args.per!r}", hint=f"choose one of: {', '.join(PER)}")
    chosen = fleet.usable_nodes(args.per, options)
    if args.fleet_command == "probe":
        plan = fleet.plan_probe_job(chosen, args.per, options, given, args.release, log)
    else:
        from kitbench.environments import targets

        plan = fleet.plan_run_job(
            chosen,
            args.per,
            options,
            targets.get(args.target),
            args.run_args,
            log,
            venvs=args.venv,
            runtime=args.containers,
            image=args.image,
            dry_run=args.dry_run,
        )
    if args.dry_run:
        print(plan.script, end="")
        return 0
    job, rows = fleet.launch(
        plan,
        _ui.fleet_task_line(["all nodes"] if plan.span else list(plan.nodes)),
        log,
        timeout_s=args.timeout,
        verify=getattr(args, "verify", False),
        reference=getattr(args, "reference", None),
    )
    code = _ui.fleet_results(job, plan.summary(), rows, majority_notes(rows), args.json)
    _fleet_report(job, rows)
    return code


def _fleet_report(job: str, rows: list[TaskResult]) -> None:
    """The job's report beside its records; a page that cannot be written never fails the job."""
    from kitbench.fleet.results import write_report

    try:
        path = write_report(job, rows)
    except KitbenchError as error:
        print(f"note: no report written: {clean(error.message)}", file=sys.stderr)
        return
    if path is not None:
        print(f"report: {clean(path)}", file=sys.stderr)


def _once(values: Sequence[str] | None, default: Sequence[str]) -> tuple[str, ...]:
    """Repeated values run once, in the order first given."""
    return tuple(dict.fromkeys(values or default))


def _cmd_run(args: argparse.Namespace) -> int:
    from kitbench import _ui
    from kitbench.records import record as records
    from kitbench.suite import runargs
    from kitbench.suite import runner as suite
    from kitbench.suite.checks import DEFAULT_CHECKS
    from kitbench.suite.checks.base import DEFAULT_LOOPS, SWEEP, Options

    runargs.refuse_combinations(args)
    sizes = args.batch_size or (64,)
    options = Options(
        checks=_once(args.checks, DEFAULT_CHECKS),
        device=args.device,
        data=args.data,
        offline=args.offline,
        quick=args.quick,
        models=_once(args.models, ("fnn",)),
        loops=_once(args.loops, DEFAULT_LOOPS),
        epochs=args.epochs,
        batch_size=sizes[0],
        sweep=SWEEP if args.sweep else (sizes if len(sizes) > 1 else ()),
        seed=args.seed,
        threads=args.threads,
        train_limit=args.limit if args.limit is not None else (6000 if args.quick else None),
        lr=args.lr,
        nproc=args.nproc,
        nnodes=args.nnodes,
        rdzv_endpoint=args.rdzv_endpoint,
        ddp_timeout=args.ddp_timeout,
        deterministic=args.deterministic,
    )
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
    from kitbench.fleet import pythons

    _check_fleet_run_args(args.run_args)
    target = targets.get(args.target)
    if args.containers not in fleet_containers.RUNTIMES:
        raise UsageError(
            f"unknown --containers {args.containers!r}", hint=f"choose one of: {', '.join(fleet_containers.RUNTIMES)}"
        )
    if target.kind == "venv":
        given = [
            flag for flag, value in (("--containers", args.containers != "auto"), ("--image", args.image)) if value
        ]
        if given:
            raise UsageError(
                f"{' and '.join(given)} only act{'' if len(given) > 1 else 's'} on docker targets; "
                f"{target.name} is a venv target",
                hint="drop them, or name a docker target such as cuda126",
            )
        plain, _ = pythons.per_arch(args.venv, "--venv")
        pythons.venv_folder(target.name, plain)
    elif target.kind != "docker":
        raise UsageError(
            f"target {target.name!r} is a {target.kind} target: it cannot run on a Slurm cluster",
            hint="fleet run takes venv and docker targets",
        )
    elif args.venv:
        raise UsageError(
            f"--venv only acts on venv targets; {target.name} is a docker target",
            hint="drop it (a docker target runs in its image), or name a venv target such as cpu",
        )
    elif args.containers == "oci" and args.image is not None:
        raise UsageError(
            "--image only acts with pyxis; Slurm's OCI support runs a bundle kitbench exports",
            hint="drop --image, or use --containers pyxis",
        )


def _check_fleet_run_args(run_args: Sequence[str]) -> None:
    """Arguments after -- are checked by `kitbench run`'s own parser before Slurm is asked anything;
    the fleet owns where records go and how ranks meet, so those options are refused."""
    from kitbench.suite import runargs

    parsed = _parser.parse(["run", *run_args])
    runargs.refuse_combinations(parsed)
    owned = [
        flag
        for flag, value in (
            ("--out", parsed.out),
            ("--force", parsed.force),
            ("--nnodes", parsed.nnodes),
            ("--rdzv-endpoint", parsed.rdzv_endpoint),
        )
        if value
    ]
    if owned:
        raise UsageError(
            f"fleet run sets {', '.join(owned)} itself; after -- they are refused",
            hint="each node's record is results/fleet/<job>/<node>.json; drop them after --",
        )


def _cmd_container(args: argparse.Namespace) -> int:
    from kitbench.environments import targets
    from kitbench.rebuild import containers, images

    target = targets.get(args.target)
    if target.kind != "docker":
        raise UsageError(
            f"target {target.name!r} is a {target.kind} target, not a docker one",
            hint=f"run it with: nox -s {target.name}",
        )
    if not args.build_only:
        containers.host_data(args.run_args)  # no MNIST and --offline: said before a build of minutes
    result = images.build(target, log=lambda line: print(line, file=sys.stderr, flush=True))
    print(
        f"image {result.tag} ({result.image_id[:19]}, {result.size_bytes / 2**30:.2f} GiB) from {result.base_image}",
        file=sys.stderr,
    )
    if args.build_only:
        return 0
    return containers.run(target, result, args.run_args, log=lambda line: print(line, flush=True))


def _check_machine_choices(args: argparse.Namespace) -> None:
    """install-cmd's words for another machine, each one of those it knows."""
    from kitbench.advice import selector

    for name, value, choices in (
        ("--os", args.os, selector.OSES),
        ("--arch", args.arch, selector.ARCHES),
        ("--python-arch", args.python_arch, selector.ARCHES),
    ):
        if value is not None:
            selector.check_choice(name, value, choices)


def _cmd_install(args: argparse.Namespace) -> int:
    from kitbench.advice.answer import answer

    _check_machine_choices(args)
    given = dict(
        os=args.os,
        arch=args.arch,
        python_arch=args.python_arch,
        driver=args.driver,
        gpu_capabilities=args.gpu_cc,
        no_gpu=args.no_gpu,
        gpu_gfx=args.gpu_gfx,
        intel_gpu=args.intel_gpu,
        python_path=args.python_path,
        python_version=args.python_version,
        glibc=args.glibc,
        os_version=args.os_version,
    )
    chosen = answer(
        given,
        refresh=_refresh,
        force_refresh=args.refresh,
        not_refreshed=lambda error: print(f"note: {clean(_not_refreshed(error))}", file=sys.stderr),
        release_spec=args.release,
        package=args.package,
        compute=args.compute,
        fmt=args.fmt,
    )
    if args.json:
        import json

        print(json.dumps(chosen.as_dict(), indent=2))
        return 0
    if args.explain:
        from kitbench.advice import facts
        from kitbench.advice.wording import grouped

        sources = chosen.facts["sources"]
        for key in (
            "os",
            "os_version",
            "arch",
            "python_arch",
            "python_version",
            "libc",
            "libc_version",
            "driver",
            "gpu_capabilities",
            "rocm",
            "amd_gpus",
            "intel_gpus",
            "wsl",
            "container",
        ):
            if key.startswith("libc") and chosen.os != "linux":
                continue
            value = chosen.facts[key]
            shown = ", ".join(value) if isinstance(value, list) else value
            where = sources.get({"gpu_capabilities": "gpus", "libc_version": "libc"}.get(key, key), "probe")
            if value is None and key in ("os_version", "wsl", "container"):
                continue  # another machine's: this host's kernel, WSL and container say nothing of it
            print(clean(f"# {key}: {shown if shown not in (None, '') else 'none'}  [{where}]"), file=sys.stderr)
        wheel_facts = chosen.facts["wheels"]
        assumed = (
            " (this build is not on PyPI: assumed_from pypi, the same release's PyPI wheels)"
            if wheel_facts["assumed_from"]
            else ""
        )
        print(clean(f"# wheels: {wheel_facts['source']}, read {wheel_facts['read']}{assumed}"), file=sys.stderr)
        refreshed = facts.checked()
        if refreshed is not None:
            print(
                f"# fact cache: {facts.cache_dir() / 'releases.json'} (kitbench facts refresh), read "
                f"{refreshed.date().isoformat()}",
                file=sys.stderr,
            )
        build = chosen.facts["build"]
        print(clean(f"# build: {build['kind']}, from {build['source']}"), file=sys.stderr)
        for line in grouped(chosen.rejected):
            print(f"# rejected {clean(line)}", file=sys.stderr)
    # Reasons and notes quote the machine's and the indexes' words (a GPU's name, a build label): data.
    if args.explain:
        for line in chosen.reasons:
            print(f"# {clean(line)}", file=sys.stderr)
        for line in chosen.notes:
            print(f"note: {clean(line)}", file=sys.stderr)
    else:
        from kitbench.advice.wording import summary

        for line in summary(chosen.because, chosen.noted):
            print(f"# {clean(line)}", file=sys.stderr)
    print(chosen.command)
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from kitbench import _ui
    from kitbench.reading import compare, inputs

    if args.fmt not in ("table", "markdown", "csv", "json"):
        raise UsageError(f"unknown format {args.fmt!r}", hint="choose one of: table, markdown, csv, json")
    if args.plot:
        from kitbench.reading import plots

        plots.check_target(args.plot, args.force)
    skipped: list[Path] = []
    loaded = inputs.load(args.inputs, skipped)
    if args.plot:
        plots.check_count(len(loaded))  # before any output: nothing half done
    if skipped:
        print(
            f"note: skipped {len(skipped)} *.json file(s) that are not run records (fleet plans, probe and "
            f"install JSON, image bundles), e.g. {clean(skipped[0])}",
            file=sys.stderr,
        )
    table = compare.rows(loaded)
    if args.fmt == "json":
        # Each difference as an object (quantity, before: the baseline's, after: this record's).
        print(
            json.dumps(
                [{**dataclasses.asdict(r), "differs": [c._asdict() for c in r.differs]} for r in table],
                indent=2,
                default=str,
            )
        )
    else:
        _ui.comparison(table, args.fmt)
    if args.plot:
        plots.comparison(loaded, table, args.plot, args.force)
        print(f"plot: {clean(args.plot)}", file=sys.stderr)
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from kitbench.reading import inputs
    from kitbench.reading.verify import tally, verify
    from kitbench.records import record as records

    (reference, ref_sha), (candidate, cand_sha) = (records.read_hashed(p) for p in (args.reference, args.candidate))
    inputs.refuse_same_run(
        [inputs.Loaded(args.reference, reference, ref_sha), inputs.Loaded(args.candidate, candidate, cand_sha)]
    )
    verdict = verify(reference, candidate)
    if args.json:
        print(json.dumps({**dataclasses.asdict(verdict), "reproduced": verdict.reproduced}, indent=2))
    else:
        # Model names, packages and settings come from the records: data, shown escaped.
        print(
            verdict.verdict.upper() if not verdict.reproduced else verdict.verdict,
            f": {clean(verdict.first_divergence)}" if verdict.first_divergence else "",
            sep="",
        )
        print(f"  compared: {_counted(tally(verdict.comparisons))}")
        for c in verdict.comparisons:
            print(clean(f"  {_compared(c, f': {c.detail}' if c.detail else '')}"))
        for line in verdict.differences:
            print(f"  environment differs: {clean(line)}")
        for line in verdict.rules:
            print(f"  rule: {clean(line)}")
        print(clean(f"  not compared: {'; '.join(verdict.not_compared)}"))
    return 0 if verdict.reproduced else 1


# The rules that are no tolerance but a condition: a record's status, a run's partner. Their outcome is said in
# their own words ("DIFFERS (ok)" read as a difference that was fine).
_CONDITIONS = {"ok": ("ok", "NOT OK", "must be ok"), "paired": ("paired", "UNPAIRED", "must have a partner")}


def _compared(c: Any, detail: str) -> str:
    """One comparison of verify's (a ``Comparison``): its outcome, the rule it was held to, the quantity."""
    if c.rule in _CONDITIONS:
        return f"{_CONDITIONS[c.rule][0 if c.equal else 1]}: {c.quantity}{detail}"
    return f"{'equal' if c.equal else 'DIFFERS'} ({c.rule}): {c.quantity}{detail}"


def _counted(counts: Any) -> str:
    """verify's ``Tally`` in words: ``12 quantities: 11 agree (within rtol 0.05), 1 differs (within rtol 0.05)``;
    with several rules, each counted."""

    def part(by_rule: dict[str, int]) -> str:
        named = {(_CONDITIONS[rule][2] if rule in _CONDITIONS else rule): n for rule, n in by_rule.items()}
        if not named:
            return ""
        return (
            f" ({next(iter(named))})"
            if len(named) == 1
            else " (" + ", ".join(f"{n} {name}" for name, n in named.items()) + ")"
        )

    agree, differ = sum(counts.agree.values()), sum(counts.differ.values())
    return (
        f"{agree + differ} quantit{'y' if agree + differ == 1 else 'ies'}: {agree} agree{part(counts.agree)}, "
        f"{differ} differ{'s' if differ == 1 else ''}{part(counts.differ)}"
    )


def _cmd_replay(args: argparse.Namespace) -> int:
    from kitbench.machine.probe import probe
    from kitbench.reading.verify import tally
    from kitbench.rebuild import replay

    outcome = replay.replay(
        args.record,
        args.out,
        probe(),
        lambda line: print(f"replay: {clean(line)}", file=sys.stderr),
        args.local_by_name,
    )
    for note in outcome.notes:
        print(f"note: {clean(note)}")
    for line in outcome.differences:
        print(f"environment differs: {clean(line)}")
    if outcome.mnist:  # verify's many quantities counted in one line, each one that differs on its own
        print(clean(f"compared: MNIST: {_counted(tally(outcome.mnist))}"))
    for c in [*(c for c in outcome.mnist if not c.equal), *outcome.compared]:
        print(clean(f"compared: {_compared(c, f' ({c.detail})' if c.detail else '')}"))
    if outcome.not_compared:
        print(clean(f"not compared: {'; '.join(outcome.not_compared)}"))
    print(
        clean(
            f"{outcome.verdict if outcome.reproduced else outcome.verdict.upper()}"
            f"{f': {outcome.first_divergence}' if outcome.first_divergence else ''} ({outcome.record})"
        )
    )
    return 0 if outcome.reproduced else 1


def _cmd_report(args: argparse.Namespace) -> int:
    from kitbench import _files
    from kitbench.reading import report

    built = report.build(args.inputs, args.fmt)
    out = (
        _files.destination(args.out, report.default_name(args.fmt), UsageError)
        if args.out
        else Path(report.default_name(args.fmt))
    )
    report.write(out, built.text, args.force)
    if built.skipped:
        print(
            f"note: skipped {len(built.skipped)} *.json file(s) that are not run records, "
            f"e.g. {clean(built.skipped[0])}",
            file=sys.stderr,
        )
    print(f"report: {clean(out)} ({built.records} records, sections: {', '.join(built.sections)})")
    return 0


def _refresh() -> None:
    from kitbench import _reach
    from kitbench.advice import facts, indexes

    def report(done: indexes.Outcome) -> None:
        state = "unchanged (304)" if done.status == 304 else f"{done.releases} releases"
        where = _reach.shown(done.source.url)  # an index URL may carry a token, as pip takes it
        print(
            clean(f"# {done.source.kind} {done.source.package}: {state}, {done.seconds:.2f} s  [{where}]"),
            file=sys.stderr,
        )
        for note in done.notes:  # an index's own words: cleaned, as all of its text is
            print(f"note: {clean(note)}", file=sys.stderr)

    indexes.refresh(done=report)
    for rel in facts.derived():
        print(
            clean(
                f"# torch {rel.version} with torchvision {rel.torchvision}: "
                f"{', '.join(rel.computes) or 'no builds'} (derived from the index)"
            ),
            file=sys.stderr,
        )
    print(f"facts: {facts.cache_dir()}", file=sys.stderr)


def _not_refreshed(error: KitbenchError) -> str:
    """What a refresh that failed left: nothing new, or the pages it read before a host did not answer."""
    from kitbench.advice import indexes

    read = error.read if isinstance(error, indexes.RefreshFailed) else []
    if not read:
        return f"the facts were not refreshed: {error.message}; answering from those at hand"
    unread = error.unread if isinstance(error, indexes.RefreshFailed) else []
    return (
        f"the facts were refreshed in part: read {_pages([o.source for o in read])}; not read "
        f"{_pages(unread)}: {error.message}; answering from what was read and the facts at hand"
    )


_INDEXES = {"pypi": "PyPI's", "pytorch": "PyTorch's index's"}


def _pages(sources: Sequence[Any]) -> str:
    """``PyPI's torch, torchvision pages``, each index once, in the order read."""
    by_kind: dict[str, list[str]] = {}
    for source in sources:
        by_kind.setdefault(source.kind, []).append(source.package)
    return " and ".join(f"{_INDEXES.get(kind, kind)} {', '.join(packages)} pages" for kind, packages in by_kind.items())


def _cmd_facts(args: argparse.Namespace) -> int:
    _refresh()
    return 0


def _cmd_probe(args: argparse.Namespace) -> int:
    from kitbench.machine.probe import as_dict, probe

    facts = as_dict(probe())
    if args.json:
        import json

        print(json.dumps(facts, indent=2))
        return 0
    sources = facts.pop("sources")
    for key, value in facts.items():
        if key == "gpus":
            value = ", ".join(f"{g['index']}: {g['name']} (sm {g['capability']})" for g in value) or "none"
        elif key == "amd_gpus":
            value = (
                ", ".join(
                    f"{g['index']}: {g['gfx'] or 'gfx unknown'}"
                    + (f" (PCI {g['device_id']})" if g["device_id"] else "")
                    for g in value
                )
                or "none"
            )
        elif key == "intel_gpus":
            value = ", ".join(f"{g['address']}: {g['device_id'] or '?'}" for g in value) or "none"
        where = sources.get("libc" if key == "libc_version" else key)
        note = f"  [{where}]" if where else ""
        print(clean(f"{key:15} {value}{note}"))
    return 0


# install-cmd's flags that are not facts of a machine: in a project they would be ignored, so they are refused.
_NOT_A_MACHINE = {
    "--release": "the project's release is its own --release, for every machine: kitbench project --release 2.5.0",
    "--compute": "a project gives each machine the build install-cmd answers for it: describe the machine "
    "(--driver, --gpu-cc, --no-gpu, ...) and that decides its build",
    "--package": "a project is installed by uv (pyproject.toml) or pixi (pixi.toml), not by one package tool",
    "--format": "a project pins exact versions: there is no other format",
    "--json": "describe the machine only; the project's lines go to stdout",
    "--explain": "ask `kitbench install-cmd --explain` with the machine's flags to see why it gets its build",
    "--refresh": "run `kitbench facts refresh` first, then the project",
    "--python": "--python names this host's interpreter; for another machine give its --python-version",
}
# The machine flags that share a prefix with a refused one (--python-version, --python-arch).
_MACHINE_FLAGS = ("--python-version", "--python-arch")


def _shown(text: str, most: int = 60) -> str:
    """``text`` quoted for a message, cut short: a name or a spec may be any length."""
    return repr(text) if len(text) <= most else repr(text[:most]) + f"... ({len(text):,} characters)"


def _project_machine(spec: str) -> tuple[str, Any]:
    """``NAME=FILE`` (what `kitbench probe --json` wrote there) or ``NAME=FLAGS`` (install-cmd's) as a machine."""
    import shlex

    from kitbench.machine.probe import saved

    name, sep, given = spec.partition("=")
    if not sep or not name or not given:
        raise UsageError(
            f"--machine {_shown(spec)} is not NAME=FILE or NAME='FLAGS'",
            hint="e.g. --machine laptop=laptop.json or --machine ci='--os linux --no-gpu'",
        )
    if not given.lstrip().startswith("-"):
        return name, saved.load(Path(given))
    try:
        words = shlex.split(given)
    except ValueError as bad:  # an unterminated quote or a trailing backslash
        raise UsageError(
            f"--machine {_shown(name)}: its flags do not split as a shell would ({bad})",
            hint="close each quote in the machine's flags, e.g. --machine ci='--os linux --no-gpu'",
        ) from None
    for word in words:
        flag = word.partition("=")[0]
        # argparse takes an unambiguous prefix (--rel for --release): a prefix of a refused flag is refused too.
        refused = (
            flag
            if flag in _NOT_A_MACHINE
            else next(
                (
                    f
                    for f in _NOT_A_MACHINE
                    if flag.startswith("--")
                    and len(flag) > 3
                    and f.startswith(flag)
                    and not any(m.startswith(flag) for m in _MACHINE_FLAGS)
                ),
                None,
            )
        )
        if refused:
            raise UsageError(
                f"--machine {_shown(name)}: {refused} says nothing about a machine", hint=_NOT_A_MACHINE[refused]
            )
    try:
        args = _parser.parse(["install-cmd", *words])
    except UsageError as refused:
        # install-cmd's parser says so; the hint is the project's, naming the machine's flags.
        raise UsageError(
            f"--machine {_shown(name)}: {refused.message}",
            hint="a machine's flags: --os, --arch, --python-arch, --python-version, --driver, --gpu-cc, "
            "--gpu-gfx, --intel-gpu, --no-gpu, --glibc, --os-version (see "
            "`kitbench install-cmd --help`, 'answer for another machine')",
        ) from None
    _check_machine_choices(args)
    return name, saved.described(
        os=args.os,
        arch=args.arch,
        python_arch=args.python_arch,
        driver=args.driver,
        gpu_capabilities=args.gpu_cc,
        no_gpu=args.no_gpu,
        gpu_gfx=args.gpu_gfx,
        intel_gpu=args.intel_gpu,
        python_path=args.python_path,
        python_version=args.python_version,
        glibc=args.glibc,
        os_version=args.os_version,
    )


def _cmd_project(args: argparse.Namespace) -> int:
    import re

    from kitbench.advice import project_files
    from kitbench.machine.probe import saved

    machines = [_project_machine(spec) for spec in args.machine]
    if args.fleet is not None:
        found = sorted(args.fleet.glob("*.probe.json"))
        if not found:
            raise UsageError(
                f"no <node>.probe.json in {args.fleet}",
                hint="give the folder of a `kitbench fleet probe` job (results/fleet/<job>)",
            )
        # A node's name as a project's machine name: lowercase words joined by '-' (gpu_01 is gpu-01).
        machines += [
            (re.sub(r"[^a-z0-9]+", "-", path.name.removesuffix(".probe.json").lower()).strip("-"), saved.load(path))
            for path in found
        ]
    team, written = project_files.write(
        args.directory,
        machines,
        drop=args.drop,
        release_spec=args.release,
        with_pixi=args.pixi,
        index=args.index,
        name=args.name,
    )
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
    for note in team.notes:
        print(f"note: {note}", file=sys.stderr)
    width = max(len(m.name) for m in team.members)
    pixi = (args.directory / project_files.PIXI).exists()
    for member in team.members:
        print(
            f"{member.name:{width}}  {member.uv:24}  # torch {dict(member.wheels.pins)['torch']} "
            f"{member.chosen.compute}" + (f"; pixi: {member.pixi}" if pixi else "")
        )
    return 0


def _this_machines_torch() -> tuple[list[str], str | None] | None:
    """install-cmd's answer for this machine as the packages and index it installs, or None where there is
    none (no probe, no build) or it pins nothing (nightly: only pip's own words carry --pre)."""
    from kitbench.advice import selector
    from kitbench.machine.probe import probe

    try:
        chosen = selector.select(probe())
    except KitbenchError:
        return None
    return ([f"{name}=={version}" for name, version in chosen.pins], chosen.index) if chosen.pins else None


_COMMANDS: dict[str, Any] = {
    "run": _cmd_run,
    "probe": _cmd_probe,
    "container": _cmd_container,
    "fleet": _cmd_fleet,
    "install-cmd": _cmd_install,
    "compare": _cmd_compare,
    "verify": _cmd_verify,
    "replay": _cmd_replay,
    "report": _cmd_report,
    "facts": _cmd_facts,
    "project": _cmd_project,
}


_MAX_ARGUMENT = 4096  # PATH_MAX: no name, path or value kitbench takes is longer


EXIT_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away (git does the same)
EXIT_IO = 74  # sysexits' EX_IOERR: neither of verify's meanings (0 same, 1 different)


@contextlib.contextmanager
def _uncollected(argv: Sequence[str] | None) -> Iterator[None]:
    """install-cmd without the cyclic garbage collector: it allocates tens of thousands of objects (modules,
    classes, the facts it reads) and keeps them all until it exits a moment later, so the collector's passes over
    them, which find nothing, took a tenth of its time. Run as the program (no ``argv`` given), they are frozen at
    the end, out of the last such pass, which Python's exit makes; called in-process, the collector is only turned
    back on. Every other command keeps it: run's loops make garbage of their own."""
    if list(sys.argv[1:] if argv is None else argv)[:1] != ["install-cmd"] or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if argv is None:
            gc.freeze()
        gc.enable()


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stderr is None:  # started with fd 2 closed: print(file=None) would write notes into stdout
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 -- for the process's life; it takes fd 2 if free
    if sys.stdout is None:  # started with fd 1 closed: the answer has nowhere to go, so nothing is done
        print(f"ERROR: cannot write the output: {os.strerror(errno.EBADF)}", file=sys.stderr)
        return EXIT_IO
    with sigterm_raises(), _uncollected(argv):
        try:
            code = _main(argv)
            sys.stdout.flush()  # here, not at interpreter exit, where an error would be a traceback
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
    passed = words[words.index("--") + 1 :] if "--" in words else []
    words = words[: words.index("--")] if "--" in words else words
    try:
        for word in words + passed:
            if len(word) > _MAX_ARGUMENT:
                raise UsageError(
                    f"an argument of {len(word):,} characters ({word[:40]!r}...) is longer than any "
                    f"kitbench takes ({_MAX_ARGUMENT})"
                )
        args = _parser.parse(words)
        takes_run_args = args.command == "container" or (args.command == "fleet" and args.fleet_command == "run")
        if passed and not takes_run_args:
            raise UsageError(f"unexpected arguments after --: {' '.join(passed)[:200]}")
        args.run_args = passed
        code: int = _COMMANDS[args.command](args)
        return code
    except ModuleNotFoundError as missing:
        root = (missing.name or "").partition(".")[0]
        if root not in _installed.OPTIONAL:
            raise
        error = MissingDependency(root, f"kitbench {words[0] if words else ''}".strip(), _installed.optional_hint(root))
    except KitbenchError as caught:
        error = caught
    except OSError as failed:  # a results root that cannot be written, a full disk: never a traceback
        if isinstance(failed, BrokenPipeError) or not failed.filename:
            raise  # writing the output itself (a closed pipe, /dev/full): main's to answer, with its codes
        error = KitbenchError(
            f"{failed.filename}: {failed.strerror or failed}",
            hint="check that the folder "
            "exists, is writable and has room (KITBENCH_RESULTS moves the results, KITBENCH_DATA "
            "the data)",
        )
    if isinstance(error, MissingDependency) and error.module in ("torch", "torchvision"):
        error.hint = _installed.optional_hint(error.module, _this_machines_torch())
    # Messages quote records, paths and programs' words: data, escaped here for every error at once.
    print(f"ERROR: {clean(error.message)}", file=sys.stderr)
    if error.hint:
        print(f"hint: {clean(error.hint)}", file=sys.stderr)
    return error.exit_code
