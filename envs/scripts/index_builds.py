"""Bring the builds of ``envs/releases/*.yaml`` to what PyTorch's index lists.

Reads what ``kitbench facts refresh`` has just read (the fact cache's ``releases.json``, its ``listed``
builds per release) and rewrites each baked release's ``wheels:`` line to the builds the index lists:
a build it does not list (CUDA 12.6 removed from 2.15 before the release) is taken out. A build it
lists that the manifest lacks is reported, not added: its kernel list, driver facts and provenance need
a source first. The weekly facts workflow (.github/workflows/facts.yml) runs it after the refresh and
opens a pull request with the diff and this script's report.

    kitbench facts refresh && PYTHONPATH=. python envs/scripts/index_builds.py
"""

from __future__ import annotations

import re
import sys

from kitbench.advice import facts
from kitbench.records import manifest

_VERSION = re.compile(r'\s*- version: "([0-9.]+)"')
_WHEELS = re.compile(r"(\s*wheels: \[)([^\]]*)(\].*)", re.DOTALL)


def main() -> int:
    where, listed = facts.listed()
    if not listed:
        print("no index listing in the fact cache: run `kitbench facts refresh` first", file=sys.stderr)
        return 1
    print(f"PyTorch's index: {where}")
    for path in sorted((manifest.envs_dir() / "releases").glob("*.yaml")):
        lines = path.read_text().splitlines(keepends=True)
        version = ""
        for at, line in enumerate(lines):
            found = _VERSION.match(line)
            if found:
                version = found.group(1)
                continue
            wheels = _WHEELS.match(line)
            if not wheels or version not in listed:
                continue
            baked = [w.strip() for w in wheels.group(2).split(",")]
            kept = [w for w in baked if w in listed[version]]
            extra = [c for c in listed[version] if c not in baked]
            if extra:
                print(f"torch {version}: the index also lists {', '.join(extra)}; add it to {path.name} with "
                      "its sources")
            if kept == baked:
                continue
            if not kept:
                print(f"torch {version}: the index lists none of {', '.join(baked)}; left as it is, for a person "
                      "to read")
                continue
            print(f"torch {version}: {', '.join(w for w in baked if w not in kept)} not on the index, taken out of "
                  f"{path.name}")
            lines[at] = f"{wheels.group(1)}{', '.join(kept)}{wheels.group(3)}"
        path.write_text("".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
