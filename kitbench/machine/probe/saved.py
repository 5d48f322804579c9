"""A probe read back from what ``kitbench probe --json`` wrote on another machine (by hand, or a fleet's
``<node>.probe.json``), checked field by field: the file comes from elsewhere, so a field of the wrong
kind is a refusal naming it, never a traceback further on. A run record holds a machine too (its
``environment``), with less in it: its GPUs by name only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kitbench._files import read_text
from kitbench.errors import UsageError
from kitbench.machine.probe import Gpu, Probe, override
from kitbench.machine.probe.amd import AmdGpu
from kitbench.machine.probe.intel import IntelGpu

_TEXT = ("os", "os_version", "arch", "python_arch", "python_version")
_OPTIONAL_TEXT = ("driver", "rocm", "libc", "libc_version")
_FLAGS = ("rosetta", "wsl", "container")


def _field(data: dict[str, Any], key: str, kinds: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        raise UsageError(f"{where}: {key!r} is {type(value).__name__}, not what `kitbench probe --json` writes",
                         hint="give the file `kitbench probe --json > FILE` wrote on that machine")
    return value


def _items(data: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise UsageError(f"{where}: {key!r} is not a list of objects, as `kitbench probe --json` writes it",
                         hint="give the file `kitbench probe --json > FILE` wrote on that machine")
    return items


def from_json(data: object, where: str) -> Probe:
    """The Probe ``kitbench probe --json`` printed as ``data``; ``where`` names the file in a refusal."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a JSON object, as `kitbench probe --json` writes",
                         hint="give the file `kitbench probe --json > FILE` wrote on that machine")
    text = {key: _field(data, key, str, where) for key in _TEXT}
    optional = {key: _field(data, key, (str, type(None)), where) for key in _OPTIONAL_TEXT}
    flags = {key: _field(data, key, bool, where) for key in _FLAGS}
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise UsageError(f"{where}: 'sources' is not an object, as `kitbench probe --json` writes it",
                         hint="give the file `kitbench probe --json > FILE` wrote on that machine")
    try:
        gpus = tuple(Gpu(int(g["index"]), str(g["name"]), g.get("capability"), g.get("memory_mib"),
                         g.get("pcie_gen"), g.get("pcie_width")) for g in _items(data, "gpus", where))
        amd = tuple(AmdGpu(int(g["index"]), g.get("gfx"), g.get("device_id"), g.get("compute_units"))
                    for g in _items(data, "amd_gpus", where))
        intel = tuple(IntelGpu(str(g["address"]), g.get("device_id")) for g in _items(data, "intel_gpus", where))
    except (KeyError, TypeError, ValueError) as bad:
        raise UsageError(f"{where}: a GPU entry lacks {bad}, as `kitbench probe --json` writes none",
                         hint="give the file `kitbench probe --json > FILE` wrote on that machine") from None
    for gpu in gpus:
        if gpu.capability is not None and not isinstance(gpu.capability, str):
            raise UsageError(f"{where}: GPU {gpu.index}'s capability is not text like \"9.0\"",
                             hint="give the file `kitbench probe --json > FILE` wrote on that machine")
    return Probe(**text, **flags, **optional, gpus=gpus, amd_gpus=amd, intel_gpus=intel,
                 sources={str(k): f"{where}: {v}" for k, v in sources.items()})


def load(path: Path) -> Probe:
    """The probe in the file ``kitbench probe --json > FILE`` wrote."""
    try:
        text = read_text(path, 1 << 20, "probe file", UsageError)
    except UsageError as unread:
        unread.hint = unread.hint or "give the file `kitbench probe --json > FILE` wrote on that machine"
        raise
    try:
        data = json.loads(text)
    except ValueError as bad:
        raise UsageError(f"{path}: not JSON ({bad})",
                         hint="give the file `kitbench probe --json > FILE` wrote on that machine") from None
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("kitbench.run/"):
        from kitbench.records import record

        return from_record(record.parse(text, path), str(path))
    return from_json(data, str(path))


def from_record(run: Mapping[str, Any], where: str) -> Probe:
    """The machine a run record was written on, as far as it says: no GPU's compute capability (the record
    names GPUs only), no AMD or Intel GPU, its C library read from Python's platform string."""
    env = run["environment"]
    libc = re.search(r"-with-(glibc|musl)([0-9.]+)$", env.get("platform") or "")
    sources = {key: f"{where}: the record's environment" for key in (
        "os", "os_version", "arch", "python_arch", "python_version", "driver", "gpus", "container", "libc")}
    return Probe(os=env["os"], os_version=env.get("os_version") or "", arch=env["arch"],
                 python_arch=env.get("python_arch") or env["arch"], python_version=env.get("python") or "",
                 rosetta=env["os"] == "macos" and env["arch"] == "arm64" and env.get("python_arch") == "x86_64",
                 wsl=False, container=bool(env.get("container")), driver=env.get("driver"),
                 gpus=tuple(Gpu(i, str(name), None, None) for i, name in enumerate(env.get("gpus") or [])),
                 rocm=None, sources=sources, libc=libc[1] if libc else None, libc_version=libc[2] if libc else None)


def described(**given: Any) -> Probe:
    """A machine described by hand with install-cmd's flags (``probe.override``'s keywords), nothing of this
    host's in it: what is not given is unknown, and constrains nothing."""
    if not given.get("os"):
        raise UsageError("a machine described by its flags needs its --os",
                         hint="e.g. --machine h100='--os linux --driver 570.86.10 --gpu-cc 9.0'; or give the file "
                              "`kitbench probe --json` wrote on it")
    blank = Probe(os="", os_version="", arch="", python_arch="", python_version="", rosetta=False, wsl=False,
                  container=False, driver=None, gpus=(), rocm=None, sources={})
    return override(blank, **given)
