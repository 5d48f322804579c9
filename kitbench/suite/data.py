"""The real MNIST, through torchvision's own loader, verified before use.

``--data`` (or ``KITBENCH_DATA``) may name the root torchvision expects (the
directory holding ``MNIST/raw``), the ``MNIST`` directory or ``raw`` itself.
Nothing is downloaded unless the files are missing and ``--offline`` is off.
"""

from __future__ import annotations

import hashlib
import os
from functools import cache
from pathlib import Path

from kitbench import _files, _reach
from kitbench.errors import DataError
from kitbench.records import manifest

DATA_VARIABLE = "KITBENCH_DATA"
MEAN, STD = 0.1307, 0.3081  # the normalization every MNIST tutorial uses


def default_root() -> Path:
    if os.environ.get(DATA_VARIABLE):
        return Path(os.environ[DATA_VARIABLE])
    return _files.cache_dir() / "data"


def normalize_root(path: Path) -> Path:
    """Accept root, root/MNIST or root/MNIST/raw; return root."""
    path = path.expanduser()
    if path.name == "raw" and path.parent.name == "MNIST":
        return path.parent.parent
    if path.name == "MNIST":
        return path.parent
    return path


MAX_RAW_BYTES = 64 * 2**20  # the largest raw MNIST file, train-images-idx3-ubyte, is 47,040,016 bytes


def expected_checksums() -> dict[str, str]:
    """The MNIST digests of the envs/ in force now (KITBENCH_ENVS read at each call): read once per folder."""
    return _expected_checksums(manifest.envs_dir().resolve())


@cache
def _expected_checksums(envs: Path) -> dict[str, str]:
    files: dict[str, str] = manifest.load(envs / "mnist.yaml", "mnist").data["files"]
    return files


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(root: Path) -> dict[str, str]:
    """Check every raw file against ``envs/mnist.yaml``; return their digests."""
    raw = root / "MNIST" / "raw"
    found = {}
    for name, expected in expected_checksums().items():
        path = raw / name
        if not path.is_file():
            raise DataError(
                f"MNIST file missing: {path}", hint="point --data (or KITBENCH_DATA) at the directory holding MNIST/raw"
            )
        size = path.stat().st_size
        if size > MAX_RAW_BYTES:
            # Hashing whatever --data names could take minutes (a disk image, a sparse file).
            raise DataError(
                f"{path} is {size:,} bytes: no MNIST file is larger than {MAX_RAW_BYTES:,}",
                hint="the file is not MNIST; point --data (or KITBENCH_DATA) at the directory holding MNIST/raw",
            )
        actual = _sha256(path)
        if actual != expected:
            raise DataError(
                f"MNIST file {path} fails its SHA-256 check ({actual[:12]}... != {expected[:12]}...)",
                hint="the file is corrupt or not MNIST; delete it and download again",
            )
        found[name] = actual
    return found


def missing(root: Path) -> list[str]:
    """The raw files absent under ``root`` (existence only: ``verify`` reads them)."""
    raw = root / "MNIST" / "raw"
    return [n for n in expected_checksums() if not (raw / n).is_file()]


def locate(path: Path | None, offline: bool) -> tuple[Path, bool]:
    """The root ``--data``/``KITBENCH_DATA`` (or the cache) names, and whether MNIST must be
    downloaded there; with ``offline`` a missing file is an error."""
    root = normalize_root(path) if path is not None else default_root()
    absent = missing(root)
    if absent and offline:
        raise DataError(
            f"no MNIST at {root} ({len(absent)} of 4 raw files missing) and --offline forbids a download",
            hint="point --data (or KITBENCH_DATA) at a directory holding MNIST/raw, or drop --offline",
        )
    return root, bool(absent)


def ahead() -> str | None:
    """Said before an environment is built for a run: where MNIST will come from when it is not there yet
    (a download, which an offline machine learns of only after minutes of installing); None when it is."""
    root = default_root()
    absent = missing(normalize_root(root))
    if not absent:
        return None
    where = f"{DATA_VARIABLE}={root}" if os.environ.get(DATA_VARIABLE) else f"the cache ({root})"
    return (
        f"MNIST is not in {where} ({len(absent)} of 4 raw files missing): the run's MNIST check will download "
        f"it; on a machine that cannot, set {DATA_VARIABLE} to a folder holding MNIST/raw"
    )


def prepare(path: Path | None, offline: bool) -> tuple[Path, dict[str, str]]:
    """Find (or, when allowed, download) MNIST and verify it; return (root, digests)."""
    root, download = locate(path, offline)
    if download:
        _download(root)
    return root, verify(root)


def download_cause(exc: BaseException) -> str:
    """One line that keeps the cause: torchvision's message is "Error downloading <file>:"
    with each mirror's error on the lines below it, the last one the likeliest to matter."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    return (lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}")[:300]


def _download(root: Path) -> None:
    from torchvision.datasets import MNIST

    try:
        root.mkdir(parents=True, exist_ok=True)
        MNIST(str(root), train=True, download=True)
        MNIST(str(root), train=False, download=True)
    except (OSError, RuntimeError) as exc:
        offline = "on an offline machine, copy MNIST/raw into a folder and point --data (or KITBENCH_DATA) at it"
        cause, hosts = _reach.network_cause(str(exc)), _reach.hosts_in(str(exc))
        if cause is not None and hosts:  # every mirror torchvision tried, and why the last failed
            raise _reach.unreachable(
                " and ".join(hosts),
                cause,
                f"could not download MNIST into {root}",
                _reach.Known(doing="download", then=offline),
                DataError,
            ) from None
        raise DataError(f"could not download MNIST into {root}: {download_cause(exc)}", hint=offline) from None
