"""Write envs/intel_gpus.yaml: the PCI device ids of the Intel GPUs PyTorch's XPU builds support.

Which GPU families the builds support is PyTorch's own page, "Getting Started on Intel GPU"
(docs.pytorch.org/docs/<release>/notes/get_start_xpu.html, Hardware Prerequisite); which device
ids each family has is the Linux kernel's table, ``include/drm/intel/pciids.h`` (one macro per
family, the ids i915 and xe bind to). This reads that header from a git checkout of torvalds/linux
at a named commit, so the data says exactly where it came from:

    python envs/scripts/intel_gpus_from_linux.py /path/to/linux.git 0755a4e3e809610a14befc9ad28d35e2e460da68

Every other Intel display device (UHD, Iris Xe, HD Graphics) is absent, and gets the CPU build. The file is
written as data (pyyaml) under a fixed header, checked against its schema, then renamed into place; a header
without a family's macro, a macro that names itself, or a git that fails is one ERROR line, the file left as it was.
"""

from __future__ import annotations

import re
import sys
from datetime import date
from pathlib import Path

from kitbench.records import manifest

import _shared

# The families of PyTorch's page, each as the kernel's macro names it; validated: on PyTorch's list
# (the 2.15 page), else the same silicon as a family on it (Flex is DG2; MTL-U, ARL-U/S share their
# family's Xe-LPG).
FAMILIES = (
    ("Intel Arc A-Series (Alchemist, DG2)", "INTEL_DG2_IDS", True),
    ("Intel Data Center GPU Flex (ATS-M, DG2 silicon)", "INTEL_ATS_M_IDS", False),
    ("Intel Data Center GPU Max (Ponte Vecchio)", "INTEL_PVC_IDS", True),
    ("Intel Arc B-Series (Battlemage)", "INTEL_BMG_IDS", True),
    ("Intel Core Ultra (Meteor Lake) Arc graphics", "INTEL_MTL_IDS", True),
    ("Intel Core Ultra Series 2 (Arrow Lake) Arc graphics", "INTEL_ARL_IDS", True),
    ("Intel Core Ultra Series 2 (Lunar Lake) Arc graphics", "INTEL_LNL_IDS", True),
    ("Intel Core Ultra Series 3 (Panther Lake) Arc graphics", "INTEL_PTL_IDS", True),
)
_DEFINE = re.compile(r"^#define (INTEL_\w+_IDS)\(MACRO__, \.\.\.\)((?:.*\\\n)*.*)$", re.MULTILINE)
_ID = re.compile(r"MACRO__\((0[xX][0-9a-fA-F]{4})")
_NESTED = re.compile(r"(INTEL_\w+_IDS)\(MACRO__")
HEADER = """\
The Intel GPUs PyTorch's XPU builds support, by PCI device id: install-cmd answers xpu only for these;
every other Intel display device (UHD, Iris Xe, HD Graphics) gets the CPU build, with a note.
Written by envs/scripts/intel_gpus_from_linux.py (the families from PyTorch's "Getting Started on Intel GPU",
the ids of each from the Linux kernel's table); validated: false marks a family that is not on PyTorch's
list but is the same silicon as one that is (Flex is DG2). Read only when an Intel GPU is in question."""


def expand(header: str) -> dict[str, list[str]]:
    """Every ``INTEL_*_IDS`` macro of the header as its device ids ("0x56a0"), nested macros expanded."""
    bodies = dict(_DEFINE.findall(header))

    def ids(name: str, within: tuple[str, ...] = ()) -> list[str]:
        if name in within or name not in bodies:
            raise _shared.Refused(
                f"{name} is {'defined' if name in within else 'used'} in pciids.h "
                f"{'through itself' if name in within else 'but not defined'}",
                hint="read the header at another commit",
            )
        body = bodies[name]
        found = [f"0x{i[2:].lower()}" for i in _ID.findall(body)]
        for nested in _NESTED.findall(body):
            found += ids(nested, (*within, name))
        return found

    return {name: sorted(set(ids(name))) for name in bodies}


def main(git_dir: str, commit: str, out: Path | None = None) -> int:
    out = out or manifest.envs_dir() / "intel_gpus.yaml"
    macros = expand(_shared.git_show(git_dir, commit, "include/drm/intel/pciids.h"))
    missing = [macro for _, macro, _ in FAMILIES if macro not in macros]
    if missing:
        raise _shared.Refused(
            f"pciids.h at {commit[:12]} defines no {', '.join(missing)}", hint="a family was renamed: update FAMILIES"
        )
    data = {
        "source": f"torvalds/linux@{commit[:8]} include/drm/intel/pciids.h (the ids of each family); the "
        "families from docs.pytorch.org/docs/2.15/notes/get_start_xpu.html, Hardware Prerequisite",
        "read": date.today().isoformat(),
        "families": [
            {"name": name, "macro": macro, "validated": validated, "ids": macros[macro]}
            for name, macro, validated in FAMILIES
        ],
    }
    _shared.write(out, _shared.dump(data, HEADER, flow=True), "intel_gpus")
    print(f"wrote {out} ({len(FAMILIES)} families)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: intel_gpus_from_linux.py PATH_TO_LINUX_GIT_DIR COMMIT")
    _shared.run(lambda: main(sys.argv[1], sys.argv[2]))
