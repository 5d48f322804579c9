"""Write ``envs/wheels.yaml``: which wheels PyPI holds for each torch release kitbench knows.

Read from PyPI's own index, the simple API's JSON form (PEP 691), one request per
package; a wheel's file name is all it needs (PEP 427: name-version-python-abi-platform).
For each release in ``envs/releases/*.yaml`` and its paired torchvision, it records
the platform tags and, per platform, the Python tags: ``cp310`` installs on CPython 3.10,
``cp313t`` on its free-threaded build. Yanked files are left out (pip skips them).

    PYTHONPATH=. python envs/scripts/fetch_wheels.py            # rewrites envs/wheels.yaml

Builds that live only on download.pytorch.org (cu*, rocm*, +cpu) are not on PyPI;
kitbench assumes they carry the tags of the same release's PyPI wheels, and says so.
"""

from __future__ import annotations

import datetime
import json
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path

from kitbench import selector

INDEX = "https://pypi.org/simple/{package}/"
ACCEPT = "application/vnd.pypi.simple.v1+json"
OUT = Path(__file__).resolve().parent.parent / "wheels.yaml"


def index(package: str) -> list[dict[str, object]]:
    request = urllib.request.Request(INDEX.format(package=package), headers={"Accept": ACCEPT})
    with urllib.request.urlopen(request, timeout=60) as response:
        files: list[dict[str, object]] = json.load(response)["files"]
    return files


def python_tag(interpreter: str, abi: str) -> str:
    # cp310-cp310 and cp310-none (2.6.0's macOS wheels) both install on CPython 3.10; cp313-cp313t only free-threaded.
    return interpreter + ("t" if abi.endswith("t") else "")


def wheels(files: list[dict[str, object]], version: str) -> tuple[dict[str, list[str]], set[str]]:
    """Platform tag -> Python tags of ``version``'s wheels, and their Requires-Python."""
    found: dict[str, set[str]] = defaultdict(set)
    requires: set[str] = set()
    for entry in files:
        name = str(entry["filename"])
        if not name.endswith(".whl") or entry.get("yanked"):
            continue
        _, wheel_version, interpreters, abi, platforms = name[:-4].split("-")[-5:]
        if wheel_version != version:
            continue
        requires.add(str(entry.get("requires-python") or ""))
        for platform in platforms.split("."):
            found[platform].update(python_tag(i, abi) for i in interpreters.split("."))
    return {p: sorted(tags, key=_tag_key) for p, tags in sorted(found.items())}, requires


def _tag_key(tag: str) -> tuple[int, str]:
    return int(tag[3:].rstrip("t") or 0), tag


def main() -> int:
    torch, torchvision = index("torch"), index("torchvision")
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    lines = [
        "# The wheels PyPI holds for each torch release kitbench knows, and its paired torchvision:",
        "# platform tag -> Python tags (cp310: CPython 3.10; cp313t: its free-threaded build; py3: any",
        "# Python 3, within requires_python).",
        "# Written by envs/scripts/fetch_wheels.py; do not edit by hand. Builds served only by",
        "# download.pytorch.org (cu*, rocm*, +cpu) are unreachable from where this was read: kitbench",
        "# assumes they carry the tags of the same release's PyPI wheels and marks its answers so.",
        f'source: "{INDEX.format(package="{torch,torchvision}")} (PEP 691 JSON), yanked files left out"',
        f'read: "{today}"',
        "releases:",
    ]
    for rel in selector.releases().values():
        lines += [f'  - torch: "{rel.version}"', f'    torchvision: "{rel.torchvision}"', "    wheels:"]
        for package, version, files in (("torch", rel.version, torch), ("torchvision", rel.torchvision, torchvision)):
            found, requires = wheels(files, version)
            if not found or len(requires) != 1:
                print(f"{package} {version}: {len(found)} platforms, Requires-Python {requires}", file=sys.stderr)
                return 1
            lines.append(f"      {package}:")
            # py3-tagged wheels (torchvision from 0.29.2) leave the Python floor to Requires-Python.
            lines.append(f'        requires_python: "{requires.pop()}"')
            # One string per platform, not a list: a third of the YAML nodes, which install-cmd parses at start-up.
            lines.extend(f'        {platform}: "{" ".join(tags)}"' for platform, tags in found.items())
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({len(selector.releases())} releases, read {today})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
