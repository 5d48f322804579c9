"""Write ``envs/wheels.yaml``: which wheels PyPI holds for each torch release kitbench knows.

A thin caller of ``kitbench facts refresh``'s own code (``kitbench.advice.indexes``), so that the facts baked
into kitbench and those a user's refresh reads can never disagree in form: the same request (PyPI's
simple API in its JSON form, PEP 691, where pip reads it), the same parsing of wheel file names
(PEP 427: name-version-python-abi-platform), yanked files left out (pip skips them). For each release
in ``envs/releases/*.yaml`` and its paired torchvision and torchaudio (where the release has one), it
records the platform tags and, per platform, the Python tags: ``cp310`` installs on CPython 3.10,
``cp313t`` on its free-threaded build, ``cp39-abi3`` on every default CPython from 3.9.

    PYTHONPATH=. python envs/scripts/fetch_wheels.py            # rewrites envs/wheels.yaml

Builds that live only on download.pytorch.org (cu*, rocm*, +cpu) are not on PyPI;
kitbench assumes they carry the tags of the same release's PyPI wheels, and says so.
"""

from __future__ import annotations

import datetime
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from kitbench.advice import indexes, selector

OUT = Path(__file__).resolve().parent.parent / "wheels.yaml"


def read(package: str, folder: Path) -> dict[str, Any]:
    """One package's PyPI facts, read exactly as a refresh reads them."""
    source = indexes.Source("pypi", package, indexes.pypi_index() + package + "/")
    indexes.refresh_source(source, folder)
    data: dict[str, Any] = json.loads((folder / source.file).read_text())
    return data


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        torch, torchvision, torchaudio = (read(p, Path(scratch)) for p in ("torch", "torchvision", "torchaudio"))
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    lines = [
        "# The wheels PyPI holds for each torch release kitbench knows, and its paired torchvision and",
        "# torchaudio: platform tag -> Python tags (cp310: CPython 3.10; cp313t: its free-threaded build;",
        "# cp39-abi3: every default CPython from 3.9; py3: any Python 3, within requires_python).",
        "# Written by envs/scripts/fetch_wheels.py; do not edit by hand. Builds served only by",
        "# download.pytorch.org (cu*, rocm*, +cpu) are unreachable from where this was read: kitbench",
        "# assumes they carry the tags of the same release's PyPI wheels and marks its answers so.",
        f'source: "{torch["url"].replace("/torch/", "/{torch,torchvision,torchaudio}/")} (PEP 691 JSON), '
        'yanked files left out"',
        f'read: "{today}"',
        "releases:",
    ]
    baked = list(selector.newest_first(derived=False))[::-1]
    for rel in baked:
        lines += [f'  - torch: "{rel.version}"', f'    torchvision: "{rel.torchvision}"']
        lines += [f'    torchaudio: "{rel.torchaudio}"'] if rel.torchaudio else []
        lines.append("    wheels:")
        packages = [("torch", rel.version, torch), ("torchvision", rel.torchvision, torchvision)]
        packages += [("torchaudio", rel.torchaudio, torchaudio)] if rel.torchaudio else []
        for package, version, data in packages:
            release = data["releases"].get(version, {})
            found, requires = release.get("builds", {}).get("", {}), release.get("requires_python", [])
            # Some old uploads state no Requires-Python (torchaudio 2.0.1): nothing then bounds it but the tags.
            if not found or len(requires) > 1:
                print(f"{package} {version}: {len(found)} platforms, Requires-Python {requires}", file=sys.stderr)
                return 1
            lines.append(f"      {package}:")
            # py3-tagged wheels (torchvision from 0.29.2) leave the Python floor to Requires-Python.
            lines.append(f'        requires_python: "{requires[0] if requires else ""}"')
            # One string per platform, not a list: a third of the YAML nodes, which install-cmd parses at start-up.
            lines.extend(f'        {platform}: "{tags}"' for platform, tags in found.items())
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({len(baked)} releases, read {today})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
