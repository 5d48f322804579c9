"""What differs between two records' environments: the one diff that compare's rows, verify and
replay show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from kitbench.environments.locks import normalize
from kitbench.records.types import Environment

# The fingerprint fields that most often explain a difference in numbers.
DIFF_FIELDS = (
    "target",
    "torch",
    "torch_build",
    "cuda",
    "cudnn",
    "driver",
    "gpus",
    "cpu",
    "cpu_count",
    "threads",
    "image",
    "image_id",
    "manifest_sha256",
    "python",
    "os_version",
)


class Change(NamedTuple):
    """One quantity that differs: its name (``torch``, ``package numpy``, ``setting cudnn.benchmark``) and the
    two sides' values, ``absent`` where a package or setting is on one side only."""

    quantity: str
    before: object
    after: object


def changes(a: Environment, b: Environment) -> list[Change]:
    """Each fingerprint field that differs, then each package and each setting that differs. Packages are
    compared only where both records list them (a /1 record does not)."""
    found = [Change(key, a.get(key), b.get(key)) for key in DIFF_FIELDS if a.get(key) != b.get(key)]
    if "packages" in a and "packages" in b:
        found += _keyed(
            "package",
            {normalize(p["name"]): p["version"] for p in a["packages"]},
            {normalize(p["name"]): p["version"] for p in b["packages"]},
        )
    settings_a, settings_b = a.get("settings"), b.get("settings")
    if isinstance(settings_a, dict) and isinstance(settings_b, dict):
        found += _keyed("setting", settings_a, settings_b)
    return found


def line(change: Change) -> str:
    return f"{change.quantity}: {change.before} -> {change.after}"


def diff(a: Environment, b: Environment) -> list[str]:
    """``field: a -> b`` for each of :func:`changes` (``package numpy: 2.4.6 -> 2.4.5``)."""
    return [line(c) for c in changes(a, b)]


def _keyed(kind: str, a: Mapping[str, object], b: Mapping[str, object]) -> list[Change]:
    return [
        Change(f"{kind} {key}", a.get(key, "absent"), b.get(key, "absent"))
        for key in sorted(a.keys() | b.keys())
        if a.get(key, "absent") != b.get(key, "absent")
    ]
