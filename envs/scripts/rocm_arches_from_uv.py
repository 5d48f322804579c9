"""Print the ``rocm:`` entries of envs/vendors.yaml from uv's recorded arch lists.

uv keeps, per PyTorch ROCm index, the gfx architectures that index's torch
reported through ``torch.cuda.get_arch_list()`` (``LINUX_AMD_GPU_DRIVERS`` in
crates/uv-torch/src/backend.rs). This reads that table from a git checkout of
astral-sh/uv at a named commit, so the data says exactly where it came from:

    python envs/scripts/rocm_arches_from_uv.py /path/to/uv.git 26a9dd4b2125bc271b47855e1fa0c49af3365db5

uv only names the architectures its own enum knows (gfx900 .. gfx1201); a gfx
outside that set (gfx1103, for one) is absent from these lists whether or not
the build carries it.
"""

from __future__ import annotations

import re
import subprocess
import sys

_PAIR = re.compile(r"\(TorchBackend::(Rocm\d+), AmdGpuArchitecture::(Gfx\w+)\)")
_RENAME = re.compile(r'#\[serde\(rename = "(rocm[0-9.]+)"\)\][^\n]*\n[^\n]*\n\s*(Rocm\d+),')


def main(git_dir: str, commit: str) -> None:
    text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:crates/uv-torch/src/backend.rs"],
                          capture_output=True, text=True, check=True).stdout
    names = {variant: name for name, variant in _RENAME.findall(text)}
    table = text[text.index("static LINUX_AMD_GPU_DRIVERS"):]
    table = table[:table.index("});")]
    arches: dict[str, list[str]] = {}
    for variant, gfx in _PAIR.findall(table):
        arches.setdefault(names[variant], []).append(gfx.lower())
    for compute, found in arches.items():
        print(f"  - {{compute: {compute}, arches: [{', '.join(found)}],")
        print(f'     source: "astral-sh/uv@{commit[:8]} crates/uv-torch/src/backend.rs LINUX_AMD_GPU_DRIVERS '
              '(torch.cuda.get_arch_list() of that index\'s torch, as uv recorded it)"}')


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
