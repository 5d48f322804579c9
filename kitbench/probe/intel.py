"""Intel GPUs, read from PCI: no oneAPI or Level Zero needed.

A display-class PCI function (class 0x03xxxx) with vendor 0x8086 is an Intel
GPU, discrete (Arc) or integrated (Core Ultra's Arc graphics); this is the test
uv's ``--torch-backend=auto`` makes (crates/uv-torch/src/accelerator.rs). The
device id is kept so a report names the exact part. The reader takes its root
so tests point it at recorded trees (``tests/resources/pci/``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

INTEL_VENDOR = 0x8086
PCI_DEVICES = "sys/bus/pci/devices"
_DISPLAY_CLASS = 0x03


@dataclass(frozen=True)
class IntelGpu:
    address: str            # PCI address, "0000:03:00.0"; "(given)" for --intel-gpu
    device_id: str | None   # "0x56a0"; None where not known

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


def _read(path: Path) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return None


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
        if is_intel_gpu(_read(base / "vendor"), _read(base / "class")):
            device = _hex(_read(base / "device"))
            found.append(IntelGpu(address, f"0x{device:04x}" if device is not None else None))
    return tuple(found)


def detect(root: Path = Path("/")) -> tuple[tuple[IntelGpu, ...], str | None]:
    gpus = read_pci(root)
    return gpus, (f"{root / PCI_DEVICES}/*/{{vendor,class}}" if gpus else None)
