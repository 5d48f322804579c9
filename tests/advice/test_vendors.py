"""AMD and Intel GPUs: detection from recorded kernel trees, envs/vendors.yaml, and install advice."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path
from typing import Any

import pytest

from kitbench import _cli
from kitbench.advice import selector, vendors
from kitbench.errors import DeviceUnavailableError, ManifestError, SelectionError, UsageError
from kitbench.machine import probe
from kitbench.machine.probe import Probe, amd, intel
from kitbench.suite import devices

RESOURCES = Path(__file__).resolve().parent.parent / "resources"
KFD = RESOURCES / "kfd"
PCI = RESOURCES / "pci"
LINUX = Probe(
    os="linux",
    os_version="6.1",
    arch="x86_64",
    python_arch="x86_64",
    python_version="3.11.7",
    rosetta=False,
    wsl=False,
    container=False,
    driver=None,
    gpus=(),
    rocm=None,
    sources={},
)


@pytest.mark.parametrize(
    ("value", "gfx"),
    [
        (90402, "gfx942"),
        (90010, "gfx90a"),
        (110000, "gfx1100"),
        (110501, "gfx1151"),
        (120001, "gfx1201"),
        (100300, "gfx1030"),
        (90008, "gfx908"),
        (0, None),
        (110099, None),
    ],
)
def test_gfx_target_version_is_decimal_major_then_one_hex_digit_each(value: int, gfx: str | None) -> None:
    assert amd.gfx_of_target_version(value) == gfx


@pytest.mark.parametrize(
    ("tree", "gfx", "device", "cus"),
    [("mi325x", "gfx942", "0x74a0", 76), ("rx7900xtx", "gfx1100", "0x744c", 96), ("gfx90a", "gfx90a", None, None)],
)
def test_kfd_trees_recorded_from_real_gpus(tree: str, gfx: str, device: str | None, cus: int | None) -> None:
    gpus = amd.read_kfd(KFD / tree)
    # The CPU node, and the NVIDIA node KFD lists beside the gfx90a, are no AMD GPUs.
    assert gpus == (amd.AmdGpu(0, gfx, device, cus),)
    found, where = amd.detect(KFD / tree, env={})
    assert found == gpus and where == f"{KFD / tree}/sys/class/kfd/kfd/topology/nodes/*/properties"


def test_kfd_missing_falls_back_to_rocm_agent_enumerator_then_drm(tmp_path: Path) -> None:
    out = "gfx000\ngfx1100\ngfx1100\n"
    gpus, where = amd.detect(tmp_path, env={}, run=lambda argv: out if argv == ["rocm_agent_enumerator"] else None)
    assert [g.gfx for g in gpus] == ["gfx1100", "gfx1100"] and where == "rocm_agent_enumerator"
    # rocminfo's agent blocks (its layout): the CPU agent, then a GPU whose ISA line must not count twice.
    info = (
        "Agent 1\n  Name:                    AMD EPYC 7763 64-Core Processor\n"
        "  Marketing Name:          AMD EPYC 7763 64-Core Processor\nAgent 2\n  Name:                    gfx90a\n"
        "  Marketing Name:          AMD Instinct MI210\n  ISA Info:\n    ISA 1\n"
        "      Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-\n"
    )
    gpus, where = amd.detect(tmp_path, env={}, run=lambda argv: info if argv == ["rocminfo"] else None)
    assert [g.gfx for g in gpus] == ["gfx90a"] and where == "rocminfo"
    card = tmp_path / "sys/class/drm/card1/device"
    card.mkdir(parents=True)
    (card / "vendor").write_text("0x1002\n")
    (card / "device").write_text("0x744c\n")
    (tmp_path / "sys/class/drm/renderD128").mkdir()
    gpus, where = amd.detect(tmp_path, env={}, run=lambda argv: None)
    assert gpus == (amd.AmdGpu(0, None, "0x744c"),) and where.endswith("card*/device/vendor")
    assert amd.detect(tmp_path / "nothing", env={}) == ((), None)


def test_uv_override_variable_names_the_gfx_and_is_checked(tmp_path: Path) -> None:
    gpus, where = amd.detect(KFD / "mi325x", env={"UV_AMD_GPU_ARCHITECTURE": "gfx90a,gfx942"})
    assert [g.gfx for g in gpus] == ["gfx90a", "gfx942"] and where == "UV_AMD_GPU_ARCHITECTURE"
    with pytest.raises(UsageError, match="UV_AMD_GPU_ARCHITECTURE: 'sm_90'"):
        amd.detect(tmp_path, env={"UV_AMD_GPU_ARCHITECTURE": "sm_90"})


def test_pci_trees_recorded_from_real_intel_gpus() -> None:
    assert intel.read_pci(PCI / "arc-a770") == (intel.IntelGpu("0000:03:00.0", "0x56a0"),)
    # The host bridge (class 0x0600) and the NPU (0x1200) are Intel functions, but no GPU.
    assert intel.read_pci(PCI / "core-ultra-igpu") == (intel.IntelGpu("0000:00:02.0", "0x7d55"),)
    assert intel.detect(PCI / "nothing") == ((), None)
    assert not intel.is_intel_gpu("0x1002", "0x030000") and not intel.is_intel_gpu("0x8086", "garbage")


WINDOWS = RESOURCES / "windows"


@pytest.mark.parametrize(
    ("listed", "ids"),
    [
        ("arc-a770.txt", ["0x56a0"]),
        ("core-ultra-165h.txt", ["0x7d55"]),
        ("core-ultra-rtx3000ada.txt", ["0x7d55"]),
        ("iris-xe-tgl.txt", ["0x9a49"]),
        ("uhd770-a770-rx7900xtx.txt", ["0x56a0", "0x4680"]),
    ],
)
def test_windows_display_adapters_recorded_from_real_machines(listed: str, ids: list[str]) -> None:
    text = (WINDOWS / listed).read_text()
    gpus, where = intel.detect_windows(text)
    assert [g.device_id for g in gpus] == ids and where is not None and "CM_Get_Device_ID_ListW" in where
    assert gpus[0].address.startswith("PCI\\VEN_8086&DEV_")
    # Configuration Manager's own form: NUL-separated, a second NUL at the end.
    assert intel.parse_windows_ids("\0".join(text.split()) + "\0\0") == gpus


def test_windows_is_asked_as_uv_asks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """Configuration Manager's two calls, faked: the display class, present devices only, and the
    NUL-separated list it writes read back whole."""
    import ctypes
    import sys

    listed = "\0".join((WINDOWS / "core-ultra-rtx3000ada.txt").read_text().split()) + "\0\0"
    asked: list[tuple[str, int]] = []

    class Cfgmgr:
        def CM_Get_Device_ID_List_SizeW(self, size: Any, guid: str, flags: int) -> int:
            asked.append((guid, flags))
            size._obj.value = len(listed)
            return 0

        def CM_Get_Device_ID_ListW(self, guid: str, buffer: Any, length: int, flags: int) -> int:
            buffer[:length] = listed
            return 0

    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(ctypes, "WinDLL", lambda name: Cfgmgr(), raising=False)
    gpus, where = intel.detect_windows()
    assert [g.device_id for g in gpus] == ["0x7d55"] and where is not None
    assert asked == [("{4d36e968-e325-11ce-bfc1-08002be10318}", 0x300)]
    monkeypatch.setattr(ctypes, "WinDLL", lambda name: (_ for _ in ()).throw(OSError("no cfgmgr32")), raising=False)
    assert intel.read_windows() == ""


def test_windows_without_an_intel_adapter_and_elsewhere() -> None:
    assert intel.detect_windows("PCI\\VEN_10DE&DEV_2838&SUBSYS_232D17AA&REV_A1\\4&1EBFE625&0&0008\r\n") == ((), None)
    assert intel.detect_windows("ROOT\\DISPLAY\\0000\0\0") == ((), None)
    assert intel.read_windows() == ""  # not Windows: nothing is asked


def _intel(device: str | bool = True, os: str = "linux") -> Probe:
    return probe.override(LINUX, os=os, intel_gpu=device)


@pytest.mark.parametrize(
    ("device", "os", "compute"),
    [
        ("56a0", "linux", "xpu"),  # Arc A770
        ("e20b", "windows", "xpu"),  # Arc B580
        ("0bd5", "linux", "xpu"),  # Data Center GPU Max 1550
        ("56c0", "linux", "xpu"),  # Data Center GPU Flex 170
        ("7d55", "windows", "xpu"),  # Core Ultra 7 165H (Meteor Lake-H) Arc graphics
        ("7d51", "linux", "xpu"),  # Core Ultra 200H (Arrow Lake-H)
        ("64a0", "windows", "xpu"),  # Core Ultra 200V (Lunar Lake)
        ("9a49", "linux", "cpu"),  # Tiger Lake Iris Xe
        ("a7a0", "windows", "cpu"),  # Raptor Lake-P Iris Xe
        ("4680", "linux", "cpu"),  # Alder Lake-S UHD 770
        ("3e92", "windows", "cpu"),  # Coffee Lake UHD 630
    ],
)
def test_xpu_only_for_the_gpus_the_xpu_builds_support(device: str, os: str, compute: str) -> None:
    chosen = selector.select(_intel(device, os), release_spec="2.9.1")
    assert chosen.compute == compute
    said = chosen.because[-1]
    if compute == "xpu":
        # Checked against the families the XPU builds support, and found in one.
        assert (said.kind, [g.device_id for g in said.figures["served"]]) == ("xpu_reason", [f"0x{device}"])
        assert vendors.intel_gpus().family(f"0x{device}") is not None
    else:
        assert (said.kind, [g.device_id for g in said.figures["unserved"]], said.figures["where"]) == (
            "intel_unsupported",
            [f"0x{device}"],
            "--intel-gpu",
        )
        assert chosen.command.endswith("/whl/cpu")


def test_intel_gpu_alone_keeps_its_meaning_and_says_it_was_not_checked() -> None:
    chosen = selector.select(_intel(True), release_spec="2.9.1")
    assert chosen.compute == "xpu" and chosen.because[-1].kind == "xpu_reason"
    assert [g.device_id for g in chosen.because[-1].figures["served"]] == [None]  # not known, so not checked
    assert _intel("8086:56A0").intel_gpus[0].device_id == "0x56a0"
    assert _intel("0x56a0").intel_gpus[0].device_id == "0x56a0"
    with pytest.raises(UsageError, match="--intel-gpu 'arc' is not a PCI device id"):
        _intel("arc")


def test_a_desktop_uhd_beside_an_arc_card_is_left_out() -> None:
    gpus, where = intel.detect_windows((WINDOWS / "uhd770-a770-rx7900xtx.txt").read_text())
    box = LINUX._replace(os="windows", intel_gpus=gpus, sources={"intel_gpus": str(where)})
    chosen = selector.select(box, release_spec="2.9.1")
    assert chosen.compute == "xpu" and chosen.because[-1].kind == "xpu_reason"
    assert [g.device_id for g in chosen.because[-1].figures["served"]] == ["0x56a0"]
    assert "Intel GPU 0x56a0 (Intel Arc A-Series" in chosen.reasons[-1]  # the words: the family that serves it
    left = [n for n in chosen.noted if n.kind == "intel_left_out"]
    assert [
        ([g.device_id for g in n.figures["unserved"]], [g.device_id for g in n.figures["served"]]) for n in left
    ] == [(["0x4680"], ["0x56a0"])]
    forced = selector.select(_intel("9a49"), release_spec="2.9.1", compute="xpu")
    warned = [n for n in forced.noted if n.kind == "xpu_will_not_run"]
    assert [[g.device_id for g in n.figures["gpus"]] for n in warned] == [["0x9a49"]]


def test_the_recorded_pci_trees_get_xpu() -> None:
    for tree in ("arc-a770", "core-ultra-igpu"):
        gpus, where = intel.detect(PCI / tree)
        box = LINUX._replace(intel_gpus=gpus, sources={"intel_gpus": str(where)})
        assert selector.select(box, release_spec="2.9.1").compute == "xpu"


def test_intel_gpu_list_loads_validated_and_its_script_reads_the_kernel_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    facts = vendors.intel_gpus()
    assert facts.family("0x56A0") is not None and facts.family("0x9a49") is None
    assert {f.name for f in facts.families.values() if not f.validated} == {
        "Intel Data Center GPU Flex (ATS-M, DG2 silicon)"
    }
    spec = importlib.util.spec_from_file_location(
        "intel_gpus_from_linux", Path(__file__).resolve().parents[2] / "envs/scripts/intel_gpus_from_linux.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    macros = script.expand((RESOURCES / "linux" / "pciids-mtl-lnl.h").read_text())
    assert macros["INTEL_MTL_IDS"] == ["0x7d40", "0x7d45", "0x7d55", "0x7d60", "0x7dd5"]
    assert all(facts.family(i) for ids in macros.values() for i in ids)  # the data agrees with the excerpt
    text = (Path(__file__).resolve().parents[2] / "envs" / "intel_gpus.yaml").read_text()
    (tmp_path / "intel_gpus.yaml").write_text(text.replace('"0x7d40"', '"0x56a0"'))
    monkeypatch.setenv("KITBENCH_ENVS", str(tmp_path))
    with pytest.raises(ManifestError, match="device id 0x56a0 is in"):
        vendors.intel_gpus()


def test_probe_here_reports_amd_and_intel_gpus_with_sources(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_AMD_GPU_ARCHITECTURE", "gfx1100")
    monkeypatch.setenv("UV_CUDA_DRIVER_VERSION", "550.144.03")
    here = probe.probe()
    assert here.gfx == ("gfx1100",) and here.sources["amd_gpus"] == "UV_AMD_GPU_ARCHITECTURE"
    assert here.driver == "550.144.03" and here.sources["driver"] == "UV_CUDA_DRIVER_VERSION"


def test_override_for_another_machine() -> None:
    box = probe.override(LINUX, gpu_gfx=["gfx942", "gfx90a,gfx942"], intel_gpu=True)
    assert box.gfx == ("gfx942", "gfx90a") and len(box.amd_gpus) == 3
    assert box.sources["amd_gpus"] == "--gpu-gfx" and box.sources["intel_gpus"] == "--intel-gpu"
    assert probe.override(box, os="windows").amd_gpus == ()
    with pytest.raises(UsageError, match="--no-gpu contradicts --gpu-gfx"):
        probe.override(LINUX, gpu_gfx=["gfx942"], no_gpu=True)
    with pytest.raises(UsageError, match="'gfx9420' is not an AMD GPU architecture"):
        probe.override(LINUX, gpu_gfx=["gfx9420"])


def test_vendor_facts_load_and_answer() -> None:
    facts = vendors.load()
    assert "gfx942" in (facts.rocm_arches("rocm6.4") or ()) and facts.rocm_arches("rocm5.7") is None
    assert facts.xpu("2.5.0", "linux", "x86_64") and not facts.xpu("2.5.0", "windows", "x86_64")
    assert facts.xpu("2.6.0", "windows", "x86_64") and not facts.xpu("2.4.1", "linux", "x86_64")
    assert not facts.xpu("2.9.1", "linux", "aarch64") and not facts.xpu("2.9.1", "macos", "arm64")
    assert facts.override_hint("gfx1031", ("gfx1030",)) and facts.override_hint("gfx1030", ("gfx1030",)) is None


def _recorded_arch_list(name: str) -> list[str]:
    text = (RESOURCES / "rocm" / name).read_text()
    listed = text[
        text.index(
            "[",
            text.index("arch list") if "arch list" in text else text.index("get_arch_list") + len("get_arch_list()"),
        ) :
    ]
    return [part.strip(" '\n") for part in listed[1 : listed.index("]")].split(",")]


@pytest.mark.parametrize(
    ("name", "compute"),
    [("torch-2.9.1+rocm6.4-radeon-8060s.txt", "rocm6.4"), ("torch-2.13.0+rocm7.2-radeon-8060s.txt", "rocm7.2")],
)
def test_recorded_arch_lists_match_the_data(name: str, compute: str) -> None:
    assert sorted(_recorded_arch_list(name)) == sorted(vendors.load().rocm_arches(compute) or ())


def _amd(*gfx: str) -> Probe:
    return probe.override(LINUX, gpu_gfx=list(gfx))


@pytest.mark.parametrize(
    ("release", "gfx", "compute"),
    [
        ("2.9.1", ("gfx942",), "rocm6.4"),
        ("2.9.1", ("gfx90a", "gfx1100"), "rocm6.4"),
        ("2.10.0", ("gfx950",), "rocm7.1"),
        ("2.6.0", ("gfx1200",), "rocm6.2.4"),  # the newest, rocm6.2.4, carries RDNA4; rocm6.1 never did
        ("2.5.1", ("gfx1101",), "rocm6.1"),  # rocm6.2 lacks gfx1101: rocm6.1 (which has it) is chosen
        ("2.13.0", ("gfx1151",), "rocm7.2"),
        ("2.9.1", ("gfx1151",), "cpu"),  # no 2.9 ROCm build carries Strix Halo kernels
        ("2.9.1", ("gfx1031",), "cpu"),  # an RX 6700 XT: no build has gfx1031
    ],
)
def test_amd_advice_per_release_and_architecture(release: str, gfx: tuple[str, ...], compute: str) -> None:
    chosen = selector.select(_amd(*gfx), release_spec=release)
    assert chosen.compute == compute
    said = chosen.because[-1]
    assert (said.figures["machine"].gfx, said.figures["where"]) == (gfx, "--gpu-gfx")
    if compute == "cpu":
        assert said.kind == "no_rocm_kernels"
        assert chosen.command.endswith("/whl/cpu")
    else:
        assert chosen.command.endswith(f"--index-url https://download.pytorch.org/whl/{compute}")
        # Checked against its recorded gfx list, every GPU deciding.
        assert (said.kind, said.figures["compute"], said.figures["left"]) == ("rocm_reason", compute, [])
        assert vendors.load().rocm_arches(compute) is not None


def test_rejected_rocm_builds_name_the_missing_gfx_and_rdna_gets_a_hint_only() -> None:
    chosen = selector.select(_amd("gfx1101"), release_spec="2.5.1")
    assert ("rocm6.2", "no kernels", ("gfx1101",)) in [(r.build, r.cause, r.arches) for r in chosen.passed]
    rx6700 = selector.select(_amd("gfx1031"), release_spec="2.9.1")
    assert rx6700.compute == "cpu"
    assert [(n.kind, n.figures["hint"]) for n in rx6700.noted] == [
        (
            "rocm_hint",
            "HSA_OVERRIDE_GFX_VERSION=10.3.0 makes gfx1031 run gfx1030's kernels; "
            "AMD does not support it, results are yours to check",
        )
    ]


def test_amd_off_linux_or_unrecorded_or_unknown_gfx() -> None:
    windows = selector.select(probe.override(LINUX, os="windows", gpu_gfx=["gfx1100"]), release_spec="2.9.1")
    assert windows.compute == "cpu"
    assert (windows.because[-1].kind, windows.because[-1].figures["machine"].os) == ("no_rocm_build", "windows")
    assert "ROCm builds exist only for Linux" in windows.reasons[-1]  # the words, once
    old = selector.select(_amd("gfx90a"), release_spec="2.1.2")
    assert old.compute == "rocm5.6"
    assert (old.because[-1].kind, old.because[-1].figures["compute"]) == ("rocm_reason", "rocm5.6")
    assert vendors.load().rocm_arches("rocm5.6") is None  # not recorded, so not checked: none passed over
    assert [r.build for r in old.passed if r.cause != "no driver"] == []
    drm_only = LINUX._replace(
        amd_gpus=(amd.AmdGpu(0, None, "0x744c"),), sources={"amd_gpus": "/sys/class/drm/card*/device/vendor"}
    )
    chosen = selector.select(drm_only, release_spec="2.9.1")
    assert chosen.compute == "rocm6.4" and chosen.because[-1].kind == "rocm_reason"
    assert chosen.because[-1].figures["machine"].gfx == ()  # no gfx named: nothing to check


def test_kfd_lists_a_ryzen_igpu_beside_the_discrete_card() -> None:
    mixed = amd.read_kfd(KFD / "raphael-rx6600")
    assert [(g.index, g.gfx, g.device_id) for g in mixed] == [(0, "gfx1032", "0x73ff"), (1, "gfx1036", "0x164e")]
    alone = amd.read_kfd(KFD / "granite-ridge-igpu")
    assert [(g.gfx, g.device_id, g.compute_units) for g in alone] == [("gfx1036", "0x13c0", None)]
    facts = vendors.load()
    assert {
        "gfx1036",
        "gfx1103",
        "gfx1150",
        "gfx1151",
    } <= facts.integrated and "llvm/llvm-project" in facts.integrated_source
    # No gfx of a discrete card is taken for an integrated one.
    assert not facts.integrated & {"gfx1030", "gfx1032", "gfx1100", "gfx1102", "gfx942", "gfx1200"}


def test_the_integrated_list_is_llvms_apu_column() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "apu_gfx_from_llvm", Path(__file__).resolve().parents[2] / "envs/scripts/apu_gfx_from_llvm.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    found = script.apus((RESOURCES / "llvm" / "AMDGPUUsage-processors-excerpt.rst").read_text())
    assert found == ["gfx1033", "gfx1035", "gfx1036", "gfx1103"]
    assert set(found) <= vendors.load().integrated


def _kfd(tree: str) -> Probe:
    gpus = amd.read_kfd(KFD / tree)
    return LINUX._replace(amd_gpus=gpus, sources={"amd_gpus": f"{tree}/*/properties"})


@pytest.mark.parametrize(
    ("release", "gfx", "compute", "hidden"),
    [
        ("2.9.1", ("gfx1036", "gfx1100"), "rocm6.4", "1"),  # Raphael iGPU + RX 7900 XTX
        ("2.9.1", ("gfx1103", "gfx1100"), "rocm6.4", "1"),  # Phoenix (Ryzen 7040) + RX 7900 XTX
        ("2.9.1", ("gfx1100", "gfx1035"), "rocm6.4", "0"),  # Rembrandt iGPU listed second
        ("2.9.1", ("gfx1150", "gfx1201"), "rocm6.4", "1"),  # Strix Point + RX 9070 XT
        ("2.13.0", ("gfx1103", "gfx1100"), "rocm7.2", None),  # rocm7.2 serves gfx1103 too: nothing left out
    ],
)
def test_an_integrated_gpu_no_build_serves_leaves_the_choice_to_the_discrete_one(
    release: str, gfx: tuple[str, ...], compute: str, hidden: str | None
) -> None:
    chosen = selector.select(_amd(*gfx), release_spec=release)
    assert chosen.compute == compute
    igpu = next(g for g in gfx if g in vendors.load().integrated)
    notes = [n for n in chosen.noted if n.kind == "hidden_gpus"]
    if hidden is None:
        assert notes == []
    else:
        # The integrated GPU left out (its HIP device), and the one HIP_VISIBLE_DEVICES keeps.
        figures = notes[0].figures
        assert len(notes) == 1 and figures["compute"] == compute
        assert [(g.index, g.gfx) for g in figures["left"]] == [(1 - int(hidden), igpu)]
        assert [g.index for g in figures["gpus"] if g not in figures["left"]] == [int(hidden)]
    assert "rocm_hint" not in [n.kind for n in chosen.noted]
    served = [g for g in gfx if hidden is None or g != igpu]
    said = chosen.because[-1]
    assert (said.kind, said.figures["compute"], said.figures["where"]) == ("rocm_reason", compute, "--gpu-gfx")
    assert [g.gfx for g in said.figures["machine"].amd_gpus if g not in said.figures["left"]] == served


def test_the_recorded_raphael_box_gets_a_hint_for_its_card_never_for_its_igpu() -> None:
    # gfx1032 (RX 6600) is in no build: the CPU build, the override hint aimed at the card alone.
    chosen = selector.select(_kfd("raphael-rx6600"), release_spec="2.9.1")
    assert chosen.compute == "cpu" and chosen.because[-1].kind == "no_rocm_kernels"
    assert {r.arches for r in chosen.passed if r.cause == "no kernels"} == {("gfx1032",)}  # the card, not the iGPU
    hints = [n for n in chosen.notes if n.startswith("hint:")]
    assert hints == [
        "hint: HSA_OVERRIDE_GFX_VERSION=10.3.0 makes gfx1032 run gfx1030's kernels; "
        "AMD does not support it, results are yours to check"
    ]


def test_an_integrated_gpu_alone_decides_and_gets_no_override_hint() -> None:
    chosen = selector.select(_kfd("granite-ridge-igpu"), release_spec="2.9.1")
    assert chosen.compute == "cpu" and chosen.because[-1].kind == "no_rocm_kernels"
    assert chosen.because[-1].figures["machine"].gfx == ("gfx1036",)
    assert {r.arches for r in chosen.passed if r.cause == "no kernels"} == {("gfx1036",)}
    assert not {"rocm_hint", "hidden_gpus"} & {n.kind for n in chosen.noted}
    strix_halo = selector.select(_amd("gfx1151"), release_spec="2.13.0")  # an APU some build serves
    assert strix_halo.compute == "rocm7.2"


def test_nvidia_comes_before_an_amd_igpu() -> None:
    laptop = probe.override(LINUX, driver="570.86.10", gpu_capabilities=["8.9"], gpu_gfx=["gfx1103"])
    assert selector.select(laptop, release_spec="2.9.1").compute == "cu128"


@pytest.mark.parametrize(
    ("release", "os", "compute"),
    [
        ("2.9.1", "linux", "xpu"),
        ("2.5.1", "linux", "xpu"),
        ("2.5.1", "windows", "cpu"),
        ("2.6.0", "windows", "xpu"),
        ("2.4.1", "linux", "cpu"),
        ("nightly", "linux", "xpu"),
    ],
)
def test_intel_advice_per_release(release: str, os: str, compute: str) -> None:
    chosen = selector.select(probe.override(LINUX, os=os, intel_gpu=True), release_spec=release)
    assert chosen.compute == compute
    said = chosen.because[-1]
    assert ([g.device_id for g in said.figures["served"]], said.figures["where"]) == ([None], "--intel-gpu")
    if compute == "xpu":
        assert chosen.command.endswith("/xpu") and said.kind == "xpu_reason"
    else:
        assert said.kind == "no_xpu_build"


def test_compute_xpu_and_rocm_in_every_format() -> None:
    assert (
        selector.select(LINUX, release_spec="2.9.1", compute="xpu").command
        == "pip install torch==2.9.1 torchvision==0.24.1 torchaudio==2.9.1 "
        "--index-url https://download.pytorch.org/whl/xpu"
    )
    assert (
        selector.select(LINUX, release_spec="2.9.1", compute="xpu", fmt="selector").command
        == "pip3 install torch torchvision --index-url https://download.pytorch.org/whl/xpu"
    )  # no torchaudio from 2.8
    assert (
        selector.select(LINUX, release_spec="2.9.1", compute="xpu", package="uv").command
        == "uv pip install torch==2.9.1 torchvision==0.24.1 torchaudio==2.9.1 "
        "--index-url https://download.pytorch.org/whl/xpu"
    )
    assert selector.select(LINUX, release_spec="2.9.1", compute="rocm6.4", package="uv").command.endswith(
        "/whl/rocm6.4"
    )
    warned = selector.select(_amd("gfx1151"), release_spec="2.9.1", compute="rocm6.4")
    assert warned.notes == ["warning: rocm6.4 will not run on this machine: no kernels for gfx1151"]
    for release, os, package, match in [
        ("2.4.1", "linux", "pip", "no xpu build for linux x86_64"),
        ("2.9.1", "macos", "pip", "no xpu builds for macOS"),
        ("2.3.1", "linux", "conda", "no xpu build for conda"),
    ]:
        machine = probe.override(LINUX, os=os)
        with pytest.raises(SelectionError, match=match):
            selector.select(machine, release_spec=release, package=package, compute="xpu")
    with pytest.raises(SelectionError) as unknown:  # the builds it names include xpu, which Start Locally lacks
        selector.select(LINUX, release_spec="2.9.1", compute="rocm9.9")
    assert unknown.value.hint is not None and unknown.value.hint.endswith("cpu, xpu")


def test_cli_explain_shows_each_vendor_fact_and_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli.main(["install-cmd", "--gpu-gfx", "gfx942", "--release", "2.9.1", "--explain"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().endswith("--index-url https://download.pytorch.org/whl/rocm6.4")
    assert "# amd_gpus: gfx942  [--gpu-gfx]" in err and "# rocm6.4: the newest ROCm build of 2.9.1" in err
    assert _cli.main(["install-cmd", "--intel-gpu", "--release", "2.9.1", "--explain"]) == 0
    out, err = capsys.readouterr()
    assert out.strip().endswith("/whl/xpu") and "# intel_gpus: an Intel GPU  [--intel-gpu]" in err
    assert _cli.main(["install-cmd", "--gpu-gfx", "sm_90"]) == 2
    assert "ERROR: --gpu-gfx: 'sm_90' is not an AMD GPU architecture" in capsys.readouterr().err


# --- the suite's device layer on a HIP or XPU torch: the real code paths, torch's answers faked ----------------

HIP = devices.CudaFacts(
    torch_version="2.9.1+rocm6.4",
    built_cuda=None,
    built_hip="6.4.43484-123eb5128",
    visible_devices=None,
    driver=None,
    os="linux",
    in_container=False,
    wsl=False,
    available=False,
    device_count=0,
    init_warning=None,
)
XPU = devices.XpuFacts(
    torch_version="2.9.1+xpu", built=True, available=False, device_count=0, names=(), intel_gpus=1, affinity_mask=None
)


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"hip_visible_devices": "-1"}, "hidden by HIP_VISIBLE_DEVICES='-1'"),
        ({"rocr_visible_devices": ""}, "hidden by ROCR_VISIBLE_DEVICES=''"),
        (
            {"kfd_problem": "no permission on /dev/kfd: add this user to the render and video groups"},
            "no permission on /dev/kfd",
        ),
        ({"torch_version": "2.9.1+xpu", "built_hip": None}, "is an XPU (Intel GPU) build (2.9.1+xpu)"),
    ],
)
def test_hip_reasons(changes: dict[str, object], expected: str) -> None:
    reason = devices.cuda_unavailable_reason(dataclasses.replace(HIP, **changes))  # type: ignore[arg-type]
    assert reason is not None and expected in reason


def test_kfd_problem_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "missing" in (devices.kfd_problem(str(tmp_path / "kfd")) or "")
    kfd = tmp_path / "kfd"
    kfd.write_text("")
    assert devices.kfd_problem(str(kfd)) is None
    kfd.chmod(0)
    # What the kernel answers a user outside the render group, whoever runs the tests (root may open anything).
    monkeypatch.setattr(devices.os, "access", lambda path, mode: Path(path).stat().st_mode & 0o666 == 0o666)
    assert devices.kfd_problem(str(kfd)) == f"no permission on {kfd}: add this user to the render and video groups"
    kfd.chmod(0o666)
    assert devices.kfd_problem(str(kfd)) is None


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"built": False, "torch_version": "2.9.1+cu126"}, "no XPU support (2.9.1+cu126)"),
        ({"affinity_mask": ""}, "hidden by ZE_AFFINITY_MASK=''"),
        ({"intel_gpus": 0}, "no Intel GPU found"),
        ({}, "Level Zero runtime is missing"),
        ({"available": True, "device_count": 1}, None),
    ],
)
def test_xpu_reasons(changes: dict[str, object], expected: str | None) -> None:
    reason = devices.xpu_unavailable_reason(dataclasses.replace(XPU, **changes))  # type: ignore[arg-type]
    assert reason == expected if expected is None else expected in (reason or "")


# The suite's device layer below fakes a HIP or XPU torch's answers on a real torch; the rest of this file
# (detection, envs/vendors.yaml, install advice) runs on a bare Python, as install-cmd does.
HAS_TORCH = importlib.util.find_spec("torch") is not None
if HAS_TORCH:
    import torch
needs_torch = pytest.mark.skipif(
    not HAS_TORCH, reason="fakes a HIP or XPU build's answers on a real torch, and torch is not installed"
)


@dataclasses.dataclass
class _Props:
    name: str
    gcnArchName: str  # torch's attribute name
    major: int = 9
    minor: int = 4
    total_memory: int = 192 * 2**30
    multi_processor_count: int = 304


def _fake_hip(monkeypatch: pytest.MonkeyPatch, props: _Props, recording: str) -> None:
    """A HIP build of torch as the recorded one reported itself: torch.version, torch.cuda answer as on ROCm."""
    monkeypatch.setattr(torch, "__version__", recording.removeprefix("torch-").partition("-")[0])
    monkeypatch.setattr(torch.version, "hip", "6.4.43484-123eb5128")
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda index: (props.total_memory // 2, props.total_memory))
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: _recorded_arch_list(recording))
    monkeypatch.setattr(devices, "kfd_problem", lambda path=devices.KFD_DEVICE: None)


def _availability(machine: Probe) -> Any:
    from kitbench.suite.checks import availability
    from kitbench.suite.checks.base import Context, NoProgress, Options

    return availability.run(
        Context(device=torch.device("cpu"), machine=machine, options=Options(device="auto"), progress=NoProgress())
    )


@needs_torch
def test_hip_build_on_a_gpu_it_carries_is_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_hip(
        monkeypatch, _Props("AMD Instinct MI300X", "gfx942:sramecc+:xnack-"), "torch-2.9.1+rocm6.4-radeon-8060s.txt"
    )
    result = _availability(probe.override(LINUX, gpu_gfx=["gfx942"]))
    # Before: every AMD GPU failed with "no kernels for sm_94" read off an empty CUDA arch list.
    assert result.status == "ok" and result.cuda_available and result.fix is None
    assert [(d.capability, d.kernels_in_wheel) for d in result.devices] == [("gfx942", True)]
    assert result.built_hip == "6.4.43484-123eb5128" and "gfx1201" in result.arch_list


@needs_torch
def test_hip_build_without_kernels_for_the_gpu_says_which_and_what_install_cmd_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fake_hip(monkeypatch, _Props("AMD Radeon 8060S", "gfx1151"), "torch-2.9.1+rocm6.4-radeon-8060s.txt")
    machine = probe.override(LINUX, gpu_gfx=["gfx1151"])
    result = _availability(machine)
    assert result.status == "failed"
    assert "no kernels for gfx1151 (AMD Radeon 8060S) in this wheel's arch list" in result.summary
    advice = selector.select(machine, release_spec="2.9.1")
    assert result.fix == f"no build of torch 2.9.1 runs on this GPU and driver: {advice.reasons[-1]}"


@needs_torch
def test_a_cuda_build_on_an_amd_machine_gets_install_cmd_s_rocm_command() -> None:
    if torch.version.cuda is None or torch.cuda.is_available():
        pytest.skip("needs this host's CUDA build of torch (PyPI's) without a GPU")
    machine = probe.override(LINUX, gpu_gfx=["gfx942"])
    result = _availability(machine)
    expected = selector.select(machine, release_spec=torch.__version__.partition("+")[0])
    assert expected.compute.startswith("rocm") and result.fix == expected.command
    assert result.status == "failed" and "cuda: no NVIDIA driver found" in result.summary


def _fake_xpu(monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...]) -> None:
    monkeypatch.setattr(torch.xpu, "_is_compiled", lambda: True)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: bool(names))
    monkeypatch.setattr(torch.xpu, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.xpu, "get_device_name", lambda index: names[index])


@needs_torch
def test_xpu_build_with_an_arc_gpu_is_chosen_by_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("auto prefers a CUDA device, which this host has")
    _fake_xpu(monkeypatch, ("Intel(R) Arc(TM) A770 Graphics",))
    machine = probe.override(LINUX, intel_gpu=True)
    assert devices.resolve("auto", machine) == torch.device("xpu", 0)
    assert devices.resolve("xpu:0", machine) == torch.device("xpu", 0)
    with pytest.raises(DeviceUnavailableError, match="only 1 XPU device"):
        devices.resolve("xpu:1", machine)
    result = _availability(machine)
    assert result.xpu_available and result.xpu_devices == ["Intel(R) Arc(TM) A770 Graphics"]


@needs_torch
def test_an_intel_gpu_beside_a_build_without_xpu_gets_the_xpu_command(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available() or torch.xpu._is_compiled():
        pytest.skip("needs a torch without a usable CUDA device and without XPU")
    machine = probe.override(LINUX, intel_gpu=True)
    with pytest.raises(DeviceUnavailableError, match="no XPU support"):
        devices.resolve("xpu", machine)
    result = _availability(machine)
    assert result.status == "failed" and "xpu: this torch has no XPU support" in result.summary
    assert result.fix is not None and result.fix.endswith("/whl/xpu")


@needs_torch
def test_ddp_joins_intel_gpus_over_xccl_where_the_build_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from kitbench.suite.checks import ddp

    if torch.cuda.is_available():
        pytest.skip("a CUDA device here takes the GPU part (NCCL)")
    _fake_xpu(monkeypatch, ("Intel(R) Data Center GPU Max 1550",) * 2)
    monkeypatch.setattr(torch.distributed, "is_xccl_available", lambda: True, raising=False)
    assert ddp._xccl_gpus() == 2
    monkeypatch.setattr(torch.distributed, "is_xccl_available", lambda: False, raising=False)
    assert ddp._xccl_gpus() == 0


def test_rocm_and_xpu_targets_load_and_preflight_refuses_them_without_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from kitbench.environments import preflight, targets
    from kitbench.errors import PreflightError

    monkeypatch.delenv("KITBENCH_GPUS", raising=False)  # =none would run them without their GPU

    rocm, xpu = targets.get("rocm"), targets.get("xpu")
    assert rocm.index["linux"].endswith("/whl/rocm7.2") and xpu.index["windows"].endswith("/whl/xpu")
    with pytest.raises(PreflightError, match="no AMD GPU found") as refused:
        preflight.check(rocm, LINUX)
    assert refused.value.alternative == "cpu"
    with pytest.raises(PreflightError, match="no Intel GPU found"):
        preflight.check(xpu, LINUX)
    with pytest.raises(PreflightError, match=r"its rocm7\.2 build has no kernels for gfx1031"):
        preflight.check(rocm, _amd("gfx1031"))
    preflight.check(rocm, _amd("gfx942"))
    preflight.check(xpu, probe.override(LINUX, intel_gpu=True))
    assert preflight.alternative(_amd("gfx942"), exclude="cpu") == "rocm"
    assert targets.check_build(xpu, "2.14.1+xpu", None, "linux").matches


def test_a_gpu_this_release_cannot_serve_is_pointed_at_a_release_that_can() -> None:
    strix = selector.select(_amd("gfx1151"), release_spec="2.9.1")
    # 2.15's ROCm builds are inferred (a nightly matrix): the pointer names 2.14.1's, published on Start Locally.
    pointed = [n for n in strix.noted if n.kind == "other_rocm_release"]
    assert [(n.figures["version"], n.figures["compute"]) for n in pointed] == [("2.14.1", "rocm7.14")]
    assert "torch 2.14.1 has rocm7.14 with kernels for gfx1151: --release 2.14.1" in strix.notes  # the words, once
    nightly = selector.select(_amd("gfx1031"), release_spec="nightly")  # no release serves it: no pointer
    assert nightly.compute == "cpu"
    assert [n.kind for n in nightly.noted] == ["nightly_unpinned", "unverified", "rocm_hint"]


def test_cli_probe_shows_the_amd_gpus_and_their_source(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("UV_AMD_GPU_ARCHITECTURE", "gfx942,gfx942")
    assert _cli.main(["probe"]) == 0
    assert "amd_gpus        0: gfx942, 1: gfx942  [UV_AMD_GPU_ARCHITECTURE]" in capsys.readouterr().out


@needs_torch
def test_every_accelerator_synchronizes_through_torch_accelerator(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(torch, "accelerator"):
        pytest.skip("this torch predates torch.accelerator (2.6): the per-backend calls are used")
    seen: list[object] = []
    monkeypatch.setattr(torch.accelerator, "synchronize", seen.append)
    for device in (torch.device("xpu", 0), torch.device("cuda", 1), torch.device("cpu")):
        devices.synchronize(device)
    assert seen == [torch.device("xpu", 0), torch.device("cuda", 1)]


def test_an_arc_card_beside_a_uhd_igpu_is_described_with_two_intel_gpu_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--intel-gpu once per GPU, as --gpu-cc and --gpu-gfx: the Arc decides, the UHD is named as left out."""
    from kitbench._cli import main

    assert (
        main(
            [
                "install-cmd",
                "--os",
                "linux",
                "--python-version",
                "3.12",
                "--glibc",
                "2.35",
                "--intel-gpu",
                "4680",
                "--intel-gpu",
                "56a0",
                "--explain",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert out.rstrip().endswith("/whl/xpu")
    assert "Intel GPU 0x4680: none of the GPUs the XPU builds support, left out" in err
    assert (
        main(["install-cmd", "--os", "linux", "--python-version", "3.12", "--glibc", "2.35", "--intel-gpu", "4680"])
        == 0
    )
    assert capsys.readouterr().out.rstrip().endswith("/whl/cpu")


# --- the scripts that read these facts from a git checkout: data written, bad input one line ------------------------


def _repo(tmp_path: Path, files: dict[str, str]) -> tuple[str, str]:
    """A git repository holding ``files`` in one commit: its git dir and the commit's id."""
    import subprocess

    work = tmp_path / "repo"
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@t", *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "facts")
    return str(work / ".git"), git("rev-parse", "HEAD").strip()


def _script(name: str, capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    import runpy

    module = runpy.run_path(str(Path(__file__).resolve().parents[2] / "envs" / "scripts" / f"{name}.py"))
    with pytest.raises(SystemExit) as done:
        module["_shared"].run(lambda: module["main"](*argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return int(done.value.code or 0), captured.out, captured.err


_FAMILIES = ("DG2", "ATS_M", "PVC", "BMG", "MTL", "ARL", "LNL", "PTL")


def _pciids(*extra: str) -> str:
    """pciids.h with one id per family of intel_gpus_from_linux.FAMILIES (DG2's through a nested macro)."""
    lines = [
        "#define INTEL_DG2_G10_IDS(MACRO__, ...) \\\n\tMACRO__(0x56A0, ## __VA_ARGS__)\n",
        "#define INTEL_DG2_IDS(MACRO__, ...) \\\n\tINTEL_DG2_G10_IDS(MACRO__, ## __VA_ARGS__), \\\n"
        "\tMACRO__(0x5690, ## __VA_ARGS__)\n",
    ]
    lines += [
        f"#define INTEL_{f}_IDS(MACRO__, ...) \\\n\tMACRO__(0x{0xE000 + i:04X}, ## __VA_ARGS__)\n"
        for i, f in enumerate(_FAMILIES[1:])
    ]
    return "\n".join([*lines, *extra])


def test_the_intel_script_writes_the_file_as_data_and_refuses_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench.records import manifest

    header = "include/drm/intel/pciids.h"
    git_dir, commit = _repo(tmp_path, {header: _pciids()})
    out = tmp_path / "intel_gpus.yaml"
    assert _script("intel_gpus_from_linux", capsys, git_dir, commit, out)[0] == 0
    families = {f["macro"]: f for f in manifest.load(out, "intel_gpus").data["families"]}
    assert families["INTEL_DG2_IDS"]["ids"] == ["0x5690", "0x56a0"] and len(families) == len(_FAMILIES)
    assert out.read_text().startswith("# The Intel GPUs PyTorch's XPU builds support")
    written = out.read_bytes()
    for files, said in (
        ({header: _pciids().replace("INTEL_PTL_IDS", "INTEL_PTL_X_IDS")}, "defines no INTEL_PTL_IDS"),
        (
            {header: _pciids().replace("MACRO__(0x5690", "INTEL_DG2_IDS(MACRO__")},
            "INTEL_DG2_IDS is defined in pciids.h through itself",
        ),
        ({"README": "no header"}, "failed: fatal: "),
    ):
        repo = _repo(tmp_path / said[:8].replace(" ", "_"), files)
        code, _, err = _script("intel_gpus_from_linux", capsys, *repo, out)
        assert code == 1 and len(err.splitlines()) == 2 and said in err, err
    code, _, err = _script("intel_gpus_from_linux", capsys, git_dir, "HEAD; rm -rf /", out)
    assert code == 1 and err.startswith("ERROR: 'HEAD; rm -rf /' is not a commit id")
    assert out.read_bytes() == written


def test_the_amd_scripts_print_entries_the_schema_takes_and_refuse_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    backend = (
        '#[serde(rename = "rocm6.4")]\n#[value(name = "rocm6.4")]\nRocm64,\n'
        "static LINUX_AMD_GPU_DRIVERS: LazyLock<...> = LazyLock::new(|| {\n"
        "    (TorchBackend::Rocm64, AmdGpuArchitecture::Gfx1100),\n"
        "    (TorchBackend::Rocm64, AmdGpuArchitecture::Gfx942),\n});\n"
    )
    uv = _repo(tmp_path / "uv", {"crates/uv-torch/src/backend.rs": backend})
    code, out, _ = _script("rocm_arches_from_uv", capsys, *uv)
    assert code == 0
    assert [(e["compute"], e["arches"]) for e in yaml.safe_load(out)["rocm"]] == [("rocm6.4", ["gfx1100", "gfx942"])]
    moved = _repo(tmp_path / "moved", {"crates/uv-torch/src/backend.rs": backend.replace("LINUX_AMD", "AMD")})
    code, _, err = _script("rocm_arches_from_uv", capsys, *moved)
    assert code == 1 and "has no LINUX_AMD_GPU_DRIVERS table" in err
    llvm = _repo(
        tmp_path / "llvm",
        {"llvm/docs/AMDGPUUsage.rst": (RESOURCES / "llvm" / "AMDGPUUsage-processors-excerpt.rst").read_text()},
    )
    code, out, _ = _script("apu_gfx_from_llvm", capsys, *llvm)
    assert code == 0 and yaml.safe_load(out)["integrated"]["gfx"] == ["gfx1033", "gfx1035", "gfx1036", "gfx1103"]
    empty = _repo(tmp_path / "empty", {"llvm/docs/AMDGPUUsage.rst": "no table\n"})
    code, _, err = _script("apu_gfx_from_llvm", capsys, *empty)
    assert code == 1 and "has no processor marked APU" in err
