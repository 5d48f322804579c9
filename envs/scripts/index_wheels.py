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
File names are read strictly (packaging's wheel file names, in a wheel's characters only: no %-escape is ever
decoded into a tag); a name that is no wheel's is left out and counted. The rows are written as data (pyyaml) after
the file's hand-kept part, and the whole is checked against its schema, with that part's data unchanged, before it
replaces the file. The weekly facts workflow (.github/workflows/facts.yml) runs it and opens a pull request with the
diff and this report.

    PYTHONPATH=. python envs/scripts/index_wheels.py
"""

from __future__ import annotations

import datetime
import re
from collections import defaultdict
from typing import Any

from packaging.version import Version

from kitbench import _files, _reach
from kitbench.advice import indexes
from kitbench.records import manifest

import _shared

PLATFORM = "win_arm64"  # the platforms index_tags.schema.json takes: the one PyPI has no torch wheel for
_SECTION = "\nwheels:\n"  # the file's last part, the one this script writes
PACKAGES = ("torch", "torchvision", "torchaudio")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

Found = dict[str, dict[str, dict[str, tuple[str, ...]]]]


def listed(base: str, releases: list[dict[str, str]], left_out: list[str]) -> tuple[Found, set[str]]:
    """torch version -> package -> its win_arm64 wheels on ``base``'s cpu tree (file name -> Python tags), and
    the torch versions the torch page lists at all; a .whl whose name is no wheel's goes to ``left_out``."""
    found: Found = defaultdict(lambda: defaultdict(dict))
    on_page: set[str] = set()
    for package in PACKAGES:
        torch_of = {Version(r[package]): r["torch"] for r in releases if r.get(package)}
        for entry in indexes.read_page(f"{base}cpu/{package}/"):
            if not entry.filename.endswith(".whl"):
                continue
            parsed = _shared.wheel(entry.filename)
            if parsed is None:
                left_out.append(entry.filename)
                continue
            name, version, _, tags = parsed
            public = Version(version.public)
            if entry.yanked or name != package or public not in torch_of:
                continue
            if package == "torch":
                on_page.add(torch_of[public])
            if any(t.platform == PLATFORM for t in tags):
                found[torch_of[public]][package][entry.filename] = tuple(
                    indexes.python_tag(t.interpreter, t.abi) for t in tags if t.platform == PLATFORM
                )
    return found, on_page


def _row(version: str, files: dict[str, dict[str, tuple[str, ...]]], url: str, today: str) -> dict[str, Any]:
    pythons = {p: " ".join(sorted({t for ts in f.values() for t in ts}, key=indexes.tag_key)) for p, f in files.items()}
    names = ", ".join(sorted(name for f in files.values() for name in f))
    return {
        "torch": version,
        "platform": PLATFORM,
        "kind": "published",
        "read": today,
        "pythons": pythons,
        "source": f"{url} as listed on {today}: {names}",
    }


def _undated(rows: list[dict[str, Any]]) -> list[str]:
    """Rows as compared week to week: without the dates, which change every time."""
    return [_DATE.sub("", repr(r)) for r in rows]


def main() -> int:
    path = manifest.envs_dir() / "index_tags.yaml"
    releases = manifest.load(manifest.envs_dir() / "wheels.yaml", "wheels").data["releases"]
    text = _files.read_text(path, manifest.MAX_BYTES, "manifest")
    before = _shared.checked(text, path, "index_tags")
    head, section, _ = text.partition(_SECTION)
    if not section:
        raise _shared.Refused(
            f"{path} has no {_SECTION.strip()} section at the start of a line",
            hint="it is the file's last part, the one this script writes: restore it",
        )
    base = indexes.pytorch_index()
    left_out: list[str] = []
    found, on_page = listed(base, releases, left_out)
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    url = f"{_reach.bare(base)}cpu/{{{','.join(PACKAGES)}}}/"
    print(f"PyTorch's index: {_reach.shown(url)}")
    if left_out:
        print(
            f"{len(left_out)} listed file(s) whose name is no wheel's left out (the first: "
            f"{_shared.shown(left_out[0])})"
        )
    kept: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in before.get("wheels", []):
        kept[row["torch"]].append(row)
    for version in sorted(on_page, key=Version):
        had = kept.pop(version, [])
        if found.get(version, {}).get("torch"):
            kept[version] = [_row(version, found[version], url, today)]
            if _undated(had) != _undated(kept[version]):
                print(
                    f"torch {version}: the {PLATFORM} wheels of {', '.join(found[version])} as listed, in place of "
                    f"{len(had)} recorded row(s)"
                )
        elif had:
            print(f"torch {version}: the index lists no {PLATFORM} wheel of it; its {len(had)} row(s) taken out")
    rows = [row for _, group in sorted(kept.items(), key=lambda item: Version(item[0])) for row in group]
    new = head + "\n" + _shared.dump({"wheels": rows})
    if _shared.checked(new, path, "index_tags") != {**before, "wheels": rows}:
        raise _shared.Refused(
            f"{path}: the part before {_SECTION.strip()} does not read the same once the rows are written after it",
            hint="keep wheels: the file's last part",
        )
    _shared.write(path, new, "index_tags")
    return 0


if __name__ == "__main__":
    _shared.run(main)
