"""The suite run in a target's container (a fake engine: mounts, GPUs, host paths, owners), and the
failures a real engine can show here, building and running."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

import pytest

from kitbench.environments import targets
from kitbench.errors import ContainerError
from kitbench.rebuild import containers, engine, images

BASE = os.environ.get("KITBENCH_TEST_BASE_IMAGE", "kitbench-ci/debian:bookworm")


def _engine() -> None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:
        pytest.skip(f"no Docker engine reachable here ({type(exc).__name__})")


def _has_image(name: str) -> bool:
    done = subprocess.run(["docker", "image", "inspect", name], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.docker
def test_real_engine_unknown_base_image(monkeypatch: pytest.MonkeyPatch) -> None:
    _engine()
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", "kitbench-test/no-such-image:0")
    with pytest.raises(ContainerError) as caught:
        images.build(targets.get("cuda126"), log=lambda line: None)
    assert caught.value.message == (
        "base image kitbench-test/no-such-image:0 is not on this machine and cannot be pulled"
    )


@pytest.mark.docker
def test_real_engine_failing_build_step_names_step_and_log(monkeypatch: pytest.MonkeyPatch) -> None:
    _engine()
    if not _has_image(BASE):
        pytest.skip(f"base image {BASE} not built here (.ci/run makes it with debootstrap)")
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", BASE)
    monkeypatch.setenv("KITBENCH_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens: pip fails
    monkeypatch.setenv("KITBENCH_DOCKER_NETWORK", "host")
    with pytest.raises(ContainerError) as caught:
        images.build(targets.get("cuda126"), log=lambda line: None)
    assert caught.value.message.startswith("build step failed (exit 1): Step ")
    assert "RUN set -e" in caught.value.message
    assert caught.value.hint and "last lines of the build log" in caught.value.hint


@pytest.mark.docker
def test_real_engine_without_gpu_runtime_says_so_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _engine()
    import docker

    client = docker.from_env()
    if "nvidia" in client.info().get("Runtimes", {}):
        pytest.skip("this engine has the NVIDIA runtime, so a GPU request is not refused")
    target = targets.get("cuda126")
    tag = images.image_tag(target)
    if not _has_image(tag):
        pytest.skip(f"image {tag} not built here (.ci/run builds it with nox -s cuda126)")
    monkeypatch.delenv("KITBENCH_GPUS", raising=False)
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("KITBENCH_DOCKER_NETWORK", "host")
    image = client.images.get(tag)
    result = images.BuildResult(tag, image.id, "(test)", 0)
    with pytest.raises(ContainerError) as caught:
        containers.run(target, result, ["--check", "availability"], log=lambda line: None)
    assert caught.value.message.startswith("Docker has no NVIDIA GPU runtime")
    # Ours only (its results folder is this test's): other tests run containers on the same engine meanwhile.
    ours = [
        c.id
        for c in client.containers.list(all=True)
        if any(m.get("Source", "").startswith(str(tmp_path)) for m in c.attrs.get("Mounts", []))
    ]
    assert ours == []


@pytest.mark.docker
def test_built_image_keeps_no_ca_bundle_and_runs_as_non_root() -> None:
    _engine()
    import docker

    tag = images.image_tag(targets.get("cuda126"))
    if not _has_image(tag):
        pytest.skip(f"image {tag} not built here (.ci/run builds it with nox -s cuda126)")
    image = docker.from_env().images.get(tag)
    history = " ".join(step.get("CreatedBy", "") for step in image.history())
    assert "/build/extra" not in history and "ca-bundle" not in history
    assert image.attrs["Config"]["User"] == "1000"
    labels = image.labels
    assert labels["dev.kitbench.target"] == "cuda126"
    assert labels["dev.kitbench.manifest-sha256"] == targets.get("cuda126").sha256


@pytest.mark.docker
def test_real_engine_build_without_name_resolution_names_the_network_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    _engine()
    if not _has_image(BASE):
        pytest.skip(f"base image {BASE} not built here (.ci/run makes it with debootstrap)")
    monkeypatch.setenv("KITBENCH_BASE_IMAGE", BASE)
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://pypi.org/simple")
    monkeypatch.setenv("KITBENCH_DOCKER_NETWORK", "none")  # no DNS inside the build
    with pytest.raises(ContainerError) as caught:
        images.build(targets.get("cuda126"), log=lambda line: None)
    assert caught.value.message.startswith("a build step could not reach the network (name resolution failed)")
    assert caught.value.hint and "KITBENCH_DOCKER_NETWORK=host" in caught.value.hint


@pytest.mark.docker
def test_real_engine_base_that_already_has_uid_1000_builds() -> None:
    """Every Ubuntu 24.04 image has uid 1000 (ubuntu); the image's runtime stage must still build."""
    _engine()
    if not _has_image(BASE):
        pytest.skip(f"base image {BASE} not built here (.ci/run makes it with debootstrap)")
    import io

    import docker

    client = docker.from_env()
    taken = "kitbench-test/uid1000:1"
    dockerfile = f"FROM {BASE}\nRUN useradd --create-home --uid 1000 ubuntu\n".encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=taken, network_mode="none", rm=True)
    try:
        chunks = client.api.build(
            fileobj=images.context_tar(),
            custom_context=True,
            dockerfile="docker/Dockerfile",
            target="runtime",
            buildargs={"BASE_IMAGE": taken},
            network_mode="none",
            decode=True,
            rm=True,
            forcerm=True,
            tag="kitbench-test/rt:1",
        )
        image_id = images.follow_build(chunks, lambda line: None, target=targets.get("cuda126"), base=taken)
        users = client.containers.run(
            image_id, ["getent", "passwd", "1000"], entrypoint=[], remove=True, network_mode="none"
        )
        assert users.decode().startswith("ubuntu:")
    finally:
        for tag in ("kitbench-test/rt:1", taken):
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag, force=True)


class _FakeContainer:
    """What containers.run asks of a container: start, logs, wait, remove."""

    def __init__(self, output: bytes) -> None:
        self.output, self.removed = output, False

    def start(self) -> None:
        pass

    def logs(self, stream: bool, follow: bool) -> list[bytes]:
        return [self.output[:7], self.output[7:]]  # a line split across chunks, as the engine sends it

    def wait(self) -> dict[str, int]:
        return {"StatusCode": 0}

    def remove(self, force: bool) -> None:
        self.removed = True


class _FakeImages:
    """The engine's images: the base a build started from is there, under a local id."""

    def get(self, name: str) -> object:
        return type("Image", (), {"id": f"sha256:{name}-local"})()


class _FakeEngine:
    def __init__(self, output: bytes) -> None:
        self.created: dict[str, object] = {}
        self.container = _FakeContainer(output)
        self.containers = self
        self.images = _FakeImages()

    def create(self, image: str, command: list[str], **options: object) -> _FakeContainer:
        self.created = {"image": image, "command": command, **options}
        return self.container


def _fake_run(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    run_args: list[str],
    output: bytes = b"status: ok; record: /results/cuda126/2026-01-01T000000Z-ab12.json\n",
    target: str = "cuda126",
    gpus: str = "none",
) -> tuple[_FakeEngine, list[str]]:
    fake = _FakeEngine(output)
    monkeypatch.setattr(engine, "client", lambda: fake)
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("KITBENCH_GPUS", gpus)
    lines: list[str] = []
    result = images.BuildResult(f"kitbench/{target}:abc", "sha256:abc", "base", 0)
    assert containers.run(targets.get(target), result, run_args, lines.append) == 0
    assert fake.container.removed
    return fake, lines


def _mounts(fake: _FakeEngine) -> dict[str, tuple[str, bool]]:
    return {m["Target"]: (m["Source"], m["ReadOnly"]) for m in fake.created["mounts"]}  # type: ignore[attr-defined]


def test_first_run_without_mnist_mounts_a_writable_host_folder_and_prints_host_paths(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fresh = tmp_path / "cache" / "kitbench" / "data"
    monkeypatch.setenv("KITBENCH_DATA", str(fresh))
    fake, lines = _fake_run(monkeypatch, tmp_path, ["--quick"])
    # The image's user cannot create /data: the host folder exists and is mounted writable for the download.
    assert fresh.is_dir()
    assert _mounts(fake)["/data"] == (str(fresh.resolve()), False)
    assert _mounts(fake)["/results/cuda126"] == (str((tmp_path / "results" / "cuda126").resolve()), False)
    assert lines == [f"status: ok; record: {(tmp_path / 'results').resolve()}/cuda126/2026-01-01T000000Z-ab12.json"]
    assert fake.created["command"] == ["run", "--quick"]


def test_gpus_nvidia_by_device_request_amd_by_device_nodes_none_without(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_mnist: Path
) -> None:
    from docker.types import DeviceRequest

    monkeypatch.setenv("KITBENCH_DATA", str(tiny_mnist))
    fake, _ = _fake_run(monkeypatch, tmp_path, ["--quick"], gpus="all")
    assert fake.created["device_requests"] == [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    assert "devices" not in fake.created and "group_add" not in fake.created
    assert fake.created["command"] == ["run", "--device", "cuda", "--quick"]
    # ROCm's docs: --device=/dev/kfd --device=/dev/dri --group-add video, never NVIDIA's request.
    fake, _ = _fake_run(monkeypatch, tmp_path, ["--quick"], target="rocm64", gpus="all")
    assert fake.created["devices"] == ["/dev/kfd:/dev/kfd:rwm", "/dev/dri:/dev/dri:rwm"]
    assert "group_add" in fake.created and "device_requests" not in fake.created
    assert fake.created["command"] == ["run", "--device", "cuda", "--quick"]  # HIP's GPUs are cuda devices
    for target in ("rocm64", "cuda126"):
        fake, _ = _fake_run(monkeypatch, tmp_path, ["--quick"], target=target)
        assert not {"devices", "group_add", "device_requests"} & set(fake.created)
        assert fake.created["command"] == ["run", "--quick"]


def test_amd_groups_are_the_ids_owning_the_hosts_device_nodes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The container runs as the host user: it needs the groups of /dev/kfd and the render nodes
    by id (render's id differs between distributions); "video" where no node is there to ask."""
    monkeypatch.setenv("KITBENCH_GPUS", "all")
    rocm = targets.get("rocm64")
    assert containers.gpu_options(rocm, dict, dev=tmp_path)["group_add"] == ["video"]
    (tmp_path / "dri" / "by-path").mkdir(parents=True)  # a folder: not a device, its group is not asked
    for node in ("kfd", "dri/renderD128", "dri/card0"):
        (tmp_path / node).symlink_to(os.devnull)  # a character device, owned by root's group
    assert containers.gpu_options(rocm, dict, dev=tmp_path)["group_add"] == [str(os.stat(os.devnull).st_gid)]


def test_data_after_the_separator_is_the_host_folder_mounted_read_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_mnist: Path
) -> None:
    monkeypatch.setenv("KITBENCH_DATA", str(tmp_path / "elsewhere"))
    fake, _ = _fake_run(monkeypatch, tmp_path, ["--data", str(tiny_mnist / "MNIST" / "raw"), "--offline"])
    assert _mounts(fake)["/data"] == (str(tiny_mnist.resolve()), True)
    assert fake.created["command"] == ["run", "--offline"]  # inside, KITBENCH_DATA names the mount
    assert not (tmp_path / "elsewhere").exists()


def test_offline_without_mnist_stops_before_the_container(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from kitbench.errors import DataError

    fake = _FakeEngine(b"")
    monkeypatch.setattr(engine, "client", lambda: fake)
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    result = images.BuildResult("kitbench/cuda126:abc", "sha256:abc", "base", 0)
    with pytest.raises(DataError, match="--offline forbids a download"):
        containers.run(targets.get("cuda126"), result, [f"--data={tmp_path / 'none'}", "--offline"], print)
    assert fake.created == {}


def test_host_paths_replace_mount_points_only() -> None:
    mounts = {"/results": Path("/home/u/results"), "/data": Path("/home/u/.cache/kitbench/data")}
    assert containers.host_paths("record: /results/cpu/x.json", mounts) == "record: /home/u/results/cpu/x.json"
    assert containers.host_paths("MNIST at /data (ok)", mounts) == "MNIST at /home/u/.cache/kitbench/data (ok)"
    assert containers.host_paths("see /srv/results/x and /database", mounts) == "see /srv/results/x and /database"


def test_a_container_run_where_there_are_no_uids(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_mnist: Path
) -> None:
    """Docker Desktop on Windows: no os.getuid/getgid/chown, and no user to map."""
    for name in ("getuid", "getgid", "chown"):
        monkeypatch.delattr(os, name, raising=False)
    fake, _ = _fake_run(monkeypatch, tmp_path, ["--data", str(tiny_mnist)])
    assert fake.created["user"] is None


def test_a_container_run_as_root_changes_no_owner(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`container cuda126 -- --data /etc` as root once handed /etc to uid 1000 (and broke munged):
    the container runs as the caller, and no folder of the user's changes owner."""
    chowned: list[object] = []
    monkeypatch.setattr(os, "getuid", lambda: 0)
    monkeypatch.setattr(os, "getgid", lambda: 0)
    monkeypatch.setattr(os, "chown", lambda *args, **kwargs: chowned.append(args))
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    fake, _ = _fake_run(monkeypatch, tmp_path, ["--data", str(theirs)])
    assert fake.created["user"] == "0:0"
    assert _mounts(fake)["/data"] == (str(theirs.resolve()), False)
    assert chowned == []


def test_offline_without_mnist_is_refused_before_the_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    def no_build(*args: object, **options: object) -> None:
        raise AssertionError("built")

    monkeypatch.setattr(images, "build", no_build)
    assert main(["container", "cuda126", "--", "--offline", "--data", str(tmp_path / "nowhere")]) == 1
    assert capsys.readouterr().err.startswith(f"ERROR: no MNIST at {tmp_path / 'nowhere'} (4 of 4 raw files missing)")
