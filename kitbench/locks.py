"""Locks: hash-pinned requirements for every (target, platform) pair, resolved from one machine.

A lock is the exact, hash-checked set of distributions a target's environment
holds on one platform (``<os>-<arch>-py<X.Y>``), resolved by ``uv pip compile``
for that platform whatever the host. Its first line is the header
``targets.lock_header`` writes (target, platform, index); the second says how it
was resolved. Locks resolved under an index override (``KITBENCH_INDEX_URL``)
live in ``envs/locks/override/`` and are only used while the same override is in
force: the header names the index, and ``Target.usable_lock`` compares it.

The format is hash-pinned requirements, not PEP 751's ``pylock.toml``: the
nox sessions install with uv *or* pip (virtualenv backend, conda's pip), and
pip (25.x) cannot install from a ``pylock.toml``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from kitbench import _files, targets
from kitbench.errors import KitbenchError, UsageError
from kitbench.targets import Target

# kitbench's (os, arch) -> uv's --python-platform.
UV_PLATFORMS = {("linux", "x86_64"): "x86_64-unknown-linux-gnu",
                ("linux", "aarch64"): "aarch64-unknown-linux-gnu",
                ("macos", "arm64"): "aarch64-apple-darwin",
                ("windows", "x86_64"): "x86_64-pc-windows-msvc"}
PYPI_SIMPLE = targets.PYPI_SIMPLE
LOCK_VARIABLE = "KITBENCH_LOCK"          # set by the nox sessions: the lock the environment was built from
LOCK_WHY_VARIABLE = "KITBENCH_LOCK_WHY"  # ... or why there was none
_MACOS_TAG = re.compile(r"macosx_(\d+)_(\d+)_(?:arm64|universal2)\.whl$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")


@dataclass(frozen=True)
class Outcome:
    """One (target, platform) pair: the lock written, or why not."""

    target: str
    platform: str
    path: Path | None
    skipped: str | None


def platform_name(os_name: str, arch: str, python: str) -> str:
    return f"{os_name}-{arch}-py{python}"


def pairs(target: Target) -> list[tuple[str, str]]:
    """Every (os, arch) the target's manifest lists."""
    return [(host.os, arch) for host in target.hosts for arch in host.arch]


def macos_floor(torch_version: str, index: str = PYPI_SIMPLE) -> str:
    """The oldest macOS the pinned torch's arm64 wheels are tagged for (e.g. ``14.0`` for
    ``macosx_14_0_arm64``): the deployment target uv resolves the rest against, read
    from the index (PEP 691 JSON) rather than uv's default (which is older)."""
    request = urllib.request.Request(f"{index}/torch/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            files = json.load(response)["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"cannot read torch's wheel list from {index}: {exc}") from None
    floors = [(int(m[1]), int(m[2])) for f in files
              if f["filename"].startswith(f"torch-{torch_version}-") and (m := _MACOS_TAG.search(f["filename"]))]
    if not floors:
        raise UsageError(f"{index} serves no macOS arm64 wheel of torch {torch_version}")
    major, minor = min(floors)
    return f"{major}.{minor}"


def compile_lock(uv: str, target: Target, os_name: str, arch: str, macos_floor_version: str | None = None) -> Outcome:
    """Resolve one pair with uv and write its lock; an unreachable index skips it, said why."""
    platform = platform_name(os_name, arch, target.python)
    index = target.lock_index(os_name)
    env = dict(os.environ)
    how = [f"--python-platform {UV_PLATFORMS[os_name, arch]}", f"--python-version {target.python}"]
    if os_name == "macos" and macos_floor_version:
        env["MACOSX_DEPLOYMENT_TARGET"] = macos_floor_version
        how.append(f"MACOSX_DEPLOYMENT_TARGET={macos_floor_version}")
    with tempfile.TemporaryDirectory() as tmp:
        wanted = Path(tmp) / "requirements.in"     # named relative below: no temp path in the lock
        wanted.write_text("\n".join(target.pins()) + "\n")
        out = Path(tmp) / "lock.txt"
        # The index belongs to the header, not to the file: this machine's uv/pip configuration
        # (mirrors) must not be written into a committed lock.
        command = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header", "--no-emit-index-url",
                   "--python-platform", UV_PLATFORMS[os_name, arch], "--python-version", target.python,
                   *(["--index-url", index] if index else []), "--output-file", str(out), wanted.name]
        try:
            done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp, timeout=600,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Outcome(target.name, platform, None, f"uv failed to run: {exc}")
        if done.returncode != 0:
            last = next((line.strip() for line in reversed(done.stderr.splitlines()) if line.strip()), "")
            return Outcome(target.name, platform, None,
                           f"could not resolve against {index or 'the default index'}: {last[:200]}")
        path = target.lock_file(platform)
        path.parent.mkdir(parents=True, exist_ok=True)
        header = targets.lock_header(target.name, platform, index)
        path.write_text(f"{header}\n# resolved with uv pip compile {' '.join(how)}\n\n" + out.read_text())
    return Outcome(target.name, platform, path, None)


def lock_all(uv: str) -> list[Outcome]:
    """Every pip-installed target (venv, and conda's pip part) for every host its manifest lists.
    Docker targets resolve inside their image build and are listed as skipped."""
    found: list[Outcome] = []
    floors: dict[str, str] = {}
    for target in targets.load_all().values():
        for os_name, arch in pairs(target):
            platform = platform_name(os_name, arch, target.python)
            if target.kind == "docker":
                found.append(Outcome(target.name, platform, None, "docker target: its image build installs it"))
                continue
            floor = None
            if os_name == "macos":
                try:
                    floor = floors.setdefault(target.torch, macos_floor(target.torch))
                except KitbenchError as error:
                    found.append(Outcome(target.name, platform, None, error.message))
                    continue
            found.append(compile_lock(uv, target, os_name, arch, floor))
    return found


@dataclass(frozen=True)
class Lock:
    path: Path
    platform: str
    index: str
    sha256: str
    hashes: dict[tuple[str, str], list[str]]     # (normalized name, version) -> sha256 hashes


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read(path: Path) -> Lock:
    """A lock's header and its pins' hashes."""
    text = _files.read_text(path, targets.MAX_LOCK_BYTES, "lock", UsageError)
    header = re.match(r"# kitbench lock: target [^,]+, ([^,]+), index (.+)", text)
    if header is None:
        raise UsageError(f"{path} is not a kitbench lock (no header line)")
    hashes: dict[tuple[str, str], list[str]] = {}
    current: tuple[str, str] | None = None
    for line in text.splitlines():
        pin = _PIN.match(line)
        if pin:
            current = (normalize(pin[1]), pin[2])
            hashes[current] = []
        if current is not None:
            hashes[current] += _HASH.findall(line)
    return Lock(path, header[1], header[2], hashlib.sha256(text.encode()).hexdigest(), hashes)


def choose(target: Target, platform: str, os_name: str) -> tuple[Path | None, str | None]:
    """The lock to install from, or None and why (for the record)."""
    path = target.lock_file(platform)
    if not path.is_file():
        return None, f"no lock for {target.name} on {platform}" + (
            " under the index override" if os.environ.get(targets.INDEX_VARIABLE) else "") + " (nox -s lock)"
    found = target.usable_lock(platform, os_name)
    if found is None:
        return None, f"{path.name} was resolved against another index than the one in force"
    return found, None
