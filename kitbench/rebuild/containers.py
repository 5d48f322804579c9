"""Build and run a docker target's image through the docker SDK.

The image is ``docker/Dockerfile`` with build arguments taken from the
target's manifest; the suite runs inside it with all GPUs requested (NVIDIA's through
the container toolkit, AMD's as device nodes), MNIST
mounted read-only and the results directory mounted, and writes its record
there. Docker's raw failures are translated into one line and a hint by
``translate``, a pure function tested against recorded daemon messages.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import re
import shutil
import tarfile
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kitbench import __version__
from kitbench.environments import installer, locks, preflight
from kitbench.environments.targets import Target
from kitbench.errors import ContainerError, MissingDependency, optional_hint
from kitbench.heartbeat import Heartbeat
from kitbench.records import manifest
from kitbench.records import record as records
from kitbench.suite import data
from kitbench.suite.fingerprint import git_revision

BASE_VARIABLE = "KITBENCH_BASE_IMAGE"
APP_INSIDE = "/opt/kitbench"          # docker/Dockerfile copies app/ (the package and envs/) there
CA_VARIABLE = "KITBENCH_CA_BUNDLE"
NETWORK_VARIABLE = "KITBENCH_DOCKER_NETWORK"
RESULTS_INSIDE = "/results"     # the Dockerfile's KITBENCH_RESULTS
DATA_INSIDE = "/data"           # and KITBENCH_DATA
_TAIL = 12                      # lines of build log kept for an error
_DOCKERFILE = "docker/Dockerfile"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")   # the colour codes the builder wraps a step's stderr in
Log = Callable[[str], None]


@dataclass(frozen=True)
class BuildResult:
    tag: str
    image_id: str
    base_image: str
    size_bytes: int
    arch: str | None = None     # the image's architecture, as Docker names it (amd64, arm64)


def sdk() -> Any:
    """The docker SDK. Without it, ``import docker`` run from a checkout finds the repository's
    ``docker/`` folder as a namespace package (no ``__file__``, no ``errors``): that is the
    SDK missing too, not an AttributeError later."""
    import importlib

    try:
        docker = importlib.import_module("docker")
    except ModuleNotFoundError:
        docker = None
    if getattr(docker, "__file__", None) is None or not hasattr(docker, "errors"):
        found = f" (`import docker` found the folder {next(iter(docker.__path__))})" if docker is not None else ""
        raise MissingDependency("docker", "building and running images", f"{optional_hint('docker')}{found}")
    return docker


def _client() -> Any:
    docker = sdk()
    with _engine_errors():
        client = docker.from_env()
        client.ping()
    return client


def image_tag(target: Target) -> str:
    return f"kitbench/{target.name}:{target.sha256[:12]}"


def base_image(target: Target) -> tuple[str, str | None]:
    """The base image to build FROM, by digest where the target declares one (a tag moves; a digest
    names one image), and a note where it does not."""
    override = os.environ.get(BASE_VARIABLE)
    if override:
        return override, None
    if target.base_image is None:
        raise ContainerError(f"target {target.name!r} names no base image",
                             hint=f"add image.base to {target.path} or set {BASE_VARIABLE}")
    if target.image_digest:
        return f"{target.base_image.partition('@')[0]}@{target.image_digest}", None
    return target.base_image, (f"{target.name}'s base image {target.base_image} is pulled by tag: the target "
                               "declares no image.digest, so a rebuild may start from another image")


def image_install(target: Target, python: str | None = None) -> installer.Install:
    """What the image's venv gets: the lock for this host's architecture and the image's Python (every
    transitive dependency pinned and hash-checked), else the pins resolved once. ``python``: the base's
    own, where ``KITBENCH_BASE_IMAGE`` replaced the target's (a lock's wheels are for one Python)."""
    import platform

    from kitbench.machine.probe import normalize_arch

    arch = normalize_arch(platform.machine(), "linux")
    return installer.suite(target, f"linux-{arch}-py{python or target.python}", "linux")


def base_python(client: Any, image: str) -> str | None:
    """The X.Y of ``python3`` in a replaced base image (CI's Debian has 3.11 where the target's Ubuntu has
    3.10); None where it has none (nvidia/cuda: the Dockerfile installs the distribution's, the target's)."""
    try:
        out = client.containers.run(image, ["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                    remove=True, network_mode="none")
    except Exception:       # no python3 there, or an image this engine cannot run: the build will say so
        return None
    text = out.decode(errors="replace").strip() if isinstance(out, bytes) else ""
    return text if re.fullmatch(r"3\.[0-9]{1,2}", text) else None


def _lock_env(install: installer.Install) -> dict[str, str]:
    """KITBENCH_LOCK (the lock's path inside the image, where app/ puts envs/) or KITBENCH_LOCK_WHY, baked
    into the image: its runs' records name what their environment was installed from."""
    lock = install.record.get(locks.LOCK_VARIABLE)
    if lock:
        return {"LOCK": f"{APP_INSIDE}/envs/locks/{Path(lock).name}", "LOCK_WHY": ""}
    return {"LOCK": "", "LOCK_WHY": install.record.get(locks.LOCK_WHY_VARIABLE, "")}


def build_args(target: Target, install: installer.Install | None = None) -> dict[str, str]:
    """Every build argument, from the manifest and the documented overrides."""
    install = install or image_install(target)
    return {
        "BASE_IMAGE": base_image(target)[0],
        "TORCH": target.torch,
        "PIP_ARGS": " ".join(install.args("pip", "/build/extra/requirements.txt")),
        "TARGET": target.name,
        "MANIFEST_SHA256": target.sha256,
        "KITBENCH_VERSION": __version__,
        **_lock_env(install),
    }


def context_tar(install: installer.Install | None = None) -> io.BytesIO:
    """The build context: the Dockerfile, ``app/`` (the checkout, or the installed
    package, as ``Dockerfile.dockerignore`` filters it, so the image gets it in one
    COPY), ``extra/ca-bundle.crt`` (empty unless ``KITBENCH_CA_BUNDLE`` names a file)
    and ``extra/requirements.txt``, what the venv gets (``install``; empty without)."""
    sdk()
    from docker.utils.build import exclude_paths

    folder = manifest.docker_dir()
    # From a checkout: the package, envs/ and metadata. From a wheel: the installed
    # package, which carries its envs/ inside (the same filter selects only it).
    source = manifest.checkout_root() or Path(__file__).resolve().parents[2]
    patterns = [line.strip() for line in (folder / "Dockerfile.dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    ca = b""
    if os.environ.get(CA_VARIABLE):
        path = Path(os.environ[CA_VARIABLE])
        try:
            ca = path.read_bytes()
        except OSError as exc:
            raise ContainerError(f"{CA_VARIABLE}={path} cannot be read: {exc.strerror}",
                                 hint="point it at a PEM bundle, e.g. /etc/ssl/certs/ca-certificates.crt") from None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(folder / "Dockerfile"), arcname=_DOCKERFILE)
        for name in sorted(exclude_paths(str(source), patterns, dockerfile=_DOCKERFILE)):
            if name != _DOCKERFILE:
                tar.add(str(source / name), arcname=f"app/{name}", recursive=False)
        wanted = "".join(f"{line}\n" for line in install.requirements).encode() if install else b""
        for name, body in (("extra/ca-bundle.crt", ca), ("extra/requirements.txt", wanted)):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(body))
    buffer.seek(0)
    return buffer


class _Lines:
    """Text that arrives in chunks, as whole lines without colour codes (the
    builder sends one line in several chunks, each wrapped in codes). Each line
    goes to ``log``; the last ones are kept for an error."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.tail: deque[str] = deque(maxlen=_TAIL)
        self._partial = ""

    def feed(self, text: str) -> None:
        *complete, self._partial = (self._partial + text).split("\n")
        for line in complete:
            self._emit(line)

    def flush(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = ""

    def _emit(self, raw: str) -> None:
        line = _ANSI.sub("", raw).rstrip()
        if line.strip():
            self.tail.append(line)
            self.log(line)


def follow_build(chunks: Iterable[dict[str, Any]], log: Log, *, target: Target | None = None,
                 base: str | None = None) -> str | None:
    """Stream a build's decoded chunks to ``log`` line by line; return the built
    image's id (None if the stream named none), or raise the build's error translated."""
    step = ""

    def log_line(line: str) -> None:
        nonlocal step
        if line.startswith("Step "):
            step = line
        log(line)

    lines = _Lines(log_line)
    image_id = None
    for chunk in chunks:
        if "stream" in chunk:
            lines.feed(chunk["stream"])
        if "error" in chunk:
            lines.flush()
            raise translate(chunk["error"], target=target, step=step, tail=list(lines.tail), base=base)
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    lines.flush()
    return image_id


@contextlib.contextmanager
def _engine_errors(target: Target | None = None, base: str | None = None) -> Iterator[None]:
    """Any error the engine answers with, as one translated line rather than the SDK's traceback."""
    docker = sdk()

    try:
        yield
    except docker.errors.APIError as exc:
        raise translate(str(exc.explanation or exc), target=target, base=base) from None
    except docker.errors.DockerException as exc:
        raise translate(str(exc), target=target, base=base) from None


def build(target: Target, log: Log) -> BuildResult:
    """Build (or reuse from cache) the target's image, streaming the build log."""
    docker = sdk()

    client = _client()
    override = os.environ.get(BASE_VARIABLE)
    install = image_install(target, base_python(client, override) if override else None)
    args = build_args(target, install)
    tag = image_tag(target)
    note = base_image(target)[1]
    log(f"{target.name}: {install.what}" + (f"; {note}" if note else ""))
    with _engine_errors(target, args["BASE_IMAGE"]):
        try:
            previous = client.images.get(tag).id
        except docker.errors.ImageNotFound:
            previous = None
        stream = client.api.build(fileobj=context_tar(install), custom_context=True, dockerfile=_DOCKERFILE,
                                  tag=tag, buildargs=args, decode=True, rm=True, forcerm=True,
                                  network_mode=os.environ.get(NETWORK_VARIABLE))
        # A base image pulling or a wheel downloading inside a RUN step prints nothing for minutes.
        last = [f"Step 1: FROM {args['BASE_IMAGE']}"]
        with Heartbeat(lambda s: log(f"... building {tag}: still at {last[0][:100]} after {s:.0f} s")) as beat:
            def shown(line: str) -> None:
                log(line)
                beat.beat()
                if line.startswith("Step "):
                    last[0] = line

            image_id = follow_build(stream, shown, target=target, base=args["BASE_IMAGE"])
        image = client.images.get(image_id or tag)
        if previous not in (None, image.id):
            # The image this build superseded: on copy-per-layer storage (vfs) each one holds gigabytes.
            with contextlib.suppress(docker.errors.APIError):
                client.images.remove(previous)
    return BuildResult(tag, image.id, args["BASE_IMAGE"], image.attrs.get("Size", 0), image.attrs.get("Architecture"))


def existing(image_id: str, tag: str, target: Target) -> BuildResult | None:
    """The image ``image_id`` where this engine still has it (a replay reuses it instead of
    building anew); named by ``tag`` while that tag still points at it."""
    docker = sdk()

    client = _client()
    base = base_image(target)[0]
    with _engine_errors(target, base):
        try:
            image = client.images.get(image_id)
        except docker.errors.ImageNotFound:
            return None
    return BuildResult(tag if tag in image.tags else image.id, image.id, base, image.attrs.get("Size", 0),
                       image.attrs.get("Architecture"))


def run(target: Target, result: BuildResult, run_args: Sequence[str], log: Log) -> int:
    """Run the suite in the image; return the container's exit status."""
    docker = sdk()
    from docker.types import DeviceRequest, Mount

    client = _client()
    results_dir = records.results_root().resolve() / target.name
    data_root, download, run_args = host_data(run_args)
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        # A fresh machine: the image's user cannot create /data, so MNIST is downloaded into
        # the host's data folder, mounted writable, and is there for the next run and for nox.
        if download:
            data_root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ContainerError(f"cannot create {exc.filename}: {exc.strerror}", hint="set KITBENCH_RESULTS (records) "
                             "or KITBENCH_DATA (MNIST) to a writable folder") from None
    # The target's own folder, not the results root: the image's user need not be able to enter
    # the root (a folder of mode 700, a home directory), only the folder it writes to.
    mounts = [Mount(f"{RESULTS_INSIDE}/{target.name}", str(results_dir), type="bind"),
              Mount(DATA_INSIDE, str(data_root), type="bind", read_only=not download)]
    # Records (and MNIST) owned by whoever ran kitbench, root included: the folders are the user's
    # own (`--data /etc` is one), so kitbench never changes their owner to suit the image's user.
    getuid = getattr(os, "getuid", None)      # absent on Windows, whose Docker maps no host uids
    user = None if getuid is None else f"{getuid()}:{os.getgid()}"
    gpus = gpu_options(target, DeviceRequest)
    # With GPUs asked for, a GPU that does not work is an error, never a quiet run on the CPU
    # (AMD GPUs are `cuda` devices to a HIP build too).
    if gpus and not any(a == "--device" or a.startswith("--device=") for a in run_args):
        run_args = ["--device", "cuda", *run_args]
    # The code in the image is the code built from this checkout a moment ago.
    environment = {"KITBENCH_IMAGE": result.tag, "KITBENCH_IMAGE_ID": result.image_id,
                   "KITBENCH_BASE_IMAGE_ID": base_image_id(result),
                   "KITBENCH_GIT_REV": git_revision() or ""}
    # The suite names its record (and MNIST) by their paths inside; the user needs the host's.
    lines = _Lines(lambda line: log(host_paths(line, {RESULTS_INSIDE: results_dir.parent, DATA_INSIDE: data_root})))
    # A chunk may end inside a multi-byte character.
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    with _engine_errors(target, result.base_image):
        container = client.containers.create(result.tag, ["run", *run_args], mounts=mounts, user=user,
                                             environment=environment, **gpus,
                                             network_mode=os.environ.get(NETWORK_VARIABLE), shm_size="1g")
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
    known = _known("\n".join(lines.tail), _context(target)) if status != 0 else None
    if known is not None:
        raise known
    return status


AMD_DEVICES = ("/dev/kfd", "/dev/dri")     # ROCm's compute interface, and each GPU's render node


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
    if target.compute.startswith("rocm"):
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


def base_image_id(result: BuildResult) -> str:
    """The engine's id of the base ``result`` was built from: a record names it beside the image's."""
    return _image_id(_client(), result.base_image)


def _image_id(client: Any, name: str) -> str:
    """The local id of an image (the base a build started from), or "" when the engine has none by that name."""
    import docker

    try:
        return str(client.images.get(name).id)
    except docker.errors.DockerException:
        return ""


def export_rootfs(image_id: str, dest: Path, log: Log) -> list[str]:
    """The image's filesystem unpacked into ``dest`` (an OCI bundle's rootfs); return its
    environment (``Config.Env``), which a runtime without Docker must be told."""
    import subprocess

    docker = sdk()

    client = _client()
    with _engine_errors():
        image = client.images.get(image_id)
        container = client.containers.create(image_id, ["true"])
    partial = dest.with_name(dest.name + ".partial")
    try:
        partial.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise ContainerError(f"{partial} exists: another export is under way, or one was cut short",
                             hint=f"wait for it, or remove {partial}") from None
    try:
        log(f"exporting {image.tags[0] if image.tags else image_id[:19]} into {dest} (once per image)")
        # tar, not tarfile: device nodes, hard links and ownership as the image has them, at disk speed.
        with subprocess.Popen(["tar", "-x", "-C", str(partial)], stdin=subprocess.PIPE) as untar:
            assert untar.stdin is not None
            with _engine_errors():
                for chunk in container.export():
                    untar.stdin.write(chunk)
            untar.stdin.close()
        if untar.returncode != 0:
            raise ContainerError(f"unpacking the image into {partial} failed (tar exit {untar.returncode})",
                                 hint="is there room on the shared storage? a CUDA image is about 7 GB")
        partial.rename(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)
    env: list[str] = image.attrs.get("Config", {}).get("Env") or []
    return env


_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str], dict[str, Any]], tuple[str, str]]]] = [
    # First: a full disk fails whichever step it hits, and a build step's own output may be the only place it shows.
    (re.compile(r"no space left on device", re.I),
     lambda m, c: ("the Docker engine ran out of disk space",
                   "free space where it keeps its data (docker system df; docker system prune; docker info names "
                   "its root dir and storage driver): a CUDA target's image is about 7 GB, and the vfs storage "
                   "driver copies the whole filesystem for every layer and container, overlay2 shares them")),
    (re.compile(r"Error while fetching server API version|Cannot connect to the Docker daemon"),
     lambda m, c: ("cannot reach the Docker daemon",
                   "start it (systemctl start docker, or dockerd), check DOCKER_HOST, or join the docker group")),
    (re.compile(r'could not select device driver "[^"]*" with capabilities: \[\[gpu\]\]'),
     lambda m, c: ("Docker has no NVIDIA GPU runtime: the NVIDIA Container Toolkit is missing or not configured",
                   "install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
                   "then restart docker; or set KITBENCH_GPUS=none to run the image on the CPU")),
    (re.compile(r'error gathering device information while adding custom device "(/dev/(?:kfd|dri)[^"]*)"'),
     lambda m, c: (f"this host has no {m.group(1)}: the amdgpu kernel driver is not loaded, so Docker has no AMD GPU "
                   f"to give the container",
                   "install the amdgpu driver (amdgpu-dkms) and check `ls -l /dev/kfd /dev/dri`; "
                   "or set KITBENCH_GPUS=none to run the image on the CPU")),
    (re.compile(r"unsatisfied condition: cuda>=([0-9]+\.[0-9]+)"),
     lambda m, c: (f"the host NVIDIA driver is too old for this image's CUDA {m.group(1)} "
                   f"(the container toolkit refused NVIDIA_REQUIRE_CUDA)", c["fit"])),
    (re.compile(r"(Error 803|error 803|unsupported display driver / cuda driver combination)"),
     lambda m, c: ("CUDA error 803: the host driver does not support this image's CUDA "
                   "(system has unsupported display driver / cuda driver combination)", c["fit"])),
    (re.compile(r"(Error 804|error 804|forward compatibility was attempted on non supported HW)"),
     lambda m, c: ("CUDA error 804: forward compatibility was attempted on a GPU that does not support it",
                   c["fit"])),
    (re.compile(r"(pull access denied for ([^,\s]+)|manifest for (\S+) not found|"
                r"repository (\S+) not found|failed to resolve reference|dial tcp: lookup \S+)", re.I),
     lambda m, c: (f"base image {c['base']} is not on this machine and cannot be pulled",
                   f"docker pull it where a registry is reachable, or set {BASE_VARIABLE} to a local image")),
    # Before the generic step failure: pip, apt and curl each word a failed name lookup their own way.
    (re.compile(r"Temporary failure in name resolution|Temporary failure resolving|Name or service not known|"
                r"Could not resolve host|No address associated with hostname", re.I),
     lambda m, c: (f"a build step could not reach the network (name resolution failed): {c['step'] or 'a RUN step'}",
                   f"builds use Docker's default network; where only the host's network reaches out (no bridge, "
                   f"a proxy on the host) set {NETWORK_VARIABLE}=host, and behind a TLS-re-signing proxy also "
                   f"{CA_VARIABLE}=/path/to/ca-bundle.crt")),
    (re.compile(r"The command '(.+)' returned a non-zero code: ([0-9]+)", re.S),
     lambda m, c: (f"build step failed (exit {m.group(2)}): {c['step'] or m.group(1)[:120]}",
                   "last lines of the build log:\n  " + "\n  ".join(c["tail"]))),
]


def _fit_hint(target: Target | None) -> str:
    """Which docker targets an older driver can still run, from the manifests and driver table."""
    from kitbench.environments import targets
    from kitbench.machine import drivers
    from kitbench.machine.versions import parse_cuda

    if target is None or target.cuda is None:
        return "update the NVIDIA driver"
    older = sorted((t for t in targets.load_all().values()
                    if t.kind == "docker" and t.cuda and parse_cuda(t.cuda) < parse_cuda(target.cuda)),
                   key=lambda t: parse_cuda(t.cuda or "0.0"), reverse=True)
    options = [f"nox -s {t.name} (driver >= {drivers.load().requirement(t.cuda or '').floor})" for t in older]
    return "update the NVIDIA driver" + (f", or use an older CUDA target: {'; '.join(options)}" if options else "")


def _context(target: Target | None, step: str = "", tail: Sequence[str] = (),
             base: str | None = None) -> dict[str, Any]:
    return {"fit": _fit_hint(target), "step": step, "tail": list(tail), "base": base or "(unknown)"}


def _known(message: str, context: dict[str, Any]) -> ContainerError | None:
    for pattern, explain in _RULES:
        match = pattern.search(message)
        if match:
            text, hint = explain(match, context)
            return ContainerError(text, hint=hint)
    return None


def translate(message: str, *, target: Target | None = None, step: str = "", tail: Sequence[str] = (),
              base: str | None = None) -> ContainerError:
    """Docker's raw error text (and the build log's last lines, which may name the cause)
    -> one line and a hint; unknown text passes through as one line."""
    known = _known("\n".join((message, *tail)), _context(target, step, tail, base))
    if known is not None:
        return known
    first = next((line for line in message.splitlines() if line.strip()), "unknown error")
    # "above" only where a build log was streamed; its last lines come along either way.
    hint = ("\n  ".join(["see the log above", *tail]) if tail else
            "that is all docker said; docker info checks the engine")
    return ContainerError(f"docker: {first.strip()[:300]}", hint=hint)
