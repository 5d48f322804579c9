from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kitbench.advice import vendors
from kitbench.environments import targets
from kitbench.errors import UsageError

REPO = Path(__file__).resolve().parents[2]


def test_pins_come_from_the_manifests() -> None:
    cpu = targets.get("cpu")
    assert cpu.pins()[:2] == [f"torch=={cpu.torch}", f"torchvision=={cpu.torchvision}"]
    assert all("==" in pin for pin in cpu.pins())


@pytest.mark.parametrize("name", sorted(targets.load_all()))
def test_target_pins_agree_with_the_release_manifests(name: str) -> None:
    from kitbench.advice import releases

    target = targets.get(name)
    release = releases.releases()[target.torch]
    assert target.torchvision == release.torchvision
    if target.kind != "conda":
        # XPU builds are off pytorch.org's selector (so off release.wheels); envs/vendors.yaml has them.
        assert target.compute in release.wheels or (
            target.compute == "xpu" and vendors.load().xpu(target.torch, "linux", "x86_64")
        )
        # The manifest's own URL: index_for() would apply a KITBENCH_INDEX_URL override (CI sets one).
        assert target.index["linux"] == releases.index_pattern().format(compute=target.compute)


def test_index_override(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = targets.get("cpu")
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)
    monkeypatch.delenv("KITBENCH_PYTORCH_INDEX", raising=False)
    assert cpu.index_for("linux") == "https://download.pytorch.org/whl/cpu"
    assert cpu.index_for("macos") is None  # PyPI
    monkeypatch.setenv("KITBENCH_PYTORCH_INDEX", "http://127.0.0.1:8000/whl/")  # a mirror of PyTorch's index
    assert cpu.index_for("linux") == "http://127.0.0.1:8000/whl/cpu"
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    assert cpu.index_for("linux") is None
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://mirror.example/simple")
    assert cpu.index_for("linux") == "https://mirror.example/simple"


def test_target_without_index_for_the_os(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)
    with pytest.raises(UsageError, match="names no package index for windows"):
        targets.get("cuda118").index_for("windows")


def test_unknown_target() -> None:
    with pytest.raises(UsageError, match="unknown target 'cuda99'"):
        targets.get("cuda99")


def test_no_version_is_written_in_the_noxfile() -> None:
    import re

    text = (REPO / "noxfile.py").read_text()
    assert not re.search(r"==\s*\d|\b\d+\.\d+\.\d+\b", text)


def test_the_noxfile_s_inline_dependencies_are_kitbench_s_own() -> None:
    """`pipx run nox` / `uvx nox` install what the noxfile declares (PEP 723): kitbench's light
    dependencies and the docker extra, exactly as pyproject.toml states them, plus nox and uv."""
    import re

    import tomllib

    block = re.search(r"^# /// script\n((?:^#.*\n)+?)^# ///$", (REPO / "noxfile.py").read_text(), re.M)
    assert block, "the noxfile has no inline script metadata"
    declared = tomllib.loads("".join(line[2:] + "\n" for line in block[1].splitlines()))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    names = {re.split(r"[<>=;\s]", dep)[0] for dep in declared["dependencies"]}
    assert set(project["dependencies"]) | set(project["optional-dependencies"]["docker"]) <= set(
        declared["dependencies"]
    )
    assert {"nox", "uv"} <= names
    assert declared["requires-python"] == project["requires-python"]


def _nox(env_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("nox", reason="nox is not installed beside this Python (nox -s tests installs it)")
    import os

    return subprocess.run(
        [sys.executable, "-m", "nox", *args, "-f", str(REPO / "noxfile.py")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "KITBENCH_ENVS": str(env_dir)},
    )


def _nox_list(env_dir: Path) -> str:
    done = _nox(env_dir, "-l")
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.integration
@pytest.mark.parametrize(
    ("breakage", "words"),
    [
        (
            lambda envs: (envs / "targets" / "cpu.yaml").write_text("kind: venv\nkind: docker\n"),
            "cpu.yaml:2: duplicate key 'kind' (first on line 1)",
        ),
        (lambda envs: (envs / "targets" / "cpu.yaml").unlink(), "unknown target 'cpu'"),
        (
            lambda envs: (envs / "targets" / "cpu.yaml").write_text("description: [unclosed\n"),
            "cpu.yaml:2: invalid YAML",
        ),
    ],
)
@pytest.mark.parametrize("args", [("-l",), ("-s", "cpu")])
def test_nox_with_a_broken_manifest_says_one_line(
    envs_copy: Path, breakage: object, words: str, args: tuple[str, ...]
) -> None:
    breakage(envs_copy)  # type: ignore[operator]
    done = _nox(envs_copy, *args)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1 and words in errors[0], done.stderr


@pytest.mark.integration
def test_nox_lists_a_session_per_target_with_its_description() -> None:
    listing = _nox_list(REPO / "envs")
    for name in ("cpu", "cuda118", "cuda126", "mps", "tests", "lint", "bench"):
        assert f"{name} -> " in listing
    assert targets.get("cuda118").description in listing


@pytest.mark.integration
def test_adding_a_yaml_file_adds_a_session(envs_copy: Path) -> None:
    text = (envs_copy / "targets" / "cpu.yaml").read_text()
    (envs_copy / "targets" / "cpu-py312.yaml").write_text(
        text.replace('python: "3.11"', 'python: "3.12"').replace("CPU-only", "CPU-only, Python 3.12,")
    )
    listing = _nox_list(envs_copy)
    assert "cpu-py312 -> CPU-only, Python 3.12," in listing


@pytest.mark.parametrize(
    ("target", "version", "cuda", "os_name", "matches"),
    [
        ("cpu", "2.14.1+cpu", None, "linux", True),
        ("cpu", "2.14.1+cu130", "13.0", "linux", False),  # what the offline override installs here
        ("cpu", "2.14.1", "13.0", "linux", False),  # plain PyPI's untagged CUDA build
        ("cpu", "2.14.1", None, "macos", True),
        ("mps", "2.9.1", None, "macos", True),
        ("cuda126", "2.9.1+cu126", "12.6", "linux", True),
        ("cuda126", "2.9.1", "12.6", "linux", True),
        ("cuda126", "2.9.1+cu128", "12.8", "linux", False),
        ("cuda118", "2.7.1+cpu", None, "linux", False),
    ],
)
def test_the_installed_build_is_checked_against_the_target(
    target: str, version: str, cuda: str | None, os_name: str, matches: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    check = targets.check_build(targets.get(target), version, cuda, os_name)
    assert check.matches is matches
    assert version in check.got
    if not matches:
        assert check.cause is not None and check.cause.startswith("KITBENCH_INDEX_URL=default replaced")


def test_the_build_check_never_shows_an_index_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_INDEX_URL", "https://user:s3cret@mirror.example/simple")
    check = targets.check_build(targets.get("cpu"), "2.14.1", "13.0", "linux")
    assert check.cause == (
        "KITBENCH_INDEX_URL=https://mirror.example/simple replaced the target's index "
        "(https://download.pytorch.org/whl/cpu)"
    )


def test_a_target_file_name_must_be_a_plain_name(envs_copy: Path) -> None:
    from kitbench.errors import ManifestError

    shutil.copy(envs_copy / "targets" / "cpu.yaml", envs_copy / "targets" / "my target.yaml")
    with pytest.raises(ManifestError, match=r"my target.yaml: target name 'my target' is not a plain name"):
        targets.load_all()


@pytest.mark.integration
def test_a_nox_installed_apart_reads_the_noxfile_s_own_dependencies(tmp_path: Path) -> None:
    """nox from pipx or `uv tool` has none of kitbench's dependencies: it must build them from the
    noxfile's inline metadata and list the sessions, not fail on `import yaml`."""
    import os

    uv = shutil.which("uv") or pytest.skip("uv is not installed (nox -s tests installs it)")
    nox_home = tmp_path / "nox-alone"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(nox_home)], check=True)
    subprocess.run([uv, "pip", "install", "-q", "--python", str(nox_home / "bin" / "python"), "nox"], check=True)
    alone = subprocess.run([str(nox_home / "bin" / "python"), "-c", "import yaml"], capture_output=True, check=False)
    assert alone.returncode != 0, "the venv standing in for pipx's must lack kitbench's dependencies"
    # Under `pipx run nox -s tests` the sessions inherit NOX_SCRIPT_MODE=none from the outer nox.
    env = {
        key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV", "NOX_SCRIPT_MODE")
    }
    done = subprocess.run(
        [str(nox_home / "bin" / "nox"), "-l", "-f", str(REPO / "noxfile.py"), "--envdir", str(tmp_path / "envdir")],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "- cpu -> " in done.stdout
    assert (tmp_path / "envdir" / "_nox_script_mode").is_dir()


def test_an_unresolvable_index_names_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket
    import time

    from kitbench.errors import KitbenchError

    for name in (
        "KITBENCH_INDEX_URL",
        "KITBENCH_PYTORCH_INDEX",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    asked: list[str] = []

    def no_dns(host: str, port: int) -> None:
        asked.append(host)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    with pytest.raises(KitbenchError) as caught:
        targets.check_index(targets.get("cpu"), "linux")
    assert asked == ["download.pytorch.org"]
    assert caught.value.message == (
        "cannot install cpu's packages from https://download.pytorch.org/whl/cpu: cannot "
        "reach download.pytorch.org (it does not resolve: Temporary failure in name "
        "resolution)"
    )
    assert caught.value.host == "download.pytorch.org"
    assert caught.value.hint == (
        "set KITBENCH_PYTORCH_INDEX to a mirror of PyTorch's index (its whl/ tree); or set "
        "KITBENCH_INDEX_URL to an index this machine reaches, or to default for your pip or "
        "uv configuration (a mirror, a proxy): `KITBENCH_INDEX_URL=default nox -s cpu`"
    )
    # A resolver that never answers is bounded too.
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port: time.sleep(5))
    with pytest.raises(KitbenchError, match=r"no answer within 0\.2 s"):
        targets.check_index(targets.get("cpu"), "linux", timeout_s=0.2)
    # pip's own configuration, or a proxy, decides where requests go: nothing to check.
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    targets.check_index(targets.get("cpu"), "linux")
    monkeypatch.delenv("HTTPS_PROXY")
    monkeypatch.setenv("KITBENCH_INDEX_URL", "default")
    targets.check_index(targets.get("cpu"), "linux")
    assert asked == ["download.pytorch.org"]  # neither behind the proxy nor with the override


def test_each_envs_folder_is_read_for_itself_without_clearing_a_cache(
    envs_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The targets and the suite's pins are read once per envs/ folder: pointing KITBENCH_ENVS at another
    folder reads that one, and coming back finds the first as it was read."""
    first = targets.load_all()
    other = tmp_path / "other"
    shutil.copytree(envs_copy, other)
    (other / "targets" / "xpu.yaml").unlink()
    suite = other / "suite.yaml"
    suite.write_text(suite.read_text().replace("  - numpy==2.4.6", "  - numpy==2.4.5"))
    monkeypatch.setenv("KITBENCH_ENVS", str(other))
    assert set(targets.load_all()) == set(first) - {"xpu"}
    assert "numpy==2.4.5" in targets.suite_requirements("3.11")
    monkeypatch.setenv("KITBENCH_ENVS", str(envs_copy))
    assert targets.load_all() is first and "numpy==2.4.6" in targets.suite_requirements("3.11")


@pytest.mark.parametrize("variable", ["KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX"])
@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "https://me:S3/CR3T@mirror.example/simple",
        "https://mirror.example/a b",
        "ftp://mirror.example/simple",
    ],
)
def test_an_unusable_index_url_is_one_error_that_never_quotes_it(
    url: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The URLs a user may type (a bracket left open, a token with an unencoded '/', a space, another scheme)
    are refused before any installer sees them, naming the variable, never the token."""
    monkeypatch.delenv("KITBENCH_INDEX_URL", raising=False)  # CI's own override would hide the mirror
    monkeypatch.setenv(variable, url)
    with pytest.raises(UsageError) as caught:
        targets.get("cpu").index_for("linux")
    assert str(caught.value.message).startswith(f"{variable} is not a usable index URL: ")
    assert "CR3T" not in caught.value.message + (caught.value.hint or "")
