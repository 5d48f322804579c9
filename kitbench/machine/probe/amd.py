"""AMD GPUs, read from the kernel: no ROCm needed.

The amdgpu kernel driver publishes every GPU it drives in the KFD topology
(``/sys/class/kfd/kfd/topology/nodes/N/properties``, one ``name value`` line per
property), whose ``gfx_target_version`` names the instruction set PyTorch's
ROCm builds compile for. Where KFD is not mounted (some containers) the DRM
devices with vendor 0x1002 still say an AMD GPU is there, without its gfx;
``rocm_agent_enumerator`` or ``rocminfo`` (ROCm's own tools, where installed) name the gfx too.
The parsers are pure functions over that text; the reader takes its root so
tests point it at recorded trees (``tests/resources/kfd/``).
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
import re
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from kitbench._files import read_small
from kitbench._numbers import is_whole
from kitbench.errors import UsageError

AMD_VENDOR = 0x1002
KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
DRM_CARDS = "sys/class/drm"
# uv's name for the same override (crates/uv-static, UV_AMD_GPU_ARCHITECTURE): one gfx, as uv takes it;
# kitbench also accepts a comma-separated list, one per GPU.
GFX_VARIABLE = "UV_AMD_GPU_ARCHITECTURE"
# A pattern, compiled by re when first matched: only a machine with an AMD GPU, or one given, reads a gfx name.
_GFX = r"gfx([6-9]|1[0-2])[0-9a-f]{2}"


class AmdGpu(NamedTuple):  # not a dataclass: see Probe
    index: int  # type: ignore[assignment]  # tuple.index: never asked of a GPU
    gfx: str | None  # "gfx942"; None where only DRM saw the card
    device_id: str | None  # PCI device id, "0x74a1"
    compute_units: int | None = None


def gfx_of_target_version(value: int) -> str | None:
    """KFD's ``gfx_target_version`` as a gfx name: major*10000 + minor*100 + stepping,
    the minor and stepping printed as one hex digit each (90010 -> gfx90a, 90402 -> gfx942,
    110000 -> gfx1100); 0 (a CPU node) and out-of-range digits are None."""
    major, rest = divmod(value, 10000)
    minor, stepping = divmod(rest, 100)
    if major == 0 or minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_properties(text: str) -> dict[str, int]:
    """A KFD node's ``properties`` file: ``name value`` lines, values decimal integers."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and is_whole(parts[1]):
            found[parts[0]] = int(parts[1])
    return found


def gpu_of_properties(index: int, properties: dict[str, int]) -> AmdGpu | None:
    """The AMD GPU a KFD node describes, None for CPU nodes and other vendors' nodes."""
    gfx = gfx_of_target_version(properties.get("gfx_target_version", 0))
    if gfx is None or properties.get("vendor_id", AMD_VENDOR) != AMD_VENDOR:
        return None
    simds, per_cu = properties.get("simd_count"), properties.get("simd_per_cu")
    device = properties.get("device_id")
    return AmdGpu(index, gfx, f"0x{device:04x}" if device else None, simds // per_cu if simds and per_cu else None)


def parse_agent_enumerator(text: str) -> tuple[str, ...]:
    """``rocm_agent_enumerator`` output: one ISA per line; gfx000 is the CPU agent."""
    return tuple(
        line.strip() for line in text.splitlines() if re.fullmatch(_GFX, line.strip()) and line.strip() != "gfx000"
    )


def parse_rocminfo(text: str) -> tuple[str, ...]:
    """``rocminfo`` output: each GPU agent's ``Name:  gfx1100`` line (CPU agents and ISA names are no gfx)."""
    values = (
        line.strip().removeprefix("Name:").strip() for line in text.splitlines() if line.strip().startswith("Name:")
    )
    return tuple(value for value in values if re.fullmatch(_GFX, value))


def parse_gfx_list(text: str, where: str) -> tuple[str, ...]:
    """``gfx942`` or ``gfx942,gfx1100`` (``where`` names the flag or variable it came from)."""
    names = tuple(part.strip().lower() for part in text.split(",") if part.strip())
    bad = [n for n in names if not re.fullmatch(_GFX, n)] or ([] if names else [text])
    if bad:
        raise UsageError(
            f"{where}: {bad[0]!r} is not an AMD GPU architecture",
            hint="give a gfx name as rocminfo prints it, e.g. gfx942, gfx90a or gfx1100",
        )
    return names


def read_kfd(root: Path = Path("/")) -> tuple[AmdGpu, ...]:
    """The GPUs of the KFD topology under ``root``, in node order (HIP's device order)."""
    nodes = root / KFD_NODES
    try:
        names = sorted((p.name for p in nodes.iterdir() if is_whole(p.name)), key=int)
    except OSError:
        return ()
    gpus: list[AmdGpu] = []
    for name in names:
        gpu = gpu_of_properties(len(gpus), parse_properties(read_small(nodes / name / "properties") or ""))
        if gpu is not None:
            gpus.append(gpu)
    return tuple(gpus)


def read_drm(root: Path = Path("/")) -> tuple[AmdGpu, ...]:
    """AMD display/compute devices among the DRM cards (no gfx: DRM does not say it)."""
    cards = root / DRM_CARDS
    try:
        names = sorted(p.name for p in cards.iterdir() if re.fullmatch(r"card[0-9]+", p.name))
    except OSError:
        return ()
    gpus: list[AmdGpu] = []
    for name in names:
        vendor = (read_small(cards / name / "device" / "vendor") or "").strip()
        if vendor.lower() == f"0x{AMD_VENDOR:04x}":
            device = (read_small(cards / name / "device" / "device") or "").strip() or None
            gpus.append(AmdGpu(len(gpus), None, device))
    return tuple(gpus)


def detect(
    root: Path = Path("/"), env: dict[str, str] | None = None, run: Callable[[list[str]], str | None] | None = None
) -> tuple[tuple[AmdGpu, ...], str | None]:
    """The AMD GPUs here and where they were read: the override, KFD, rocm_agent_enumerator, rocminfo, DRM."""
    override = (env or {}).get(GFX_VARIABLE)
    if override:
        return tuple(AmdGpu(i, g, None) for i, g in enumerate(parse_gfx_list(override, GFX_VARIABLE))), GFX_VARIABLE
    gpus = read_kfd(root)
    if gpus:
        return gpus, f"{root / KFD_NODES}/*/properties"
    agents = parse_agent_enumerator((run(["rocm_agent_enumerator"]) or "") if run else "")
    if agents:
        return tuple(AmdGpu(i, g, None) for i, g in enumerate(agents)), "rocm_agent_enumerator"
    agents = parse_rocminfo((run(["rocminfo"]) or "") if run else "")
    if agents:
        return tuple(AmdGpu(i, g, None) for i, g in enumerate(agents)), "rocminfo"
    gpus = read_drm(root)
    return (gpus, f"{root / DRM_CARDS}/card*/device/vendor") if gpus else ((), None)
