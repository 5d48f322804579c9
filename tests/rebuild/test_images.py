"""A target's image: build arguments and context from the manifest, and the build's stream followed,
its failures named (recorded build streams, a fake engine)."""

from __future__ import annotations

import dataclasses
import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from kitbench.environments import targets
from kitbench.errors import ContainerError
from kitbench.rebuild import engine, images


def _replay(resources: Path, name: str) -> tuple[list[str], ContainerError]:
    """A build stream recorded from a real engine (a vfs engine on a small tmpfs), fed
    through the same loop a real build uses."""
    import json

    chunks = [json.loads(line) for line in (resources / "docker" / name).read_text().splitlines()]
    lines: list[str] = []
    with pytest.raises(ContainerError) as caught:
        images.follow_build(chunks, lines.append, target=targets.get("cuda126"), base="t/base:1")
    return lines, caught.value


def test_full_disk_in_a_build_step_is_named_from_the_step_output(resources: Path) -> None:
    lines, error = _replay(resources, "build-no-space-in-step.jsonl")
    # One line, reassembled from four chunks, without the builder's colour codes.
    assert "head: error writing 'standard output': No space left on device" in lines
    assert not any("\x1b" in line for line in lines)
    assert error.message == "the Docker engine ran out of disk space"
    assert error.hint and "docker system prune" in error.hint and "vfs" in error.hint


def test_full_disk_refused_by_the_daemon(resources: Path) -> None:
    lines, error = _replay(resources, "build-no-space-daemon.jsonl")
    assert lines[-1].startswith("Step 2/3 : RUN python3 -m venv")
    assert error.message == "the Docker engine ran out of disk space"


def test_build_stream_without_error_gives_the_image_id() -> None:
    chunks = [
        {"stream": "Step 1/1 : FROM t/base:1"},
        {"stream": "\n ---> 10cc57a23fe8\n"},
        {"aux": {"ID": "sha256:10cc57a23fe8"}},
        {"stream": "Successfully built 10cc57a23fe8"},
    ]
    lines: list[str] = []
    assert images.follow_build(chunks, lines.append) == "sha256:10cc57a23fe8"
    assert lines == ["Step 1/1 : FROM t/base:1", " ---> 10cc57a23fe8", "Successfully built 10cc57a23fe8"]


def test_build_args_come_from_the_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_BASE_IMAGE", raising=False)
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)
    monkeypatch.delenv("KITBENCH_PYTORCH_INDEX", raising=False)
    target = targets.get("cuda118")
    args = images.build_args(target)
    assert args["BASE_IMAGE"] == target.base_image
    assert "by tag" in str(images.base_image(target)[1])  # no digest declared: said
    assert args["TORCH"] == target.torch and args["MANIFEST_SHA256"] == target.sha256
    # Without a lock, the pins (numpy 2.2.6 for its Python 3.10: envs/suite.yaml's python table); no index
    # in the arguments (a build argument stays in history): PyTorch's beside PyPI in extra/pip.conf.
    install = images.image_install(target)
    assert args["PIP_ARGS"] == "-r /build/extra/requirements.txt" and args["INDEX_OVERRIDE"] == ""
    assert install.pip_conf() == "[global]\nextra-index-url = https://download.pytorch.org/whl/cu118\n"
    assert args["LOCK"] == "" and "no lock for cuda118" in args["LOCK_WHY"]
    assert "torch==2.7.1" in install.requirements and "numpy==2.2.6" in install.requirements
    # A replaced base and an override: the image's records mark the override, without its credentials.
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", "local/base:1")
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://user:s3cret@mirror.example/simple")
    install = images.image_install(target, "3.11")
    args = images.build_args(target, install)
    assert (args["BASE_IMAGE"], args["PIP_ARGS"]) == ("local/base:1", "-r /build/extra/requirements.txt")
    assert args["LOCK"] == "" and "py3.11" in args["LOCK_WHY"]
    assert args["INDEX_OVERRIDE"] == "https://mirror.example/simple" and "s3cret" not in str(args)
    members = _members(images.context_tar(install))
    assert members["extra/pip.conf"] == b"[global]\nindex-url = https://user:s3cret@mirror.example/simple\n"


def test_the_base_image_is_pulled_by_digest_where_the_target_declares_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_BASE_IMAGE", raising=False)
    digest = "sha256:" + "ab" * 32
    target = dataclasses.replace(targets.get("cuda126"), image_digest=digest)
    assert images.base_image(target) == (f"nvidia/cuda:12.6.3-base-ubuntu22.04@{digest}", None)
    assert images.build_args(target)["BASE_IMAGE"].endswith(f"@{digest}")


def test_an_image_with_a_lock_installs_it_hash_checked(
    monkeypatch: pytest.MonkeyPatch, write_lock: Callable[..., Path]
) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    write_lock("cuda126", "2.9.1+cu126", cuda=True, python="3.10")
    target = targets.get("cuda126")
    install = images.image_install(target)
    assert install.hashed and all(" --hash=sha256:" in line for line in install.requirements)
    assert images.build_args(target, install)["PIP_ARGS"] == (
        "--no-deps --require-hashes -r /build/extra/requirements.txt"
    )
    members = _members(images.context_tar(install))
    assert members["extra/requirements.txt"].decode().splitlines() == install.requirements


def _members(buffer: io.BytesIO) -> dict[str, bytes]:
    with tarfile.open(fileobj=buffer) as tar:
        return {m.name: (tar.extractfile(m).read() if m.isfile() else b"") for m in tar.getmembers()}  # type: ignore[union-attr]


def test_context_holds_only_what_the_image_needs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KITBENCH_CA_BUNDLE", raising=False)
    members = _members(images.context_tar())
    assert {
        "docker/Dockerfile",
        "app/pyproject.toml",
        "app/envs/targets/cuda126.yaml",
        "app/kitbench/__main__.py",
    } <= set(members)
    assert not any(
        name.startswith(("app/tests", "app/.git", "app/results", "app/.nox", "app/docker")) for name in members
    )
    assert members["extra/ca-bundle.crt"] == b""
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("KITBENCH_CA_BUNDLE", str(bundle))
    assert _members(images.context_tar())["extra/ca-bundle.crt"] == bundle.read_bytes()


def test_unreadable_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_CA_BUNDLE", "/nonexistent/ca.pem")
    with pytest.raises(ContainerError, match=r"KITBENCH_CA_BUNDLE=/nonexistent/ca\.pem cannot be read"):
        images.context_tar()


def test_stopped_daemon_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(ContainerError) as caught:
        images.build(targets.get("cuda126"), log=lambda line: None)
    assert caught.value.message == "cannot reach the Docker daemon"


def test_a_silent_build_step_still_logs_a_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel downloading inside a RUN step prints nothing; the build log must not go quiet."""
    import time

    import docker

    from kitbench import heartbeat

    class Images:
        def get(self, name: str) -> object:
            if name == "sha256:10cc":
                return type("Image", (), {"id": "sha256:10cc", "attrs": {"Size": 1, "Architecture": "amd64"}})()
            raise docker.errors.ImageNotFound("none yet")

    class Api:
        def build(self, **options: object) -> object:
            yield {"stream": "Step 10/23 : RUN pip install torch\n"}
            time.sleep(0.5)  # pip downloading 900 MB, silently
            yield {"aux": {"ID": "sha256:10cc"}}

    fake = type("Engine", (), {"images": Images(), "api": Api()})()
    monkeypatch.setattr(engine, "client", lambda: fake)
    monkeypatch.setattr(heartbeat, "EVERY_S", 0.15)
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", "t/base:1")
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)  # CI's override adds its warning first
    lines: list[str] = []
    result = images.build(targets.get("cuda126"), lines.append)
    assert (result.image_id, result.arch) == ("sha256:10cc", "amd64")
    said = lines.pop(0)  # what the image installs, first
    # The fake engine runs no container to ask the base's Python: the target's 3.10, and its pins (no lock).
    assert said.startswith("cuda126: no usable lock (no lock for cuda126 on linux-") and "resolving the pins" in said
    assert lines[0] == "Step 10/23 : RUN pip install torch"
    assert len(lines) >= 2 and all(
        line.startswith(f"... building {result.tag}: still at Step 10/23 : RUN pip install torch after ")
        for line in lines[1:]
    )
