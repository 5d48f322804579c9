"""kitbench.machine.drivers: the first driver of each GPU generation, beside the CUDA floors. A generation's
first driver is the driver of the first CUDA toolkit that compiles for it (NVIDIA's CUDA release notes: the
architectures each toolkit adds, Table 3's drivers): Hopper's and Ada's 520.61.05 (CUDA 11.8), Blackwell's 570.26
(CUDA 12.8), not the GPU Operator's driver-container note (570.133.20, NVIDIA/cloud-native-docs#184)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kitbench.advice import selector
from kitbench.machine import drivers, probe
from kitbench.machine.probe import Probe
from kitbench.machine.versions import parse_capability, parse_cuda

BARE = Probe(
    os="linux",
    os_version="6.8",
    arch="x86_64",
    python_arch="x86_64",
    python_version="3.12.3",
    rosetta=False,
    wsl=False,
    container=False,
    driver=None,
    gpus=(),
    rocm=None,
    sources={},
)


def test_each_generation_s_first_driver_is_its_first_toolkit_s() -> None:
    """Read from the YAML itself: each generation's toolkit is the first whose architecture range reaches it,
    and its floors are that toolkit's drivers."""
    table = drivers.load()
    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "envs" / "drivers.yaml").read_text())
    toolkits = sorted(parse_cuda(row["cuda"]) for row in data["toolkits"])
    for row in data["generations"]:
        first = parse_cuda(row["toolkit"])
        for cc in row["capabilities"]:
            capability = parse_capability(cc)
            reaches = [
                t
                for t in toolkits
                if (found := table.arch_range(f"{t[0]}.{t[1]}")) and found[0] <= capability <= found[1]
            ]
            # The ranges are numeric, Blackwell's numbers are not: sm_103 came with 12.9 though 12.8 reaches sm_120,
            # and Thor's 11.0 is 12.8's and 12.9's 10.1 renamed by 13.0.
            assert reaches[0] == first or cc in ("10.3", "11.0"), (cc, reaches[:1], first)
            generation = table.generation(cc)
            assert generation is not None and generation.published
            toolkit = next(t for t in data["toolkits"] if parse_cuda(t["cuda"]) == first)
            assert generation.floors == {"linux": toolkit["linux"], "windows": toolkit["windows"]}
    hopper, b200, rtx5090 = table.generation("9.0"), table.generation("10.0"), table.generation("12.0")
    assert hopper is not None and hopper.floor("linux") == "520.61.05" and hopper.floor("windows") == "520.06"
    assert b200 is not None and b200.floor("linux") == "570.26" and b200 is rtx5090
    assert not hopper.allows("470.256.02", "linux") and hopper.allows("520.61.05", "linux")
    assert table.generation("7.5") is None  # older than the toolkits on record: no floor applied


def test_a_b200_on_an_r570_driver_gets_a_cuda_build() -> None:
    """570.124.06 is newer than CUDA 12.8's 570.26: the B200 runs a CUDA 12.8 or 12.9 build, not the CPU one."""
    b200 = probe.override(BARE, driver="570.124.06", gpu_capabilities=["10.0"], glibc="2.35")
    chosen = selector.select(b200)
    assert chosen.compute in ("cu128", "cu129"), (chosen.compute, chosen.notes)


def test_a_floor_resting_on_docs_or_an_inference_is_said_and_never_decides(envs_copy: Path) -> None:
    path = envs_copy / "drivers.yaml"
    data = path.read_text().replace(
        '  - {name: Blackwell, capabilities: ["10.0", "10.1", "12.0"], toolkit: "12.8", kind: release-notes,',
        '  - {name: Blackwell, capabilities: ["10.0", "10.1", "12.0"], toolkit: "12.9", kind: inferred, '
        'confirm: "a release note",',
    )
    assert data != path.read_text()
    path.write_text(data)
    machine = probe.override(BARE, driver="570.124.06", gpu_capabilities=["12.0"], glibc="2.35")
    chosen = selector.select(machine)
    assert chosen.compute.startswith("cu")  # the inferred 575.51.03 floor does not take the CUDA build away
    said = [n.figures for n in chosen.noted if n.kind == "inferred_gpu_floor"]
    assert [(f["generation"].name, f["capability"], f["driver"], f["os"]) for f in said] == [
        ("Blackwell", "12.0", "570.124.06", "linux")
    ], chosen.noted
    assert said[0]["generation"].floor("linux") == "575.51.03" and not said[0]["generation"].published


def test_a_gpu_its_driver_cannot_drive_gets_the_cpu_build_and_the_driver_to_update_to() -> None:
    h100 = probe.override(BARE, driver="470.256.02", gpu_capabilities=["9.0"], glibc="2.35")
    chosen = selector.select(h100)
    assert chosen.compute == "cpu"
    fallback = next(n for n in chosen.noted if n.kind == "cpu_fallback")
    assert fallback.figures["passed"] == chosen.passed
    # Hopper's own floor (520.61.05) is below CUDA 13's (580): each build names the floor that makes it run,
    # and the answer one driver to update to (it told both, 520.61.05 under each build, then 580).
    assert {(r.cause, r.arches, r.driver, r.floor) for r in chosen.passed} == {
        ("driver floor", (), "470.256.02", "580")
    }
    assert fallback.figures["floor"] == "580"
    asked = selector.select(h100, release_spec="2.7.1", compute="cu118")
    warned = [n.figures for n in asked.noted if n.kind == "will_not_run"]
    assert [(w["compute"], w["why"].cause, w["why"].floor) for w in warned] == [("cu118", "gpu floor", "520.61.05")]
    assert any(
        n.startswith("warning: cu118 will not run on this machine: driver 470.256.02 cannot drive sm_90")
        for n in asked.notes
    )  # the words, once
