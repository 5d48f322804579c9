"""Print envs/intel_gpus.yaml: the PCI device ids of the Intel GPUs PyTorch's XPU builds support.

Which GPU families the builds support is PyTorch's own page, "Getting Started on Intel GPU"
(docs.pytorch.org/docs/<release>/notes/get_start_xpu.html, Hardware Prerequisite); which device
ids each family has is the Linux kernel's table, ``include/drm/intel/pciids.h`` (one macro per
family, the ids i915 and xe bind to). This reads that header from a git checkout of torvalds/linux
at a named commit, so the data says exactly where it came from:

    python envs/scripts/intel_gpus_from_linux.py /path/to/linux.git 0755a4e3e809610a14befc9ad28d35e2e460da68

Every other Intel display device (UHD, Iris Xe, HD Graphics) is absent, and gets the CPU build.
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date

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


def expand(header: str) -> dict[str, list[str]]:
    """Every ``INTEL_*_IDS`` macro of the header as its device ids ("0x56a0"), nested macros expanded."""
    bodies = dict(_DEFINE.findall(header))

    def ids(name: str) -> list[str]:
        body = bodies[name]
        found = [f"0x{i[2:].lower()}" for i in _ID.findall(body)]
        for nested in _NESTED.findall(body):
            found += ids(nested)
        return found

    return {name: sorted(set(ids(name))) for name in bodies}


def main(git_dir: str, commit: str) -> None:
    header = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:include/drm/intel/pciids.h"],
                            capture_output=True, text=True, check=True).stdout
    macros = expand(header)
    print(f'source: "torvalds/linux@{commit[:8]} include/drm/intel/pciids.h (the ids of each family); the families '
          'from docs.pytorch.org/docs/2.15/notes/get_start_xpu.html, Hardware Prerequisite"')
    print(f'read: "{date.today().isoformat()}"')
    print("families:")
    for name, macro, validated in FAMILIES:
        print(f'  - name: "{name}"')
        print(f"    macro: {macro}")
        print(f"    validated: {'true' if validated else 'false'}")
        quoted = ", ".join(f'"{i}"' for i in macros[macro])      # quoted: YAML reads a bare 0x56a0 as a number
        print(f"    ids: [{quoted}]")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
