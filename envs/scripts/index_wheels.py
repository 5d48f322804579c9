"""Bring ``envs/index_tags.yaml``'s ``wheels`` to what PyTorch's index lists: the wheels it serves on a platform
PyPI has no torch wheel for (Windows on Arm, win_arm64), which install-cmd answers there.

For each release ``envs/wheels.yaml`` holds, it reads ``whl/cpu/{torch,torchvision,torchaudio}/`` of PyTorch's
index (``KITBENCH_PYTORCH_INDEX``'s tree, else envs/pytorch.yaml's) as a refresh reads a page (PEP 691 JSON or
PEP 503 HTML, yanked files left out) and takes the release's win_arm64 wheels: torch's by its version, its
torchvision's and torchaudio's by their public version, whatever local label they carry (torchvision's Windows
Arm64 builds were labelled with a git hash, not +cpu, up to 0.27.1: pytorch/test-infra#8224; pip's ==0.25.0
takes 0.25.0+8ac84ee, PEP 440). A release the index lists is written as one published row, read today, in place
of every row recorded for it, hand-recorded or inferred: for what it lists, the listing is the truth. What that
changes (beyond the date) is reported; a release the index does not list is left as it is.
The weekly facts workflow (.github/workflows/facts.yml) runs it and opens a pull request with the diff and this
report.

    PYTHONPATH=. python envs/scripts/index_wheels.py
"""

from __future__ import annotations

import datetime
import re
import sys
from collections import defaultdict

from kitbench.advice import indexes
from kitbench.errors import NetworkError
from kitbench.machine.versions import version_tuple
from kitbench.records import manifest

PLATFORM = "win_arm64"          # the platforms index_tags.schema.json takes: the one PyPI has no torch wheel for
_ROW = re.compile(r'  - \{torch: "([0-9.]+)"')
_SECTION = "\nwheels:\n"
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def listed(base: str, releases: list[dict[str, str]]) -> tuple[dict[str, dict[str, dict[str, tuple[str, ...]]]],
                                                                  set[str]]:
    """torch version -> package -> its win_arm64 wheels on ``base``'s cpu tree (file name -> Python tags), and
    the torch versions the torch page lists at all."""
    found: dict[str, dict[str, dict[str, tuple[str, ...]]]] = defaultdict(lambda: defaultdict(dict))
    on_page: set[str] = set()
    for package in ("torch", "torchvision", "torchaudio"):
        torch_of = {r.get(package): r["torch"] for r in releases if r.get(package)}
        for entry in indexes.read_page(f"{base}cpu/{package}/"):
            wheel = indexes.parse_wheel(entry.filename)
            if wheel is None or entry.yanked or wheel.name != package or wheel.version not in torch_of:
                continue
            if package == "torch":
                on_page.add(wheel.version)
            if PLATFORM in wheel.platforms:
                found[torch_of[wheel.version]][package][entry.filename] = wheel.pythons
    return found, on_page


def _row(version: str, files: dict[str, dict[str, tuple[str, ...]]], url: str, today: str) -> str:
    pythons = ", ".join(f'{p}: "{" ".join(sorted({t for ts in f.values() for t in ts}, key=indexes.tag_key))}"'
                        for p, f in files.items())
    names = ", ".join(sorted(name for f in files.values() for name in f))
    return (f'  - {{torch: "{version}", platform: {PLATFORM}, kind: published, read: "{today}",\n'
            f'     pythons: {{{pythons}}},\n     source: "{url} as listed on {today}: {names}"}}\n')


def main() -> int:
    path = manifest.envs_dir() / "index_tags.yaml"
    releases = manifest.load(manifest.envs_dir() / "wheels.yaml", "wheels").data["releases"]
    base = indexes.pytorch_index()
    try:
        found, on_page = listed(base, releases)
    except NetworkError as error:
        print(f"PyTorch's index was not read: {error.message}", file=sys.stderr)
        return 1
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    url = f"{base}cpu/{{torch,torchvision,torchaudio}}/"
    print(f"PyTorch's index: {url}")
    text = path.read_text()
    at = text.index(_SECTION) + len(_SECTION)
    kept: dict[str, list[str]] = defaultdict(list)
    for block in re.split(r"(?m)^(?=  - )", text[at:]):
        match = _ROW.match(block)
        if match:
            kept[match.group(1)].append(block)
    for version in sorted(on_page, key=version_tuple):
        had = kept.pop(version, [])
        if found.get(version, {}).get("torch"):
            kept[version] = [_row(version, found[version], url, today)]
            if [_DATE.sub("", b) for b in had] != [_DATE.sub("", b) for b in kept[version]]:
                print(f"torch {version}: the {PLATFORM} wheels of {', '.join(found[version])} as listed, in place of "
                      f"{len(had)} recorded row(s)")
        elif had:
            print(f"torch {version}: the index lists no {PLATFORM} wheel of it; its {len(had)} row(s) taken out")
    ordered = sorted(kept.items(), key=lambda item: version_tuple(item[0]))
    path.write_text(text[:at] + "".join(block for _, blocks in ordered for block in blocks))
    manifest.load(path, "index_tags")       # what it wrote still validates
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
