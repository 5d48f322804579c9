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
from kitbench.machine.probe import UNCONFIRMED, Gpu, Probe, normalize_arch, override
from kitbench.machine.probe.amd import AmdGpu
from kitbench.machine.probe.intel import IntelGpu, parse_device_id

_TEXT = ("os", "os_version", "arch", "python_arch", "python_version")
_OPTIONAL_TEXT = ("driver", "rocm", "libc", "libc_version", "gpu_doubt")
_FLAGS = ("rosetta", "wsl", "container")
_HINT = "give the file `kitbench probe --json > FILE` wrote on that machine"
# install-cmd's --os and --arch choices (kitbench.advice.selector's OSES and ARCHES, which tests keep in step).
OSES = ("linux", "macos", "windows")
ARCHES = ("x86_64", "aarch64", "arm64")
# What the probe writes that no flag gives: a Python's version as sys.version starts (3.13.0rc1, 3.14.0+, 3.13.1t),
# ROCm's as /opt/rocm/.info/version has it, a PCI device id, a C library's version.
_PYTHON = r"[0-9]{1,2}\.[0-9]{1,3}(\.[0-9]{1,3})?((a|b|rc)[0-9]{1,3})?\+?t?"
_ROCM = r"[0-9]{1,3}(\.[0-9]{1,4}){0,3}"
_DEVICE_ID = r"0x[0-9a-f]{4}"
_LIBC_VERSION = r"[0-9]{1,3}\.[0-9]{1,3}(\.[0-9]{1,3})?"
_LONGEST = 1000  # characters of a name, an address, a kernel's release or a source (a path in it)


def _refused(where: str, what: str) -> UsageError:
    return UsageError(f"{where}: {what}, not what `kitbench probe --json` writes", hint=_HINT)


def _field(data: dict[str, Any], key: str, kinds: type | tuple[type, ...], where: str) -> Any:
    value = data.get(key)
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, wanted) or (isinstance(value, bool) and bool not in wanted):
        raise _refused(where, f"{key!r} is {type(value).__name__}")
    return value


def _items(data: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    items = data.get(key, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise UsageError(f"{where}: {key!r} is not a list of objects, as `kitbench probe --json` writes it", hint=_HINT)
    return items


def _plain(value: object) -> bool:
    """Text a message or a file may carry as it is: printable (no control character, no lone surrogate), short."""
    return isinstance(value, str) and value.isprintable() and len(value) <= _LONGEST


def _number(value: object) -> bool:
    """A count or an index as JSON writes one: an integer, not a boolean, a float, Infinity or NaN."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31


def check(machine: Probe, where: str) -> Probe:
    """``machine`` (read from ``where``, a file from elsewhere) with every field through the rules install-cmd's
    flags go through (--os, --arch, --driver, --gpu-cc, --gpu-gfx, --intel-gpu, --python-version, --glibc,
    --os-version), and the rest to the forms the probe writes: a bad one is a UsageError naming the file and
    the field, never a traceback later, nor a fact a flag would have refused (a capability of 99.9)."""
    if machine.os not in OSES:
        raise _refused(where, f"os {machine.os!r:.60} is none of {', '.join(OSES)}")
    for key in ("arch", "python_arch"):
        value = getattr(machine, key)
        if value not in ARCHES or normalize_arch(value, machine.os) != value:
            raise _refused(where, f"{key} {value!r:.60} is not {machine.os}'s name for one of {', '.join(ARCHES)}")
    texts = [
        ("os_version", machine.os_version),
        *([("gpu_doubt", machine.gpu_doubt)] if machine.gpu_doubt is not None else []),
        *(("sources", text) for item in machine.sources.items() for text in item),
    ]
    texts += [(f"GPU {g.index!r:.20}'s name", g.name) for g in machine.gpus]
    texts += [(f"Intel GPU {g.address!r:.40}'s address", g.address) for g in machine.intel_gpus]
    for key, value in texts:
        if not _plain(value):
            raise _refused(where, f"{key} is not printable text of at most {_LONGEST} characters")
    numbers = [
        (f"GPU {g.index!r:.20}'s {name}", getattr(g, name))
        for g in machine.gpus
        for name in ("index", "memory_mib", "pcie_gen", "pcie_width")
    ]
    numbers += [
        (f"AMD GPU {g.index!r:.20}'s {name}", getattr(g, name))
        for g in machine.amd_gpus
        for name in ("index", "compute_units")
    ]
    for key, value in numbers:
        if not (_number(value) or (value is None and not key.endswith("index"))):
            raise _refused(where, f"{key} is {value!r:.40}, not a whole number")
    for key, value, pattern in [
        ("python_version", machine.python_version, _PYTHON),
        ("rocm", machine.rocm, _ROCM),
        ("libc_version", machine.libc_version, _LIBC_VERSION),
        *((f"AMD GPU {g.index!r}'s device_id", g.device_id, _DEVICE_ID) for g in machine.amd_gpus),
    ]:
        if value not in (None, "") and not (isinstance(value, str) and re.fullmatch(pattern, value)):
            raise _refused(where, f"{key} {value!r:.60} is not a version or id as the probe reads one")
    if machine.libc not in (None, "glibc", "musl"):
        raise _refused(where, f"libc {machine.libc!r:.60} is neither glibc nor musl")
    texts_or_none = [("driver", machine.driver)]
    texts_or_none += [(f"GPU {g.index!r}'s capability", g.capability) for g in machine.gpus]
    texts_or_none += [(f"AMD GPU {g.index!r}'s gfx", g.gfx) for g in machine.amd_gpus]
    texts_or_none += [(f"Intel GPU {g.address!r}'s device_id", g.device_id) for g in machine.intel_gpus]
    for key, value in texts_or_none:
        if value is not None and not isinstance(value, str):
            raise _refused(where, f"{key} is {type(value).__name__}, not text")
    try:  # the flags' own checks, on the file's facts as install-cmd would be given them
        override(
            _BLANK,
            os=machine.os,
            arch=machine.arch,
            python_arch=machine.python_arch,
            driver=machine.driver,
            gpu_capabilities=[g.capability for g in machine.gpus if g.capability is not None],
            gpu_gfx=[g.gfx for g in machine.amd_gpus if g.gfx is not None],
            intel_gpu=[g.device_id or True for g in machine.intel_gpus],
            glibc=machine.libc_version if machine.libc == "glibc" else None,
            os_version=machine.os_version if machine.os == "macos" and machine.os_version else None,
        )
    except UsageError as refused:
        raise UsageError(f"{where}: {refused.message}", hint=f"{refused.hint}; or {_HINT}") from None
    intel = tuple(
        g._replace(device_id=parse_device_id(g.device_id) if g.device_id else None) for g in machine.intel_gpus
    )
    return machine._replace(intel_gpus=intel)


_BLANK = Probe(
    os="",
    os_version="",
    arch="",
    python_arch="",
    python_version="",
    rosetta=False,
    wsl=False,
    container=False,
    driver=None,
    gpus=(),
    rocm=None,
    sources={},
)


def from_json(data: object, where: str) -> Probe:
    """The Probe ``kitbench probe --json`` printed as ``data``; ``where`` names the file in a refusal."""
    if not isinstance(data, dict):
        raise UsageError(f"{where}: not a JSON object, as `kitbench probe --json` writes", hint=_HINT)
    text = {key: _field(data, key, str, where) for key in _TEXT}
    optional = {key: _field(data, key, (str, type(None)), where) for key in _OPTIONAL_TEXT}
    flags = {key: _field(data, key, bool, where) for key in _FLAGS}
    sources = data.get("sources") or {}
    if not isinstance(sources, dict):
        raise UsageError(f"{where}: 'sources' is not an object, as `kitbench probe --json` writes it", hint=_HINT)
    try:
        gpus = tuple(
            Gpu(g["index"], g["name"], g.get("capability"), g.get("memory_mib"), g.get("pcie_gen"), g.get("pcie_width"))
            for g in _items(data, "gpus", where)
        )
        amd = tuple(
            AmdGpu(g["index"], g.get("gfx"), g.get("device_id"), g.get("compute_units"))
            for g in _items(data, "amd_gpus", where)
        )
        intel = tuple(IntelGpu(g["address"], g.get("device_id")) for g in _items(data, "intel_gpus", where))
    except KeyError as bad:
        raise UsageError(
            f"{where}: a GPU entry lacks {bad}, as `kitbench probe --json` writes none", hint=_HINT
        ) from None
    if optional["gpu_doubt"] is None and "gpu_doubt" not in data:
        # A probe file from before the doubt was a field of its own keeps it in its GPU list's source alone.
        listed = str(sources.get("gpus", ""))
        optional["gpu_doubt"] = listed.split(UNCONFIRMED, 1)[1] if UNCONFIRMED in listed else None
    machine = Probe(**text, **flags, **optional, gpus=gpus, amd_gpus=amd, intel_gpus=intel, sources=sources)
    return check(machine, where)._replace(sources={str(k): f"{where}: {v}" for k, v in sources.items()})


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
        raise UsageError(
            f"{path}: not JSON ({bad})", hint="give the file `kitbench probe --json > FILE` wrote on that machine"
        ) from None
    if isinstance(data, dict) and str(data.get("schema", "")).startswith("kitbench.run/"):
        from kitbench.records import record

        return from_record(record.parse(text, path), str(path))
    return from_json(data, str(path))


def from_record(run: Mapping[str, Any], where: str) -> Probe:
    """The machine a run record was written on, as far as it says: no GPU's compute capability (the record
    names GPUs only), no AMD or Intel GPU, its C library read from Python's platform string."""
    env = run["environment"]
    libc = re.search(r"-with-(glibc|musl)([0-9.]+)$", env.get("platform") or "")
    sources = {
        key: f"{where}: the record's environment"
        for key in ("os", "os_version", "arch", "python_arch", "python_version", "driver", "gpus", "container", "libc")
    }
    return check(
        Probe(
            os=env["os"],
            os_version=env.get("os_version") or "",
            arch=env["arch"],
            python_arch=env.get("python_arch") or env["arch"],
            python_version=env.get("python") or "",
            rosetta=env["os"] == "macos" and env["arch"] == "arm64" and env.get("python_arch") == "x86_64",
            wsl=False,
            container=bool(env.get("container")),
            driver=env.get("driver"),
            gpus=tuple(Gpu(i, str(name), None, None) for i, name in enumerate(env.get("gpus") or [])),
            rocm=None,
            sources=sources,
            libc=libc[1] if libc else None,
            libc_version=libc[2] if libc else None,
        ),
        where,
    )


def described(**given: Any) -> Probe:
    """A machine described by hand with install-cmd's flags (``probe.override``'s keywords), nothing of this
    host's in it: what is not given is unknown, and constrains nothing."""
    if not given.get("os"):
        raise UsageError(
            "a machine described by its flags needs its --os",
            hint="e.g. --machine h100='--os linux --driver 570.86.10 --gpu-cc 9.0'; or give the file "
            "`kitbench probe --json` wrote on it",
        )
    blank = Probe(
        os="",
        os_version="",
        arch="",
        python_arch="",
        python_version="",
        rosetta=False,
        wsl=False,
        container=False,
        driver=None,
        gpus=(),
        rocm=None,
        sources={},
    )
    return override(blank, **given)
