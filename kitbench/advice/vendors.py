"""What PyTorch's AMD (ROCm) and Intel (XPU) builds run on, read from ``envs/vendors.yaml``.

The questions install advice asks of an AMD or Intel GPU: which gfx
architectures a ROCm build carries kernels for, which neighbour's kernels an
unsupported consumer card may borrow, and from which release each OS has XPU
wheels. Nothing here imports torch.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md.
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import NamedTuple

from kitbench import _files
from kitbench.errors import ManifestError
from kitbench.machine.probe.amd import AmdGpu
from kitbench.records import manifest


# Named tuples, not dataclasses: "Start-up" in docs/architecture.md.
class VendorFacts(NamedTuple):
    rocm: dict[str, tuple[str, ...]]  # compute -> gfx architectures
    rocm_sources: dict[str, str]
    hsa_override: tuple[tuple[str, str, str], ...]  # (family prefix, HSA_OVERRIDE_GFX_VERSION, the gfx it poses as)
    xpu_since: dict[str, str]  # os -> first release with XPU wheels
    xpu_arch: str
    xpu_source: str
    integrated: frozenset[str] = frozenset()  # the gfx of AMD's integrated GPUs (APUs)
    integrated_source: str = ""

    def rocm_arches(self, compute: str) -> tuple[str, ...] | None:
        """The gfx list of a ROCm build; None where it is not recorded."""
        return self.rocm.get(compute)

    def xpu(self, release: str, os: str, arch: str) -> bool:
        """Has ``release`` (X.Y.Z, or "nightly") an XPU build for this OS and chip?"""
        since = self.xpu_since.get(os)
        if since is None or arch != self.xpu_arch:
            return False
        from packaging.version import Version  # not at import: see "Start-up" in docs/architecture.md

        return release == "nightly" or Version(release) >= Version(since)

    def rocm_missing(self, gpus: Sequence[AmdGpu], compute: str) -> tuple[list[str], list[AmdGpu]]:
        """The gfx the ``compute`` build lacks among the GPUs that decide, and the integrated GPUs left
        out of the decision: beside a discrete GPU, an integrated one the build has no kernels for does
        not decide (as uv keeps only the architectures it knows); alone, it does. A build whose list is
        not recorded lacks nothing."""
        arches = self.rocm_arches(compute)
        if arches is None:
            return [], []
        known = [g for g in gpus if g.gfx]
        discrete = any(g.gfx not in self.integrated for g in known)
        left = [g for g in known if discrete and g.gfx in self.integrated and g.gfx not in arches]
        missing = [g.gfx for g in known if g.gfx not in arches and g not in left]
        return list(dict.fromkeys(m for m in missing if m)), left

    def hidden_note(self, gpus: Sequence[AmdGpu], left: Sequence[AmdGpu], compute: str) -> str:
        """What to do about the integrated GPUs ``left`` out of choosing ``compute``: hide them from PyTorch."""
        keep = ",".join(str(g.index) for g in gpus if g not in left)
        shown = ", ".join(f"{g.gfx} (HIP device {g.index})" for g in left)
        return (
            f"{shown}: an integrated GPU that {compute} has no kernels for, left out of the choice; "
            f"hide it from PyTorch with HIP_VISIBLE_DEVICES={keep} ({self.integrated_source})"
        )

    def override_hint(self, gfx: str, arches: tuple[str, ...]) -> str | None:
        """The HSA_OVERRIDE_GFX_VERSION a card of ``gfx`` might borrow kernels under, if the build has them;
        never for an integrated GPU: the variable poses every GPU of the process as one gfx."""
        if gfx in self.integrated:
            return None
        for family, version, poses_as in self.hsa_override:
            if gfx.startswith(family) and gfx != poses_as and poses_as in arches:
                return (
                    f"HSA_OVERRIDE_GFX_VERSION={version} makes {gfx} run {poses_as}'s kernels; "
                    "AMD does not support it, results are yours to check"
                )
        return None


class IntelFamily(NamedTuple):
    name: str
    validated: bool  # on PyTorch's own list; else the same silicon as a family on it


class IntelFacts(NamedTuple):
    """The Intel GPUs PyTorch's XPU builds support (``envs/intel_gpus.yaml``), by PCI device id."""

    families: dict[str, IntelFamily]  # "0x56a0" -> its family
    source: str
    read: str

    def family(self, device_id: str) -> IntelFamily | None:
        return self.families.get(device_id.lower())


def intel_gpus() -> IntelFacts:
    """Read only when an Intel GPU is in question: the advice for every other machine never loads it."""
    return _intel_gpus(_files.stamp(manifest.envs_dir() / "intel_gpus.yaml"))


@cache
def _intel_gpus(source: _files.Stamp) -> IntelFacts:
    path = Path(source[0])
    data = manifest.load(path, "intel_gpus").data
    families: dict[str, IntelFamily] = {}
    for entry in data["families"]:
        family = IntelFamily(entry["name"], entry["validated"])
        for device in entry["ids"]:
            if device in families:
                raise ManifestError(
                    path,
                    f"device id {device} is in {families[device].name!r} and {family.name!r}",
                    hint="each PCI device id belongs to one family",
                )
            families[device] = family
    return IntelFacts(families, data["source"], data["read"])


def load() -> VendorFacts:
    return _load(_files.stamp(manifest.envs_dir() / "vendors.yaml"))


@cache
def _load(source: _files.Stamp) -> VendorFacts:
    data = manifest.load(Path(source[0]), "vendors").data
    return VendorFacts(
        rocm={e["compute"]: tuple(e["arches"]) for e in data["rocm"]},
        rocm_sources={e["compute"]: e["source"] for e in data["rocm"]},
        hsa_override=tuple((e["family"], e["version"], e["as"]) for e in data["hsa_override"]),
        xpu_since=dict(data["xpu"]["since"]),
        xpu_arch=data["xpu"]["arch"],
        xpu_source=data["xpu"]["source"],
        integrated=frozenset(data["integrated"]["gfx"]),
        integrated_source=data["integrated"]["source"],
    )
