"""Write ``envs/wheels.yaml``: which wheels PyPI holds for each torch release kitbench knows.

A thin caller of ``kitbench facts refresh``'s own code (``kitbench.advice.indexes``), so that the facts baked
into kitbench and those a user's refresh reads can never disagree in form: the same request (PyPI's
simple API in its JSON form, PEP 691, where pip reads it), the same parsing of wheel file names
(PEP 427: name-version-python-abi-platform), yanked files left out (pip skips them). For each release
in ``envs/releases/*.yaml`` and its paired torchvision and torchaudio (where the release has one), it
records the platform tags and, per platform, the Python tags: ``cp310`` installs on CPython 3.10,
``cp313t`` on its free-threaded build, ``cp39-abi3`` on every default CPython from 3.9.

    PYTHONPATH=. python envs/scripts/fetch_wheels.py            # rewrites envs/wheels.yaml

Every value is checked (a Requires-Python must be a PEP 440 specifier set) and written by pyyaml; the file is
validated against its schema before it replaces the last one, within one deadline for every read. Anything else
is one ERROR line and exit 1, the file left as it was.

Builds that live only on download.pytorch.org (cu*, rocm*, +cpu) are not on PyPI;
kitbench assumes they carry the tags of the same release's PyPI wheels, and says so.
"""

from __future__ import annotations

import datetime
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from kitbench.advice import indexes, releases

import _shared

OUT = Path(__file__).resolve().parent.parent / "wheels.yaml"
DEADLINE = 300.0  # seconds for every read together: three pages and a few .metadata files
HEADER = """\
The wheels PyPI holds for each torch release kitbench knows, and its paired torchvision and
torchaudio: platform tag -> Python tags (cp310: CPython 3.10; cp313t: its free-threaded build;
cp39-abi3: every default CPython from 3.9; py3: any Python 3, within requires_python).
Written by envs/scripts/fetch_wheels.py; do not edit by hand. Builds served only by
download.pytorch.org (cu*, rocm*, +cpu) are unreachable from where this was read: kitbench
assumes they carry the tags of the same release's PyPI wheels and marks its answers so."""


def read(package: str, folder: Path, until: float) -> dict[str, Any]:
    """One package's PyPI facts, read exactly as a refresh reads them."""
    source = indexes.Source("pypi", package, indexes.pypi_index() + package + "/")
    indexes.refresh_source(source, folder, until)
    data: dict[str, Any] = json.loads((folder / source.file).read_text())
    return data


def _package(package: str, version: str, data: dict[str, Any]) -> dict[str, str]:
    """One package's facts of one release: its Requires-Python, then platform -> Python tags."""
    release = data["releases"].get(version, {})
    found, requires = release.get("builds", {}).get("", {}), release.get("requires_python", [])
    # Some old uploads state no Requires-Python (torchaudio 2.0.1): nothing then bounds it but the tags.
    if not found or len(requires) > 1:
        raise _shared.Refused(
            f"{package} {version}: {len(found)} platforms on PyPI and "
            f"{len(requires)} Requires-Python values; a release has wheels and one",
            hint="nothing was written; look at the release's files on PyPI",
        )
    # py3-tagged wheels (torchvision from 0.29.2) leave the Python floor to Requires-Python.
    floor = _shared.requires_python(requires[0], f"{package} {version}") if requires else ""
    # One string per platform, not a list: a third of the YAML nodes, which install-cmd parses at start-up.
    return {"requires_python": floor, **found}


def main(out: Path = OUT) -> int:
    until = time.monotonic() + DEADLINE
    with tempfile.TemporaryDirectory() as scratch:
        torch, torchvision, torchaudio = (read(p, Path(scratch), until) for p in ("torch", "torchvision", "torchaudio"))
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    baked = list(releases.newest_first(derived=False))[::-1]
    rows = []
    for rel in baked:
        row: dict[str, Any] = {"torch": rel.version, "torchvision": rel.torchvision}
        row |= {"torchaudio": rel.torchaudio} if rel.torchaudio else {}
        packages = [("torch", rel.version, torch), ("torchvision", rel.torchvision, torchvision)]
        packages += [("torchaudio", rel.torchaudio, torchaudio)] if rel.torchaudio else []
        row["wheels"] = {package: _package(package, version, data) for package, version, data in packages}
        rows.append(row)
    source = torch["url"].replace("/torch/", "/{torch,torchvision,torchaudio}/")
    data = {"source": f"{source} (PEP 691 JSON), yanked files left out", "read": today, "releases": rows}
    _shared.write(out, _shared.dump(data, HEADER), "wheels")
    print(f"wrote {out} ({len(baked)} releases, read {today})")
    return 0


if __name__ == "__main__":
    _shared.run(main)
