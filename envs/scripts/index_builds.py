"""Bring the builds of ``envs/releases/*.yaml`` to what PyTorch's index lists.

Reads what ``kitbench facts refresh`` has just read (the fact cache's ``releases.json``, its ``listed``
builds per release) and rewrites each baked release's ``wheels:`` line to the builds the index lists:
a build it does not list (CUDA 12.6 removed from 2.15 before the release) is taken out. A build it
lists that the manifest lacks is reported, not added: its kernel list, driver facts and provenance need
a source first. Each file is edited where its ``wheels:`` lists stand (the rest is a person's, comments and
all), then read back and checked against its schema, holding exactly the data it held but for the builds taken
out, before it replaces the file; anything else is one ERROR line. The weekly facts workflow
(.github/workflows/facts.yml) runs it after the refresh and opens a pull request with the diff and this report.

    kitbench facts refresh && PYTHONPATH=. python envs/scripts/index_builds.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kitbench import _files
from kitbench.advice import facts
from kitbench.records import manifest

import _shared


def _wheels_nodes(root: yaml.Node) -> list[tuple[str, yaml.Node]]:
    """Each release's version and its ``wheels:`` node, where the file holds them (from the parser's marks)."""
    found = []
    for key, value in root.value:
        if key.value == "releases":
            for item in value.value:
                fields = {k.value: v for k, v in item.value}
                found.append((fields["version"].value, fields["wheels"]))
    return found


def _edited(text: str, path: Path, listed: dict[str, tuple[str, ...]]) -> tuple[str, dict[str, list[str]]]:
    """``text`` without the builds the index does not list, and version -> the builds kept, for each changed."""
    data, root = manifest.parse(text, path)
    lines, kept_by = text.splitlines(keepends=True), {}
    for (version, node), release in zip(_wheels_nodes(root), data["releases"], strict=True):
        if version not in listed:
            continue
        baked = release["wheels"]
        kept = [w for w in baked if w in listed[version]]
        extra = [_shared.shown(c) for c in listed[version] if c not in baked]
        if extra:
            print(f"torch {version}: the index also lists {', '.join(extra)}; add it to {path.name} with its sources")
        if kept == baked:
            continue
        if not kept:
            print(f"torch {version}: the index lists none of {', '.join(baked)}; left as it is, for a person to read")
            continue
        start, end = node.start_mark, node.end_mark
        if not isinstance(node, yaml.SequenceNode) or not node.flow_style or start.line != end.line:
            raise _shared.Refused(
                f"{path}:{start.line + 1}: torch {version}'s wheels are not one [a, b] line, which "
                "is what this script edits",
                hint="write them as one [a, b] line",
            )
        print(
            f"torch {version}: {', '.join(w for w in baked if w not in kept)} not on the index, taken out of "
            f"{path.name}"
        )
        line = lines[start.line]
        lines[start.line] = f"{line[: start.column]}[{', '.join(kept)}]{line[end.column :]}"
        kept_by[version] = kept
    return "".join(lines), kept_by


def main() -> int:
    where, listed = facts.listed()
    if not listed:
        raise _shared.Refused("no index listing in the fact cache", hint="run `kitbench facts refresh` first")
    print(f"PyTorch's index: {where}")
    for path in sorted((manifest.envs_dir() / "releases").glob("*.yaml")):
        text = _files.read_text(path, manifest.MAX_BYTES, "manifest")
        before = _shared.checked(text, path, "release")
        new, kept = _edited(text, path, listed)
        if not kept:
            continue
        expected: dict[str, Any] = {
            **before,
            "releases": [{**r, "wheels": kept.get(r["version"], r["wheels"])} for r in before["releases"]],
        }
        if _shared.checked(new, path, "release") != expected:  # the edit changed nothing else
            raise _shared.Refused(
                f"{path}: its wheels: lists could not be edited alone", hint="write each as one [a, b] line"
            )
        _shared.write(path, new, "release")
    return 0


if __name__ == "__main__":
    _shared.run(main)
