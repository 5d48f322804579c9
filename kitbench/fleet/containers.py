"""Docker targets on a Slurm cluster, through the container support the cluster already has.

pyxis/enroot (``srun --container-image``) where the cluster has it; otherwise
Slurm's own OCI support (``srun --container BUNDLE``, run by the runtime in
``oci.conf``, runc here) with a bundle exported once from the target's image
onto shared storage. The command each task runs is a pure function of what
it runs, so the exact job script is testable without a cluster.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kitbench import _files, _proc
from kitbench.errors import KitbenchError, UsageError
from kitbench.fleet import slurm
from kitbench.rebuild.containers import AMD_DEVICES, DATA_INSIDE, RESULTS_INSIDE

RUNTIMES = ("auto", "pyxis", "oci")
IMAGE_PYTHON = "/opt/venv/bin/python"  # docker/Dockerfile's venv


def detect(choice: str = "auto") -> str:
    """The container support this cluster's srun has: pyxis, else Slurm's own OCI."""
    if choice not in RUNTIMES:
        raise UsageError(f"unknown container support {choice!r}", hint=f"choose one of: {', '.join(RUNTIMES)}")
    if choice != "auto":
        return choice
    help_text = slurm.run(["srun", "--help"])
    if "--container-image" in help_text:
        return "pyxis"
    if "--container" in help_text:
        return "oci"
    raise KitbenchError(
        "this cluster's srun runs no containers (neither pyxis nor Slurm's OCI support)",
        hint="install pyxis/enroot, or configure oci.conf; or use a venv target such as cpu",
    )


def command(
    runtime: str, where: str, environment: dict[str, str], data: Path | None, results: Path, amd: bool = False
) -> list[str]:
    """The task's command up to the image's Python: ``where`` is the bundle (oci) or the image
    reference (pyxis). The environment is given on the command line: Slurm's OCI runs do not
    pass the job's environment into the container. ``amd``: a ROCm target, which needs the nodes'
    ``/dev/kfd`` and ``/dev/dri`` inside (as ``kitbench container`` passes them to Docker)."""
    env = {
        **environment,
        "KITBENCH_RESULTS": RESULTS_INSIDE,
        "HOME": "/tmp",
        **({"KITBENCH_DATA": DATA_INSIDE} if data is not None else {}),
    }
    assignments = ["env", *(f"{k}={v}" for k, v in env.items())]
    if runtime == "pyxis":
        mounts = (
            f"{results}:{RESULTS_INSIDE}"
            + (f",{data}:{DATA_INSIDE}:ro" if data is not None else "")
            + "".join(f",{d}:{d}" for d in (AMD_DEVICES if amd else ()))
        )
        return [
            "srun",
            f"--container-image={where}",
            f"--container-mounts={mounts}",
            "--container-workdir=/tmp",
            *assignments,
            IMAGE_PYTHON,
        ]
    return ["srun", f"--container={where}", *assignments, IMAGE_PYTHON]


def bundle_folder(target: str, image_id: str, results: Path) -> Path:
    return results / "bundles" / f"{target}-{image_id.split(':')[-1][:12]}"


def bundle(
    image_id: str, target: str, results: Path, data: Path | None, log: Callable[[str], None], amd: bool = False
) -> Path:
    """An OCI bundle of the image under ``results/bundles/``: the rootfs exported once per image,
    config.json written each time (the mounts follow the results and data folders)."""
    from kitbench.rebuild import images

    folder = bundle_folder(target, image_id, results)
    rootfs, env_file = folder / "rootfs", folder / "image-env.json"
    if not rootfs.is_dir():
        env_file.parent.mkdir(parents=True, exist_ok=True)
        # The bundle folder is kitbench's own (results/fleet/bundles): its files are replaced freely.
        _files.write(env_file, json.dumps(images.export_rootfs(image_id, rootfs, log)), replace=True)
    env: list[str] = json.loads(_files.read_text(env_file, 2**20, "image environment"))
    _files.write(folder / "config.json", json.dumps(spec(env, results, data, amd), indent=2) + "\n", replace=True)
    return folder


def spec(
    env: list[str], results: Path, data: Path | None, amd: bool = False, proc_devices: Path = Path("/proc/devices")
) -> dict[str, Any]:
    """runc's default spec, adjusted for a batch task: no terminal, the host's network (a
    multi-node run needs it), the image's environment, results and data bind-mounted."""
    config = _runc_default()
    config["process"].update(terminal=False, cwd="/tmp", args=["true"], env=[*env, "HOME=/tmp"])
    config["root"] = {"path": "rootfs", "readonly": False}
    namespaces = config.get("linux", {}).get("namespaces", [])
    config.setdefault("linux", {})["namespaces"] = [n for n in namespaces if n.get("type") != "network"]
    binds = [(results, RESULTS_INSIDE, "rw")] + ([(data, DATA_INSIDE, "ro")] if data is not None else [])
    binds += [(Path(d), d, "rw") for d in (AMD_DEVICES if amd else ())]
    config["mounts"] = [
        *config.get("mounts", []),
        *(
            {"destination": inside, "type": "bind", "source": str(outside), "options": ["rbind", mode]}
            for outside, inside, mode in binds
        ),
    ]
    if amd:
        # runc's default spec denies every device: allow the GPUs' render nodes (DRM, major 226) and
        # ROCm's compute interface, whose major the kernel chooses (read from this host, as the nodes run one).
        majors = [226, *_char_majors(proc_devices, "kfd")]
        rules = config["linux"].setdefault("resources", {}).setdefault("devices", [])
        rules += [{"allow": True, "type": "c", "major": m, "access": "rwm"} for m in majors]
    return config


def _char_majors(proc_devices: Path, name: str) -> list[int]:
    try:
        text = proc_devices.read_text()
    except OSError:
        return []
    block = text.partition("Block devices:")[0]
    return [int(m[1]) for m in re.finditer(r"^\s*([0-9]{1,4}) (\S+)$", block, re.M) if m[2] == name]


# runc spec only writes a default config.json: it ends at once, or it hangs on something broken.
_RUNC_SPEC_TIMEOUT_S = 30.0
_RUNC_HINT = "check that `runc spec` works here (the same runtime oci.conf names on the nodes)"


def _runc_default() -> dict[str, Any]:
    runc = shutil.which("runc")
    if runc is None:
        raise KitbenchError(
            "runc is not installed here, and an OCI bundle needs its default spec",
            hint="apt-get install runc (the same runtime oci.conf names on the nodes)",
        )
    with tempfile.TemporaryDirectory() as tmp:
        try:
            done = _proc.run([runc, "spec", "--bundle", tmp], _RUNC_SPEC_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            failed = (
                f"did not answer in {_RUNC_SPEC_TIMEOUT_S:.0f} s"
                if isinstance(exc, subprocess.TimeoutExpired)
                else f"cannot start: {exc.strerror or exc}"
            )
            raise KitbenchError(f"runc spec {failed}", hint=_RUNC_HINT) from None
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise KitbenchError(f"runc spec failed: {said}", hint=_RUNC_HINT)
        loaded: dict[str, Any] = json.loads((Path(tmp) / "config.json").read_text())
    return loaded
