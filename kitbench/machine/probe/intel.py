"""Intel GPUs, read from PCI: no oneAPI or Level Zero needed.

A display-class PCI function (class 0x03xxxx) with vendor 0x8086 is an Intel
GPU, discrete (Arc) or integrated (UHD, Iris Xe, Core Ultra's Arc graphics); this
is the test uv's ``--torch-backend=auto`` makes (crates/uv-torch/src/accelerator.rs).
On Windows uv lists the present display adapters' device instance ids
(``CM_Get_Device_ID_ListW`` filtered to the display class) and looks for
``VEN_8086``; kitbench does the same. The device id is kept: which Intel GPUs the
XPU builds support is decided by it (``envs/intel_gpus.yaml``). The readers take
their root (or text) so tests point them at recorded trees and lists
(``tests/resources/pci/``, ``tests/resources/windows/``).
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
import sys
from pathlib import Path
from typing import NamedTuple

from kitbench._files import read_small
from kitbench.errors import UsageError

INTEL_VENDOR = 0x8086
PCI_DEVICES = "sys/bus/pci/devices"
_DISPLAY_CLASS = 0x03
# Windows' device instance id of a PCI function: PCI\VEN_8086&DEV_56A0&SUBSYS_10208086&REV_08\6&20F6E9F4&0&00080008
# A pattern, compiled by re when first matched: only Windows reads device instance ids.
_WINDOWS_ID = r"(?i)PCI\\VEN_([0-9A-F]{4})&DEV_([0-9A-F]{4})"
# The display adapters' setup class (learn.microsoft.com, system-defined device setup classes).
_DISPLAY_CLASS_GUID = "{4d36e968-e325-11ce-bfc1-08002be10318}"
_CM_GETIDLIST_FILTER_PRESENT, _CM_GETIDLIST_FILTER_CLASS = 0x100, 0x200


class IntelGpu(NamedTuple):  # not a dataclass: see Probe
    address: str  # PCI address, "0000:03:00.0"; "(given)" for --intel-gpu
    device_id: str | None  # "0x56a0"; None where not known

    @property
    def label(self) -> str:
        return f"Intel GPU {self.device_id}" if self.device_id else "an Intel GPU"


def _hex(text: str | None) -> int | None:
    try:
        return int((text or "").strip(), 16)
    except ValueError:
        return None


def is_intel_gpu(vendor: str | None, pci_class: str | None) -> bool:
    """The sysfs ``vendor`` and ``class`` texts ("0x8086", "0x030000") of an Intel GPU."""
    klass = _hex(pci_class)
    return _hex(vendor) == INTEL_VENDOR and klass is not None and klass >> 16 == _DISPLAY_CLASS


def read_pci(root: Path = Path("/")) -> tuple[IntelGpu, ...]:
    """The Intel GPUs among the PCI devices under ``root``, in address order."""
    devices = root / PCI_DEVICES
    try:
        addresses = sorted(p.name for p in devices.iterdir())
    except OSError:
        return ()
    found = []
    for address in addresses:
        base = devices / address
        if is_intel_gpu(read_small(base / "vendor"), read_small(base / "class")):
            device = _hex(read_small(base / "device"))
            found.append(IntelGpu(address, f"0x{device:04x}" if device is not None else None))
    return tuple(found)


def parse_device_id(text: str) -> str:
    """A PCI device id as given by hand ("0x56a0", "56A0", "8086:56a0") in kitbench's form, "0x56a0"."""
    match = re.fullmatch(r"(?:(?:0x)?8086:)?(?:0x)?([0-9a-f]{4})", text.strip().lower())
    if match is None:
        raise UsageError(
            f"--intel-gpu {text!r} is not a PCI device id",
            hint="give the GPU's device id as lspci -nn shows it after 8086:, e.g. --intel-gpu 56a0 "
            "(an Arc A770), or --intel-gpu alone",
        )
    return f"0x{match.group(1)}"


def parse_windows_ids(text: str) -> tuple[IntelGpu, ...]:
    """The Intel GPUs among display adapters' device instance ids (``CM_Get_Device_ID_ListW``'s
    NUL-separated list, or one per line as ``Get-PnpDevice -Class Display`` prints ``InstanceId``)."""
    found = []
    for entry in re.split(r"[\0\r\n]+", text):
        match = re.match(_WINDOWS_ID, entry.strip())
        if match and int(match.group(1), 16) == INTEL_VENDOR:
            found.append(IntelGpu(entry.strip(), f"0x{match.group(2).lower()}"))
    return tuple(found)


def read_windows() -> str:
    """The present display adapters' device instance ids, NUL-separated, as uv reads them (empty where
    Configuration Manager does not answer). A library call, no process: nothing to wait for."""
    if sys.platform != "win32":
        return ""
    import ctypes

    flags = _CM_GETIDLIST_FILTER_CLASS | _CM_GETIDLIST_FILTER_PRESENT
    size = ctypes.c_ulong(0)
    try:
        cfgmgr = ctypes.WinDLL("cfgmgr32")
        if cfgmgr.CM_Get_Device_ID_List_SizeW(ctypes.byref(size), _DISPLAY_CLASS_GUID, flags) != 0:
            return ""
        buffer = ctypes.create_unicode_buffer(size.value)
        if cfgmgr.CM_Get_Device_ID_ListW(_DISPLAY_CLASS_GUID, buffer, size.value, flags) != 0:
            return ""
    except (OSError, AttributeError):  # no Configuration Manager (Wine, a trimmed Windows): no answer
        return ""
    return buffer[: size.value]


def detect(root: Path = Path("/")) -> tuple[tuple[IntelGpu, ...], str | None]:
    gpus = read_pci(root)
    return gpus, (f"{root / PCI_DEVICES}/*/{{vendor,class}}" if gpus else None)


def detect_windows(listed: str | None = None) -> tuple[tuple[IntelGpu, ...], str | None]:
    """The Intel GPUs among Windows' present display adapters (``listed``: their ids, read if None)."""
    gpus = parse_windows_ids(read_windows() if listed is None else listed)
    return gpus, ("CM_Get_Device_ID_ListW (display adapters, VEN_8086)" if gpus else None)
