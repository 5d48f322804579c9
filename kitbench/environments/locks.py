"""Locks: PEP 751 ``pylock.toml`` files for (target, platform) pairs, resolved from one machine.

A lock is the exact, hash-checked set of distributions a target's environment
holds on one platform (``<os>-<arch>-py<X.Y>``), resolved by ``uv pip compile
--format pylock.toml`` for that platform whatever the host, against the indexes a
user's install reads: the torch family from the target's PyTorch index (an explicit
index, ``scoped_project``), everything else from PyPI, whatever PyTorch's index mirrors.

Each package names the index it came from (``index``, PEP 751); ``[tool.kitbench]``
says how the lock was made. A lock is committed only where it was resolved against
the files its users get (``nox -s lock`` where the target's index answers): one whose
torch is not the target's build (PyPI's CUDA torch, resolved against a stand-in of
PyTorch's index, in a cpu lock) is never written and is refused on load
(``check_build``); every field of a lock is checked before anything is derived from it.
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

from kitbench import _files, _http, _reach
from kitbench.environments import targets
from kitbench.environments.targets import Target
from kitbench.errors import KitbenchError, NetworkError, UsageError, clean
from kitbench.machine.builds import build
from kitbench.records import manifest

# kitbench's (os, arch) -> uv's --python-platform.
UV_PLATFORMS = {
    ("linux", "x86_64"): "x86_64-unknown-linux-gnu",
    ("linux", "aarch64"): "aarch64-unknown-linux-gnu",
    ("macos", "arm64"): "aarch64-apple-darwin",
    ("windows", "x86_64"): "x86_64-pc-windows-msvc",
}
PYPI_SIMPLE = targets.PYPI_SIMPLE
LOCK_VARIABLE = "KITBENCH_LOCK"  # set by the nox sessions: the lock the environment was built from
LOCK_WHY_VARIABLE = "KITBENCH_LOCK_WHY"  # ... or why there was none
# The names that come from PyTorch's index and nowhere else (those uv's --torch-backend scopes to it).
FAMILY = frozenset(
    {"torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu"}
)
# What a build's torch wheels require that only PyTorch's index carries: named directly, so that the
# installer takes them from there too (uv applies sources to the names it is given, not to their dependencies).
_COMPANIONS = {"rocm": ("pytorch-triton-rocm",), "xpu": ("pytorch-triton-xpu",)}


def lock_path(target: Target, platform: str) -> Path:
    """PEP 751's name for a lock, ``envs/locks/pylock.<target>-<os>-<arch>-py<XY>.toml``: the name between
    ``pylock.`` and ``.toml`` holds no dot (PEP 751; uv refuses ``-r pylock.a.b.toml``)."""
    return manifest.envs_dir() / "locks" / f"pylock.{target.name}-{platform.replace('.', '')}.toml"


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
        raise UsageError(f"cannot read torch's wheel list from {_reach.shown(index)}: {exc.message}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"cannot read torch's wheel list from {_reach.shown(index)}: {exc}") from None
    floors = [
        (int(m[1]), int(m[2]))
        for f in files
        if f["filename"].startswith(f"torch-{torch_version}-") and (m := _MACOS_TAG.search(f["filename"]))
    ]
    if not floors:
        raise UsageError(f"{index} serves no macOS arm64 wheel of torch {torch_version}")
    major, minor = min(floors)
    return f"{major}.{minor}"


@dataclass(frozen=True)
class Where:
    """The indexes one lock is resolved against: ``torch`` (the target's PyTorch index, for the torch
    family only; None where the target's packages all come from the default), then ``default`` (None: uv's
    own default, PyPI unless configured)."""

    torch: str | None
    default: str | None = None


def scoped_project(requirements: list[str], family: list[str], torch_index: str | None) -> str:
    """``requirements`` as a project uv reads (``uv pip install|compile -r pyproject.toml``), the names in
    ``family`` taken from ``torch_index`` alone, an explicit index (uv's documented way to scope an index to
    some packages: https://docs.astral.sh/uv/guides/integration/pytorch/), everything else from the default."""
    text = (
        '[project]\nname = "kitbench-environment"\nversion = "0"\ndependencies = [\n'
        + "".join(f"    {json.dumps(line)},\n" for line in requirements)
        + "]\n"
    )
    if torch_index:
        text += (
            "\n[tool.uv.sources]\n"
            + "".join(f'{name} = {{ index = "pytorch" }}\n' for name in family)
            + f'\n[[tool.uv.index]]\nname = "pytorch"\nurl = {json.dumps(torch_index)}\nexplicit = true\n'
        )
    return text


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


def family(requirements: list[str]) -> list[str]:
    """The names among ``requirements`` (``name==version ...`` lines) that come from PyTorch's index alone."""
    return sorted({normalize(line.split("==", 1)[0].strip()) for line in requirements} & FAMILY)


def companions(index: str | None) -> tuple[str, ...]:
    """The runtime packages PyTorch's ``index`` (``.../whl/rocm7.2``) alone carries for its build."""
    if not index:
        return ()
    return _COMPANIONS.get(build(index.rstrip("/").rsplit("/", 1)[-1]).kind, ())


def compile_lock(
    uv: str, target: Target, os_name: str, arch: str, where: Where, macos_floor_version: str | None = None
) -> Outcome:
    """Resolve one pair with uv and write its lock; a failed resolution, or one whose files are not the
    target's build (PyPI's CUDA torch where the target names cpu), skips it, said why, and leaves the last
    lock as it was."""
    import os

    platform = platform_name(os_name, arch, target.python)
    env = dict(os.environ)
    how = [f"--python-platform {UV_PLATFORMS[os_name, arch]}", f"--python-version {target.python}"]
    if os_name == "macos" and macos_floor_version:
        env["MACOSX_DEPLOYMENT_TARGET"] = macos_floor_version
        how.append(f"MACOSX_DEPLOYMENT_TARGET={macos_floor_version}")
    common = [
        uv,
        "pip",
        "compile",
        "--quiet",
        "--generate-hashes",
        "--no-header",
        "--python-platform",
        UV_PLATFORMS[os_name, arch],
        "--python-version",
        target.python,
        *(["--default-index", where.default] if where.default else []),
    ]
    pins = [*target.pins(), *companions(where.torch)]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "pyproject.toml").write_text(scoped_project(pins, family(pins), where.torch))
        # Where each package came from: uv says it in requirements form only; the pylock is then made
        # from exactly those pins (--no-deps, the same scoping), so the two cannot differ.
        ok, why = _uv([*common, "--emit-index-annotation", "-o", "resolved.txt", "pyproject.toml"], env, tmp)
        if not ok:
            return Outcome(
                target.name,
                platform,
                None,
                f"could not resolve against {where.torch or where.default or 'the default index'}: {_last(why)[:300]}",
            )
        resolved = Path(tmp, "resolved.txt").read_text()
        exact = [m[0] for line in resolved.splitlines() if (m := _PIN.match(line))]
        Path(tmp, "exact", "pyproject.toml").parent.mkdir()
        Path(tmp, "exact", "pyproject.toml").write_text(scoped_project(exact, family(exact), where.torch))
        ok, why = _uv(
            [*common, "--no-deps", "--format", "pylock.toml", "-o", "pylock.toml", "exact/pyproject.toml"], env, tmp
        )
        if not ok:
            return Outcome(target.name, platform, None, f"uv could not write the pylock.toml: {_last(why)[:300]}")
        # A mirror of PyTorch's index (KITBENCH_PYTORCH_INDEX) is named as the index it mirrors.
        named = target.index.get(os_name)
        real = named if where.torch and named and named != targets.PYPI else where.torch
        indexes = {name: real if url == where.torch and real else url for name, url in _indexes(resolved).items()}
        text = _with_indexes(Path(tmp, "pylock.toml").read_text(), indexes)
        tool = {
            "target": target.name,
            "platform": platform,
            "python-platform": UV_PLATFORMS[os_name, arch],
            "indexes": [i for i in (real, where.default or PYPI_SIMPLE) if i],
            "resolved-with": f"uv pip compile {' '.join(how)}",
        }
        body = (
            f"# kitbench lock for target {target.name} on {platform}, written by `nox -s lock`.\n"
            + text.rstrip("\n")
            + "\n\n[tool.kitbench]\n"
            + "".join(f"{key} = {_toml(value)}\n" for key, value in tool.items())
        )
        path = lock_path(target, platform)
        draft = Path(tmp, path.name)
        draft.write_text(body)
        try:
            check_build(read(draft), target)
        except UsageError as refused:
            return Outcome(target.name, platform, None, refused.message)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    return Outcome(target.name, platform, path, None)


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    return json.dumps(value)


def _indexes(resolved: str) -> dict[str, str]:
    """Each package's index, from uv's ``# from <url>`` annotations."""
    found: dict[str, str] = {}
    current = None
    for line in resolved.splitlines():
        if pin := _PIN.match(line):
            current = normalize(pin[1])
        elif (origin := _FROM.match(line)) and current is not None:
            found[current] = origin[1]
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
                    found.append(Outcome(target.name, platform_name(os_name, arch, target.python), None, error.message))
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
    index: str  # the lock's first index: the target's (PyTorch's or PyPI)
    sha256: str
    hashes: dict[tuple[str, str], list[str]]  # (normalized name, version) -> sha256 hashes
    indexes: dict[str, str] = field(default_factory=dict)  # normalized name -> the index it came from
    wheels: dict[str, list[str]] = field(default_factory=dict)  # normalized name -> its wheels' file names


def normalize(name: str) -> str:
    """A package's name as PEP 503 compares it (packaging's reading)."""
    from packaging.utils import canonicalize_name  # packaging.utils reads tags too: only where a name is asked

    return canonicalize_name(name)


# A lock is input kitbench did not write (a checkout's, KITBENCH_LOCK's): every field it derives
# requirement lines, paths or records from is checked against its standard's form first.
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")  # PEP 508
_VERSION = re.compile(
    r"(?:[0-9]+!)?[0-9]+(?:\.[0-9]+)*(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
    r"(?:\+[a-z0-9]+(?:\.[a-z0-9]+)*)?"
)  # PEP 440, normalized
_URL = re.compile(r"https?://[^\s\"'\\<>]+")
_HEX = re.compile(r"[0-9a-f]{64}")
_ANY_SHA256 = re.compile(r'sha256 = "([^"\n]*)"')
_ANY_URL = re.compile(r'(?:\burl|^index) = "([^"\n]*)"', re.MULTILINE)


def _checked(path: Path, fields: dict[str, str], block: str) -> None:
    """One package's fields in their standard's form, or one line naming the first that is not."""
    bad = None
    if not _NAME.fullmatch(fields["name"]):
        bad = f"name {fields['name']!r} (PEP 508)"
    elif not _VERSION.fullmatch(fields["version"]):
        bad = f"version {fields['version']!r} of {fields['name']} (PEP 440)"
    elif digest := next((d for d in _ANY_SHA256.findall(block) if not _HEX.fullmatch(d)), None):
        bad = f"hash {digest[:80]!r} of {fields['name']} (sha256: 64 hex digits)"
    elif url := next((u for u in _ANY_URL.findall(block) if not _URL.fullmatch(u)), None):
        bad = f"URL {url[:120]!r} of {fields['name']} (http or https, no spaces)"
    if bad:
        raise UsageError(
            f"{path}: not a lock kitbench installs: {clean(bad)}",
            hint="nox -s lock writes them; a lock from elsewhere is refused field by field",
        )


def read(path: Path) -> Lock:
    """A lock's packages, their hashes and indexes, and how it was made, every field checked. Read line by
    line (no TOML parser on Python 3.10, where the images' kitbench runs): the lines uv and ``compile_lock``
    write."""
    raw = _files.read(path, targets.MAX_LOCK_BYTES, "lock", UsageError)
    text = _files.decode(raw, path, "lock", UsageError)
    head, _, tool_text = text.partition("\n[tool.kitbench]\n")
    tool: dict[str, object] = {}
    for line in tool_text.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            with contextlib.suppress(ValueError):  # a value of another shape: not one kitbench reads
                tool[key.strip()] = json.loads(value)
    hashes: dict[tuple[str, str], list[str]] = {}
    indexes: dict[str, str] = {}
    wheels: dict[str, list[str]] = {}
    for block in head.split("\n[[packages]]\n")[1:]:
        fields = dict(_FIELD.findall(block))
        if "name" not in fields or "version" not in fields:
            raise UsageError(f"{path}: a package without a name or version")
        _checked(path, fields, block)
        name = normalize(fields["name"])
        hashes[name, fields["version"]] = [f"sha256:{digest}" for digest in _SHA256.findall(block)]
        wheels[name] = [url.rsplit("/", 1)[-1] for url in _WHEEL_URL.findall(block)]
        if "index" in fields:
            indexes[name] = fields["index"]
    found = tool.get("indexes")
    platform = tool.get("platform")
    if not isinstance(found, list) or not found or not isinstance(platform, str) or not hashes:
        raise UsageError(
            f"{path} is not a kitbench lock (PEP 751 packages and a [tool.kitbench] table)",
            hint="nox -s lock writes them",
        )
    target = tool.get("target")
    if (
        not all(isinstance(url, str) and _URL.fullmatch(url) for url in found)
        or not re.fullmatch(r"[a-z]+-[a-z0-9_]+-py[0-9]+\.[0-9]+", platform)
        or not (isinstance(target, str) and re.fullmatch(r"[a-z0-9][a-z0-9_-]*", target))
    ):
        raise UsageError(
            f"{path}: not a lock kitbench installs: its [tool.kitbench] target, platform or indexes "
            "are not of their form",
            hint="nox -s lock writes them",
        )
    return Lock(path, target, platform, str(found[0]), hashlib.sha256(raw).hexdigest(), hashes, indexes, wheels)


def check_build(lock: Lock, target: Target) -> None:
    """Refuse, in one line, a lock that is not of ``target``'s build: one of another target, or whose torch
    is another build than the target's index serves (PyPI's CUDA torch in a cpu, rocm or xpu lock)."""
    os_name = lock.platform.split("-", 1)[0]
    torch = next((version for name, version in lock.hashes if name == "torch"), None)
    declared = target.index.get(os_name)
    tag = torch.partition("+")[2] if torch else None
    why = None
    if lock.target != target.name:
        why = f"it is {lock.target}'s lock"
    elif torch is None:
        why = "it pins no torch"
    elif declared == targets.PYPI and tag:
        why = f"it pins torch {torch}, where {target.name} takes PyPI's build on {os_name}"
    elif declared != targets.PYPI and tag != target.compute:
        why = f"it pins torch {torch}, not the +{target.compute} build of {declared}" + (
            " (PyPI's build)" if not tag else ""
        )
    elif build(target.compute).kind != "cuda" and (
        cuda := sorted(name for name, _ in lock.hashes if name.startswith(("nvidia-", "cuda-")))
    ):
        why = f"it pins CUDA packages ({', '.join(cuda[:3])}{', ...' if len(cuda) > 3 else ''})"
    if why:
        raise UsageError(
            f"{lock.path.name} is not a lock of {target.name}'s {target.compute} build: {why}",
            hint=f"delete it and the target resolves its pins; nox -s lock rewrites it where {declared} answers",
        )


def where(target: Target, os_name: str) -> Where:
    """The indexes a lock is resolved against: the target's (``KITBENCH_PYTORCH_INDEX`` honoured) for the
    torch family, and for the rest ``KITBENCH_INDEX_URL`` when it names an index, else uv's own default."""
    import os

    override = os.environ.get(targets.INDEX_VARIABLE)
    return Where(target.declared_index(os_name), override if override and override != "default" else None)
