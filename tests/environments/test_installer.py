"""kitbench.environments.installer: where each package comes from, and the commands that install a target's lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitbench import _pipconf
from kitbench.environments import installer, locks, targets

REPO = Path(__file__).resolve().parents[2]
CPU_LINUX = REPO / "envs" / "locks" / "pylock.cpu-linux-x86_64-py3.11.toml"


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No override, no pip or uv configuration: a user's machine with nothing set."""
    for name in ("KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
                 "PIP_FIND_LINKS", *installer._UV_INDEX_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    monkeypatch.setenv("XDG_CONFIG_DIRS", str(tmp_path / "etc"))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "none.conf"))
    monkeypatch.setattr(_pipconf, "config_files", lambda: [tmp_path / "pip.conf"])
    monkeypatch.setattr(installer, "_uv_config_files", lambda: [tmp_path / "uv.toml"])
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("plain")
def test_the_torch_family_from_pytorchs_index_the_rest_from_pypi(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = targets.get("cpu")
    linux = installer.sources(cpu, "linux")
    assert linux == installer.Sources("https://download.pytorch.org/whl/cpu", None)
    # uv: PyTorch's index first (first-index: what it lacks, rich and pyyaml, comes from PyPI); pip: beside PyPI.
    pins = installer.Install(["torch==2.14.1", "rich==15.0.0"], False, linux, {}, "")
    assert pins.args("uv", "r.txt") == ["--index", "https://download.pytorch.org/whl/cpu", "-r", "r.txt"]
    assert pins.args("pip", "r.txt") == ["--extra-index-url", "https://download.pytorch.org/whl/cpu", "-r", "r.txt"]
    # A lock: hash-checked, nothing resolved; each file from whichever index has it, the hash says what it is.
    locked = installer.Install(["torch==2.14.1 --hash=sha256:00"], True, linux, {}, "")
    assert locked.args("uv", "r.txt") == [
        "--index", "https://download.pytorch.org/whl/cpu", "--index-strategy", "unsafe-best-match",
        "--no-deps", "--require-hashes", "-r", "r.txt"]
    assert installer.sources(cpu, "macos") == installer.Sources(None, None)        # PyPI's wheels
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://mirror.example/simple")
    mirror = installer.Install([], True, installer.sources(cpu, "linux"), {}, "")
    assert mirror.args("pip", "r.txt") == [
        "--index-url", "https://mirror.example/simple", "--no-deps", "--require-hashes", "-r", "r.txt"]


@pytest.mark.usefixtures("plain")
def test_default_means_the_users_configuration_for_pip_and_uv(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    chosen = installer.sources(targets.get("cpu"), "linux")
    assert chosen.configured and installer.pip_index_args(chosen) == []        # pip reads its own
    assert installer.uv_index_args(chosen, hashed=True) == []                  # nothing configured: uv's PyPI
    # pip configured and uv not: uv is given pip's indexes, pip's best-match semantics included.
    (tmp_path / "pip.conf").write_text("[global]\nindex-url = https://mirror.example/simple\n"
                                       "extra-index-url = file:///opt/a/simple file:///opt/b/simple\n"
                                       "find-links = /opt/wheels\n")
    assert installer.uv_index_args(chosen, hashed=True) == [
        "--default-index", "https://mirror.example/simple", "--index", "file:///opt/a/simple",
        "--index", "file:///opt/b/simple", "--find-links", "/opt/wheels", "--index-strategy", "unsafe-best-match"]
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")          # the environment over the file
    assert _pipconf.pip_configuration()["index-url"] == ["https://env.example/simple"]
    # uv configured (uv.toml or UV_* variables): uv reads its own, kitbench passes nothing.
    (tmp_path / "uv.toml").write_text('[[index]]\nurl = "https://uv.example/simple"\ndefault = true\n')
    assert installer.uv_index_args(chosen, hashed=True) == []
    (tmp_path / "uv.toml").unlink()
    monkeypatch.setenv("UV_DEFAULT_INDEX", "https://uv.example/simple")
    assert installer.uv_index_args(chosen, hashed=False) == []


@pytest.mark.usefixtures("plain")
def test_a_stand_in_lock_installs_through_a_mirror_not_from_the_real_index(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Path) -> None:
    cpu = targets.get("cpu")
    assert locks.read(CPU_LINUX).stand_in
    lock, why = installer.choose(cpu, "linux-x86_64-py3.11", "linux")
    assert lock is None and why is not None and "stand-in of https://download.pytorch.org/whl/cpu" in why
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    assert not plan.hashed and {"torch==2.14.1", "torchvision==0.29.1", "rich==15.0.0"} <= set(plan.requirements)
    assert set(plan.record) == {locks.LOCK_WHY_VARIABLE}
    for variable, value in (("KITBENCH_INDEX_URL", "default"), ("KITBENCH_PYTORCH_INDEX", "http://127.0.0.1:1/whl")):
        monkeypatch.setenv(variable, value)
        plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
        assert plan.record == {locks.LOCK_VARIABLE: str(CPU_LINUX)} and plan.hashed
        pinned = Path(plan.write(tmp_path / "r.txt")).read_text().splitlines()
        assert any(line.startswith("torch==2.14.1 --hash=sha256:") for line in pinned)
        assert all(" --hash=sha256:" in line for line in pinned)
        monkeypatch.delenv(variable)
    # PyPI's lock (macOS) is the real thing anywhere.
    assert installer.choose(cpu, "macos-arm64-py3.11", "macos")[0] is not None
    assert installer.choose(cpu, "linux-riscv64-py3.11", "linux") == (
        None, "no lock for cpu on linux-riscv64-py3.11 (nox -s lock)")
