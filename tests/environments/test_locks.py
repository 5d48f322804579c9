"""Locks resolved for real by uv against recorded index pages (a stand-in as partial as PyTorch's index and
a PyPI stand-in, tests/pytorch_index.py), every lock's fields and build checked, and what a record says of them."""

from __future__ import annotations

import json
import re
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from pytorch_index import everything, in_family, partial, recorded, serving

from kitbench.environments import locks, targets
from kitbench.suite import fingerprint

REPO = Path(__file__).resolve().parents[2]
UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))  # on PATH, or beside python
needs_uv = pytest.mark.skipif(UV is None, reason="uv is not installed here: locks are resolved with it")
CPU = "https://download.pytorch.org/whl/cpu"
# What a wheel's tags must allow for a lock to install on a platform (PEP 425: platform tag, python tag).
_PLATFORM_TAG = {
    ("linux", "x86_64"): r"(manylinux|linux)\w*_x86_64",
    ("linux", "aarch64"): r"(manylinux|linux)\w*_aarch64",
    ("macos", "arm64"): r"macosx_\d+_\d+_(arm64|universal2)",
    ("windows", "x86_64"): r"win_amd64",
}


def test_the_stand_in_is_as_partial_as_pytorchs_index() -> None:
    def get(url: str) -> bytes:
        with urllib.request.urlopen(url, timeout=10) as response:
            body: bytes = response.read()
            return body

    with serving(partial()) as url:
        request = urllib.request.Request(f"{url}/torch/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            page = json.load(response)
        assert page["name"] == "torch" and any(f["filename"].startswith("torch-2.14.1-") for f in page["files"])
        numpy = get(url.replace("/simple", "/whl/cpu") + "/numpy/").decode()  # PEP 503 HTML, PyTorch's layout
        assert "numpy-2.1.2-" in numpy and "numpy-2.4.6-" not in numpy  # one old version only
        assert "MarkupSafe-2.1.5-" in get(f"{url}/jinja2/").decode()  # a file of another project
        for name in ("rich", "pyyaml", "fastjsonschema"):  # kitbench's own: not PyTorch's to serve
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(f"{url}/{name}/", timeout=10)


@needs_uv
def test_a_resolution_that_is_not_the_targets_build_is_never_written(
    envs_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)
    assert UV is not None
    with serving(partial(), in_family) as torch_index, serving(recorded(), everything) as pypi:
        # The stand-in serves PyPI's torch (a CUDA build) where the cpu target names +cpu: skipped, said why.
        outcome = locks.compile_lock(
            UV, targets.get("cpu"), "linux", "x86_64", locks.Where(torch_index.replace("/simple", "/whl/cpu"), pypi)
        )
        assert outcome.path is None and outcome.skipped is not None
        assert "not the +cpu build of https://download.pytorch.org/whl/cpu (PyPI's build)" in outcome.skipped
        assert not (envs_copy / "locks" / "pylock.cpu-linux-x86_64-py311.toml").exists()
        # macOS takes PyPI's build: its lock is written, every package from PyPI's stand-in, hash-pinned.
        outcome = locks.compile_lock(UV, targets.get("cpu"), "macos", "arm64", locks.Where(None, pypi), "14.0")
    assert outcome.skipped is None and outcome.path == envs_copy / "locks" / "pylock.cpu-macos-arm64-py311.toml"
    lock = locks.read(outcome.path)
    assert lock.platform == "macos-arm64-py3.11" and lock.hashes[("torch", "2.14.1")]
    assert set(lock.indexes.values()) == {pypi} and all(lock.hashes.values())


@needs_uv
def test_an_unreachable_index_skips_the_pair_and_says_why(envs_copy: Path) -> None:
    assert UV is not None
    committed = envs_copy / "locks" / "pylock.cpu-macos-arm64-py311.toml"
    before = committed.read_text()
    outcome = locks.compile_lock(
        UV, targets.get("cpu"), "macos", "arm64", locks.Where(None, "http://127.0.0.1:9/simple")
    )
    assert outcome.path is None and outcome.skipped is not None
    assert "could not resolve against http://127.0.0.1:9/simple" in outcome.skipped
    assert committed.read_text() == before  # a failed resolution leaves the last lock as it was


def test_lock_all_locks_the_docker_targets_too(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[str, str, str]] = []
    monkeypatch.setattr(
        locks,
        "compile_lock",
        lambda uv, target, os_name, arch, where, floor=None: (
            asked.append((target.name, os_name, arch)) or locks.Outcome(target.name, "x", None, "test")
        ),
    )
    cuda126 = targets.get("cuda126")
    monkeypatch.setattr(targets, "load_all", lambda: {"cuda126": cuda126})
    locks.lock_all("uv", lambda target, os_name: locks.Where(None), lambda outcome: None)
    assert asked == [("cuda126", "linux", "x86_64"), ("cuda126", "linux", "aarch64")]


@pytest.mark.parametrize("target", sorted(targets.load_all()))
def test_every_committed_lock_is_complete_and_of_its_targets_build(target: str) -> None:
    """Whatever locks are committed: each holds every pin with hashes, its index, a wheel that installs on
    its platform, and is of its target's build (``check_build``)."""
    found = targets.get(target)
    pins = dict(pin.split("==", 1) for pin in found.pins())
    for os_name, arch in locks.pairs(found):
        platform = locks.platform_name(os_name, arch, found.python)
        path = locks.lock_path(found, platform)
        if not path.is_file():
            continue
        lock = locks.read(path)
        locks.check_build(lock, found)
        assert lock.platform == platform and lock.target == target
        versions = {name: version.partition("+")[0] for name, version in lock.hashes}
        for name, version in pins.items():
            assert versions.get(locks.normalize(name)) == version, (path.name, name)
        python_tag = "cp" + found.python.replace(".", "")
        for (name, _), hashes in lock.hashes.items():
            assert hashes and name in lock.indexes, (path.name, name)
            assert any(
                (re.search(_PLATFORM_TAG[os_name, arch], wheel) or wheel.endswith("-any.whl"))
                and (f"-{python_tag}-" in wheel or "-py3-" in wheel or "-abi3-" in wheel or "py2.py3" in wheel)
                for wheel in lock.wheels[name]
            ), (path.name, name)


def test_the_record_names_the_lock_and_its_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    path = REPO / "tests" / "resources" / "locks" / "pylock.cpu-linux-x86_64-py311.toml"
    monkeypatch.setenv(locks.LOCK_VARIABLE, str(path))
    found, named, why = fingerprint.lock()
    assert why is None and named is not None and found is not None
    assert named["path"] == "tests/resources/locks/pylock.cpu-linux-x86_64-py311.toml"
    assert named["platform"] == "linux-x86_64-py3.11" and len(named["sha256"]) == 64
    packages = {p["name"].lower(): p for p in fingerprint.packages(found)}
    assert packages["numpy"]["version"] == "2.4.6" and packages["numpy"]["hashes"]
    assert packages["numpy"]["source"] == CPU and packages["rich"]["source"] == "https://pypi.org/simple"
    assert packages["pytest"].get("hashes") is None  # not in the lock: no hash claimed
    monkeypatch.delenv(locks.LOCK_VARIABLE)
    monkeypatch.setenv(locks.LOCK_WHY_VARIABLE, "no lock for cpu on linux-x86_64-py3.11 (nox -s lock)")
    assert fingerprint.lock() == (None, None, "no lock for cpu on linux-x86_64-py3.11 (nox -s lock)")
    # The override the session installed under: named, never with its credentials.
    monkeypatch.delenv("KITBENCH_INDEX_OVERRIDE", raising=False)
    assert fingerprint.index_override() is None
    monkeypatch.setenv("KITBENCH_INDEX_OVERRIDE", "https://user:s3cret@mirror.example/simple")
    assert fingerprint.index_override() == "https://mirror.example/simple"


def test_a_lock_is_resolved_against_the_targets_index_or_its_mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX"):
        monkeypatch.delenv(name, raising=False)
    assert locks.where(targets.get("rocm"), "linux") == locks.Where("https://download.pytorch.org/whl/rocm7.2")
    assert locks.where(targets.get("mps"), "macos") == locks.Where(None)  # PyPI's builds
    monkeypatch.setenv("KITBENCH_PYTORCH_INDEX", "http://127.0.0.1:1/whl")
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://mirror.example/simple")
    assert locks.where(targets.get("cpu"), "linux") == locks.Where(
        "http://127.0.0.1:1/whl/cpu", "https://mirror.example/simple"
    )


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ('name = "torch"', 'name = "torch\\nrequests"'),
        ('name = "torch"', 'name = "torch --index-url x"'),
        ('version = "2.14.1"', 'version = "2.14.1 ; os_name"'),
        ('sha256 = "', 'sha256 = "zz'),
        ('url = "https://files.pythonhosted.org/', 'url = "file:///etc/'),
        ('index = "https://download.pytorch.org/whl/cpu"', 'index = "https://x y"'),
    ],
)
def test_every_field_of_a_lock_is_checked_before_use(line: str, bad: str, tmp_path: Path) -> None:
    from kitbench.errors import UsageError

    text = (REPO / "tests" / "resources" / "locks" / "pylock.cpu-linux-x86_64-py311.toml").read_text()
    assert line in text
    path = tmp_path / "pylock.x.toml"
    path.write_text(text.replace(line, bad, 1))
    with pytest.raises(UsageError) as refused:
        locks.read(path)
    assert "not a lock kitbench installs" in refused.value.message and "\n" not in refused.value.message


@pytest.mark.parametrize("kind", ["fifo", "device", "random bytes"])
def test_a_lock_that_is_no_text_file_is_one_line_never_a_hang(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
