"""The job script: Slurm's options (no injected lines), the nodes chosen, the script of a two-architecture cluster."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kitbench.errors import UsageError
from kitbench.fleet import jobscript, slurm
from kitbench.fleet.jobscript import SlurmOptions

NODES = ["n1", "n2", "n3"]


def test_two_architectures_one_job_each_node_its_own_environment(tmp_path: Path) -> None:
    """A Grace Hopper partition beside x86 nodes: one job; each task picks the environment built for
    its own architecture by uname -m, and a node of a third says so and fails (tried with a fake uname)."""
    pythons = {"x86_64": "/shared/.nox/cpu/bin/python", "aarch64": "/shared/.nox/aarch64/cpu/bin/python"}
    plan = jobscript.plan_run(
        NODES, "node", SlurmOptions(), "cpu", "9ad5", [pythons["x86_64"]], ["--quick"], {}, pythons=pythons
    )
    assert (
        'case "$(uname -m)" in aarch64) py=/shared/.nox/aarch64/cpu/bin/python;; x86_64) '
        "py=/shared/.nox/cpu/bin/python;;"
    ) in plan.script
    assert '"$py" -m kitbench run --force --out "$out/$node.json" --quick' in plan.script
    dispatch = jobscript.arch_dispatch(pythons)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for machine in ("aarch64", "x86_64", "ppc64le"):
        (bin_dir / "uname").write_text(f"#!/bin/sh\necho {machine}\n")
        (bin_dir / "uname").chmod(0o755)
        done = subprocess.run(
            ["bash", "-c", dispatch + 'echo "$py"'],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
        )
        if machine == "ppc64le":
            assert done.returncode == 3
            assert done.stderr == "kitbench: no environment built for ppc64le (built: aarch64, x86_64)\n"
        else:
            assert (done.returncode, done.stdout) == (0, pythons[machine] + "\n")
    # One architecture: the job script is as before, no dispatch.
    one = jobscript.plan_run(
        NODES,
        "node",
        SlurmOptions(),
        "cpu",
        "9ad5",
        [pythons["x86_64"]],
        ["--quick"],
        {},
        pythons={"x86_64": pythons["x86_64"]},
    )
    assert "uname" not in one.script


@pytest.mark.parametrize(("value", "words"), [("a\nb", "cannot be an sbatch option value"), ("", "cannot be")])
def test_option_values_cannot_inject_lines(value: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        SlurmOptions(partition=value).lines()
    with pytest.raises(UsageError, match="is not an sbatch option"):
        SlurmOptions(extra=("rm -rf /",)).lines()


def test_choose_one_node_per_type() -> None:
    nodes = [
        slurm.Node("a1", ("p",), "gpu:a100:4", "a100,ib", "idle"),
        slurm.Node("a2", ("p",), "gpu:a100:4", "a100,ib", "mixed"),
        slurm.Node("h1", ("p",), "gpu:h100:8", "h100,ib", "idle"),
        slurm.Node("h2", ("p",), "gpu:h100:8", "h100,ib", "down*"),
    ]
    assert [n.name for n in jobscript.choose(nodes, "node")] == ["a1", "a2", "h1"]
    assert [n.name for n in jobscript.choose(nodes, "gres")] == ["a1", "h1"]
    assert [n.name for n in jobscript.choose(nodes, "node", "h100")] == ["h1"]
    assert [n.name for n in jobscript.choose(nodes, "node", "nosuch")] == ["a1", "a2", "h1"]  # Slurm will refuse it
