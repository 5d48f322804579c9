"""Each node's Python: a venv target's environment built here with nox, bounded in time."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kitbench._cli import main
from kitbench.fleet import pythons, slurm


def test_a_hung_nox_build_is_stopped_and_said_in_one_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A build that never ends (a stalled download) is stopped at the named limit, with what it
    printed so far shown, and becomes one ERROR line and a hint, not a wait without end."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'nox > Creating virtual environment'\nexec sleep 60\n")
    fake.chmod(0o755)
    from kitbench.records import manifest

    here = manifest.checkout_root()
    assert here is not None
    checkout = tmp_path / "checkout"      # a checkout whose .nox/cpu was never built
    checkout.mkdir()
    (checkout / "envs").symlink_to(here / "envs")
    node = slurm.Node("n1", ("debug",), "(null)", "(null)", "idle")
    monkeypatch.setattr(manifest, "checkout_root", lambda: checkout)
    monkeypatch.setattr(slurm, "nodes", lambda partition=None: [node])
    monkeypatch.setattr(slurm, "node_arches", lambda names: {"n1": os.uname().machine})
    monkeypatch.setattr(slurm, "submit_held", lambda *a: pytest.fail("a job was submitted without its environment"))
    monkeypatch.setattr(pythons, "BUILD_TIMEOUT_S", 0.5)
    monkeypatch.setattr(sys, "executable", str(fake))
    started = time.monotonic()
    assert main(["fleet", "run", "cpu"]) == 1
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err.splitlines()
    assert "nox > Creating virtual environment" in err          # its output, streamed while it ran
    errors = [line for line in err if line.startswith("ERROR: ")]
    assert errors == ["ERROR: nox -s cpu --install-only did not finish in 0 minutes and was stopped"]
    assert err[-1] == "hint: build it yourself (nox -s cpu --install-only, which reuses what it downloaded) " \
                      "and run again"
