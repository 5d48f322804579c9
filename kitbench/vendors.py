"""What PyTorch's AMD (ROCm) and Intel (XPU) builds run on, read from ``envs/vendors.yaml``.

The questions install advice asks of an AMD or Intel GPU: which gfx
architectures a ROCm build carries kernels for, which neighbour's kernels an
unsupported consumer card may borrow, and from which release each OS has XPU
wheels. Nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from kitbench import manifest
from kitbench.versions import version_tuple


@dataclass(frozen=True)
class VendorFacts:
    rocm: dict[str, tuple[str, ...]]              # compute -> gfx architectures
    rocm_sources: dict[str, str]
    hsa_override: tuple[tuple[str, str, str], ...]  # (family prefix, HSA_OVERRIDE_GFX_VERSION, the gfx it poses as)
    xpu_since: dict[str, str]                     # os -> first release with XPU wheels
    xpu_arch: str
    xpu_source: str

    def rocm_arches(self, compute: str) -> tuple[str, ...] | None:
        """The gfx list of a ROCm build; None where it is not recorded."""
        return self.rocm.get(compute)

    def xpu(self, release: str, os: str, arch: str) -> bool:
        """Has ``release`` (X.Y.Z, or "nightly") an XPU build for this OS and chip?"""
        since = self.xpu_since.get(os)
        if since is None or arch != self.xpu_arch:
            return False
        return release == "nightly" or version_tuple(release) >= version_tuple(since)

    def override_hint(self, gfx: str, arches: tuple[str, ...]) -> str | None:
        """The HSA_OVERRIDE_GFX_VERSION a card of ``gfx`` might borrow kernels under, if the build has them."""
        for family, version, poses_as in self.hsa_override:
            if gfx.startswith(family) and gfx != poses_as and poses_as in arches:
                return (f"HSA_OVERRIDE_GFX_VERSION={version} makes {gfx} run {poses_as}'s kernels; "
                        "AMD does not support it, results are yours to check")
        return None


@cache
def load() -> VendorFacts:
    data = manifest.load(manifest.envs_dir() / "vendors.yaml", "vendors").data
    return VendorFacts(
        rocm={e["compute"]: tuple(e["arches"]) for e in data["rocm"]},
        rocm_sources={e["compute"]: e["source"] for e in data["rocm"]},
        hsa_override=tuple((e["family"], e["version"], e["as"]) for e in data["hsa_override"]),
        xpu_since=dict(data["xpu"]["since"]), xpu_arch=data["xpu"]["arch"], xpu_source=data["xpu"]["source"])
