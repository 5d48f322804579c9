"""The job script: Slurm's options, the nodes that stand for the cluster, and the one template
rendered for a probe or a run (every value quoted), so the exact script is testable without a cluster.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from kitbench import __version__
from kitbench.errors import UsageError
from kitbench.fleet import slurm
from kitbench.records import record as records

PER = ("node", "gres", "feature")


@dataclass(frozen=True)
class SlurmOptions:
    """Slurm's own options, passed through as ``#SBATCH`` lines of the job script."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    gres: str | None = None
    constraint: str | None = None
    qos: str | None = None
    extra: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        named = [
            (f"--{key}", value)
            for key, value in (
                ("partition", self.partition),
                ("account", self.account),
                ("time", self.time),
                ("gres", self.gres),
                ("constraint", self.constraint),
                ("qos", self.qos),
            )
            if value is not None
        ]
        out = []
        for flag, value in named:
            _check_word(flag, value)
            if flag == "--time":
                _check_time(value)
            out.append(f"#SBATCH {flag}={value}")
        for extra in self.extra:
            _check_word("--sbatch-arg", extra)
            if not extra.startswith("-"):
                raise UsageError(f"--sbatch-arg {extra!r} is not an sbatch option", hint="e.g. --sbatch-arg=--mem=4G")
            out.append(f"#SBATCH {extra}")
        return out

    def srun_args(self) -> list[str]:
        """The same choices for a single ``srun`` step (an environment's build): where and on whose account,
        not what the suite's tasks ask for (GPUs, extra sbatch options)."""
        return [
            f"--{key}={value}"
            for key, value in (
                ("partition", self.partition),
                ("account", self.account),
                ("time", self.time),
                ("qos", self.qos),
            )
            if value is not None
        ]


def _check_word(flag: str, value: str) -> None:
    if not value or any(c in value for c in "\n\r\0") or len(value) > 256:
        raise UsageError(
            f"{flag} {value[:40]!r} cannot be an sbatch option value",
            hint="one line, no control characters, at most 256 characters",
        )


# sbatch's --time formats (its man page): minutes, minutes:seconds, hours:minutes:seconds, days-hours,
# days-hours:minutes, days-hours:minutes:seconds; and no limit at all. sbatch would refuse any other
# only after Slurm was asked for nodes, and a job never submitted is the cheaper place to say so.
_TIME = re.compile(r"[0-9]+(:[0-9]+){0,2}|[0-9]+-[0-9]+(:[0-9]+){0,2}|unlimited|infinite", re.IGNORECASE)


def _check_time(value: str) -> None:
    if not _TIME.fullmatch(value):
        raise UsageError(
            f"--time {value[:40]!r} is not a Slurm time limit",
            hint="minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes, "
            "days-hours:minutes:seconds or UNLIMITED, e.g. --time 30 or --time 1-12:00:00",
        )


@dataclass(frozen=True)
class Plan:
    action: str  # probe | run
    per: str
    nodes: tuple[str, ...]  # task i runs on nodes[i]
    script: str
    results: Path  # results/fleet (shared storage)
    target: str | None = None
    span: bool = False  # one job across the nodes (DDP), not an array

    def summary(self) -> dict[str, Any]:
        """What gather needs to read the job back: saved beside its results, shown with them."""
        return {
            "action": self.action,
            "per": self.per,
            "target": self.target,
            "nodes": list(self.nodes),
            "span": self.span,
        }


def check_per(per: str) -> None:
    if per not in PER:
        raise UsageError(f"one task per {per!r}: not a way to choose nodes", hint=f"choose one of: {', '.join(PER)}")


def choose(nodes: Sequence[slurm.Node], per: str, constraint: str | None = None) -> list[slurm.Node]:
    """The usable nodes that stand for the cluster: each, or one per distinct GRES or feature set."""
    check_per(per)
    usable = [n for n in nodes if n.usable]
    if constraint and re.fullmatch(r"[\w.-]+(&[\w.-]+)*", constraint):
        # A plain AND of features can be matched here; anything richer is Slurm's to resolve, and so is
        # a constraint no node meets: its refusal is the clearest answer.
        wanted = set(constraint.split("&"))
        usable = [n for n in usable if wanted <= set(n.features.split(","))] or usable
    if per == "node":
        return usable
    seen: dict[str, slurm.Node] = {}
    for node in usable:
        seen.setdefault(node.gres if per == "gres" else node.features, node)
    return list(seen.values())


def _template() -> str:
    return resources.files("kitbench.fleet").joinpath("templates/fleet-job.sh").read_text()


def render(
    action: str,
    per: str,
    nodes: Sequence[str],
    results: Path,
    command: str,
    options: SlurmOptions,
    environment: dict[str, str],
    span: bool = False,
) -> str:
    """The job script, from the one template; every value is quoted for the shell. An array
    (a task per node) unless ``span``: then one job over every node, one srun task per node."""
    if span:
        shape = f"one job over {len(nodes)} nodes, one srun task per node, joined by torchrun's c10d rendezvous"
        layout = f"#SBATCH --nodes={len(nodes)}\n#SBATCH --nodelist={','.join(nodes)}\n#SBATCH --ntasks-per-node=1"
        # The rendezvous lives on the first node, at the address Slurm knows it by; the port follows the job.
        prologue = (
            'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
            "head_addr=$(scontrol show node \"$head\" | sed -n 's/.*NodeAddr=\\([^ ]*\\).*/\\1/p')\n"
            "port=$((29500 + SLURM_JOB_ID % 1000))"
        )
    else:
        shape = (
            f"one Slurm array task per {per} ({len(nodes)} tasks); kitbench pins\n# task i to node i of the "
            "list below after submitting the array held, then releases it"
        )
        layout = f"#SBATCH --array=0-{len(nodes) - 1}\n#SBATCH --ntasks=1"
        prologue = ""
    values = {
        "action": action,
        "shape": shape,
        "layout": layout,
        "prologue": prologue,
        "log_name": "%j_0" if span else "%A_%a",
        "plan": " ".join(f"{i}={n}" for i, n in enumerate(nodes)),
        "version": __version__,
        "logs": str(results / "logs"),
        "results": shlex.quote(str(results)),
        "sbatch_lines": "\n".join(options.lines()),
        "environment": "\n".join(f"export {k}={shlex.quote(v)}" for k, v in environment.items()),
        "command": command,
    }
    if any(c.isspace() for c in str(results)):
        raise UsageError(
            f"the results root {results} has a space in it, which #SBATCH --output cannot carry",
            hint="set KITBENCH_RESULTS to a path without spaces",
        )
    return re.sub(r"{{(\w+)}}", lambda m: values[m.group(1)], _template())


def _python(python: Path) -> str:
    return shlex.quote(str(python))


def plan_probe(
    nodes: Sequence[str], per: str, options: SlurmOptions, pythons: dict[str, Path], install_args: Sequence[str] = ()
) -> Plan:
    results = fleet_root()
    dispatch = arch_dispatch({arch: str(p) for arch, p in pythons.items()}) if len(pythons) > 1 else ""
    py = '"$py"' if dispatch else _python(next(iter(pythons.values())))
    extra = " ".join(shlex.quote(a) for a in install_args)
    command = (
        f'{dispatch}{py} -m kitbench probe --json > "$out/$node.probe.json" && '
        f'{py} -m kitbench install-cmd --json {extra} > "$out/$node.install.json"'
    ).replace("  ", " ")
    return Plan("probe", per, tuple(nodes), render("probe", per, nodes, results, command, options, {}), results)


def spans_nodes(run_args: Sequence[str]) -> bool:
    """Whether the suite asked for is one run across nodes (the DDP check), not one per node."""
    return (
        any(a == "ddp" and i and run_args[i - 1] == "--check" for i, a in enumerate(run_args))
        or "--check=ddp" in run_args
    )


def plan_run(
    nodes: Sequence[str],
    per: str,
    options: SlurmOptions,
    target: str,
    manifest_sha256: str,
    command_prefix: Sequence[str],
    run_args: Sequence[str],
    environment: dict[str, str],
    record_dir: str = "$out",
    pythons: dict[str, str] | None = None,
) -> Plan:
    """``command_prefix`` runs Python in the target's environment: a venv's python, or
    ``srun --container...`` and the image's; ``record_dir`` is where the shared results
    folder of this job is seen from there. With ``--check ddp`` the job spans the nodes:
    ``srun`` starts one kitbench per node and torchrun's rendezvous joins them."""
    results = fleet_root()
    span = spans_nodes(run_args) and len(nodes) > 1
    args = " ".join(shlex.quote(a) for a in run_args)
    # Two architectures: each node picks the environment built for its own (``pythons``, by uname -m).
    dispatch = arch_dispatch(pythons) if pythons and len(pythons) > 1 else ""
    prefix = '"$py"' if dispatch else " ".join(shlex.quote(p) for p in command_prefix)
    if span:
        # Each node's task writes its own record and exit status, named by the node it runs on.
        inner = (
            f'{dispatch}{prefix} -m kitbench run --force --out "$0/$SLURMD_NODENAME.json" --nnodes '
            f'"$SLURM_NNODES" --rdzv-endpoint "$1" {args}; code=$?; echo "$code" > "$2/$SLURMD_NODENAME.exit"; '
            'exit "$code"'
        )
        command = (
            f"srun --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c {shlex.quote(inner)} "
            f'"{record_dir}" "$head_addr:$port" "$out"'
        )
    else:
        # --force: a task Slurm requeues replaces its own earlier record, nothing else.
        command = f'{dispatch}{prefix} -m kitbench run --force --out "{record_dir}/$node.json" {args}'.rstrip()
    env = {"KITBENCH_TARGET": target, "KITBENCH_MANIFEST_SHA256": manifest_sha256, **environment}
    script = render("run", per, nodes, results, command, options, env, span=span)
    return Plan("run", per, tuple(nodes), script, results, target, span)


def fleet_root() -> Path:
    return (records.results_root() / "fleet").resolve()


def arch_dispatch(pythons: dict[str, str]) -> str:
    """Shell that sets ``$py`` to this node's environment by ``uname -m``, or ends the task in words:
    one job for a cluster of two architectures, each node running the environment built for it."""
    cases = " ".join(f"{arch}) py={shlex.quote(python)};;" for arch, python in sorted(pythons.items()))
    return (
        f'case "$(uname -m)" in {cases} *) echo "kitbench: no environment built for $(uname -m) '
        f'(built: {", ".join(sorted(pythons))})" >&2; exit 3;; esac; '
    )
