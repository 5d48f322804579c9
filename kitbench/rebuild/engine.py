"""The Docker engine as kitbench talks to it: the SDK found (never the checkout's docker/ folder),
a client, and the engine's raw failures translated into one line and a hint.

``translate`` is a pure function tested against recorded daemon messages; the build and the run both
stream the engine's output through ``Lines``, whose last lines an error names.
"""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from kitbench._installed import optional_hint
from kitbench.environments.targets import Target
from kitbench.errors import ContainerError, MissingDependency

BASE_VARIABLE = "KITBENCH_BASE_IMAGE"
CA_VARIABLE = "KITBENCH_CA_BUNDLE"
NETWORK_VARIABLE = "KITBENCH_DOCKER_NETWORK"
_TAIL = 12  # lines of build log kept for an error
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colour codes the builder wraps a step's stderr in
Log = Callable[[str], None]


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


def client() -> Any:
    docker = sdk()
    with errors():
        client = docker.from_env()
        client.ping()
    return client


class Lines:
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


@contextlib.contextmanager
def errors(target: Target | None = None, base: str | None = None) -> Iterator[None]:
    """Any error the engine answers with, as one translated line rather than the SDK's traceback."""
    docker = sdk()

    try:
        yield
    except docker.errors.APIError as exc:
        raise translate(str(exc.explanation or exc), target=target, base=base) from None
    except docker.errors.DockerException as exc:
        raise translate(str(exc), target=target, base=base) from None


def image_id(client: Any, name: str) -> str:
    """The local id of an image (the base a build started from), or "" when the engine has none by that name."""
    docker = sdk()

    try:
        return str(client.images.get(name).id)
    except docker.errors.DockerException:
        return ""


_RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str], dict[str, Any]], tuple[str, str]]]] = [
    # First: a full disk fails whichever step it hits, and a build step's own output may be the only place it shows.
    (
        re.compile(r"no space left on device", re.I),
        lambda m, c: (
            "the Docker engine ran out of disk space",
            "free space where it keeps its data (docker system df; docker system prune; docker info names "
            "its root dir and storage driver): a CUDA target's image is about 7 GB, and the vfs storage "
            "driver copies the whole filesystem for every layer and container, overlay2 shares them",
        ),
    ),
    (
        re.compile(r"Error while fetching server API version|Cannot connect to the Docker daemon"),
        lambda m, c: (
            "cannot reach the Docker daemon",
            "start it (systemctl start docker, or dockerd), check DOCKER_HOST, or join the docker group",
        ),
    ),
    (
        re.compile(r'could not select device driver "[^"]*" with capabilities: \[\[gpu\]\]'),
        lambda m, c: (
            "Docker has no NVIDIA GPU runtime: the NVIDIA Container Toolkit is missing or not configured",
            "install nvidia-container-toolkit and run `nvidia-ctk runtime configure --runtime=docker`, "
            "then restart docker; or set KITBENCH_GPUS=none to run the image on the CPU",
        ),
    ),
    (
        re.compile(r'error gathering device information while adding custom device "(/dev/(?:kfd|dri)[^"]*)"'),
        lambda m, c: (
            f"this host has no {m.group(1)}: the amdgpu kernel driver is not loaded, so Docker has no AMD GPU "
            f"to give the container",
            "install the amdgpu driver (amdgpu-dkms) and check `ls -l /dev/kfd /dev/dri`; "
            "or set KITBENCH_GPUS=none to run the image on the CPU",
        ),
    ),
    (
        re.compile(r"unsatisfied condition: cuda>=([0-9]+\.[0-9]+)"),
        lambda m, c: (
            f"the host NVIDIA driver is too old for this image's CUDA {m.group(1)} "
            f"(the container toolkit refused NVIDIA_REQUIRE_CUDA)",
            c["fit"],
        ),
    ),
    (
        re.compile(r"(Error 803|error 803|unsupported display driver / cuda driver combination)"),
        lambda m, c: (
            "CUDA error 803: the host driver does not support this image's CUDA "
            "(system has unsupported display driver / cuda driver combination)",
            c["fit"],
        ),
    ),
    (
        re.compile(r"(Error 804|error 804|forward compatibility was attempted on non supported HW)"),
        lambda m, c: (
            "CUDA error 804: forward compatibility was attempted on a GPU that does not support it",
            c["fit"],
        ),
    ),
    (
        re.compile(
            r"(pull access denied for ([^,\s]+)|manifest for (\S+) not found|"
            r"repository (\S+) not found|failed to resolve reference|dial tcp: lookup \S+)",
            re.I,
        ),
        lambda m, c: (
            f"base image {c['base']} is not on this machine and cannot be pulled",
            f"docker pull it where a registry is reachable, or set {BASE_VARIABLE} to a local image",
        ),
    ),
    # Before the generic step failure: pip, apt and curl each word a failed name lookup their own way.
    (
        re.compile(
            r"Temporary failure in name resolution|Temporary failure resolving|Name or service not known|"
            r"Could not resolve host|No address associated with hostname",
            re.I,
        ),
        lambda m, c: (
            f"a build step could not reach the network (name resolution failed): {c['step'] or 'a RUN step'}",
            f"builds use Docker's default network; where only the host's network reaches out (no bridge, "
            f"a proxy on the host) set {NETWORK_VARIABLE}=host, and behind a TLS-re-signing proxy also "
            f"{CA_VARIABLE}=/path/to/ca-bundle.crt",
        ),
    ),
    (
        re.compile(r"The command '(.+)' returned a non-zero code: ([0-9]+)", re.S),
        lambda m, c: (
            f"build step failed (exit {m.group(2)}): {c['step'] or m.group(1)[:120]}",
            "last lines of the build log:\n  " + "\n  ".join(c["tail"]),
        ),
    ),
]


def _fit_hint(target: Target | None) -> str:
    """Which docker targets an older driver can still run, from the manifests and driver table."""
    from kitbench.environments import targets
    from kitbench.machine import drivers
    from kitbench.machine.versions import parse_cuda

    if target is None or target.cuda is None:
        return "update the NVIDIA driver"
    older = sorted(
        (
            t
            for t in targets.load_all().values()
            if t.kind == "docker" and t.cuda and parse_cuda(t.cuda) < parse_cuda(target.cuda)
        ),
        key=lambda t: parse_cuda(t.cuda or "0.0"),
        reverse=True,
    )
    options = [f"nox -s {t.name} (driver >= {drivers.load().requirement(t.cuda or '').floor})" for t in older]
    return "update the NVIDIA driver" + (f", or use an older CUDA target: {'; '.join(options)}" if options else "")


def _context(
    target: Target | None, step: str = "", tail: Sequence[str] = (), base: str | None = None
) -> dict[str, Any]:
    return {"fit": _fit_hint(target), "step": step, "tail": list(tail), "base": base or "(unknown)"}


def known(message: str, target: Target | None = None) -> ContainerError | None:
    """The cause ``message`` names, where it is one of the known ones (a container's own output: CUDA's
    803 and 804 surface only there), else None."""
    return _known(message, _context(target))


def _known(message: str, context: dict[str, Any]) -> ContainerError | None:
    for pattern, explain in _RULES:
        match = pattern.search(message)
        if match:
            text, hint = explain(match, context)
            return ContainerError(text, hint=hint)
    return None


def translate(
    message: str, *, target: Target | None = None, step: str = "", tail: Sequence[str] = (), base: str | None = None
) -> ContainerError:
    """Docker's raw error text (and the build log's last lines, which may name the cause)
    -> one line and a hint; unknown text passes through as one line."""
    known = _known("\n".join((message, *tail)), _context(target, step, tail, base))
    if known is not None:
        return known
    first = next((line for line in message.splitlines() if line.strip()), "unknown error")
    # "above" only where a build log was streamed; its last lines come along either way.
    hint = (
        "\n  ".join(["see the log above", *tail]) if tail else "that is all docker said; docker info checks the engine"
    )
    return ContainerError(f"docker: {first.strip()[:300]}", hint=hint)
