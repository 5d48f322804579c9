"""Locks: PEP 751 ``pylock.toml`` files for every (target, platform) pair, resolved from one machine.

A lock is the exact, hash-checked set of distributions a target's environment
holds on one platform (``<os>-<arch>-py<X.Y>``), resolved by ``uv pip compile
--format pylock.toml`` for that platform whatever the host, against the indexes a
user's install reads: the target's PyTorch index for the torch family, PyPI for
the rest (uv's first-index strategy; ``unsafe-best-match`` only where the PyTorch
index lacks a pinned version of a package it mirrors, and the lock says so).

Each package names the index it came from (``index``, PEP 751); ``[tool.kitbench]``
says how the lock was made. Where PyTorch's index is out of reach, the torch
family is resolved against a stand-in (``tests/pytorch_index.py``: PyPI's torch
wheels under PyTorch's layout) and the lock says ``stand-in = true``: its builds
are PyPI's, installable through PyPI or a mirror of it, not from the real index.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kitbench import _files, _http
from kitbench.environments import targets
from kitbench.environments.targets import Target
from kitbench.errors import KitbenchError, NetworkError, UsageError
from kitbench.records import manifest

# kitbench's (os, arch) -> uv's --python-platform.
UV_PLATFORMS = {("linux", "x86_64"): "x86_64-unknown-linux-gnu",
                ("linux", "aarch64"): "aarch64-unknown-linux-gnu",
                ("macos", "arm64"): "aarch64-apple-darwin",
                ("windows", "x86_64"): "x86_64-pc-windows-msvc"}
PYPI_SIMPLE = targets.PYPI_SIMPLE
LOCK_VARIABLE = "KITBENCH_LOCK"          # set by the nox sessions: the lock the environment was built from
LOCK_WHY_VARIABLE = "KITBENCH_LOCK_WHY"  # ... or why there was none


def lock_path(target: Target, platform: str) -> Path:
    """PEP 751's name for a lock: ``envs/locks/pylock.<target>-<os>-<arch>-py<X.Y>.toml``."""
    return manifest.envs_dir() / "locks" / f"pylock.{target.name}-{platform}.toml"
_MACOS_TAG = re.compile(r"macosx_([0-9]+)_([0-9]+)_(?:arm64|universal2)\.whl$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")
_FROM = re.compile(r"^\s+# from (\S+)")
_FIELD = re.compile(r'^(name|version|index) = "([^"]*)"', re.MULTILINE)
_SHA256 = re.compile(r'sha256 = "([0-9a-f]{64})"')
_WHEEL_URL = re.compile(r'url = "([^"]+\.whl)"')


@dataclass(frozen=True)
class Outcome:
    """One (target, platform) pair: the lock written, or why not."""

    target: str
    platform: str
    path: Path | None
    skipped: str | None
    note: str | None = None        # e.g. resolved against a stand-in of the target's index


def platform_name(os_name: str, arch: str, python: str) -> str:
    return f"{os_name}-{arch}-py{python}"


def pairs(target: Target) -> list[tuple[str, str]]:
    """Every (os, arch) the target's manifest lists."""
    return [(host.os, arch) for host in target.hosts for arch in host.arch]


def macos_floor(torch_version: str, index: str = PYPI_SIMPLE) -> str:
    """The oldest macOS the pinned torch's arm64 wheels are tagged for (e.g. ``14.0`` for
    ``macosx_14_0_arm64``): the deployment target uv resolves the rest against, read
    from the index (PEP 691 JSON) rather than uv's default (which is older)."""
    try:
        page = _http.get(f"{index}/torch/", "application/vnd.pypi.simple.v1+json", timeout=30)
        files = json.loads(page.body)["files"]
    except NetworkError as exc:
        raise UsageError(f"cannot read torch's wheel list from {_http.shown(index)}: {exc.message}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read torch's wheel list from {_http.shown(index)}: {exc}") from None
    floors = [(int(m[1]), int(m[2])) for f in files
              if f["filename"].startswith(f"torch-{torch_version}-") and (m := _MACOS_TAG.search(f["filename"]))]
    if not floors:
        raise UsageError(f"{index} serves no macOS arm64 wheel of torch {torch_version}")
    major, minor = min(floors)
    return f"{major}.{minor}"


@dataclass(frozen=True)
class Where:
    """The indexes one lock is resolved against: ``torch`` (the URL uv reads; a stand-in's when
    ``stand_in_for`` names the real index it stands for), then ``default`` (None: uv's own default)."""

    torch: str | None
    default: str | None = None
    stand_in_for: str | None = None


def _uv(command: list[str], env: dict[str, str] | None, cwd: str) -> tuple[bool, str]:
    """Whether uv succeeded, and its words (stderr) when not: the last of them, where uv says why."""
    import subprocess

    from kitbench import _proc

    try:
        done = _proc.run(command, 600, env=env, cwd=cwd, tail=True)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"uv failed to run: {exc}"
    return done.returncode == 0, done.stderr


def _last(words: str) -> str:
    return next((line.strip() for line in reversed(words.splitlines()) if line.strip()), "")


def compile_lock(uv: str, target: Target, os_name: str, arch: str, where: Where,
                 macos_floor_version: str | None = None) -> Outcome:
    """Resolve one pair with uv and write its lock; a failed resolution skips it, said why, and
    leaves the last lock as it was."""
    import os

    platform = platform_name(os_name, arch, target.python)
    env = dict(os.environ)
    how = [f"--python-platform {UV_PLATFORMS[os_name, arch]}", f"--python-version {target.python}"]
    if os_name == "macos" and macos_floor_version:
        env["MACOSX_DEPLOYMENT_TARGET"] = macos_floor_version
        how.append(f"MACOSX_DEPLOYMENT_TARGET={macos_floor_version}")
    common = [uv, "pip", "compile", "--quiet", "--generate-hashes", "--no-header", "--python-platform",
              UV_PLATFORMS[os_name, arch], "--python-version", target.python,
              *(["--default-index", where.default] if where.default else []),
              *(["--index", where.torch] if where.torch else [])]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "requirements.in").write_text("\n".join(target.pins()) + "\n")
        # Where each package came from: uv says it in requirements form only; the pylock is then made
        # from exactly those pins (--no-deps), so the two cannot differ.
        strategy = "first-index"
        ok, why = _uv([*common, "--emit-index-annotation", "-o", "resolved.txt", "requirements.in"], env, tmp)
        if not ok and where.torch and "unsafe-best-match" in why:     # uv's hint: a later index has the version
            strategy = "unsafe-best-match"
            ok, why = _uv([*common, "--index-strategy", strategy, "--emit-index-annotation", "-o", "resolved.txt",
                           "requirements.in"], env, tmp)
        if not ok:
            shown = (f"a stand-in of {where.stand_in_for}" if where.stand_in_for
                     else where.torch or where.default or "the default index")
            return Outcome(target.name, platform, None, f"could not resolve against {shown}: {_last(why)[:300]}")
        resolved = Path(tmp, "resolved.txt").read_text()
        ok, why = _uv([*common, "--index-strategy", "unsafe-best-match", "--no-deps", "--format", "pylock.toml",
                       "-o", "pylock.toml", "resolved.txt"], env, tmp)
        if not ok:
            return Outcome(target.name, platform, None, f"uv could not write the pylock.toml: {_last(why)[:300]}")
        text = _with_indexes(Path(tmp, "pylock.toml").read_text(), _indexes(resolved, where))
    tool = {"target": target.name, "platform": platform, "python-platform": UV_PLATFORMS[os_name, arch],
            "indexes": [i for i in (where.stand_in_for or where.torch, where.default or PYPI_SIMPLE) if i],
            "index-strategy": strategy, "stand-in": where.stand_in_for is not None,
            "resolved-with": f"uv pip compile {' '.join(how)}"}
    path = lock_path(target, platform)
    path.parent.mkdir(parents=True, exist_ok=True)
    note = (f"# The torch family was resolved against a local stand-in of {where.stand_in_for} (PyPI's wheels\n"
            "# under PyTorch's layout: that index was out of reach here). Installable through PyPI or a mirror\n"
            "# of it (KITBENCH_INDEX_URL), not from the real index: nox -s lock where it is reachable.\n"
            if where.stand_in_for else "")
    path.write_text(f"# kitbench lock for target {target.name} on {platform}, written by `nox -s lock`.\n{note}"
                    + text.rstrip("\n") + "\n\n[tool.kitbench]\n"
                    + "".join(f"{key} = {_toml(value)}\n" for key, value in tool.items()))
    return Outcome(target.name, platform, path, None, f"the torch family against a local stand-in of "
                   f"{where.stand_in_for} (marked stand-in in the lock)" if where.stand_in_for else None)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


def _indexes(resolved: str, where: Where) -> dict[str, str]:
    """Each package's index, from uv's ``# from <url>`` annotations; a stand-in's URL named as
    the index it stands for."""
    found: dict[str, str] = {}
    current = None
    for line in resolved.splitlines():
        if pin := _PIN.match(line):
            current = normalize(pin[1])
        elif (origin := _FROM.match(line)) and current is not None:
            url = origin[1]
            found[current] = where.stand_in_for if where.stand_in_for and url == where.torch else url
    return found


def _with_indexes(text: str, indexes: dict[str, str]) -> str:
    """uv's pylock.toml with PEP 751's ``index`` key after each package's version."""
    out = []
    current = None
    for line in text.splitlines():
        out.append(line)
        if line.startswith("name = "):
            current = normalize(json.loads(line.partition(" = ")[2]))
        elif line.startswith("version = ") and current in indexes:
            out.append(f"index = {json.dumps(indexes[current])}")
    return "\n".join(out) + "\n"


def lock_all(uv: str, where: Callable[[Target, str], Where], log: Callable[[Outcome], None]) -> list[Outcome]:
    """Every target (docker ones included: their images install from these locks) for every host its
    manifest lists; ``where`` gives the indexes of a (target, os)."""
    found: list[Outcome] = []
    floors: dict[str, str] = {}
    for target in targets.load_all().values():
        for os_name, arch in pairs(target):
            floor = None
            if os_name == "macos":
                try:
                    floor = floors.setdefault(target.torch, macos_floor(target.torch))
                except KitbenchError as error:
                    found.append(Outcome(target.name, platform_name(os_name, arch, target.python), None,
                                         error.message))
                    log(found[-1])
                    continue
            found.append(compile_lock(uv, target, os_name, arch, where(target, os_name), floor))
            log(found[-1])
    return found


@dataclass(frozen=True)
class Lock:
    path: Path
    target: str
    platform: str
    index: str                                   # the lock's first index: the target's (PyTorch's or PyPI)
    sha256: str
    hashes: dict[tuple[str, str], list[str]]     # (normalized name, version) -> sha256 hashes
    indexes: dict[str, str] = field(default_factory=dict)   # normalized name -> the index it came from
    stand_in: bool = False
    wheels: dict[str, list[str]] = field(default_factory=dict)  # normalized name -> its wheels' file names


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read(path: Path) -> Lock:
    """A lock's packages, their hashes and indexes, and how it was made. Read line by line (no TOML
    parser on Python 3.10, where the images' kitbench runs): the lines uv and ``compile_lock`` write."""
    raw = _files.read(path, targets.MAX_LOCK_BYTES, "lock", UsageError)
    text = _files.decode(raw, path, "lock", UsageError)
    head, _, tool_text = text.partition("\n[tool.kitbench]\n")
    tool: dict[str, object] = {}
    for line in tool_text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            with contextlib.suppress(ValueError):     # a value of another shape: not one kitbench reads
                tool[key.strip()] = json.loads(value)
    hashes: dict[tuple[str, str], list[str]] = {}
    indexes: dict[str, str] = {}
    wheels: dict[str, list[str]] = {}
    for block in head.split("\n[[packages]]\n")[1:]:
        fields = dict(_FIELD.findall(block))
        if "name" not in fields or "version" not in fields:
            raise UsageError(f"{path}: a package without a name or version")
        name = normalize(fields["name"])
        hashes[name, fields["version"]] = [f"sha256:{digest}" for digest in _SHA256.findall(block)]
        wheels[name] = [url.rsplit("/", 1)[-1] for url in _WHEEL_URL.findall(block)]
        if "index" in fields:
            indexes[name] = fields["index"]
    found = tool.get("indexes")
    if not isinstance(found, list) or not found or not isinstance(tool.get("platform"), str) or not hashes:
        raise UsageError(f"{path} is not a kitbench lock (PEP 751 packages and a [tool.kitbench] table)",
                         hint="nox -s lock writes them")
    return Lock(path, str(tool.get("target")), str(tool["platform"]), str(found[0]),
                hashlib.sha256(raw).hexdigest(), hashes, indexes, tool.get("stand-in") is True, wheels)


def reachable(index: str, timeout_s: float = 5.0) -> bool:
    """Whether ``index`` answers for torch (PEP 503/691): PyTorch's index is out of reach on some machines.
    Asked as every index is (kitbench._http: pip's CA bundle, an index URL's credentials)."""
    try:
        _http.get(f"{index.rstrip('/')}/torch/", "application/vnd.pypi.simple.v1+json, text/html;q=0.1",
                  timeout=timeout_s)
    except NetworkError:
        return False
    return True


def where(target: Target, os_name: str, stand_in: Callable[[], str]) -> Where:
    """The indexes a lock is resolved against: the target's (``KITBENCH_PYTORCH_INDEX`` honoured), else,
    where that is out of reach, ``stand_in()`` (a local stand-in of PyTorch's index, started only then:
    its ``/simple`` URL) in its place; the rest from ``KITBENCH_INDEX_URL`` when it names an index, else
    uv's own default."""
    import os

    override = os.environ.get(targets.INDEX_VARIABLE)
    default = override if override and override != "default" else None
    declared = target.declared_index(os_name)
    if declared is None or reachable(declared):
        return Where(declared, default)
    real = target.index[os_name]
    if not real.startswith(targets.PYTORCH_INDEX + "/"):
        return Where(declared, default)         # not PyTorch's: nothing stands in for it, uv says why
    base = stand_in().rstrip("/").removesuffix("/simple") + "/whl"        # PyTorch's layout, on the stand-in
    return Where(base + real[len(targets.PYTORCH_INDEX):], default, stand_in_for=real)
