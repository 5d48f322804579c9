"""Each node's Python: architectures read and grouped, ARCH=PATH parsed, a venv target's environment built
(here with nox, bounded in time; or on a node of another architecture through Slurm)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from kitbench._cli import main
from kitbench.errors import UsageError
from kitbench.fleet import pythons, slurm
from kitbench.fleet.jobscript import SlurmOptions


def test_a_hung_nox_build_is_stopped_and_said_in_one_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A build that never ends (a stalled download) is stopped at the named limit, with what it
    printed so far shown, and becomes one ERROR line and a hint, not a wait without end."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'nox > Creating virtual environment'\nexec sleep 60\n")
    fake.chmod(0o755)
    from kitbench.records import manifest

    here = manifest.checkout_root()
    assert here is not None
    checkout = tmp_path / "checkout"  # a checkout whose .nox/cpu was never built
    checkout.mkdir()
    (checkout / "envs").symlink_to(here / "envs")
    node = slurm.Node("n1", ("debug",), "(null)", "(null)", "idle")
    monkeypatch.setattr(manifest, "checkout_root", lambda: checkout)
    monkeypatch.setattr(slurm, "nodes", lambda partition=None: [node])
    monkeypatch.setattr(slurm, "node_arches", lambda names: {"n1": os.uname().machine})
    monkeypatch.setattr(slurm, "submit_held", lambda *a: pytest.fail("a job was submitted without its environment"))
    monkeypatch.setattr(pythons, "BUILD_TIMEOUT_S", 0.5)
    monkeypatch.setattr(sys, "executable", str(fake))
    started = time.monotonic()
    assert main(["fleet", "run", "cpu"]) == 1
    assert time.monotonic() - started < 30
    err = capsys.readouterr().err.splitlines()
    assert "nox > Creating virtual environment" in err  # its output, streamed while it ran
    errors = [line for line in err if line.startswith("ERROR: ")]
    assert errors == ["ERROR: nox -s cpu --install-only did not finish in 0 minutes and was stopped"]
    assert (
        err[-1] == "hint: build it yourself (nox -s cpu --install-only, which reuses what it downloaded) and run again"
    )


def test_per_architecture_paths_are_parsed_once() -> None:
    assert pythons.per_arch(["/shared/venv", "arm64=/shared/arm"], "--venv") == (
        Path("/shared/venv"),
        {"aarch64": Path("/shared/arm")},
    )  # Docker's name, one spelling
    assert pythons.per_arch(["/a=b/venv"], "--venv") == (Path("/a=b/venv"), {})  # a path with = in it
    for twice in (["/a", "/b"], ["aarch64=/a", "arm64=/b"]):
        with pytest.raises(UsageError):
            pythons.per_arch(twice, "--venv")


def test_the_other_architecture_s_environment_is_built_on_one_of_its_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through Slurm itself (srun on an aarch64 node, nox there); what it built must be of that architecture."""
    from kitbench.records import manifest

    monkeypatch.setattr(manifest, "checkout_root", lambda: tmp_path)
    asked: list[list[str]] = []
    monkeypatch.setattr(slurm, "run", lambda args, timeout=0: asked.append(list(args)) or "")
    local = Path(sys.executable)
    arches: dict[str, str | None] = {"n1": pythons.arch_name(os.uname().machine), "n3": "aarch64"}
    with pytest.raises(Exception, match="the environment built on n3 is not aarch64"):  # nothing was built here
        pythons.venv_pythons(
            "cpu", [str(local.parent.parent)], arches, SlurmOptions(partition="grace"), lambda line: None
        )
    assert asked == [
        [
            "srun",
            "--nodelist=n3",
            "--nodes=1",
            "--ntasks=1",
            "--partition=grace",
            "python3",
            "-m",
            "nox",
            "--envdir",
            str(tmp_path / ".nox" / "aarch64"),
            "-s",
            "cpu",
            "--install-only",
            "-f",
            str(tmp_path / "noxfile.py"),
        ]
    ]
    # An aarch64 Python there (its ELF header says so) is used as it is, without building again.
    built = tmp_path / ".nox" / "aarch64" / "cpu" / "bin" / "python"
    built.parent.mkdir(parents=True)
    header = bytearray(local.resolve().read_bytes()[:64])
    header[18:20] = (0xB7).to_bytes(2, "little")
    built.write_bytes(bytes(header))
    built.chmod(0o755)
    asked.clear()
    found = pythons.venv_pythons("cpu", [str(local.parent.parent)], arches, SlurmOptions(), lambda line: None)
    assert (
        found
        == {
            pythons.arch_name(os.uname().machine): local.parent.parent.absolute() / "bin" / "python",
            "aarch64": built.absolute(),
        }
        and asked == []
    )


def test_executable_arch_reads_the_elf_header(tmp_path: Path) -> None:
    import platform

    assert pythons.executable_arch(Path(sys.executable)) == pythons.arch_name(platform.machine())
    (tmp_path / "script").write_text("#!/bin/sh\n")
    assert pythons.executable_arch(tmp_path / "script") is None
    assert pythons.executable_arch(tmp_path / "absent") is None


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for nox")
def test_a_build_whose_index_is_out_of_reach_names_the_host_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """nox's own abort (its session's preflight, as a node without DNS prints it) is said the one way every
    network failure is: the host and what gets past it, not "failed (exit 1), see above"."""
    from kitbench.errors import KitbenchError

    for name in ("KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    nox = tmp_path / "nox"
    nox.write_text(
        "#!/bin/sh\necho 'nox > Running session cpu'\necho \"nox > Session cpu aborted: cannot install "
        "cpu's packages from https://download.pytorch.org/whl/cpu: cannot reach download.pytorch.org (it "
        'does not resolve: Temporary failure in name resolution)"\nexit 1\n'
    )
    nox.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(nox))
    said: list[str] = []
    with pytest.raises(KitbenchError) as caught:
        pythons._build_with_nox(tmp_path, "cpu", said.append)
    assert caught.value.message.startswith("nox -s cpu --install-only failed: cannot reach download.pytorch.org (")
    assert caught.value.host == "download.pytorch.org"
    assert caught.value.hint is not None and caught.value.hint.startswith(
        "set KITBENCH_PYTORCH_INDEX to a mirror of PyTorch's index"
    )
    assert said[0] == "nox > Running session cpu"


def test_a_nodes_build_whose_index_is_out_of_reach_names_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other architecture's build, on its node through srun: its nox output comes back in Slurm's error,
    and the failure is said the same one way (host, cause, fix)."""
    from kitbench.errors import KitbenchError, SlurmError
    from kitbench.records import manifest

    for name in ("KITBENCH_INDEX_URL", "KITBENCH_PYTORCH_INDEX", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.delenv(name, raising=False)

    def srun(args: list[str], timeout: float = 0) -> None:
        raise SlurmError(
            "srun: error: node2: task 0: Exited with exit code 1",
            command="srun",
            stderr="nox > Session cpu aborted: cannot install cpu's packages from "
            "https://mirror.invalid/simple: cannot reach mirror.invalid (it does not resolve: "
            "Name or service not known)\n",
        )

    monkeypatch.setattr(manifest, "checkout_root", lambda: tmp_path)
    monkeypatch.setattr(slurm, "run", srun)
    with pytest.raises(KitbenchError) as caught:
        pythons._foreign_python("cpu", "aarch64", "node2", SlurmOptions(), lambda line: None, True)
    assert caught.value.message == (
        "building cpu's aarch64 environment on node2 failed: cannot reach mirror.invalid (Name or service not known)"
    )
    assert caught.value.host == "mirror.invalid"
