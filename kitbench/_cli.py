"""The command line: argument parsing and output only. All work is in the library.

Every ``KitbenchError`` becomes ``ERROR: <message>`` and ``hint: <hint>`` on
stderr with the error's exit code, here and nowhere else.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from kitbench import __version__
from kitbench.errors import KitbenchError, UsageError

_EPILOG_RUN = """\
examples:
  kitbench run                                  all checks on the best device found
  kitbench run --check mnist --model cnn --loop resident --epochs 2
  kitbench run --device cpu --quick --json      a fast run, the record on stdout
  kitbench run --data ~/datasets --offline      never download; fail if MNIST is absent

The record is written to --out, default results/<target>/<UTC time>.json
(KITBENCH_RESULTS moves the root; KITBENCH_TARGET names the target).
MNIST is read from --data, default KITBENCH_DATA or ~/.cache/kitbench/data.
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, hint=f"see: {self.prog} --help")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kitbench", description="Reproducible PyTorch acceleration checks: what to install, "
                     "whether acceleration works, how fast.")
    parser.add_argument("--version", action="version", version=f"kitbench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = sub.add_parser("run", help="run the suite (availability, tensor moves, MNIST) and write a record",
                         description="Run the kitbench suite and write one JSON record.", epilog=_EPILOG_RUN,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("--check", dest="checks", action="append", metavar="NAME",
                     help="availability, moves or mnist (repeatable; default: all three, in that order)")
    run.add_argument("--device", default="auto",
                     help="auto (CUDA, then MPS, then CPU), cpu, cuda, cuda:N or mps (default: auto)")
    run.add_argument("--data", type=Path, help="directory holding MNIST/raw (default: KITBENCH_DATA or the cache)")
    run.add_argument("--offline", action="store_true", help="never download MNIST")
    run.add_argument("--out", type=Path, help="record file (default: results/<target>/<UTC time>.json)")
    run.add_argument("--quick", action="store_true",
                     help="fewer sizes and repeats; MNIST on the first 6,000 training images")
    run.add_argument("--json", action="store_true", help="print the record as JSON on stdout instead of tables")
    mnist = run.add_argument_group("MNIST")
    mnist.add_argument("--model", dest="models", action="append", metavar="MODEL",
                       help="fnn (784-512-256-128-64-10) or cnn (pytorch/examples); repeatable (default: fnn)")
    mnist.add_argument("--loop", dest="loops", action="append", metavar="LOOP",
                       help="tutorial (DataLoader, batches moved in the loop) or resident (dataset on the "
                            "device); repeatable (default: both)")
    mnist.add_argument("--epochs", type=int, default=1, help="timed epochs per run (default: 1)")
    mnist.add_argument("--batch-size", type=int, default=64, help="(default: 64)")
    mnist.add_argument("--seed", type=int, default=0, help="same seed, same result on CPU (default: 0)")
    mnist.add_argument("--threads", type=_positive_int, help="CPU threads for torch (default: torch's choice)")
    mnist.add_argument("--limit", type=int, help="train on the first N images only")

    probe = sub.add_parser("probe", help="print this machine's facts (no torch needed)",
                           description="Read OS, chip, Python arch, NVIDIA driver, GPUs, ROCm, WSL and "
                                       "container facts without importing torch.")
    probe.add_argument("--json", action="store_true", help="print JSON")
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from kitbench import _ui, records, suite
    from kitbench.checks.base import LOOPS, Options

    options = Options(
        checks=tuple(args.checks or ("availability", "moves", "mnist")), device=args.device, data=args.data,
        offline=args.offline, quick=args.quick, models=tuple(args.models or ("fnn",)),
        loops=tuple(args.loops or LOOPS), epochs=args.epochs, batch_size=args.batch_size, seed=args.seed,
        threads=args.threads, train_limit=args.limit if args.limit is not None else (6000 if args.quick else None))
    out = args.out or records.default_path()
    record = suite.run(options, out, progress=_ui.RichProgress())
    if args.json:
        print(json.dumps(record, indent=2))
    else:
        _ui.run_summary(record, str(out))
    return 0 if record["status"] == "ok" else 1


def _cmd_probe(args: argparse.Namespace) -> int:
    import dataclasses

    from kitbench.probe import probe

    facts = dataclasses.asdict(probe())
    if args.json:
        print(json.dumps(facts, indent=2))
        return 0
    sources = facts.pop("sources")
    for key, value in facts.items():
        if key == "gpus":
            value = ", ".join(f"{g['index']}: {g['name']} (sm {g['capability']})" for g in value) or "none"
        note = f"  [{sources[key]}]" if key in sources else ""
        print(f"{key:15} {value}{note}")
    return 0


_COMMANDS: dict[str, Any] = {"run": _cmd_run, "probe": _cmd_probe}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _build_parser().parse_args(argv)
        code: int = _COMMANDS[args.command](args)
        return code
    except KitbenchError as error:
        print(f"ERROR: {error.message}", file=sys.stderr)
        if error.hint:
            print(f"hint: {error.hint}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("ERROR: interrupted", file=sys.stderr)
        return 130
