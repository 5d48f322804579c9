"""The suite run inside a docker target's image: all GPUs requested (NVIDIA's through the container
toolkit, AMD's as device nodes), MNIST mounted (read-only unless it must be downloaded) and the
results folder mounted, where the suite writes its record; its output shown with host paths.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kitbench.environments import preflight
from kitbench.environments.targets import Target
from kitbench.errors import ContainerError
from kitbench.machine.builds import build
from kitbench.rebuild import engine, images
from kitbench.rebuild.engine import Log
from kitbench.rebuild.images import BuildResult
from kitbench.records import record as records
from kitbench.suite import data
from kitbench.suite.fingerprint import git_revision

RESULTS_INSIDE = "/results"  # the Dockerfile's KITBENCH_RESULTS
DATA_INSIDE = "/data"  # and KITBENCH_DATA


def run(target: Target, result: BuildResult, run_args: Sequence[str], log: Log) -> int:
    """Run the suite in the image; return the container's exit status."""
    docker = engine.sdk()
    from docker.types import DeviceRequest, Mount

    client = engine.client()
    results_dir = records.results_root().resolve() / target.name
    data_root, download, run_args = host_data(run_args)
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        # A fresh machine: the image's user cannot create /data, so MNIST is downloaded into
        # the host's data folder, mounted writable, and is there for the next run and for nox.
        if download:
            data_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ContainerError(
            f"cannot create {exc.filename}: {exc.strerror}",
            hint="set KITBENCH_RESULTS (records) or KITBENCH_DATA (MNIST) to a writable folder",
        ) from None
    # The target's own folder, not the results root: the image's user need not be able to enter
    # the root (a folder of mode 700, a home directory), only the folder it writes to.
    mounts = [
        Mount(f"{RESULTS_INSIDE}/{target.name}", str(results_dir), type="bind"),
        Mount(DATA_INSIDE, str(data_root), type="bind", read_only=not download),
    ]
    # Records (and MNIST) owned by whoever ran kitbench, root included: the folders are the user's
    # own (`--data /etc` is one), so kitbench never changes their owner to suit the image's user.
    getuid = getattr(os, "getuid", None)  # absent on Windows, whose Docker maps no host uids
    user = None if getuid is None else f"{getuid()}:{os.getgid()}"
    gpus = gpu_options(target, DeviceRequest)
    # With GPUs asked for, a GPU that does not work is an error, never a quiet run on the CPU
    # (AMD GPUs are `cuda` devices to a HIP build too).
    if gpus and not any(a == "--device" or a.startswith("--device=") for a in run_args):
        run_args = ["--device", "cuda", *run_args]
    # The code in the image is the code built from this checkout a moment ago.
    environment = {
        "KITBENCH_IMAGE": result.tag,
        "KITBENCH_IMAGE_ID": result.image_id,
        "KITBENCH_BASE_IMAGE_ID": images.base_image_id(result),
        "KITBENCH_GIT_REV": git_revision() or "",
    }
    # The suite names its record (and MNIST) by their paths inside; the user needs the host's.
    inside = {RESULTS_INSIDE: results_dir.parent, DATA_INSIDE: data_root}
    lines = engine.Lines(lambda line: log(host_paths(line, inside)))
    # A chunk may end inside a multi-byte character.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with engine.errors(target, result.base_image):
        container = client.containers.create(
            result.tag,
            ["run", *run_args],
            mounts=mounts,
            user=user,
            environment=environment,
            **gpus,
            network_mode=os.environ.get(engine.NETWORK_VARIABLE),
            shm_size="1g",
        )
        try:
            # A refused start (no GPU runtime, driver too old) must not leave the container behind.
            container.start()
            for raw in container.logs(stream=True, follow=True):
                lines.feed(decoder.decode(raw))
            lines.feed(decoder.decode(b"", final=True))
            lines.flush()
            status: int = container.wait()["StatusCode"]
        finally:
            with contextlib.suppress(docker.errors.APIError):
                container.remove(force=True)
    # CUDA's 803/804 surface only in the suite's own output.
    known = engine.known("\n".join(lines.tail), target) if status != 0 else None
    if known is not None:
        raise known
    return status


AMD_DEVICES = ("/dev/kfd", "/dev/dri")  # ROCm's compute interface, and each GPU's render node


def gpu_options(target: Target, device_request: Callable[..., Any], dev: Path = Path("/dev")) -> dict[str, Any]:
    """The create() options that give the container the host's GPUs; none with ``KITBENCH_GPUS=none``.

    NVIDIA: a device request, which the NVIDIA Container Toolkit answers. AMD (a ROCm target):
    ROCm's docs pass the device nodes themselves (``--device=/dev/kfd --device=/dev/dri
    --group-add video``). The container runs as the host user, not as a member of the image's
    groups, so the groups added are those owning the nodes on this host (``render`` and ``video``,
    by id: their names and ids differ between distributions and the image may not know them).
    """
    if not preflight.gpus_requested():
        return {}
    if build(target.compute).kind == "rocm":
        nodes = [dev / "kfd", *sorted((dev / "dri").glob("*"))]
        groups = sorted({str(n.stat().st_gid) for n in nodes if n.is_char_device()}, key=int)
        return {"devices": [f"{d}:{d}:rwm" for d in AMD_DEVICES], "group_add": groups or ["video"]}
    return {"device_requests": [device_request(count=-1, capabilities=[["gpu"]])]}


def host_data(run_args: Sequence[str]) -> tuple[Path, bool, list[str]]:
    """Where MNIST is on the host for the run inside (``--data`` after ``--``, else
    KITBENCH_DATA or the cache), whether it must be downloaded there (a DataError with
    ``--offline``), and the run's arguments without ``--data``."""
    path, offline, rest = _data_arguments(run_args)
    root, download = data.locate(path, offline)
    return root.resolve(), download, rest


def _data_arguments(run_args: Sequence[str]) -> tuple[Path | None, bool, list[str]]:
    """``--data`` (a host path) and ``--offline`` from the arguments for the run inside, and
    those arguments without ``--data``: inside, the image's KITBENCH_DATA names the mount."""
    path, rest, words = None, [], iter(run_args)
    for word in words:
        if word == "--data":
            value = next(words, None)
            if value is None:
                raise ContainerError("--data after -- names no folder", hint="e.g. -- --data ~/datasets")
            path = Path(value)
        elif word.startswith("--data="):
            path = Path(word.partition("=")[2])
        else:
            rest.append(word)
    return path, "--offline" in rest, rest


def host_paths(line: str, mounts: dict[str, Path]) -> str:
    """``line`` with each mount point inside the container replaced by its folder on the host."""
    for inside, host in mounts.items():
        line = re.sub(rf"(?<![\w./-]){re.escape(inside)}(?=/|\s|$|[;,:)'\"])", str(host).replace("\\", "\\\\"), line)
    return line
