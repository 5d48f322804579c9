"""Write ``tests/resources/published/build-matrix.tsv``: the CUDA and ROCm builds of every torch series,
as pytorch/test-infra's binary build matrix names them, which ``envs/releases/*.yaml`` must agree with.

Reads the history of ``tools/scripts/generate_binary_build_matrix.py`` in a clone of pytorch/test-infra
(the file PyTorch's release builds and pytorch.org's Start Locally page are generated from). A series'
builds are those of its own channel at the last commit that names it:

- ``release`` while it is CURRENT_STABLE_VERSION (what was published);
- else ``test`` while it is CURRENT_CANDIDATE_VERSION (the release candidates: the clone ends before it
  became stable);
- else ``nightly`` while it is CURRENT_NIGHTLY_VERSION (the clone ends before its branch cut).

Only the first is the release's own record; the TSV says which one each row is, and from which commit.

    python envs/scripts/build_matrix.py /path/to/test-infra tests/resources/published/build-matrix.tsv

The matrix is a stranger's Python: each value is taken only in the form the TSV's readers expect (a CUDA or ROCm
version, never a tab or a line break), the rows are checked, and the file is replaced in one rename; anything else
(no clone there, a git that fails, a value in another form) is one ERROR line and exit 1, the file left as it was.
"""

from __future__ import annotations

import ast
import datetime
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from kitbench import _files

import _shared

MATRIX = "tools/scripts/generate_binary_build_matrix.py"
CHANNELS = (
    ("release", "CURRENT_STABLE_VERSION"),
    ("test", "CURRENT_CANDIDATE_VERSION"),
    ("nightly", "CURRENT_NIGHTLY_VERSION"),
)
# Each column's form, as tests/advice/test_selector.py reads the file: a series, its channel, a commit and its
# date, then space-separated CUDA and ROCm versions.
_COLUMNS = (
    re.compile(r"2\.[0-9]{1,3}"),
    re.compile("release|test|nightly"),
    re.compile("[0-9a-f]{8}"),
    re.compile("[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    *[re.compile(r"([0-9]{1,3}(\.[0-9]{1,3}){1,3}( |$))*")] * 3,
)


def constants(source: str) -> dict[str, Any]:
    """The module's literal top-level assignments (the matrix is data kept as Python)."""
    found: dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # MemoryError: nesting past the parser's
        return found  # a broken commit of the file (one in 2022): the next one fixes it
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, MemoryError, RecursionError):  # not a literal, {[1]: 2}, nesting
                continue
    return found


def channel_list(values: dict[str, Any], name: str, channel: str) -> list[str]:
    table = values.get(f"{name}_DICT")
    if isinstance(table, dict):
        return list(table.get(channel, []))
    plain = values.get(name)  # before the per-channel dicts: one list for every channel
    return list(plain) if isinstance(plain, list) else []


def series(version: object) -> str | None:
    """A 2.x version's series ("2.15"); None for anything else (a 1.x, or no version)."""
    found = re.match(r"(2\.[0-9]{1,3})(\.|$)", version) if isinstance(version, str) else None
    return found.group(1) if found else None


def _checked(row: tuple[str, ...]) -> str:
    for value, form in zip(row, _COLUMNS, strict=True):
        if not form.fullmatch(value):
            raise _shared.Refused(
                f"series {_shared.shown(row[0])} at {_shared.shown(row[2])}: {value[:80]!r} is not "
                "in the form its column takes",
                hint="read the matrix at that commit; nothing was written",
            )
    return "\t".join(row)


def main(clone: Path, out: Path) -> int:
    if not (clone / MATRIX).is_file():
        raise _shared.Refused(
            f"{clone} is no clone of pytorch/test-infra (no {MATRIX})",
            hint="git clone https://github.com/pytorch/test-infra (its whole history)",
        )

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(clone), *args], capture_output=True, text=True, check=True, errors="replace"
            ).stdout
        except (OSError, subprocess.CalledProcessError) as failed:
            why = getattr(failed, "stderr", None) or str(failed)
            raise _shared.Refused(
                f"git {args[0]} in {clone} failed: {why.strip()[:200]}",
                hint="a full clone (fetch-depth: 0) with git on PATH",
            ) from None

    history = [line.split() for line in git("log", "--reverse", "--format=%H %cs", "--", MATRIX).splitlines()]
    rows: dict[str, tuple[int, str, str, str, dict[str, Any]]] = {}  # series -> rank, channel, commit, date
    for commit, date in history:
        values = constants(git("show", f"{commit}:{MATRIX}"))
        for rank, (channel, variable) in enumerate(CHANNELS):
            name = series(values.get(variable))
            if name is None:
                continue
            # A better-ranked channel's record is never replaced by a worse one (nightly never overrides test).
            if name not in rows or rows[name][0] >= rank:
                rows[name] = (rank, channel, commit, date, values)
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    lines = [
        f"# Written by envs/scripts/build_matrix.py from pytorch/test-infra {MATRIX}, read {today}.",
        "# series\tchannel\tcommit\tcommit date\tCUDA\tROCm\tCUDA kept off Start Locally",
    ]
    for name in sorted(rows, key=lambda s: tuple(int(p) for p in s.split("."))):
        _, channel, commit, date, values = rows[name]
        hidden = values.get("CUDA_ARCHES_NO_GETTING_STARTED", [])
        lines.append(
            _checked(
                (
                    name,
                    channel,
                    commit[:8],
                    date,
                    _joined(channel_list(values, "CUDA_ARCHES", channel)),
                    _joined(channel_list(values, "ROCM_ARCHES", channel)),
                    _joined(hidden),
                )
            )
        )
    _files.write(out, "\n".join(lines) + "\n", replace=True, what="the build matrix")
    print(f"wrote {out} ({len(rows)} series)")
    return 0


def _joined(values: object) -> str:
    return " ".join(map(str, values)) if isinstance(values, list) else str(values)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: build_matrix.py PATH_TO_PYTORCH_TEST_INFRA_CLONE OUT.tsv")
    _shared.run(lambda: main(Path(sys.argv[1]), Path(sys.argv[2])))
