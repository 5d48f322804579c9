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

    python envs/scripts/build_matrix.py /path/to/test-infra > tests/resources/published/build-matrix.tsv
"""

from __future__ import annotations

import ast
import datetime
import subprocess
import sys
from pathlib import Path
from typing import Any

MATRIX = "tools/scripts/generate_binary_build_matrix.py"
CHANNELS = (("release", "CURRENT_STABLE_VERSION"), ("test", "CURRENT_CANDIDATE_VERSION"),
            ("nightly", "CURRENT_NIGHTLY_VERSION"))


def constants(source: str) -> dict[str, Any]:
    """The module's literal top-level assignments (the matrix is data kept as Python)."""
    found: dict[str, Any] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found        # a broken commit of the file (one in 2022): the next one fixes it
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def channel_list(values: dict[str, Any], name: str, channel: str) -> list[str]:
    table = values.get(f"{name}_DICT")
    if isinstance(table, dict):
        return list(table.get(channel, []))
    plain = values.get(name)      # before the per-channel dicts: one list for every channel
    return list(plain) if isinstance(plain, list) else []


def series(version: object) -> str | None:
    return ".".join(version.split(".")[:2]) if isinstance(version, str) else None


def main(clone: Path) -> int:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout

    history = [line.split() for line in git("log", "--reverse", "--format=%H %cs", "--", MATRIX).splitlines()]
    rows: dict[str, tuple[int, str, str, str, dict[str, Any]]] = {}     # series -> rank, channel, commit, date
    for commit, date in history:
        values = constants(git("show", f"{commit}:{MATRIX}"))
        for rank, (channel, variable) in enumerate(CHANNELS):
            name = series(values.get(variable))
            if name is None or not name.startswith("2."):
                continue
            # A better-ranked channel's record is never replaced by a worse one (nightly never overrides test).
            if name not in rows or rows[name][0] >= rank:
                rows[name] = (rank, channel, commit, date, values)
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    print(f"# Written by envs/scripts/build_matrix.py from pytorch/test-infra {MATRIX}, read {today}.")
    print("# series\tchannel\tcommit\tcommit date\tCUDA\tROCm\tCUDA kept off Start Locally")
    for name in sorted(rows, key=lambda s: tuple(int(p) for p in s.split("."))):
        _, channel, commit, date, values = rows[name]
        hidden = values.get("CUDA_ARCHES_NO_GETTING_STARTED", [])
        print("\t".join((name, channel, commit[:8], date, " ".join(channel_list(values, "CUDA_ARCHES", channel)),
                         " ".join(channel_list(values, "ROCM_ARCHES", channel)), " ".join(hidden))))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_matrix.py PATH_TO_PYTORCH_TEST_INFRA_CLONE")
    sys.exit(main(Path(sys.argv[1])))
