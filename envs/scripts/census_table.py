"""Write ``docs/facts.md``: the census of PyTorch's builds as ``envs/`` records it, one table a maintainer can
audit in an afternoon.

Every (release, build) of ``envs/releases/*.yaml`` with the platforms its wheels exist for, whether a default
answer may name it, its kernel lists, its CUDA family's driver floor, and the kind and text of the source it
rests on; then MPS's macOS floors (``envs/pytorch.yaml``), each NVIDIA generation's first driver
(``envs/drivers.yaml``) and the count of rows by source kind. The rows are read through kitbench's own loaders,
so the table says what install-cmd answers from. The weekly facts workflow rewrites it after the refresh;
``tests/advice/test_census_table.py`` fails when it is stale.

    PYTHONPATH=. python envs/scripts/census_table.py docs/facts.md
"""

from __future__ import annotations

from collections import Counter

from kitbench.advice import releases
from kitbench.machine import drivers
from kitbench.machine.builds import build
from kitbench.records import manifest

import _shared

# Where a wheel can install: (os, arch) as install-cmd's flags name them, and the census' name for it.
PLATFORMS = (
    ("linux", "x86_64", "linux-x86_64"),
    ("linux", "aarch64", "linux-aarch64"),
    ("windows", "x86_64", "windows-x86_64"),
    ("macos", "arm64", "macos-arm64"),
    ("macos", "x86_64", "macos-x86_64"),
)
HEADER = """# The census: every PyTorch build kitbench knows, and what each rests on

Generated from `envs/` by `envs/scripts/census_table.py` (do not edit: the weekly facts workflow rewrites it,
and `tests/advice/test_census_table.py` fails when it is stale). Source kinds, strongest first: **artifact** (a
listing read, PyPI's own files, a lock pinning the wheel by URL and hash), **code** (the release branch's build
matrix, the check that enforces a floor), **release-notes** (release notes, RELEASE.md, a release's
support-matrix RFC), **docs** (pytorch.org's selector and previous-versions pages, the docs), **inferred**. A
default answer rests on the first three only, and a build pytorch.org's pages never showed (*off the
selector*) only where its kernel list is on record. The evidence behind each row is under
`tests/resources/published/` (`census/` for this round's reading). Windows on Arm's CPU wheels, which only
PyTorch's index serves, are in `envs/index_tags.yaml`.
"""


def _platforms(rel: releases.Release, compute: str) -> list[str]:
    found = []
    for os, arch, name in PLATFORMS:
        available = releases.computes(rel, os, arch, "pip") + releases.xpu_builds(rel, os, arch, "pip")
        if compute in available:
            found.append(name)
    return found


def _floor(compute: str) -> str:
    cuda = build(compute).cuda
    if cuda is None:
        return ""
    table = drivers.load()
    linux, windows = (table.requirement(f"{cuda[0]}.{cuda[1]}", os).floor for os in ("linux", "windows"))
    return f"{linux} / {windows}"


def _kernels(rel: releases.Release, compute: str) -> str:
    lists = [
        (platform, found.get(compute))
        for platform, found in (("x86_64", rel.kernels), ("aarch64", rel.kernels_aarch64))
    ]
    return "; ".join(
        f"{platform}: {' '.join(a.removeprefix('sm_') for a in arches)}" for platform, arches in lists if arches
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rows() -> list[tuple[releases.Release, str, list[str], releases.Evidence]]:
    """(release, build, platforms, evidence) for every build of every baked release, newest first; a build whose
    rows differ by platform (2.13.0's cu129: an artifact on x86_64, code on aarch64) once per row."""
    found = []
    for rel in releases.newest_first(derived=False):
        for compute in [*rel.wheels, "xpu"]:
            platforms = _platforms(rel, compute)
            if not platforms:
                continue
            own = [row for row in rel.evidence if row.build == compute]
            for evidence in own if len(own) > 1 else [rel.provenance(compute)]:
                where = [p for p in platforms if not evidence.platforms or p in evidence.platforms]
                if where:
                    found.append((rel, compute, where, evidence))
    return found


def render() -> str:
    out = [
        HEADER,
        "## Builds",
        "",
        "| release | build | platforms | kind | default answer | kernels (sm_) | driver floor (Linux / Windows) "
        "| source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    census = rows()
    kinds: Counter[str] = Counter()
    for rel, compute, where, evidence in census:
        kinds[evidence.kind] += 1
        answer = (
            "yes"
            if rel.answerable(compute, where[0])
            else ("no: off the selector, no kernel list" if evidence.kind in manifest.ANSWERABLE else "no: named only")
        )
        source = evidence.source + (f"; also: {evidence.also}" if evidence.also else "")
        out.append(
            f"| {rel.version} | {compute}{'' if evidence.selector else ' (off the selector)'} | "
            f"{', '.join(where)} | {evidence.kind} | {answer} | {_kernels(rel, compute)} | {_floor(compute)} "
            f"| {_cell(source)} |"
        )
    out += [
        "",
        "## MPS: the macOS each release's MPS needs",
        "",
        "| from | macOS | kind | source |",
        "|---|---|---|---|",
    ]
    data = manifest.load(manifest.envs_dir() / "pytorch.yaml", "pytorch").data
    for row in data["mps"]:
        conflicts = f"; **the sources disagree**: {row['conflicts']}" if row.get("conflicts") else ""
        out.append(f"| {row['since']} | {row['macos']} | {row['kind']} | {_cell(row['source'] + conflicts)} |")
    out += [
        "",
        "## NVIDIA GPU generations: the first driver (the first CUDA toolkit that compiles for them)",
        "",
        "| generation | compute capability | Linux | Windows | kind | source |",
        "|---|---|---|---|---|---|",
    ]
    for gen in manifest.load(manifest.envs_dir() / "drivers.yaml", "drivers").data["generations"]:
        first = drivers.load().generation(gen["capabilities"][0])
        assert first is not None
        out.append(
            f"| {gen['name']} | {', '.join(gen['capabilities'])} | {first.floor('linux')} | "
            f"{first.floor('windows') or ''} | {gen['kind']} | {_cell(gen['source'])} |"
        )
    out += ["", "## Rows by source kind", "", "| kind | rows |", "|---|---|"]
    out += [f"| {kind} | {kinds[kind]} |" for kind in manifest.SOURCE_KINDS]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    _shared.write_rendered(render, "PYTHONPATH=. python envs/scripts/census_table.py docs/facts.md")
