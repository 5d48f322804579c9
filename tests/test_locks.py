"""Locks resolved for real by uv (from this machine, for other platforms), and what a record says of them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kitbench import fingerprint, locks, targets

REPO = Path(__file__).resolve().parent.parent
UV = shutil.which("uv")
needs_uv = pytest.mark.skipif(UV is None, reason="uv is not installed here: locks are resolved with it")


@needs_uv
def test_a_macos_arm64_lock_is_resolved_from_pypi_on_linux(envs_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)
    mps = targets.get("mps")
    floor = locks.macos_floor(mps.torch)
    assert floor == "14.0"               # torch 2.14.1's only macOS wheel is macosx_14_0_arm64
    assert UV is not None
    outcome = locks.compile_lock(UV, mps, "macos", "arm64", floor)
    assert outcome.skipped is None and outcome.path == envs_copy / "locks" / "mps-macos-arm64-py3.11.txt"
    lock = locks.read(outcome.path)
    assert (lock.platform, lock.index) == ("macos-arm64-py3.11", "https://pypi.org/simple")
    assert lock.hashes[("torch", "2.14.1")] and all(lock.hashes.values())
    assert not any(name.startswith("nvidia") for name, _ in lock.hashes)       # a macOS set: no CUDA wheels
    assert "MACOSX_DEPLOYMENT_TARGET=14.0" in outcome.path.read_text().splitlines()[1]
    committed = locks.read(REPO / "envs" / "locks" / "mps-macos-arm64-py3.11.txt")
    assert set(committed.hashes) == set(lock.hashes)        # the committed lock is what uv resolves today
    assert mps.usable_lock("macos-arm64-py3.11", "macos") == outcome.path


@needs_uv
def test_an_unreachable_index_skips_the_pair_and_says_why(envs_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "http://127.0.0.1:9/simple")     # nothing listens on port 9
    assert UV is not None
    committed = envs_copy / "locks" / "override" / "cpu-windows-x86_64-py3.11.txt"
    before = committed.read_text()
    outcome = locks.compile_lock(UV, targets.get("cpu"), "windows", "x86_64")
    assert outcome.path is None and outcome.skipped is not None
    assert "could not resolve against http://127.0.0.1:9/simple" in outcome.skipped
    assert committed.read_text() == before          # a failed resolution leaves the last lock as it was


def test_docker_targets_are_listed_as_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locks, "compile_lock", lambda *args: pytest.fail("docker targets are not resolved here"))
    cuda126 = targets.get("cuda126")
    monkeypatch.setattr(targets, "load_all", lambda: {"cuda126": cuda126})
    found = locks.lock_all("uv")
    assert [(o.platform, o.skipped) for o in found] == [
        ("linux-x86_64-py3.10", "docker target: its image build installs it"),
        ("linux-aarch64-py3.10", "docker target: its image build installs it")]


def test_the_record_names_the_lock_and_its_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "envs" / "locks" / "override" / "cpu-linux-x86_64-py3.11.txt"
    monkeypatch.setenv(locks.LOCK_VARIABLE, str(path))
    found, named, why = fingerprint.lock()
    assert why is None and named is not None and found is not None
    assert named["path"] == "envs/locks/override/cpu-linux-x86_64-py3.11.txt"
    assert named["platform"] == "linux-x86_64-py3.11" and len(named["sha256"]) == 64
    packages = {p["name"].lower(): p for p in fingerprint.packages(found)}
    assert packages["numpy"]["version"] == "2.4.6" and packages["numpy"]["hashes"]
    assert packages["pytest"].get("hashes") is None     # not in the lock: no hash claimed
    monkeypatch.delenv(locks.LOCK_VARIABLE)
    monkeypatch.setenv(locks.LOCK_WHY_VARIABLE, "no lock for cpu on linux-x86_64-py3.11 (nox -s lock)")
    assert fingerprint.lock() == (None, None, "no lock for cpu on linux-x86_64-py3.11 (nox -s lock)")


@pytest.mark.parametrize("kind", ["fifo", "device", "random bytes"])
def test_a_lock_that_is_no_text_file_is_one_line_never_a_hang(kind: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """KITBENCH_LOCK may name anything: the run records why it is unreadable, at once, and goes on."""
    import os
    import time

    from kitbench.errors import UsageError

    path = tmp_path / "lock.txt"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    else:
        path.write_bytes(bytes(range(256)) * 4)
    started = time.monotonic()
    with pytest.raises(UsageError):
        locks.read(path)
    monkeypatch.setenv(locks.LOCK_VARIABLE, str(path))
    found, info, why = fingerprint.lock()
    assert found is None and info is None and why is not None and "unreadable" in why
    assert time.monotonic() - started < 2
