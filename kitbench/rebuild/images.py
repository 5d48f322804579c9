"""A docker target's image: its build context and arguments from the target's manifest, built (or
reused) through the engine, and its filesystem exported for runtimes without Docker.

The image is ``docker/Dockerfile`` with build arguments taken from the target's manifest; its venv gets
the target's lock (hash-checked) where there is one, else the pins resolved once.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kitbench import __version__, _files
from kitbench.environments import installer, locks
from kitbench.environments.targets import Target
from kitbench.errors import ContainerError, KitbenchError
from kitbench.heartbeat import Heartbeat
from kitbench.rebuild import engine
from kitbench.rebuild.engine import Log
from kitbench.records import manifest

APP_INSIDE = "/opt/kitbench"  # docker/Dockerfile copies app/ (the package and envs/) there
_DOCKERFILE = "docker/Dockerfile"


@dataclass(frozen=True)
class BuildResult:
    tag: str
    image_id: str
    base_image: str
    size_bytes: int
    arch: str | None = None  # the image's architecture, as Docker names it (amd64, arm64)


def image_tag(target: Target) -> str:
    return f"kitbench/{target.name}:{target.sha256[:12]}"


def base_image(target: Target) -> tuple[str, str | None]:
    """The base image to build FROM, by digest where the target declares one (a tag moves; a digest
    names one image), and a note where it does not."""
    override = os.environ.get(engine.BASE_VARIABLE)
    if override:
        return override, None
    if target.base_image is None:
        raise ContainerError(
            f"target {target.name!r} names no base image",
            hint=f"add image.base to {target.path} or set {engine.BASE_VARIABLE}",
        )
    if target.image_digest:
        return f"{target.base_image.partition('@')[0]}@{target.image_digest}", None
    return target.base_image, (
        f"{target.name}'s base image {target.base_image} is pulled by tag: the target "
        "declares no image.digest, so a rebuild may start from another image"
    )


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
        out = client.containers.run(
            image,
            ["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            remove=True,
            network_mode="none",
        )
    except Exception:  # no python3 there, or an image this engine cannot run: the build will say so
        return None
    text = out.decode(errors="replace").strip() if isinstance(out, bytes) else ""
    return text if re.fullmatch(r"3\.[0-9]{1,2}", text) else None


def _lock_env(install: installer.Install) -> dict[str, str]:
    """KITBENCH_LOCK (the lock's path inside the image, where app/ puts envs/) or KITBENCH_LOCK_WHY, and the
    index override in force (credentials removed), baked into the image: its runs' records name what their
    environment was installed from."""
    lock = install.record.get(locks.LOCK_VARIABLE)
    if lock:
        found = {"LOCK": f"{APP_INSIDE}/envs/locks/{Path(lock).name}", "LOCK_WHY": ""}
    else:
        found = {"LOCK": "", "LOCK_WHY": install.record.get(locks.LOCK_WHY_VARIABLE, "")}
    return {**found, "INDEX_OVERRIDE": install.record.get(installer.OVERRIDE_VARIABLE, "")}


def build_args(target: Target, install: installer.Install | None = None) -> dict[str, str]:
    """Every build argument, from the manifest and the documented overrides."""
    install = install or image_install(target)
    return {
        "BASE_IMAGE": base_image(target)[0],
        "TORCH": target.torch,
        # No index URL here (a build argument stays in the builder's history): they are in extra/pip.conf.
        "PIP_ARGS": " ".join(install.args("pip", "/build/extra")),
        "TARGET": target.name,
        "MANIFEST_SHA256": target.sha256,
        "KITBENCH_VERSION": __version__,
        **_lock_env(install),
    }


def context_tar(install: installer.Install | None = None) -> io.BytesIO:
    """The build context: the Dockerfile, ``app/`` (the checkout, or the installed
    package, as ``Dockerfile.dockerignore`` filters it, so the image gets it in one
    COPY), ``extra/ca-bundle.crt`` (empty unless ``KITBENCH_CA_BUNDLE`` names a file)
    ``extra/requirements.txt``, what the venv gets (``install``; empty without), and ``extra/pip.conf``, the
    indexes it comes from (``install``'s; a URL may carry a token: the builder stage alone reads it)."""
    engine.sdk()
    from docker.utils.build import exclude_paths

    folder = manifest.docker_dir()
    # From a checkout: the package, envs/ and metadata. From a wheel: the installed
    # package, which carries its envs/ inside (the same filter selects only it).
    source = manifest.checkout_root() or Path(__file__).resolve().parents[2]
    patterns = [
        line.strip()
        for line in (folder / "Dockerfile.dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    ca = b""
    if os.environ.get(engine.CA_VARIABLE):
        path = Path(os.environ[engine.CA_VARIABLE])
        try:
            ca = _files.read(path, 16 * 2**20, "CA bundle")
        except KitbenchError as exc:
            raise ContainerError(
                f"{engine.CA_VARIABLE}={path} cannot be read: {exc.message}",
                hint="point it at a PEM bundle, e.g. /etc/ssl/certs/ca-certificates.crt",
            ) from None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(str(folder / "Dockerfile"), arcname=_DOCKERFILE)
        for name in sorted(exclude_paths(str(source), patterns, dockerfile=_DOCKERFILE)):
            if name != _DOCKERFILE:
                tar.add(str(source / name), arcname=f"app/{name}", recursive=False)
        wanted = "".join(f"{line}\n" for line in install.requirements).encode() if install else b""
        indexes = install.pip_conf().encode() if install else b""
        for name, body in (
            ("extra/ca-bundle.crt", ca),
            ("extra/requirements.txt", wanted),
            ("extra/pip.conf", indexes),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            info.mode = 0o644
            tar.addfile(info, io.BytesIO(body))
    buffer.seek(0)
    return buffer


def follow_build(
    chunks: Iterable[dict[str, Any]], log: Log, *, target: Target | None = None, base: str | None = None
) -> str | None:
    """Stream a build's decoded chunks to ``log`` line by line; return the built
    image's id (None if the stream named none), or raise the build's error translated."""
    step = ""

    def log_line(line: str) -> None:
        nonlocal step
        if line.startswith("Step "):
            step = line
        log(line)

    lines = engine.Lines(log_line)
    image_id = None
    for chunk in chunks:
        if "stream" in chunk:
            lines.feed(chunk["stream"])
        if "error" in chunk:
            lines.flush()
            raise engine.translate(chunk["error"], target=target, step=step, tail=list(lines.tail), base=base)
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    lines.flush()
    return image_id


def build(target: Target, log: Log) -> BuildResult:
    """Build (or reuse from cache) the target's image, streaming the build log."""
    docker = engine.sdk()

    client = engine.client()
    override = os.environ.get(engine.BASE_VARIABLE)
    install = image_install(target, base_python(client, override) if override else None)
    args = build_args(target, install)
    tag = image_tag(target)
    note = base_image(target)[1]
    log(f"{target.name}: {install.what}" + (f"; {note}" if note else ""))
    warning = installer.override_warning(target, install.sources)
    if warning:
        log(f"warning: {warning}")
    with engine.errors(target, args["BASE_IMAGE"]):
        try:
            previous = client.images.get(tag).id
        except docker.errors.ImageNotFound:
            previous = None
        stream = client.api.build(
            fileobj=context_tar(install),
            custom_context=True,
            dockerfile=_DOCKERFILE,
            tag=tag,
            buildargs=args,
            decode=True,
            rm=True,
            forcerm=True,
            network_mode=os.environ.get(engine.NETWORK_VARIABLE),
        )
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
    docker = engine.sdk()

    client = engine.client()
    base = base_image(target)[0]
    with engine.errors(target, base):
        try:
            image = client.images.get(image_id)
        except docker.errors.ImageNotFound:
            return None
    return BuildResult(
        tag if tag in image.tags else image.id,
        image.id,
        base,
        image.attrs.get("Size", 0),
        image.attrs.get("Architecture"),
    )


def base_image_id(result: BuildResult) -> str:
    """The engine's id of the base ``result`` was built from: a record names it beside the image's."""
    return engine.image_id(engine.client(), result.base_image)


def export_rootfs(image_id: str, dest: Path, log: Log) -> list[str]:
    """The image's filesystem unpacked into ``dest`` (an OCI bundle's rootfs); return its
    environment (``Config.Env``), which a runtime without Docker must be told."""
    import subprocess

    docker = engine.sdk()

    client = engine.client()
    with engine.errors():
        image = client.images.get(image_id)
        container = client.containers.create(image_id, ["true"])
    partial = dest.with_name(dest.name + ".partial")
    try:
        partial.mkdir(parents=True, exist_ok=False)
    except FileExistsError:
        raise ContainerError(
            f"{partial} exists: another export is under way, or one was cut short",
            hint=f"wait for it, or remove {partial}",
        ) from None
    try:
        log(f"exporting {image.tags[0] if image.tags else image_id[:19]} into {dest} (once per image)")
        # tar, not tarfile: device nodes, hard links and ownership as the image has them, at disk speed.
        with subprocess.Popen(["tar", "-x", "-C", str(partial)], stdin=subprocess.PIPE) as untar:
            assert untar.stdin is not None
            with engine.errors():
                for chunk in container.export():
                    untar.stdin.write(chunk)
            untar.stdin.close()
        if untar.returncode != 0:
            raise ContainerError(
                f"unpacking the image into {partial} failed (tar exit {untar.returncode})",
                hint="is there room on the shared storage? a CUDA image is about 7 GB",
            )
        partial.rename(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)
    env: list[str] = image.attrs.get("Config", {}).get("Env") or []
    return env
