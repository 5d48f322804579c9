"""Print the ``rocm:`` entries of envs/vendors.yaml from uv's recorded arch lists.

uv keeps, per PyTorch ROCm index, the gfx architectures that index's torch
reported through ``torch.cuda.get_arch_list()`` (``LINUX_AMD_GPU_DRIVERS`` in
crates/uv-torch/src/backend.rs). This reads that table from a git checkout of
astral-sh/uv at a named commit, so the data says exactly where it came from:

    python envs/scripts/rocm_arches_from_uv.py /path/to/uv.git 26a9dd4b2125bc271b47855e1fa0c49af3365db5

uv only names the architectures its own enum knows (gfx900 .. gfx1201); a gfx
outside that set (gfx1103, for one) is absent from these lists whether or not
the build carries it.

The entries are made by pyyaml and checked against vendors.yaml's schema in the file's place (uv's rows for the
platforms it knows, the file's own for the rest) before they are printed; a table not found, an arch or platform
in another form, or a git that fails is one ERROR line.
"""

from __future__ import annotations

import re
import sys

from kitbench.records import manifest

import _shared

_PAIR = re.compile(r"\(TorchBackend::(Rocm\d+), AmdGpuArchitecture::(Gfx\w+)\)")
_RENAME = re.compile(r'#\[serde\(rename = "(rocm[0-9.]+)"\)\][^\n]*\n[^\n]*\n\s*(Rocm\d+),')


def entries(text: str, commit: str) -> list[dict[str, object]]:
    """The ``rocm:`` entries of uv's table in ``text`` (backend.rs at ``commit``)."""
    start = text.find("static LINUX_AMD_GPU_DRIVERS")
    end = text.find("});", start)
    if start < 0 or end < 0:
        raise _shared.Refused(
            f"backend.rs at {commit[:12]} has no LINUX_AMD_GPU_DRIVERS table",
            hint="uv moved it: read it at another commit, or update this script",
        )
    names = {variant: name for name, variant in _RENAME.findall(text)}
    arches: dict[str, list[str]] = {}
    for variant, gfx in _PAIR.findall(text[start:end]):
        if variant not in names:
            raise _shared.Refused(
                f"backend.rs at {commit[:12]}: TorchBackend::{variant} has no serde name",
                hint="uv renamed its variants: update this script",
            )
        arches.setdefault(names[variant], []).append(gfx.lower())
    return [
        {
            "compute": compute,
            "arches": found,
            "source": f"astral-sh/uv@{commit[:8]} crates/uv-torch/src/backend.rs LINUX_AMD_GPU_DRIVERS "
            "(torch.cuda.get_arch_list() of that index's torch, as uv recorded it)",
        }
        for compute, found in arches.items()
    ]


def main(git_dir: str, commit: str) -> int:
    found = entries(_shared.git_show(git_dir, commit, "crates/uv-torch/src/backend.rs"), commit)
    path = manifest.envs_dir() / "vendors.yaml"
    data = manifest.load(path, "vendors").data
    ours = {e["compute"] for e in found}
    merged = {**data, "rocm": found + [e for e in data["rocm"] if e["compute"] not in ours]}
    _shared.checked(_shared.dump(merged, flow=True), path, "vendors")
    print(_shared.dump({"rocm": found}, flow=True), end="")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: rocm_arches_from_uv.py PATH_TO_UV_GIT_DIR COMMIT")
    _shared.run(lambda: main(sys.argv[1], sys.argv[2]))
