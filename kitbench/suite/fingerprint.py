"""Everything about the environment that could explain a difference in numbers."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import cast

from kitbench import __version__, _proc
from kitbench.environments.locks import Lock
from kitbench.machine import cpus
from kitbench.machine.probe import Probe
from kitbench.machine.probe.python import free_threaded
from kitbench.records.types import CpuIdentity, Environment, GpuIdentity, LockInfo, Package, Settings
from kitbench.suite import determinism
from kitbench.suite.devices import cudnn_version

_IMAGE_VARIABLES = {
    "target": "KITBENCH_TARGET",
    "image": "KITBENCH_IMAGE",
    "image_id": "KITBENCH_IMAGE_ID",
    "base_image_id": "KITBENCH_BASE_IMAGE_ID",
    "manifest_sha256": "KITBENCH_MANIFEST_SHA256",
}


def git_revision() -> str | None:
    """The kit's git revision; inside an image, the one it was built from."""
    if os.environ.get("KITBENCH_GIT_REV"):
        return os.environ["KITBENCH_GIT_REV"]
    repo = Path(__file__).resolve().parents[2]
    if not (repo / ".git").exists():
        return None
    try:
        rev = _proc.run(["git", "-C", str(repo), "rev-parse", "HEAD"], 5)
        dirty = _proc.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"], 5)
    except (OSError, subprocess.SubprocessError):
        return None
    if rev.returncode != 0 or dirty.returncode != 0:
        return None
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def host(machine: Probe) -> Environment:
    """The part of the fingerprint known before torch is imported: what a record holds
    from its first write, so that even a run stopped during ``import torch``, or failed in its
    set-up, says where it ran and what was installed (the packages, torch's among them, the lock and
    the index override). ``torch`` is torch's own ``__version__``, known once it is imported."""
    cpu = cast(CpuIdentity, cpus.identity())  # cpus builds it key by key (tests/test_cpus.py)
    found_lock, named, why = lock()
    return {
        "kitbench": __version__,
        "git_revision": git_revision(),
        "python": platform.python_version(),
        "python_arch": machine.python_arch,
        "python_build": {
            "implementation": sys.implementation.name,
            "version": sys.version,
            "free_threaded": free_threaded(),
        },
        "os": machine.os,
        "os_version": machine.os_version,
        "platform": platform.platform(),
        "arch": machine.arch,
        "cpu": cpu["model"],
        "cpu_count": cpu["cores_usable"],
        "cpu_identity": cpu,
        "ram_bytes": _ram_bytes(),
        "torch": None,
        "driver": machine.driver,
        "gpus": [g.name for g in machine.gpus],
        "gpu_links": [g.link for g in machine.gpus],
        "container": machine.container,
        # Each by its own key (in _IMAGE_VARIABLES's order), so that mypy checks each against Environment.
        "target": os.environ.get(_IMAGE_VARIABLES["target"]),
        "image": os.environ.get(_IMAGE_VARIABLES["image"]),
        "image_id": os.environ.get(_IMAGE_VARIABLES["image_id"]),
        "base_image_id": os.environ.get(_IMAGE_VARIABLES["base_image_id"]),
        "manifest_sha256": os.environ.get(_IMAGE_VARIABLES["manifest_sha256"]),
        "lock": named,
        "lock_why": why,
        "packages": packages(found_lock),
        "index_override": index_override(),
    }


def _torchvision_version() -> str:
    """torchvision's version, or why it cannot be imported: a broken torchvision is a
    finding for the MNIST check, not a reason to lose the other checks."""
    try:
        import torchvision
    except Exception as exc:  # a mismatched build fails with RuntimeError, not only ImportError
        return f"unusable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:200]
    return str(torchvision.__version__)


def _build_matches(target: str | None, version: str, cuda: str | None, os_name: str) -> bool | None:
    """Whether torch is the build its target asks for; None outside a known target."""
    from kitbench.environments import targets
    from kitbench.errors import KitbenchError

    try:
        known = targets.get(target) if target else None
    except KitbenchError:
        return None
    return None if known is None else targets.check_build(known, version, cuda, os_name).matches


def _xpu_devices() -> list[str]:
    """The Intel GPUs torch.xpu sees (empty on builds without XPU)."""
    import torch

    if not (hasattr(torch, "xpu") and torch.xpu._is_compiled() and torch.xpu.is_available()):
        return []
    return [str(torch.xpu.get_device_name(i)) for i in range(torch.xpu.device_count())]


def lock() -> tuple[Lock | None, LockInfo | None, str | None]:
    """The lock the session installed from (``KITBENCH_LOCK``), as the record names it, or why none."""
    from kitbench.environments import locks
    from kitbench.errors import KitbenchError

    path = os.environ.get(locks.LOCK_VARIABLE)
    if not path:
        return (
            None,
            None,
            (
                os.environ.get(locks.LOCK_WHY_VARIABLE)
                or f"not installed by a kitbench session ({locks.LOCK_VARIABLE} unset)"
            ),
        )
    try:
        found = locks.read(Path(path))
    except (OSError, KitbenchError) as exc:
        return None, None, f"{path}: unreadable ({exc})"[:300]
    repo = Path(__file__).resolve().parents[2]
    shown = Path(path).resolve()
    named = str(shown.relative_to(repo)) if shown.is_relative_to(repo) else path
    return found, {"path": named, "platform": found.platform, "index": found.index, "sha256": found.sha256}, None


def index_override() -> str | None:
    """The ``KITBENCH_INDEX_URL`` the session installed under (``KITBENCH_INDEX_OVERRIDE``, credentials
    removed by the installer and again here: a record is shared), or None."""
    from kitbench._reach import shown
    from kitbench.environments.installer import OVERRIDE_VARIABLE

    value = os.environ.get(OVERRIDE_VARIABLE)
    return shown(value) if value else None


def _shown_source(url: object) -> str | None:
    """Where a distribution came from, as a record may keep it: a URL as it is, but of a local path only
    its last part (a wheel's file name names its name, version and tags). A record identifies a package
    by name, version and hash; the folders of the machine that made it say nothing another machine can use."""
    if not isinstance(url, str):
        return None
    if url.startswith("file:") or url.startswith("/"):
        return url.rstrip("/").rpartition("/")[2] or None
    return url


def packages(found: Lock | None) -> list[Package]:
    """Every distribution this interpreter can import, as ``import`` finds them (the first on sys.path
    wins), with its installer, its source (direct URL, a local file's name only; else the index the lock
    names for it) and the lock's hashes."""
    from importlib import metadata

    from kitbench.environments.locks import normalize

    seen: dict[str, Package] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if not name or normalize(name) in seen:
            continue
        entry: Package = {"name": name, "version": dist.version}
        installer = (dist.read_text("INSTALLER") or "").strip()
        entry["installer"] = installer or None
        source = None
        try:
            direct = json.loads(dist.read_text("direct_url.json") or "null")
        except ValueError:
            direct = None
        if isinstance(direct, dict):
            source = _shown_source(direct.get("url"))
        hashes = found.hashes.get((normalize(name), dist.version)) if found is not None else None
        if source is None and hashes and found is not None:
            source = found.indexes.get(normalize(name), found.index)
        entry["source"] = source
        if hashes:
            entry["hashes"] = hashes
        seen[normalize(name)] = entry
    return sorted(seen.values(), key=lambda e: normalize(e["name"]))


def collect(machine: Probe, known: Environment | None = None) -> Environment:
    """The whole fingerprint, torch's part included (torch is imported by now), on ``known``, the part
    ``host`` read before (the packages are read once a run: tens of milliseconds)."""
    import copy

    import torch

    found = copy.deepcopy(known) if known is not None else host(machine)
    found["cpu_identity"]["isa"] = torch.backends.cpu.get_cpu_capability()
    if torch.cuda.is_available():
        found["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        found["gpu_identity"] = [_gpu_identity(i) for i in range(torch.cuda.device_count())]
    found.update(
        {
            "build_matches_target": _build_matches(
                found.get("target"), torch.__version__, torch.version.cuda, machine.os
            ),
            "torch": torch.__version__,
            "torch_build": torch.__version__.partition("+")[2] or None,
            "torchvision": _torchvision_version(),
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "xpu_devices": _xpu_devices(),
            "cudnn": cudnn_version(),
            "threads": torch.get_num_threads(),
            "interop_threads": torch.get_num_interop_threads(),
            "settings": cast(Settings, determinism.settings()),  # torch's names, key by key
        }
    )
    return found


def _gpu_identity(index: int) -> GpuIdentity:
    """Which GPU: its name, compute capability and UUID (the one board, as nvidia-smi -L names it)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    uuid = str(getattr(props, "uuid", "") or "") or None
    return {
        "name": props.name,
        "capability": f"{props.major}.{props.minor}",
        "uuid": f"GPU-{uuid}" if uuid and not uuid.startswith("GPU-") else uuid,
    }
