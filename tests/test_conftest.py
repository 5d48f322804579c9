"""The two test tiers (tests/conftest.py): what an unmarked test may not start, and that it cannot."""

from __future__ import annotations

import subprocess
import sys
import types
from pathlib import Path

import pytest
from conftest import _argv, launched

PY = sys.executable


@pytest.mark.parametrize(
    ("argv", "started"),
    [
        (["torchrun", "--standalone", "-m", "x"], "torchrun"),
        (["/usr/bin/docker", "build", "."], "docker"),
        (["sbatch", "--wrap", "true"], "sbatch"),
        ([PY, "-m", "nox", "-l"], "nox"),
        ([PY, "-m", "torch.distributed.run", "--nproc-per-node=2", "-m", "w"], "torch.distributed.run"),
        ([PY, "-m", "kitbench", "run", "--check", "mnist", "--quick"], "kitbench run (it trains)"),
        ([PY, "-m", "kitbench", "run", "--check=ddp"], "kitbench run (it trains)"),
        ([PY, "-m", "kitbench", "run", "--device", "cpu", "--data", "."], "kitbench run (it trains)"),
        (["kitbench", "replay", "r.json"], "kitbench replay"),
        ([PY, "-m", "kitbench", "run", "--check", "availability", "--check", "moves"], None),
        ([PY, "-m", "kitbench", "run", "--check", "mnist", "--help"], None),
        ([PY, "-m", "kitbench", "run", "--epochs", "-3"], None),
        ([PY, "-m", "kitbench", "install-cmd", "--no-gpu"], None),
        ([PY, "-c", "print('nox')"], None),
        (["env", "-u", "X", "A=1", "torchrun", "-m", "w"], "torchrun"),
        (["timeout", "60", PY, "-m", "nox"], "nox"),
        (["runuser", "-u", "munge", "--", "/usr/sbin/munged"], "munged"),
        (["env", "A=1"], None),
        ([], None),
    ],
)
def test_what_belongs_to_the_integration_tier(argv: list[str], started: str | None) -> None:
    assert launched(argv) == started


def test_popen_arguments_of_every_form_are_read_as_words() -> None:
    assert launched(_argv("docker build -t x .")) == "docker"  # a whole command line given as one string
    assert launched(_argv(b"/usr/bin/srun hostname")) == "srun"
    assert launched(_argv([Path("/usr/local/bin/torchrun"), b"-m", "w"])) == "torchrun"
    assert _argv("echo 'unbalanced") == ["echo", "'unbalanced"]


def test_a_shell_script_standing_in_for_a_launcher_starts_nothing(tmp_path: Path) -> None:
    fake = tmp_path / "sbatch"
    fake.write_text("#!/bin/sh\necho 'Submitted batch job 1'\n")
    fake.chmod(0o755)
    assert launched([str(fake), "job.sh"]) is None
    assert subprocess.run([str(fake)], capture_output=True, text=True, check=True).stdout == "Submitted batch job 1\n"


def test_an_unmarked_test_cannot_launch(tmp_path: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match=r"starts torchrun: mark it @pytest\.mark\.integration"):
        subprocess.run(["torchrun", "--standalone", "-m", "nothing"], cwd=tmp_path, check=False)
    with pytest.raises(pytest.fail.Exception, match="starts nox"):
        subprocess.Popen([sys.executable, "-m", "nox", "-l"], cwd=tmp_path)


def test_an_unmarked_test_cannot_train(monkeypatch: pytest.MonkeyPatch) -> None:
    """The trainer's epoch, guarded once the suite asks for a check (a stand-in trainer: no torch imported)."""
    import conftest

    from kitbench.suite import checks

    trainer = types.ModuleType("kitbench.suite.checks.mnist_training")
    trainer._epoch = lambda: "trained"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, trainer.__name__, trainer)
    monkeypatch.setitem(conftest._original, "get", lambda name: name)
    assert checks.get("mnist") == "mnist"
    with pytest.raises(pytest.fail.Exception, match=r"trains a model: mark it @pytest\.mark\.integration"):
        trainer._epoch()  # type: ignore[attr-defined]


@pytest.mark.docker
def test_a_docker_test_is_an_integration_test(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("integration") is not None


@pytest.mark.integration
def test_an_integration_test_may_launch(tmp_path: Path) -> None:
    """nox, as the integration tier starts it (its version only: nothing is built)."""
    pytest.importorskip("nox", reason="nox is not installed beside this Python (nox -s tests installs it)")
    done = subprocess.run(
        [sys.executable, "-m", "nox", "--version"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


class _Item:
    """What the grouping reads of a collected test: its id, its fixtures and its markers."""

    def __init__(self, nodeid: str, *fixtures: str, integration: bool = False) -> None:
        self.nodeid, self.fixturenames = nodeid, list(fixtures)
        self.marks = [pytest.mark.integration.mark] if integration else []

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.marks.append(marker.mark)

    def group(self) -> str:
        found = self.get_closest_marker("xdist_group")
        assert found is not None
        return str(found.args[0])


def test_a_module_is_one_worker_s_and_the_slow_modules_go_first() -> None:
    """pytest-xdist's groups: a module whole (its module fixtures made once), the modules sharing the Slurm
    cluster or the shared runs as one group (one cluster on the host's fixed ports), integration groups first."""
    from conftest import pytest_collection_modifyitems

    items = [
        fast := _Item("tests/a/test_fast.py::test_one"),
        verify := _Item("tests/reading/test_verify.py::test_x", "runs"),
        verify_alone := _Item("tests/reading/test_verify.py::test_y", "tmp_path"),
        compare := _Item("tests/reading/test_compare.py::test_z", "runs"),
        fleet := _Item("tests/fleet/test_fleet.py::test_f", "slurm_cluster", integration=True),
        ddp := _Item("tests/suite/test_ddp.py::test_d", integration=True),
        ddp_fast := _Item("tests/suite/test_ddp.py::test_e"),
    ]
    pytest_collection_modifyitems(items)  # type: ignore[arg-type]
    assert [i.group() for i in (fast, verify, verify_alone, compare, fleet, ddp, ddp_fast)] == [
        "tests/a/test_fast.py",
        "runs",
        "runs",
        "runs",
        "slurm_cluster",
        "tests/suite/test_ddp.py",
        "tests/suite/test_ddp.py",
    ]
    assert items == [fleet, ddp, ddp_fast, fast, verify, verify_alone, compare]
