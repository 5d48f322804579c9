"""Print the ``integrated:`` entry of envs/vendors.yaml from LLVM's AMDGPU processor table.

LLVM's ``llvm/docs/AMDGPUUsage.rst`` lists every AMDGPU processor with a ``dGPU/APU``
column; an APU's GPU is the integrated one of a Ryzen (or older A-series) chip. This
reads that table from a git checkout of llvm/llvm-project at a named commit, so the
data says exactly where it came from:

    python envs/scripts/apu_gfx_from_llvm.py /path/to/llvm-project.git 001388cf6923b54a564faf4f2daf66c1a3ab3527

A processor listed as both (none is today) would be left out: a gfx shared by a
discrete card must never be taken for an integrated one. The entry is made by pyyaml and checked against
vendors.yaml's schema in the file's place before it is printed; an empty table or a git that fails is one ERROR
line.
"""

from __future__ import annotations

import re
import sys

from kitbench.records import manifest

import _shared

# A processor row: ``gfx1036`` (alternative names) ``amdgcn`` APU ...
_ROW = re.compile(r"^\s+``(gfx[0-9a-f]+)``.*?``amdgcn``\s+(dGPU|APU)\b", re.MULTILINE)


def apus(text: str) -> list[str]:
    """The gfx names the processor table marks APU (and never dGPU), in the table's order."""
    kinds: dict[str, set[str]] = {}
    for gfx, kind in _ROW.findall(text):
        kinds.setdefault(gfx, set()).add(kind)
    return [gfx for gfx, found in kinds.items() if found == {"APU"}]


def main(git_dir: str, commit: str) -> int:
    found = apus(_shared.git_show(git_dir, commit, "llvm/docs/AMDGPUUsage.rst"))
    if not found:
        raise _shared.Refused(
            f"AMDGPUUsage.rst at {commit[:12]} has no processor marked APU",
            hint="LLVM changed the table's form: read it at another commit, or update this script",
        )
    entry = {
        "gfx": found,
        "source": f"llvm/llvm-project@{commit[:8]} llvm/docs/AMDGPUUsage.rst, the AMDGPU "
        "Processors table: the processors its dGPU/APU column marks APU",
    }
    path = manifest.envs_dir() / "vendors.yaml"
    _shared.checked(
        _shared.dump({**manifest.load(path, "vendors").data, "integrated": entry}, flow=True), path, "vendors"
    )
    print(_shared.dump({"integrated": entry}, flow=True), end="")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: apu_gfx_from_llvm.py PATH_TO_LLVM_PROJECT_GIT_DIR COMMIT")
    _shared.run(lambda: main(sys.argv[1], sys.argv[2]))
