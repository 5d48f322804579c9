"""The engine as kitbench talks to it: the SDK found (never the checkout's docker/ folder), and the
engine's raw failures translated, on recorded daemon and CUDA messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitbench.environments import targets
from kitbench.rebuild import engine


def _message(resources: Path, name: str) -> str:
    return (resources / "docker" / name).read_text()


def test_no_gpu_runtime(resources: Path) -> None:
    error = engine.translate(_message(resources, "no-gpu-runtime.txt"))
    assert error.message.startswith("Docker has no NVIDIA GPU runtime")
    assert error.hint and "nvidia-ctk runtime configure" in error.hint and "KITBENCH_GPUS=none" in error.hint


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("require-cuda.txt", "too old for this image's CUDA 12.6"),
        ("error-803.txt", "CUDA error 803"),
        ("error-804.txt", "CUDA error 804"),
    ],
)
def test_driver_too_old_names_the_target_that_fits(resources: Path, name: str, words: str) -> None:
    error = engine.translate(_message(resources, name), target=targets.get("cuda126"))
    assert words in error.message
    assert error.hint and "nox -s cuda118 (driver >= 450.80.02)" in error.hint


def test_pull_denied_and_daemon_down(resources: Path) -> None:
    pulled = engine.translate(_message(resources, "pull-denied.txt"), base="nvidia/cuda-typo:1")
    assert pulled.message == "base image nvidia/cuda-typo:1 is not on this machine and cannot be pulled"
    down = engine.translate(_message(resources, "daemon-down.txt"))
    assert down.message == "cannot reach the Docker daemon"


def test_unknown_text_passes_through_as_one_line() -> None:
    error = engine.translate("something odd\nsecond line")
    assert error.message == "docker: something odd"
    # No build log was printed: the hint points at nothing "above".
    assert error.hint == "that is all docker said; docker info checks the engine"
    built = engine.translate("something odd", tail=["Step 3/9 : RUN x", "x: not found"])
    assert built.hint == "see the log above\n  Step 3/9 : RUN x\n  x: not found"


def test_amd_device_missing_on_the_host() -> None:
    error = engine.translate(
        "Error response from daemon: error gathering device information while adding "
        'custom device "/dev/kfd": no such file or directory'
    )
    assert error.message.startswith("this host has no /dev/kfd: the amdgpu kernel driver is not loaded")
    assert error.hint and "KITBENCH_GPUS=none" in error.hint


def test_the_checkouts_docker_folder_is_not_taken_for_the_sdk(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the SDK, `import docker` from the checkout root finds docker/ as a namespace package."""
    import importlib
    import sys

    from kitbench._cli import main

    repo = Path(__file__).resolve().parents[2]
    for name in [n for n in sys.modules if n == "docker" or n.startswith("docker.")]:
        monkeypatch.delitem(sys.modules, name)
    stdlib = [p for p in sys.path if "site-packages" not in p and Path(p or ".").resolve() != repo]
    monkeypatch.setattr(sys, "path", [str(repo), *stdlib])
    importlib.invalidate_caches()
    namespace = importlib.import_module("docker")
    assert namespace.__file__ is None and list(namespace.__path__) == [str(repo / "docker")]
    assert main(["container", "cuda126", "--build-only"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "ERROR: building and running images needs docker, which is not installed in this Python"
    from kitbench._installed import add_command

    assert err[1] == f"hint: {add_command(['docker'])} (`import docker` found the folder {repo / 'docker'})"
