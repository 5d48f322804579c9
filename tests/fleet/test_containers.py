"""The cluster's container support: runc's default spec, asked through kitbench's one way of running a program."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kitbench.errors import KitbenchError
from kitbench.fleet import containers, jobscript
from kitbench.fleet.jobscript import SlurmOptions


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ("exec sleep 60", "runc spec did not answer in 0 s"),
        ("echo 'runc: permission denied' >&2; exit 1", "runc spec failed: runc: permission denied"),
    ],
)
def test_a_runc_that_hangs_or_fails_is_one_error(
    script: str, words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "runc"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake) if name == "runc" else None)
    monkeypatch.setattr(containers, "_RUNC_SPEC_TIMEOUT_S", 0.3)
    with pytest.raises(KitbenchError) as caught:
        containers.spec([], tmp_path / "fleet", None)
    assert caught.value.message == words and "runc spec" in (caught.value.hint or "")


def test_the_container_commands_are_exact(tmp_path: Path) -> None:
    from kitbench.fleet import containers as fleet_containers

    env = {"KITBENCH_TARGET": "cuda126", "KITBENCH_IMAGE": "kitbench/cuda126:abc"}
    data = tmp_path / "data"
    pyxis = fleet_containers.command("pyxis", "dockerd://kitbench/cuda126:abc", env, data, tmp_path / "fleet")
    assert pyxis == [
        "srun",
        "--container-image=dockerd://kitbench/cuda126:abc",
        f"--container-mounts={tmp_path}/fleet:/results,{data}:/data:ro",
        "--container-workdir=/tmp",
        "env",
        "KITBENCH_TARGET=cuda126",
        "KITBENCH_IMAGE=kitbench/cuda126:abc",
        "KITBENCH_RESULTS=/results",
        "HOME=/tmp",
        "KITBENCH_DATA=/data",
        "/opt/venv/bin/python",
    ]
    oci = fleet_containers.command("oci", "/shared/bundles/cuda126-1ff995446493", env, None, tmp_path)
    assert oci == [
        "srun",
        "--container=/shared/bundles/cuda126-1ff995446493",
        "env",
        "KITBENCH_TARGET=cuda126",
        "KITBENCH_IMAGE=kitbench/cuda126:abc",
        "KITBENCH_RESULTS=/results",
        "HOME=/tmp",
        "/opt/venv/bin/python",
    ]
    plan = jobscript.plan_run(
        ["n1", "n2", "n3"],
        "node",
        SlurmOptions(gres="gpu:1"),
        "cuda126",
        "9ad5",
        oci,
        ["--quick"],
        {},
        record_dir="/results/$SLURM_ARRAY_JOB_ID",
    )
    assert (
        "srun --container=/shared/bundles/cuda126-1ff995446493 env KITBENCH_TARGET=cuda126 "
        "KITBENCH_IMAGE=kitbench/cuda126:abc KITBENCH_RESULTS=/results HOME=/tmp /opt/venv/bin/python -m kitbench "
        'run --force --out "/results/$SLURM_ARRAY_JOB_ID/$node.json" --quick'
    ) in plan.script
    assert "#SBATCH --gres=gpu:1" in plan.script


def test_the_oci_spec_suits_a_batch_task(tmp_path: Path) -> None:
    import shutil

    from kitbench.fleet import containers as fleet_containers

    if shutil.which("runc") is None:
        pytest.skip("runc is not installed (apt-get install runc)")
    config = fleet_containers.spec(["PATH=/opt/venv/bin:/usr/bin"], tmp_path / "fleet", tmp_path / "data")
    assert config["process"]["terminal"] is False and config["root"] == {"path": "rootfs", "readonly": False}
    assert "HOME=/tmp" in config["process"]["env"] and "PATH=/opt/venv/bin:/usr/bin" in config["process"]["env"]
    assert "network" not in {n["type"] for n in config["linux"]["namespaces"]}
    binds = {m["destination"]: m for m in config["mounts"] if m["type"] == "bind"}
    assert binds["/results"]["source"] == str(tmp_path / "fleet") and "rw" in binds["/results"]["options"]
    assert "ro" in binds["/data"]["options"]
    assert "/dev/kfd" not in binds


def test_a_rocm_target_gets_the_amd_devices_under_the_fleet(tmp_path: Path) -> None:
    """As `kitbench container` gives them to Docker: /dev/kfd and /dev/dri, with pyxis and with runc."""
    import shutil

    from kitbench.fleet import containers as fleet_containers

    pyxis = fleet_containers.command("pyxis", "dockerd://kitbench/rocm64:abc", {}, None, tmp_path, amd=True)
    assert pyxis[2] == f"--container-mounts={tmp_path}:/results,/dev/kfd:/dev/kfd,/dev/dri:/dev/dri"
    if shutil.which("runc") is None:
        pytest.skip("runc is not installed (apt-get install runc)")
    devices = tmp_path / "devices"  # /proc/devices of a ROCm node (kfd's major is the kernel's choice)
    devices.write_text("Character devices:\n  1 mem\n226 drm\n510 kfd\n\nBlock devices:\n  8 sd\n")
    config = fleet_containers.spec([], tmp_path, None, amd=True, proc_devices=devices)
    binds = {m["destination"]: m for m in config["mounts"] if m["type"] == "bind"}
    assert binds["/dev/kfd"]["source"] == "/dev/kfd" and binds["/dev/dri"]["source"] == "/dev/dri"
    allowed = [(r["major"], r["access"]) for r in config["linux"]["resources"]["devices"] if r["allow"]]
    assert (226, "rwm") in allowed and (510, "rwm") in allowed
