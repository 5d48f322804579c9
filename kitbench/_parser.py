"""The command line's words: every command, flag and help text kitbench takes, and argparse's
complaints turned into one ``UsageError`` (with the nearest right word for a typo).

The parser only reads arguments; what they mean is ``_cli``'s to dispatch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from kitbench import __version__
from kitbench.errors import UsageError

_EPILOG_RUN = """\
examples:
  kitbench run                                  all checks on the best device found
  kitbench run --check mnist --model cnn --loop resident --epochs 2
  kitbench run --device cpu --quick --json      a fast run, the record on stdout
  kitbench run --data ~/datasets --offline      never download; fail if MNIST is absent

The record is written to --out, default a new results/<target>/<UTC time>-<id>.json
(KITBENCH_RESULTS moves the root; KITBENCH_TARGET names the target).
MNIST is read from --data, default KITBENCH_DATA, else data/ in kitbench's cache folder
(KITBENCH_CACHE, else $XDG_CACHE_HOME/kitbench, else ~/.cache/kitbench).
"""


class _Parser(argparse.ArgumentParser):
    _words: tuple[str, ...] = ()  # what this parser was given: an unknown flag among them explains a missing word

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        self._words = tuple(str(word) for word in (sys.argv[1:] if args is None else args))
        return super().parse_known_args(args, namespace)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:  # told by the command that was given, from its flags, as argparse tells the top one
            _given(self, parsed).error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        said, hint = _did_you_mean(self, message)
        raise UsageError(said, hint=hint or f"see: {self.prog} --help")


def _given(parser: argparse.ArgumentParser, parsed: argparse.Namespace) -> argparse.ArgumentParser:
    """The (sub)command's parser that ``parsed`` went down to."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and getattr(parsed, action.dest, None) in action.choices:
            return _given(action.choices[getattr(parsed, action.dest)], parsed)
    return parser


def _unknown_flag(parser: _Parser) -> str | None:
    """The first word given to ``parser`` that looks like a flag and is none of its own (nor their abbreviation)."""
    flags = parser._option_string_actions
    for word in parser._words:
        name = word.partition("=")[0]
        if (
            word.startswith("-")
            and word != "-"
            and not parser._negative_number_matcher.match(word)
            and not any(flag.startswith(name) for flag in flags)
        ):
            return name
    return None


def _did_you_mean(parser: _Parser, message: str) -> tuple[str, str | None]:
    """argparse's message, or for a typo in a command or flag, the nearest right one (a flag only from this
    command's, and only when close: any two flags share their dashes), and a hint where help says no more."""
    import difflib
    import re

    choice = re.match(r"argument \S+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if choice:
        word, known = choice.group(1), re.findall(r"'([^']*)'", choice.group(2))
        close = difflib.get_close_matches(word, known, n=1)
        if close:
            return f"unknown command {word!r}; did you mean {close[0]!r}?", None
        return f"unknown command {word!r}", f"choose one of: {', '.join(known)}"
    flags = re.match(r"unrecognized arguments: (\S+)", message)
    unknown = flags.group(1).partition("=")[0] if flags and flags.group(1).startswith("--") else None
    if message.startswith("the following arguments are required: ") and (flag := _unknown_flag(parser)):
        unknown, message = flag, ""  # `kitbench --bogus`: the flag, not the command argparse found missing
    if unknown is None:
        return message, None
    owners = [p.prog for p in _parsers(build()) if unknown in p._option_string_actions]
    if owners:  # another command's flag: "did you mean" would only name the word back
        return f"unknown option {unknown!r} for this command; it is an option of {', '.join(owners[:3])}", None
    known = sorted(flag for flag in parser._option_string_actions if flag.startswith("--"))
    close = difflib.get_close_matches(unknown, known, n=1, cutoff=0.8)
    others = flags is not None and " " in message.removeprefix("unrecognized arguments: ")
    return f"unknown option {unknown!r}" + (
        f"; did you mean {close[0]!r}?" if close else f" ({message})" if others else ""
    ), None


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser and every subcommand's, to name a flag that any of them takes."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                found += _parsers(sub)
    return found


def _run(sub: Any, name: str, summary: str) -> None:
    # Imported here: the suite's options are read by run's words alone, not at every command's start.
    from kitbench.suite import runargs

    run = sub.add_parser(
        name,
        help=summary,
        description="Run the kitbench suite and write one JSON record.",
        epilog=_EPILOG_RUN,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    runargs.add_arguments(run)


def _install(sub: Any, name: str, summary: str) -> None:
    install = sub.add_parser(
        name,
        help=summary,
        description="Print the command that installs PyTorch with the best acceleration this machine can use, "
        "the way pytorch.org's selector does, but detected, explained and pinned. Only the command "
        "goes to stdout (pipe it to a shell); notes go to stderr.",
        epilog="examples:\n"
        "  kitbench install-cmd --explain                      what fits here, and why\n"
        "  kitbench install-cmd --release 2.4.0 --format selector --os windows --compute cu121\n"
        "  kitbench install-cmd --driver 535.104.05 --gpu-cc 6.1   answer for another machine\n"
        "  kitbench install-cmd --gpu-gfx gfx942 --explain       an AMD MI300X; --intel-gpu: an Intel GPU\n"
        "  kitbench install-cmd --os linux --python-version 3.10 --glibc 2.35   Ubuntu 22.04\n"
        '  eval "$(kitbench install-cmd --package uv)"\n'
        "environment (as uv's --torch-backend=auto reads them): UV_AMD_GPU_ARCHITECTURE=gfx1100 (or a\n"
        "comma-separated list) replaces the AMD GPUs found, UV_CUDA_DRIVER_VERSION the NVIDIA driver",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    install.add_argument(
        "--release",
        default="stable",
        help="X.Y.Z, stable or nightly (a dated record, Start Locally form) (default: stable)",
    )
    install.add_argument("--package", default="pip", help="pip, conda or uv (default: pip)")
    install.add_argument(
        "--compute", default="auto", help="auto (detect), cpu, mps, cuXYZ, rocmX.Y or xpu (default: auto)"
    )
    install.add_argument(
        "--format",
        default="pinned",
        dest="fmt",
        help="pinned (the previous-versions page: exact versions) or selector (Start Locally)",
    )
    install.add_argument("--json", action="store_true", help="print command, compute, reasons, ... as JSON")
    install.add_argument(
        "--explain", action="store_true", help="show each probed fact with its source and each rejected alternative"
    )
    install.add_argument(
        "--refresh",
        action="store_true",
        help="read the wheel and build facts from the indexes first (kitbench facts refresh)",
    )
    machine = install.add_argument_group("answer for another machine")
    machine.add_argument("--os", help="linux, macos or windows")
    machine.add_argument("--arch", help="x86_64, aarch64 or arm64")
    machine.add_argument("--python-arch", help="the Python interpreter's arch (x86_64 under Rosetta)")
    machine.add_argument("--driver", help="NVIDIA driver version, e.g. 535.104.05")
    machine.add_argument(
        "--gpu-cc",
        action="append",
        default=[],
        metavar="MAJOR.MINOR",
        help="a GPU's compute capability: 8.6, 10.0, sm_86, sm_100, or 10 (a bare number "
        "under 20 is a major version) (repeatable)",
    )
    machine.add_argument(
        "--gpu-gfx",
        action="append",
        default=[],
        metavar="GFX",
        help="an AMD GPU's architecture, e.g. gfx942 (repeatable)",
    )
    machine.add_argument(
        "--intel-gpu",
        nargs="?",
        const=True,
        action="append",
        default=[],
        metavar="DEVICE_ID",
        help="answer as if there were an Intel GPU; with its PCI device id (lspci -nn's 8086:XXXX, "
        "e.g. 56a0), checked against the GPUs the XPU builds support (repeatable: an Arc "
        "card beside a UHD iGPU)",
    )
    machine.add_argument("--no-gpu", action="store_true", help="answer as if there were no GPU")
    machine.add_argument(
        "--python",
        metavar="PATH",
        dest="python_path",
        help="the interpreter torch goes into (default: the one running kitbench)",
    )
    machine.add_argument(
        "--python-version",
        metavar="X.Y[t]",
        help="that Python's version, for another machine (3.13t: a free-threaded build)",
    )
    machine.add_argument("--glibc", metavar="X.Y", help="the machine's glibc version (Linux)")
    machine.add_argument("--os-version", metavar="X.Y", help="the machine's macOS version")


def _container(sub: Any, name: str, summary: str) -> None:
    container = sub.add_parser(
        name,
        help=summary,
        description="Build docker/Dockerfile for a docker target of envs/targets/ (cached: a change to kitbench's "
        "code reuses the torch layers) and run `kitbench run` inside it with all GPUs.",
        epilog="arguments after -- go to `kitbench run` inside the container. "
        "environment: KITBENCH_BASE_IMAGE replaces the base image, KITBENCH_INDEX_URL the package index, "
        "KITBENCH_CA_BUNDLE adds a CA bundle for pip during the build (TLS-re-signing proxies), "
        "KITBENCH_GPUS=none runs without GPUs, KITBENCH_DOCKER_NETWORK sets the build and run network.",
    )
    container.add_argument("target", help="a docker target, e.g. cuda126")
    container.add_argument("--build-only", action="store_true", help="build the image, do not run it")


def _compare(sub: Any, name: str, summary: str) -> None:
    compare = sub.add_parser(
        name,
        help=summary,
        description="One row per record: target, machine, torch build, device, the MNIST epoch on CPU and on "
        "the accelerator, the speedup, test accuracy and peak pinned bandwidth; beside it, what "
        "differs in each environment from the first record's.",
        epilog="examples:\n  kitbench compare results/\n  kitbench compare 'results/*/*.json' --format markdown "
        "--plot compare.png",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("inputs", nargs="+", metavar="RECORD_OR_DIR", help="record files, directories or globs")
    compare.add_argument("--format", default="table", dest="fmt", help="table, markdown, csv or json")
    compare.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw epoch times and bandwidth curves")
    compare.add_argument("--force", action="store_true", help="replace a file already at --plot")


def _verify(sub: Any, name: str, summary: str) -> None:
    verify = sub.add_parser(
        name,
        help=summary,
        description="Compare every MNIST run of two records, paired by model, loop, device and batch size: the "
        "parameter digests bit for bit where both ran deterministically on the same build and "
        "hardware, loss curves and accuracies exactly on the same CPU build and threads, within a "
        "stated tolerance elsewhere. Each pair's rule, and what was not compared, is printed.",
    )
    verify.add_argument("reference", type=Path, metavar="REF")
    verify.add_argument("candidate", type=Path, metavar="CANDIDATE")
    verify.add_argument("--json", action="store_true", help="print the verdict as JSON")


def _report(sub: Any, name: str, summary: str) -> None:
    report = sub.add_parser(
        name,
        help=summary,
        description="Machines, availability, transfers, MNIST, the batch-size sweep, DDP, environments and "
        "every record's file, sha256 and command line; a section appears when a record holds its "
        "data. The HTML has inline SVG plots and needs no network, script or extra.",
        epilog="examples:\n  kitbench report results/\n  kitbench report results/fleet/1234 --format markdown "
        "-o report.md",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    report.add_argument("inputs", nargs="+", metavar="RECORD_OR_DIR", help="record files, directories or globs")
    report.add_argument(
        "-o", "--out", help="the page to write, or a directory to put it in (default report.html or report.md)"
    )
    report.add_argument("--format", default="html", dest="fmt", help="html or markdown")
    report.add_argument("--force", action="store_true", help="replace a file that is not a kitbench report")


def _replay(sub: Any, name: str, summary: str) -> None:
    replay = sub.add_parser(
        name,
        help=summary,
        description="Rebuild a record's environment (exact versions, its Python, hashes where known) in a fresh "
        "cached venv, run the same checks with the same options and seed, write a new record naming "
        "the old one, and verify the two.",
    )
    replay.add_argument("record", type=Path, metavar="RECORD")
    replay.add_argument(
        "--out", help="the new record, or a directory to put it in (default: results/replay/<name>-replay-<time>.json)"
    )
    replay.add_argument(
        "--local-by-name",
        action="store_true",
        help="install a package the record's machine took from a local file, and that carries no "
        "hash, by name and version from the index (refused otherwise: any index's package of "
        "that name would be taken for it)",
    )


def _project(sub: Any, name: str, summary: str) -> None:
    project = sub.add_parser(
        name,
        help=summary,
        description="Write or update a project's pyproject.toml (uv: an explicit index per PyTorch build, the torch "
        "family routed by platform, or by an extra where two machines share a platform but not a "
        "build) and, with --pixi, its pixi.toml (a feature and an environment per machine), so that "
        "each machine gets what install-cmd answers for it. The files remember their machines: "
        "run it again to add or replace one. Tables kitbench does not own are kept as they are.",
        epilog="examples:\n"
        "  kitbench probe --json > laptop.json                 on each machine, then, in the project:\n"
        "  kitbench project --machine laptop=laptop.json --machine h100=h100.json --machine ci='--os linux "
        "--no-gpu'\n"
        "  kitbench project --machine rtx5090='--os linux --driver 575.51.02 --gpu-cc 12.0' --pixi\n"
        "  kitbench project --fleet results/fleet/1234         every node of a fleet probe job\n"
        "Each machine's line to run (uv sync --extra cu126, pixi install -e h100) goes to stdout.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    project.add_argument(
        "directory", nargs="?", default=Path("."), type=Path, metavar="DIR", help="the project's folder (default: here)"
    )
    project.add_argument(
        "--machine",
        action="append",
        default=[],
        metavar="NAME=FILE|NAME='FLAGS'",
        help="a machine: the file `kitbench probe --json` wrote on it (or a run record of it), or "
        "install-cmd's flags "
        "for it (--os, --driver, --gpu-cc, --no-gpu, --python-version, ...) (repeatable)",
    )
    project.add_argument(
        "--fleet",
        type=Path,
        metavar="DIR",
        help="a fleet probe job's folder: each node's <node>.probe.json is a machine",
    )
    project.add_argument(
        "--drop",
        action="append",
        default=[],
        metavar="NAME",
        help="remove a machine the project remembers (repeatable)",
    )
    project.add_argument(
        "--release", help="X.Y.Z or stable (default: the one the project's files remember, else stable)"
    )
    project.add_argument("--pixi", action="store_true", help="write pixi.toml too (updated anyway once written)")
    project.add_argument(
        "--index",
        metavar="URL",
        help="a mirror of PyTorch's index, {compute} standing for the build, e.g. "
        "https://mirror.example/whl/{compute} (default: the one the project's files remember, "
        "else PyTorch's own)",
    )
    project.add_argument(
        "--name",
        help="the project's name where the files have none (default: the folder's, "
        "made a valid name: My Project is my-project)",
    )


def _probe(sub: Any, name: str, summary: str) -> None:
    probe = sub.add_parser(
        name,
        help=summary,
        description="Read OS, chip, Python arch, NVIDIA driver, GPUs, ROCm, WSL and "
        "container facts without importing torch.",
    )
    probe.add_argument("--json", action="store_true", help="print JSON")


def _facts(sub: Any, name: str, summary: str) -> None:
    facts = sub.add_parser(
        name,
        help=summary,
        description="install-cmd answers from facts baked into kitbench (envs/wheels.yaml, "
        "envs/releases/) and from a cache of the indexes themselves "
        "(facts/ in KITBENCH_CACHE, else $XDG_CACHE_HOME/kitbench, else "
        "~/.cache/kitbench), which refresh fills.",
    )
    # The metavar is argparse's own usage text; named, a missing verb's error says it, not the dest's name.
    verbs = facts.add_subparsers(dest="facts_command", metavar="{refresh}", required=True, parser_class=_Parser)
    verbs.add_parser(
        "refresh",
        help="read PyPI (where pip reads) and PyTorch's index (KITBENCH_PYTORCH_INDEX) "
        "for torch, torchvision and torchaudio into the cache",
    )


def _slurm_options(parser: argparse.ArgumentParser) -> None:
    slurm = parser.add_argument_group("Slurm (written into the job script as #SBATCH lines)")
    for name in ("partition", "account", "time", "gres", "constraint", "qos"):
        slurm.add_argument(f"--{name}", metavar=name.upper())
    slurm.add_argument(
        "--sbatch-arg",
        dest="sbatch_args",
        action="append",
        default=[],
        metavar="ARG",
        help="any other sbatch option, e.g. --sbatch-arg=--mem=4G (repeatable)",
    )
    slurm.add_argument(
        "--per", default="node", help="one task per node, or per distinct gres or feature set (default: node)"
    )
    slurm.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="stop waiting (the job runs on) after this long (default: the job's time limit and 10 minutes)",
    )
    slurm.add_argument("--dry-run", action="store_true", help="print the job script and submit nothing")
    slurm.add_argument("--json", action="store_true", help="print the gathered results as JSON")


def _fleet(sub: Any, name: str, summary: str) -> None:
    fleet = sub.add_parser(
        name,
        help=summary,
        description="Submit one Slurm job array (one task per node, or per node type), wait for it and gather "
        "what every node wrote into one table. Results go to $KITBENCH_RESULTS/fleet/<jobid>/ "
        "(default results/fleet/), which must be on storage every node shares.",
    )
    verbs = fleet.add_subparsers(dest="fleet_command", metavar="{probe,run}", required=True, parser_class=_Parser)
    probe = verbs.add_parser("probe", help="kitbench probe and install-cmd on every node (no torch needed)")
    probe.add_argument("--release", default="stable", help="the torch release to advise on (default: stable)")
    probe.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="[ARCH=]PATH",
        help="the Python that runs kitbench on the nodes (default: this one; it must exist on every "
        "node); ARCH=PATH for the nodes of another architecture",
    )
    _slurm_options(probe)
    run = verbs.add_parser(
        "run",
        help="a target's suite on every node; arguments after -- go to kitbench run",
        epilog="example: kitbench fleet run cpu --partition gpu -- --quick --check availability",
    )
    run.add_argument("target", help="a target of envs/targets/, e.g. cpu or cuda126")
    run.add_argument(
        "--venv",
        action="append",
        default=[],
        metavar="[ARCH=]PATH",
        help="a venv target's environment on shared storage (default: the checkout's .nox/<target>, "
        "built once with nox if missing); ARCH=PATH for the nodes of another architecture "
        "(default: built once through Slurm on one of them, in .nox/<arch>/<target>)",
    )
    run.add_argument(
        "--verify",
        action="store_true",
        help="check every record against the reference node's (kitbench verify's rules)",
    )
    run.add_argument("--reference", metavar="NODE", help="the reference node for --verify (default: the first ok)")
    run.add_argument(
        "--containers",
        default="auto",
        help="a docker target's container support: pyxis "
        "(srun --container-image), oci (srun --container, a bundle "
        "exported from the image) or auto (default)",
    )
    run.add_argument(
        "--image",
        metavar="REF",
        help="with pyxis: the image enroot imports (default: dockerd://<the image kitbench builds>)",
    )
    _slurm_options(run)
    gather = verbs.add_parser("gather", help="gather a finished or detached fleet job")
    gather.add_argument("job", help="the Slurm job id")
    gather.add_argument("--verify", action="store_true")
    gather.add_argument("--reference", metavar="NODE")
    gather.add_argument("--json", action="store_true")


# Each command in the order `kitbench --help` lists them: its line there, and what builds its parser.
_COMMANDS: dict[str, tuple[str, Callable[[Any, str, str], None]]] = {
    "run": ("run the suite (availability, tensor moves, MNIST) and write a record", _run),
    "install-cmd": ("print the PyTorch install command for this machine (no torch needed)", _install),
    "container": ("build a docker target's image and run the suite in it", _container),
    "compare": ("compare run records: a table (or markdown, csv, json) and a plot", _compare),
    "verify": ("did CANDIDATE reproduce REF? exit 0 if so, 1 if not, 2 if they cannot be compared", _verify),
    "report": ("one self-contained page (HTML or markdown) for any set of run records", _report),
    "fleet": ("install advice and the suite on every node of a Slurm cluster", _fleet),
    "replay": (
        "rebuild RECORD's environment here, rerun its checks, verify: exit 0 reproduced, 1 not, 2 cannot rebuild",
        _replay,
    ),
    "project": ("one uv (and pixi) project that installs each machine's own PyTorch build (no torch needed)", _project),
    "probe": ("print this machine's facts (no torch needed)", _probe),
    "facts": ("the wheel and build facts install-cmd answers from", _facts),
}


def build(only: str | None = None) -> argparse.ArgumentParser:
    """kitbench's parser. With ``only``, a command's name, one that knows that command alone, to read words that
    start with it (``parse``): the command's parser is whole, so its help and errors read the same, and a start
    does not build eleven parsers to use one. Its top names no other command, but nothing can show that: with a
    command first, the top's help and its errors (an unknown or a missing command) never come up."""
    parser = _Parser(
        prog="kitbench",
        description="Reproducible PyTorch acceleration checks: what to install, whether acceleration works, how fast.",
    )
    parser.add_argument("--version", action="version", version=f"kitbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (summary, fill) in _COMMANDS.items():
        if only is None or only == name:
            fill(sub, name, summary)
    return parser


def parse(words: Sequence[str]) -> argparse.Namespace:
    """``words`` read as kitbench's arguments: by the parser of their first word alone where that is a command,
    as it nearly always is (argparse takes the first word that is no flag for the command), else by the whole."""
    words = list(words)
    return build(words[0] if words and words[0] in _COMMANDS else None).parse_args(words)
