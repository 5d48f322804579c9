"""kitbench as a tool anyone can install: its own wheel, run from outside the checkout.

The wheel is built from this checkout and installed into a fresh venv with only
its base dependencies (the advice path), then every command is run from a
directory that is not the checkout. ``run`` needs torch: it runs the installed
wheel's code with this test environment's torch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORD = REPO / "docs" / "records" / "h100-fnn.json"


def _installer() -> list[str]:
    """uv where it is (nox's uv-made venvs have no pip), else this Python's pip."""
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip"]
    if subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, check=False).returncode == 0:
        return [sys.executable, "-m", "pip"]
    pytest.skip("neither uv nor pip is available to build and install the wheel")


def _run(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    if check:
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    installer = _installer()
    if installer[0].endswith("uv"):
        _run(installer[0], "build", "--wheel", "--out-dir", out, REPO)
    else:
        _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", out, REPO)
    (found,) = out.glob("kitbench-*.whl")
    return found


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with nothing of the checkout in it, and no KITBENCH_ENVS pointing back."""
    return tmp_path_factory.mktemp("elsewhere")


@pytest.fixture(scope="module")
def advice_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its base dependencies only: the install-advice path."""
    env = tmp_path_factory.mktemp("venv") / "v"
    venv.create(env, with_pip=False)
    python = env / "bin" / "python"
    installer = _installer()
    target = ["--python", str(python)] if installer[0].endswith("uv") else []
    if not target:  # pip installs into the Python that runs it
        installer = [str(python), "-m", "pip"]
        venv.create(env, with_pip=True, clear=True)
    _run(*installer, "install", *target, str(wheel))
    return env


def _no_envs_override() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "KITBENCH_ENVS"}


def _kitbench(env: Path, *args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / "kitbench"), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_no_envs_override(),
        check=False,
        timeout=120,
    )


def test_the_wheel_carries_envs_dockerfile_and_schemas(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for tracked in (REPO / "envs").rglob("*"):
        if tracked.is_file() and tracked.suffix in (".yaml", ".yml", ".txt"):
            assert f"kitbench/envs/{tracked.relative_to(REPO / 'envs')}" in names
    assert {
        "kitbench/dockerfiles/Dockerfile",
        "kitbench/dockerfiles/Dockerfile.dockerignore",
        "kitbench/records/schemas/run.schema.json",
    } <= names
    assert not any(name.startswith(("tests/", "envs/", "docker/")) for name in names)


def test_the_wheel_size_docs_quote_is_its_size(wheel: Path) -> None:
    """docs/install.md quotes the wheel's size (in MB of 10^6 bytes, two decimals): it stays true."""
    import re

    quoted = re.search(r"pip wheel --no-deps \.`, (\d+\.\d\d) MB", (REPO / "docs" / "install.md").read_text())
    assert quoted is not None, "docs/install.md no longer quotes the wheel's size where this test looks"
    size = wheel.stat().st_size / 1e6
    assert abs(size - float(quoted.group(1))) <= 0.015, f"the wheel is {size:.2f} MB; docs say {quoted.group(1)} MB"


def test_advice_commands_work_from_anywhere(
    advice_venv: Path, outside: Path, another_run: Callable[[Path, Path], Path]
) -> None:
    version = _kitbench(advice_venv, "--version", cwd=outside)
    assert version.returncode == 0 and version.stdout.startswith("kitbench ")
    command = _kitbench(advice_venv, "install-cmd", "--no-gpu", cwd=outside)
    assert command.returncode == 0, command.stderr
    assert command.stdout.startswith("pip install torch==")
    probed = _kitbench(advice_venv, "probe", "--json", cwd=outside)
    assert json.loads(probed.stdout)["os"] in ("linux", "macos", "windows")
    compared = _kitbench(advice_venv, "compare", RECORD, "--format", "csv", cwd=outside)
    assert compared.returncode == 0, compared.stderr
    assert "NVIDIA H100" in compared.stdout
    again = str(another_run(RECORD, outside / "again.json"))  # never the record against itself
    verified = _kitbench(advice_venv, "verify", RECORD, again, cwd=outside)
    assert verified.returncode == 0 and verified.stdout.startswith("reproduced")


@pytest.mark.parametrize(
    ("args", "package"),
    [
        (["run", "--quick"], "torch"),
        (["compare", str(RECORD), "--plot", "c.png"], "matplotlib"),
        # `kitbench container` is a launch to tests/conftest.py's guard, though here it stops at the missing SDK.
        pytest.param(["container", "cuda126"], "docker", marks=pytest.mark.integration),
    ],
)
def test_a_missing_extra_is_named(advice_venv: Path, outside: Path, args: list[str], package: str) -> None:
    """The hint installs into the venv kitbench runs in, naming its interpreter (pip on the path may be
    another's), never a project called kitbench from PyPI."""
    done = _kitbench(advice_venv, *args, cwd=outside)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith("ERROR: ")
    hint = done.stderr.splitlines()[1]
    python = str(advice_venv / "bin" / "python")
    assert hint.startswith("hint: ") and (
        f"{python} -m pip install {package}" in hint or f"uv pip install --python {python} {package}" in hint
    ), hint
    assert "kitbench[" not in hint


def test_the_installed_wheel_finds_its_own_manifests_and_dockerfile(advice_venv: Path, outside: Path) -> None:
    code = (
        "from kitbench.records import manifest; print(manifest.envs_dir()); print(manifest.docker_dir()); "
        "print(manifest.checkout_root())"
    )
    done = subprocess.run(
        [str(advice_venv / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        cwd=outside,
        env=_no_envs_override(),
        check=True,
    )
    envs, docker, checkout = done.stdout.splitlines()
    assert "site-packages" in envs and envs.endswith("kitbench/envs")
    assert docker.endswith("kitbench/dockerfiles") and checkout == "None"


def test_kitbench_envs_overrides_the_shipped_manifests(advice_venv: Path, outside: Path, tmp_path: Path) -> None:
    shutil.copytree(REPO / "envs", tmp_path / "envs")
    (tmp_path / "envs" / "pytorch.yaml").write_text("stable: [broken\n")
    done = subprocess.run(
        [str(advice_venv / "bin" / "kitbench"), "install-cmd"],
        capture_output=True,
        text=True,
        cwd=outside,
        env={**_no_envs_override(), "KITBENCH_ENVS": str(tmp_path / "envs")},
        check=False,
    )
    assert done.returncode != 0 and done.stderr.startswith(f"ERROR: {tmp_path / 'envs' / 'pytorch.yaml'}:")


def test_run_from_the_wheel_with_torch(wheel: Path, outside: Path, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    out = tmp_path / "r.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kitbench",
            "run",
            "--device",
            "cpu",
            "--check",
            "availability",
            "--check",
            "moves",
            "--quick",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=outside,
        env={**_no_envs_override(), "PYTHONPATH": str(unpacked)},
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    assert record["status"] == "ok"
    assert record["environment"]["git_revision"] is None  # the wheel's code, not the checkout's


@pytest.mark.docker
def test_container_builds_from_the_wheel(wheel: Path, outside: Path, tmp_path: Path) -> None:
    """The wheel's own Dockerfile and package make the image (torch layers from cache where
    `nox -s cuda126` built them first, as .ci/run does)."""
    docker = pytest.importorskip("docker")
    from kitbench.environments import targets
    from kitbench.rebuild import images

    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:
        pytest.skip(f"no Docker engine reachable here ({type(exc).__name__})")
    base = os.environ.get("KITBENCH_BASE_IMAGE") or "kitbench-ci/debian:bookworm"
    tag = images.image_tag(targets.get("cuda126"))
    try:
        client.images.get(tag)
        client.images.get(base)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{tag} or {base} is not here (.ci/run builds them): a build from nothing takes minutes")
    env = tmp_path / "v"
    venv.create(env, with_pip=False)
    installer = _installer()
    if installer[0].endswith("uv"):
        _run(*installer, "install", "--python", env / "bin" / "python", f"kitbench[docker] @ {wheel.as_uri()}")
    else:
        venv.create(env, with_pip=True, clear=True)
        _run(env / "bin" / "python", "-m", "pip", "install", f"kitbench[docker] @ {wheel.as_uri()}")
    done = subprocess.run(
        [str(env / "bin" / "kitbench"), "container", "cuda126", "--build-only"],
        capture_output=True,
        text=True,
        cwd=outside,
        check=False,
        timeout=900,
        env={
            **_no_envs_override(),
            "KITBENCH_BASE_IMAGE": base,
            "KITBENCH_DOCKER_NETWORK": os.environ.get("KITBENCH_DOCKER_NETWORK", "host"),
        },
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"image {tag}" in done.stderr
