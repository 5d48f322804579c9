"""Bad input gets one ERROR line, a hint and a non-zero exit; never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def kitbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kitbench", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=300, check=False)


def assert_clean_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    # Progress lines ("... importing torch") may come first; the error is one line.
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, done.stderr
    first = errors[0]
    for word in words:
        assert word in first, done.stderr
    assert any(line.startswith("hint: ") for line in done.stderr.splitlines()), done.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["run", "--check", "speed"], ["unknown check 'speed'"]),
    (["run", "--device", "tpu"], ["unknown device 'tpu'"]),
    (["run", "--epochs", "-3"], ["--epochs must be a positive whole number, not -3"]),
    (["run", "--batch-size", "0"], ["--batch-size must be a positive whole number, not 0"]),
    (["run", "--model", "resnet"], ["unknown model 'resnet'"]),
    (["run", "--threads", "zero"], ["expected a whole number"]),
    (["run", "--data", "/nonexistent/kitbench", "--offline"], ["does not exist and --offline forbids"]),
    (["frobnicate"], ["invalid choice"]),
])
def test_bad_input(args: list[str], words: list[str]) -> None:
    assert_clean_error(kitbench(*args), *words)


def test_unavailable_accelerator_says_why(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here, so --device cuda is not refused")
    done = kitbench("run", "--device", "cuda", "--check", "availability", "--out", str(tmp_path / "r.json"))
    assert_clean_error(done, "device 'cuda' is not usable here:")


def test_unwritable_out(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = kitbench("run", "--check", "availability", "--device", "cpu", "--out", str(blocker / "r.json"))
    assert_clean_error(done, "cannot write the record")


def test_json_output_is_the_record(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = kitbench("run", "--check", "availability", "--device", "cpu", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(out.read_text())


def test_default_record_path_follows_target_and_results_root(tmp_path: Path) -> None:
    done = kitbench("run", "--check", "availability", "--device", "cpu",
                    env={"KITBENCH_RESULTS": str(tmp_path), "KITBENCH_TARGET": "mytarget"})
    assert done.returncode == 0, done.stderr
    written = list((tmp_path / "mytarget").glob("*.json"))
    assert len(written) == 1
    assert json.loads(written[0].read_text())["environment"]["target"] == "mytarget"
    assert str(written[0]) in done.stdout


def test_sigterm_leaves_an_interrupted_record(mnist_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "kitbench", "run", "--device", "cpu", "--data", str(mnist_root),
                             "--offline", "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.stat().st_size and "availability" in json.loads(out.read_text())["checks"]:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert "Traceback" not in stderr and stderr.splitlines()[-2].startswith("ERROR: terminated")
    record = json.loads(out.read_text())
    assert record["status"] == "interrupted"
    assert "availability" in record["checks"] and "mnist" not in record["checks"]


def test_help_teaches() -> None:
    done = kitbench("run", "--help")
    assert done.returncode == 0
    for word in ("--check", "--loop", "resident", "KITBENCH_RESULTS", "examples:"):
        assert word in done.stdout


def test_probe_json_without_torch() -> None:
    code = ("import sys, runpy; sys.argv = ['kitbench', 'probe', '--json']; "
            "sys.modules['torch'] = None; runpy.run_module('kitbench', run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["os"] in ("linux", "macos", "windows")
