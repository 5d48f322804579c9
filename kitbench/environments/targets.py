"""Targets: one pinned environment per ``envs/targets/<name>.yaml``.

Adding a target is adding a file; the noxfile registers a session for each.
This module also owns the two overrides every target honours:
``KITBENCH_INDEX_URL`` (another package index for everything, or ``default`` for
the user's own pip or uv configuration) for offline and proxied machines, and
``KITBENCH_PYTORCH_INDEX`` (a mirror of PyTorch's index, in place of
``https://download.pytorch.org/whl``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kitbench import _reach
from kitbench._http import checked
from kitbench.errors import KitbenchError, ManifestError, UsageError
from kitbench.machine.builds import build
from kitbench.records import manifest

INDEX_VARIABLE = _reach.INDEX_VARIABLE
PYPI = "pypi"
PYPI_SIMPLE = "https://pypi.org/simple"
PYTORCH_INDEX = "https://download.pytorch.org/whl"
PYTORCH_INDEX_VARIABLE = _reach.PYTORCH_VARIABLE  # a mirror of PyTorch's index: its URL for PYTORCH_INDEX


@dataclass(frozen=True)
class Host:
    os: str
    arch: tuple[str, ...]
    min_os_version: str | None = None


@dataclass(frozen=True)
class Target:
    name: str
    description: str
    kind: str
    compute: str
    python: str
    torch: str
    torchvision: str
    index: dict[str, str]
    hosts: tuple[Host, ...]
    cuda: str | None
    base_image: str | None
    image_digest: str | None
    environment: Path | None
    requirements: tuple[str, ...]
    path: Path
    sha256: str

    def pins(self) -> list[str]:
        """Every exact pin installed into the environment, torch first."""
        return [
            f"torch=={self.torch}",
            f"torchvision=={self.torchvision}",
            *self.requirements,
            *suite_requirements(self.python),
        ]

    def declared_index(self, os_name: str) -> str | None:
        """The manifest's index for ``os_name`` (None: PyPI), its ``https://download.pytorch.org/whl``
        part replaced by ``KITBENCH_PYTORCH_INDEX`` where that names a mirror (or stand-in) of PyTorch's."""
        url = self.index.get(os_name)
        if url is None:
            raise UsageError(
                f"target {self.name!r} names no package index for {os_name}",
                hint=f"it is made for: {', '.join(sorted(self.index))}",
            )
        mirror = os.environ.get(PYTORCH_INDEX_VARIABLE)
        if mirror and url.startswith(PYTORCH_INDEX + "/"):
            return checked(mirror, PYTORCH_INDEX_VARIABLE).rstrip("/") + url[len(PYTORCH_INDEX) :]
        return None if url == PYPI else url

    def index_for(self, os_name: str) -> str | None:
        """The index torch comes from on ``os_name``; None means the installer's own default.
        ``KITBENCH_INDEX_URL`` overrides the manifest for every target."""
        override = os.environ.get(INDEX_VARIABLE)
        if override:
            return None if override == "default" else checked(override, INDEX_VARIABLE)
        return self.declared_index(os_name)


MAX_LOCK_BYTES = 16 * 2**20  # the largest lock is about 40 KB; KITBENCH_LOCK may name anything


@dataclass(frozen=True)
class BuildCheck:
    """Whether an installed torch is the build a target asks for, and if not, why not."""

    matches: bool
    got: str  # e.g. "torch 2.14.1 (CUDA 13.0 build from plain PyPI)"
    cause: str | None  # what put another build there, when it is not the target's


def installed_build(version: str, cuda: str | None) -> str:
    tag = version.partition("+")[2]
    kind = f"+{tag} build" if tag else (f"CUDA {cuda} build from plain PyPI" if cuda else "CPU build from plain PyPI")
    return f"torch {version} ({kind})"


def check_build(target: Target, version: str, cuda: str | None, os_name: str) -> BuildCheck:
    """Compare an installed torch (its version and ``torch.version.cuda``) with the target's compute.

    A local tag names the build (``+cpu``, ``+cu126``, ``+rocm6.2``); plain PyPI's
    untagged wheels are CUDA builds on Linux and Windows (``torch.version.cuda`` says
    which) and CPU (or MPS) builds on macOS.
    """
    tag = version.partition("+")[2]
    compute = target.compute
    if tag:
        matches = tag == compute or (compute == "mps" and tag == "cpu")
    elif compute in ("cpu", "mps"):
        matches = cuda is None
    else:
        wanted = build(compute).cuda
        matches = wanted is not None and cuda == f"{wanted[0]}.{wanted[1]}"
    cause = None
    if not matches:
        from kitbench._reach import shown

        override = os.environ.get(INDEX_VARIABLE)
        mirror = os.environ.get(PYTORCH_INDEX_VARIABLE)
        declared = target.index.get(os_name)
        # Shown without the user:token@ an index URL may carry: this line is logged.
        cause = (
            f"{INDEX_VARIABLE}={shown(override)} replaced the target's index ({declared})"
            if override
            else f"{PYTORCH_INDEX_VARIABLE}={shown(mirror)} stood in for PyTorch's index ({declared})"
            if mirror
            else f"the target's index ({declared}) served another build"
        )
    return BuildCheck(matches, installed_build(version, cuda), cause)


def targets_dir() -> Path:
    return manifest.envs_dir() / "targets"


def suite_requirements(python: str | None = None) -> tuple[str, ...]:
    """kitbench's own pins, as an environment of Python ``python`` (X.Y) takes them: a pin the suite's
    ``python:`` table replaces for an older Python (numpy 2.4 needs 3.11; the images' Ubuntu has 3.10).
    Those of the envs/ in force now (KITBENCH_ENVS read at each call), read once per folder."""
    return _suite_requirements(manifest.envs_dir().resolve(), python)


@cache
def _suite_requirements(envs: Path, python: str | None) -> tuple[str, ...]:
    data = manifest.load(envs / "suite.yaml", "suite").data
    older = dict(pin.split("==", 1) for pin in data.get("python", {}).get(python, []))
    return tuple(
        f"{name}=={older.get(name, version)}" for name, version in (pin.split("==", 1) for pin in data["requirements"])
    )


def _from_manifest(loaded: manifest.Manifest) -> Target:
    from kitbench.records.record import check_name

    try:
        check_name(loaded.path.stem)  # it names the target's results folder and nox session
    except UsageError as error:
        raise ManifestError(loaded.path, error.message, hint=error.hint) from None
    data: dict[str, Any] = loaded.data
    image = data.get("image") or {}
    environment = None
    if "environment" in data:
        environment = loaded.path.parent.parent / data["environment"]
        _check_environment(environment, data["python"], loaded.path)
    return Target(
        name=loaded.path.stem,
        description=data["description"],
        kind=data["kind"],
        compute=data["compute"],
        python=data["python"],
        torch=data["torch"],
        torchvision=data["torchvision"],
        index=dict(data["index"]),
        hosts=tuple(Host(h["os"], tuple(h["arch"]), h.get("min_os_version")) for h in data["hosts"]),
        cuda=data.get("cuda"),
        base_image=image.get("base"),
        image_digest=image.get("digest"),
        environment=environment,
        requirements=tuple(data.get("requirements", ())),
        path=loaded.path,
        sha256=loaded.sha256,
    )


def _check_environment(path: Path, python: str, target_path: Path) -> None:
    """A conda environment file must exist and agree with its target's python pin."""
    if not path.exists():
        raise ManifestError(target_path, f"environment file {path} does not exist")
    data = manifest.read(path)[0]  # as every manifest is read: bounded, strict UTF-8, no aliases
    deps = data.get("dependencies", [])
    pythons = [d for d in deps if isinstance(d, str) and d.replace(" ", "").startswith("python=")]
    if not pythons:
        raise ManifestError(path, "conda environment pins no python (expected python=X.Y)")
    pinned = pythons[0].split("=", 1)[1].strip().lstrip("=")
    if pinned != python:
        raise ManifestError(path, f"pins python={pinned} but {target_path.name} pins python {python}")


def load_all() -> dict[str, Target]:
    """The targets of the envs/ in force now (KITBENCH_ENVS read at each call): read once per folder."""
    return _load_all(targets_dir().resolve())


@cache
def _load_all(folder: Path) -> dict[str, Target]:
    return {m.path.stem: _from_manifest(m) for m in manifest.iter_manifests(folder, "target")}


def get(name: str) -> Target:
    found = load_all()
    if name not in found:
        raise UsageError(f"unknown target {name!r}", hint=f"known targets: {', '.join(sorted(found))}")
    return found[name]


def check_index(target: Target, os_name: str, timeout_s: float = 3.0) -> None:
    """Fail at once, naming the host and what gets past it, when the index the target installs from cannot
    even be resolved: pip would retry for a while and then print a raw DNS error. Nothing is checked where
    pip's own configuration or a proxy decides where requests go."""
    from kitbench._reach import shown

    url = target.index_for(os_name)
    failed = _reach.first_unresolved([url], timeout_s)
    if failed is not None:
        raise _reach.unreachable(
            failed[0],
            failed[1],
            f"cannot install {target.name}'s packages from {shown(failed[0])}",
            _reach.Known(again=f"nox -s {target.name}"),
            KitbenchError,
        )
