"""kitbench.environments.installer: the torch family from PyTorch's index and everything else from PyPI, each
installer told so its own way, checked by resolving for real against the partial stand-in (tests/pytorch_index.py)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from pytorch_index import MIRRORED, everything, in_family, partial, recorded, serving

from kitbench.environments import installer, locks, targets

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
STAND_IN_LOCK = RESOURCES / "locks" / "pylock.cpu-linux-x86_64-py311.toml"
UV = shutil.which("uv") or shutil.which("uv", path=str(Path(sys.executable).parent))
needs_uv = pytest.mark.skipif(UV is None, reason="uv is not installed here: the uv install paths are resolved with it")
CPU = "https://download.pytorch.org/whl/cpu"


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """No override: a user's machine with nothing set."""
    for name in ("KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX"):
        monkeypatch.delenv(name, raising=False)


def _compile(folder: Path, args: list[str], env: dict[str, str], pypi: str) -> dict[str, str]:
    """What uv resolves for an install's arguments (``uv pip compile`` of the same input): name -> index."""
    assert UV is not None
    source = args[args.index("-r") + 1]
    done = subprocess.run(
        [
            UV,
            "pip",
            "compile",
            "--quiet",
            "--no-header",
            "--emit-index-annotation",
            "--no-config",
            "--python-version",
            "3.11",
            "--python-platform",
            "x86_64-unknown-linux-gnu",
            source,
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        timeout=120,
        env={**os.environ, "UV_DEFAULT_INDEX": pypi, **env},
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = {}
    current = ""
    for line in done.stdout.splitlines():
        if "==" in line and not line.startswith(" "):
            current = line.split("==")[0] + "==" + line.split("==")[1]
        elif line.strip().startswith("# from "):
            found[current] = line.strip().removeprefix("# from ")
    return found


@needs_uv
@pytest.mark.usefixtures("plain")
def test_uv_takes_the_family_from_pytorchs_index_and_the_rest_from_pypi_whatever_it_mirrors(
    tmp_path: Path, envs_copy: Path
) -> None:
    for lock in (envs_copy / "locks").glob("*.toml"):
        lock.unlink()
    with serving(partial(), in_family) as torch_index, serving(recorded(), everything) as pypi:
        mirror = torch_index.replace("/simple", "/whl")
        cpu = dataclasses.replace(targets.get("cpu"), index={"linux": f"{mirror}/cpu"})
        plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
        assert not plan.hashed and "no lock for cpu on linux-x86_64-py3.11" in plan.record[locks.LOCK_WHY_VARIABLE]
        args = plan.write(tmp_path / "uv", "uv")
        assert args == ["-r", f"{tmp_path}/uv/pyproject.toml"] and plan.env("uv") == {}
        resolved = _compile(tmp_path, args, plan.env("uv"), pypi)
        # The stand-in has numpy (2.1.2 only), sympy and the rest: still PyPI's, at the pinned versions.
        assert resolved["torch==2.14.1"] == resolved["torchvision==0.29.1"] == f"{mirror}/cpu"
        assert resolved["numpy==2.4.6"] == pypi and resolved["rich==15.0.0"] == pypi
        assert all(index == pypi for pin, index in resolved.items() if pin.split("==")[0] in MIRRORED)
        # uv's first-index strategy with the PyTorch index as an ordinary one (round 4) meets the old numpy.
        done = subprocess.run(
            [
                str(UV),
                "pip",
                "compile",
                "--quiet",
                "--no-config",
                "--python-version",
                "3.11",
                "--index",
                f"{mirror}/cpu",
                "--default-index",
                pypi,
                "-",
            ],
            input="numpy==2.4.6\n",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode != 0 and "there is no version of numpy==2.4.6" in done.stderr


@pytest.mark.usefixtures("plain")
def test_pip_gets_the_pytorch_index_beside_its_own_and_no_url_is_an_argument(tmp_path: Path) -> None:
    linux = installer.sources(targets.get("cpu"), "linux")
    pins = installer.Install(["torch==2.14.1", "rich==15.0.0"], False, linux, {}, "")
    assert pins.write(tmp_path, "pip") == ["-r", f"{tmp_path}/requirements.txt"]
    assert pins.env("pip") == {"PIP_EXTRA_INDEX_URL": CPU}
    assert (tmp_path / "requirements.txt").read_text() == "torch==2.14.1\nrich==15.0.0\n"
    assert pins.pip_conf() == f"[global]\nextra-index-url = {CPU}\n"
    # macOS: PyPI's wheels are the target's build; nothing beside the default.
    assert installer.sources(targets.get("cpu"), "macos") == installer.Sources(None, None)


@pytest.mark.usefixtures("plain")
def test_a_build_whose_runtime_only_pytorch_serves_names_it_from_there(envs_copy: Path) -> None:
    for lock in (envs_copy / "locks").glob("*.toml"):
        lock.unlink()
    rocm = targets.get("rocm")
    plan = installer.suite(rocm, "linux-x86_64-py3.11", "linux")
    text = plan.files("uv")["pyproject.toml"]
    assert '"pytorch-triton-rocm",' in text and 'pytorch-triton-rocm = { index = "pytorch" }' in text
    assert "numpy = {" not in text and 'url = "https://download.pytorch.org/whl/rocm7.2"' in text
    assert locks.companions(CPU) == () and locks.companions(None) == ()


@pytest.mark.usefixtures("plain")
def test_a_lock_installs_as_its_installer_reads_it(
    write_lock: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cpu = targets.get("cpu")
    path = write_lock("cpu", "2.14.1+cpu")
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    assert plan.hashed and plan.record == {locks.LOCK_VARIABLE: str(path)}
    # uv reads the PEP 751 file itself; pip gets it as hash-pinned lines, nothing resolved.
    assert plan.write(tmp_path / "uv", "uv") == ["-r", str(path)] and plan.env("uv") == {}
    assert plan.write(tmp_path / "pip", "pip") == [
        "--no-deps",
        "--require-hashes",
        "-r",
        f"{tmp_path}/pip/requirements.txt",
    ]
    assert all(" --hash=sha256:" in line for line in (tmp_path / "pip" / "requirements.txt").read_text().splitlines())
    # Where the files must come from a mirror of PyTorch's index, uv gets the hash-pinned lines too.
    monkeypatch.setenv("KITBENCH_PYTORCH_INDEX", "http://127.0.0.1:1/whl")
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    assert plan.write(tmp_path / "mirror", "uv")[:2] == ["--no-deps", "--require-hashes"]
    assert plan.env("uv") == {"UV_INDEX": "http://127.0.0.1:1/whl/cpu", "UV_INDEX_STRATEGY": "unsafe-best-match"}


@pytest.mark.usefixtures("plain")
def test_an_environment_of_many_processes_is_compiled_by_uv_as_pip_compiles_unasked(
    write_lock: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nox -s tests and bench start hundreds of torch processes: their uv install compiles the bytecode (pip
    does unasked), every other install (a replay, lint) leaves it to the first import."""
    cpu = targets.get("cpu")
    path = write_lock("cpu", "2.14.1+cpu")
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    assert plan.write(tmp_path / "uv", "uv", compiled=True) == ["--compile-bytecode", "-r", str(path)]
    assert plan.write(tmp_path / "pip", "pip", compiled=True)[:2] == ["--no-deps", "--require-hashes"]
    monkeypatch.setenv("KITBENCH_PYTORCH_INDEX", "http://127.0.0.1:1/whl")
    mirrored = installer.suite(cpu, "linux-x86_64-py3.11", "linux").write(tmp_path / "mirror", "uv", compiled=True)
    assert mirrored[:3] == ["--compile-bytecode", "--no-deps", "--require-hashes"]


@pytest.mark.usefixtures("plain")
def test_the_override_is_said_once_marked_in_the_record_and_its_token_stays_out_of_logs(
    monkeypatch: pytest.MonkeyPatch, envs_copy: Path, tmp_path: Path
) -> None:
    for lock in (envs_copy / "locks").glob("*.toml"):
        lock.unlink()
    cpu = targets.get("cpu")
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://user:s3cret@mirror.example/simple")
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    warning = installer.override_warning(cpu, plan.sources)
    assert warning is not None and "PyPI's torch is a CUDA build" in warning and "s3cret" not in warning
    assert plan.record[installer.OVERRIDE_VARIABLE] == "https://mirror.example/simple"
    assert "s3cret" not in plan.what and "s3cret" not in " ".join(plan.write(tmp_path, "uv"))
    assert plan.env("uv") == {"UV_DEFAULT_INDEX": "https://user:s3cret@mirror.example/simple"}
    assert plan.env("pip") == {"PIP_INDEX_URL": "https://user:s3cret@mirror.example/simple"}
    # default: the user's own pip or uv configuration, nothing given; still marked.
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    assert plan.env("uv") == plan.env("pip") == {} and plan.record[installer.OVERRIDE_VARIABLE] == "default"
    monkeypatch.delenv("KITBENCH_INDEX_URL")
    plan = installer.suite(cpu, "linux-x86_64-py3.11", "linux")
    assert installer.override_warning(cpu, plan.sources) is None and installer.OVERRIDE_VARIABLE not in plan.record


@pytest.mark.usefixtures("plain")
def test_a_lock_of_another_build_is_refused_in_one_line(write_lock: Callable[..., Path]) -> None:
    from kitbench.errors import UsageError

    for target, torch, why in (
        ("cpu", "2.14.1", "not the +cpu build"),
        ("rocm", "2.14.1+rocm7.2", "CUDA packages (cuda-bindings, cuda-pathfinder"),
    ):
        path = write_lock(target, torch, cuda=True)
        with pytest.raises(UsageError) as refused:
            installer.suite(targets.get(target), "linux-x86_64-py3.11", "linux")
        assert why in refused.value.message and "\n" not in refused.value.message
        assert refused.value.message.startswith(f"{path.name} is not a lock of {target}'s")
    assert installer.choose(targets.get("cpu"), "linux-riscv64-py3.11")[0] is None


@needs_uv
@pytest.mark.usefixtures("plain")
def test_uv_reads_a_kitbench_lock_as_pep_751(tmp_path: Path) -> None:
    """The lock file as kitbench writes it (its name, its [tool.kitbench] table, each package's index) is one
    uv installs as it is: every package it pins, nothing resolved."""
    assert UV is not None
    plan = installer.Install(
        installer.requirements(STAND_IN_LOCK), True, installer.Sources(CPU, None), {}, "", lock=STAND_IN_LOCK
    )
    args = plan.write(tmp_path, "uv")
    assert args == ["-r", str(STAND_IN_LOCK)]
    subprocess.run([UV, "venv", "--quiet", "--python", "3.11", str(tmp_path / "venv")], check=True, timeout=120)
    done = subprocess.run(
        [UV, "pip", "install", "--dry-run", "--python", str(tmp_path / "venv" / "bin" / "python"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **plan.env("uv")},
    )
    assert done.returncode == 0, done.stderr
    planned = {line.strip().removeprefix("+ ") for line in done.stderr.splitlines() if line.strip().startswith("+ ")}
    assert planned == {f"{name}=={version}" for name, version in locks.read(STAND_IN_LOCK).hashes}
