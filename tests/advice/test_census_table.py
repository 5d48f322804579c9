"""envs/scripts/census_table.py: docs/facts.md is the census as envs/ holds it, and the census is whole."""

from __future__ import annotations

import runpy
from pathlib import Path

import yaml

from kitbench.advice import releases

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = runpy.run_path(str(ROOT / "envs" / "scripts" / "census_table.py"))


def test_docs_facts_md_is_the_census_as_envs_holds_it() -> None:
    """Rewrite it with `PYTHONPATH=. python envs/scripts/census_table.py docs/facts.md`."""
    assert (ROOT / "docs" / "facts.md").read_text() == SCRIPT["render"]()


def test_every_build_of_every_release_has_a_census_row_of_a_known_kind() -> None:
    """Read from the YAML itself: no build of a baked release rests on the series' pytorch.org page by default."""
    for path in sorted((ROOT / "envs" / "releases").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for entry in data["releases"]:
            rows = [
                row for row in data.get("provenance", ()) if entry["version"] in row.get("releases", [entry["version"]])
            ]
            missing = [b for b in entry["wheels"] if not any(b in row["builds"] for row in rows)]
            assert not missing, (entry["version"], missing)
            assert all(row.get("read") for row in rows), entry["version"]  # each says when it was read


def test_the_table_says_which_rows_no_default_answer_takes() -> None:
    table = (ROOT / "docs" / "facts.md").read_text()
    cu129 = [line for line in table.splitlines() if line.startswith("| 2.12.1 | cu129 (off the selector)")]
    assert cu129 and "no: off the selector, no kernel list" in cu129[0]
    assert any(
        line.startswith("| 2.13.0 | cu129 (off the selector) | linux-x86_64 | artifact | yes |")
        for line in table.splitlines()
    )
    assert any(
        line.startswith("| 2.15.0 | rocm7.14 | linux-x86_64 | inferred | no: named only |")
        for line in table.splitlines()
    )
    # Every row of the table is a build install-cmd answers when named.
    for rel, compute, where, _ in SCRIPT["rows"]():
        os, arch = where[0].split("-")
        assert compute in releases.computes(rel, os, arch, "pip") + releases.xpu_builds(rel, os, arch, "pip")
