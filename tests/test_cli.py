"""Bad input gets one ERROR line, a hint and a non-zero exit; never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kitbench import _parser
from kitbench._cli import main


def kitbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kitbench", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )


def assert_clean_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    # Progress lines ("... importing torch") may come first; the error is one line.
    errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR: ")]
    assert len(errors) == 1, done.stderr
    first = errors[0]
    for word in words:
        assert word in first, done.stderr
    assert any(line.startswith("hint: ") for line in done.stderr.splitlines()), done.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "--check", "speed"], ["unknown check 'speed'"]),
        (["run", "--device", "tpu"], ["unknown device 'tpu'"]),
        (["run", "--epochs", "-3"], ["--epochs must be a positive whole number, not -3"]),
        (["run", "--batch-size", "0"], ["--batch-size must be a positive whole number, not 0"]),
        (["run", "--model", "resnet"], ["unknown model 'resnet'"]),
        (["run", "--threads", "zero"], ["expected a whole number"]),
        (["run", "--data", "/nonexistent/kitbench", "--offline"], ["does not exist and --offline forbids"]),
        (["frobnicate"], ["unknown command 'frobnicate'"]),
    ],
)
def test_bad_input(args: list[str], words: list[str]) -> None:
    assert_clean_error(kitbench(*args), *words)


def test_unavailable_accelerator_says_why(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here, so --device cuda is not refused")
    done = kitbench("run", "--device", "cuda", "--check", "availability", "--out", str(tmp_path / "r.json"))
    assert_clean_error(done, "device 'cuda' is not usable here:")


def test_unwritable_out(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    done = kitbench("run", "--check", "availability", "--device", "cpu", "--out", str(blocker / "r.json"))
    assert_clean_error(done, "cannot write the record")


def test_json_output_is_the_record(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    done = kitbench("run", "--check", "availability", "--device", "cpu", "--json", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(out.read_text())


def test_default_record_path_follows_target_and_results_root(tmp_path: Path) -> None:
    done = kitbench(
        "run",
        "--check",
        "availability",
        "--device",
        "cpu",
        env={"KITBENCH_RESULTS": str(tmp_path), "KITBENCH_TARGET": "mytarget"},
    )
    assert done.returncode == 0, done.stderr
    written = list((tmp_path / "mytarget").glob("*.json"))
    assert len(written) == 1
    assert json.loads(written[0].read_text())["environment"]["target"] == "mytarget"
    assert str(written[0]) in done.stdout


@pytest.mark.integration
def test_sigterm_leaves_an_interrupted_record(
    mnist_root: Path, tmp_path: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    out = tmp_path / "r.json"
    proc = spawn(
        [
            sys.executable,
            "-m",
            "kitbench",
            "run",
            "--device",
            "cpu",
            "--data",
            str(mnist_root),
            "--offline",
            "--out",
            str(out),
        ]
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if out.exists() and out.stat().st_size and "availability" in json.loads(out.read_text())["checks"]:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert "Traceback" not in stderr and stderr.splitlines()[-2].startswith("ERROR: terminated")
    record = json.loads(out.read_text())
    assert record["status"] == "interrupted"
    assert "availability" in record["checks"] and "mnist" not in record["checks"]


def test_help_teaches() -> None:
    done = kitbench("run", "--help")
    assert done.returncode == 0
    for word in (
        "--check",
        "--loop",
        "resident",
        "KITBENCH_RESULTS",
        "examples:",
        "KITBENCH_DATA, else data/ in",
        "(KITBENCH_CACHE, else $XDG_CACHE_HOME/kitbench, else ~/.cache/kitbench)",
    ):
        assert word in done.stdout


def test_a_command_built_alone_helps_as_in_the_whole_parser() -> None:
    """A start builds only the given command's parser (``_parser.parse``): its help, and its verbs', read the same."""
    whole = {p.prog: p.format_help() for p in _parser._parsers(_parser.build())}
    for name in _parser._COMMANDS:
        alone = {p.prog: p.format_help() for p in _parser._parsers(_parser.build(name))[1:]}
        assert alone and alone == {
            prog: text
            for prog, text in whole.items()
            if prog == f"kitbench {name}" or prog.startswith(f"kitbench {name} ")
        }, name


def test_install_cmd_imports_only_what_it_needs(tmp_path: Path) -> None:
    """install-cmd's start-up ("Start-up" in docs/architecture.md), a test of modules, not of time: an answer, its
    manifests kept by a first one, imports nothing that only other commands or other answers need."""
    code = (
        "import runpy, sys\nsys.argv = ['kitbench', *sys.argv[1:]]\ntry:\n"
        "    runpy.run_module('kitbench', run_name='__main__')\nexcept SystemExit:\n"
        "    print('modules:', *sys.modules, file=sys.stderr)\n"
    )
    env = {**os.environ, "KITBENCH_CACHE": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path)}
    never = {
        "dataclasses",
        "inspect",
        "kitbench.suite",
        "hashlib",
        "json",
        "yaml",
        "fastjsonschema",
        "kitbench.advice.indexes",
        "urllib.request",
        "tomlkit",
        "kitbench._toml",
        "packaging.tags",
    }
    never |= {"platform"} if sys.platform == "linux" else set()
    for args in (["install-cmd", "--os", "linux", "--driver", "570.86.10", "--gpu-cc", "9.0"], ["install-cmd"]):
        for _ in range(2):  # the first keeps the manifests, as any install-cmd before it would have
            done = subprocess.run(
                [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300, check=False
            )
        modules = next(line for line in done.stderr.splitlines() if line.startswith("modules: ")).split()
        assert done.stdout.startswith("pip install torch==") and not never & set(modules), (args, done.stderr)


def test_in_process_install_cmd_turns_the_collector_back_on(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The collector is off while install-cmd answers ("Start-up" in docs/architecture.md), and a caller's
    ``main([...])`` gets it back as it was: on, nothing frozen; off stays off; a refusal turns it back on too."""
    import gc

    from kitbench import _cli

    during: list[bool] = []
    answer = _cli._main

    def watched(argv: list[str] | None) -> int:
        during.append(gc.isenabled())
        return answer(argv)

    monkeypatch.setattr(_cli, "_main", watched)
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    assert _cli.main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    assert _cli.main(["install-cmd", "--os", "beos"]) != 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    assert _cli.main(["compare", "--no-such-option"]) != 0
    assert during == [False, False, True]  # only install-cmd runs without it
    gc.disable()
    try:
        assert _cli.main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
        assert not gc.isenabled()
    finally:
        gc.enable()
    capsys.readouterr()


def test_probe_json_without_torch() -> None:
    code = (
        "import sys, runpy; sys.argv = ['kitbench', 'probe', '--json']; "
        "sys.modules['torch'] = None; runpy.run_module('kitbench', run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["os"] in ("linux", "macos", "windows")


# --- Nothing lost or clobbered, and the record says what happened (through the real CLI) ---


def _main(*args: str) -> int:
    from kitbench._cli import main

    return main(list(args))


AVAIL = ("run", "--check", "availability", "--device", "cpu")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: p.write_text("notes I care about"), "is not a kitbench record"),
        (lambda p: p.symlink_to(p.parent / "target.json"), "is a symlink"),
        (lambda p: os.mkfifo(p), "not a regular file"),
    ],
)
def test_out_refuses_what_is_not_a_record(
    tmp_path: Path, make: object, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    make(out)  # type: ignore[operator]
    before = _untouched(out)
    assert _main(*AVAIL, "--out", str(out), "--force") == 2  # refused output: exit 2, as --plot, report -o
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err and "Traceback" not in err
    assert _untouched(out) == before and not (tmp_path / "target.json").exists()


def _untouched(path: Path) -> tuple[int, ...]:
    # Not the whole stat: reading a file to see whether it is a record moves its atime (relatime, first read).
    found = path.lstat()
    return found.st_mode, found.st_ino, found.st_size, found.st_mtime_ns, found.st_ctime_ns


def test_out_to_a_device_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(*AVAIL, "--out", "/dev/null") == 2
    assert "not a regular file" in capsys.readouterr().err


def test_a_record_is_replaced_only_with_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert _main(*AVAIL, "--out", str(out)) == 0
    first = out.read_text()
    assert _main(*AVAIL, "--out", str(out)) == 2
    assert "already holds a kitbench record" in capsys.readouterr().err and out.read_text() == first
    assert _main(*AVAIL, "--out", str(out), "--force") == 0
    assert out.read_text() != first


def test_two_runs_in_the_same_second_keep_two_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    monkeypatch.setenv("KITBENCH_TARGET", "same")
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "kitbench", *AVAIL], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for _ in range(3)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    assert len(list((tmp_path / "same").glob("*.json"))) == 3


@pytest.mark.parametrize("name", ["../outside", "a/b", "/etc"])
def test_a_target_name_cannot_leave_the_results_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("KITBENCH_TARGET", name)
    assert _main(*AVAIL) == 2
    assert "is not a plain name" in capsys.readouterr().err
    assert list(tmp_path.rglob("*.json")) == []


def test_sigterm_while_torch_imports_leaves_an_interrupted_record(
    tmp_path: Path, spawn: Callable[..., subprocess.Popen[str]]
) -> None:
    out = tmp_path / "r.json"
    proc = spawn([sys.executable, "-m", "kitbench", *AVAIL, "--out", str(out)])
    deadline = time.monotonic() + 60
    while not (out.exists() and out.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)  # the record exists; torch takes seconds to import
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    assert "Traceback" not in stderr
    record = json.loads(out.read_text())
    assert record["status"] == "interrupted" and record["ended_at"]
    assert record["environment"]["torch"] is None and record["checks"] == {}


@pytest.mark.parametrize(
    ("stop", "code", "words"), [("term", 143, "terminated (SIGTERM)"), ("int", 130, "interrupted")]
)
def test_a_signal_before_the_record_exists_is_one_line(
    stop: str,
    code: int,
    words: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from kitbench.errors import Terminated
    from kitbench.suite import runner as suite

    def probe_stopped() -> None:  # the signal arrives while the machine is probed, before the claim
        raise Terminated if stop == "term" else KeyboardInterrupt

    monkeypatch.setattr(suite, "probe_machine", probe_stopped)
    assert _main(*AVAIL, "--out", str(tmp_path / "r.json")) == code
    assert capsys.readouterr().err == f"ERROR: {words} before a record was written\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["probe"], "ERROR: interrupted: kitbench probe\n"),
        (["install-cmd", "--no-gpu"], "ERROR: interrupted: kitbench install-cmd\n"),
        (["compare", "docs/records"], "ERROR: interrupted: kitbench compare\n"),
    ],
)
def test_ctrl_c_in_a_command_that_writes_no_record_says_nothing_of_records(
    args: list[str], said: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench import _cli

    def stopped(parsed: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(_cli._COMMANDS, args[0], stopped)
    assert _main(*args) == 130
    assert capsys.readouterr().err == said


def test_an_os_error_is_one_line_naming_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench import _cli

    def writes_a_plan(parsed: object) -> int:  # as a fleet plan written where no folder is
        (tmp_path / "gone" / "fleet.json").write_text("{}")
        return 0

    monkeypatch.setitem(_cli._COMMANDS, "probe", writes_a_plan)
    assert _main("probe") == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"ERROR: {tmp_path / 'gone' / 'fleet.json'}: No such file or directory"
    assert err[1].startswith("hint: check that the folder exists, is writable and has room")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["isntall-cmd"], "unknown command 'isntall-cmd'; did you mean 'install-cmd'?"),
        (["fleet", "rn", "cpu"], "unknown command 'rn'; did you mean 'run'?"),
        (["run", "--quik"], "unknown option '--quik'; did you mean '--quick'?"),
        (["compare", "x", "--formt=csv"], "unknown option '--formt'; did you mean '--format'?"),
        (
            ["probe", "--explain"],
            "unknown option '--explain' for this command; it is an option of kitbench install-cmd",
        ),
    ],
)
def test_a_typo_gets_a_suggestion(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(*args) == 2
    assert capsys.readouterr().err.startswith(f"ERROR: {said}")


_EVERY_COMMAND = "run, install-cmd, container, compare, verify, report, fleet, replay, project, probe, facts"


@pytest.mark.parametrize(
    ("args", "said", "hint"),
    [
        # Suggested only from the given command's own flags, and only when close (any two flags share "--").
        (["install-cmd", "--forse"], "unknown option '--forse'", "see: kitbench install-cmd --help"),
        (["install-cmd", "--bogus"], "unknown option '--bogus'", "see: kitbench install-cmd --help"),
        (["run", "--bogus"], "unknown option '--bogus'", "see: kitbench run --help"),
        (["container", "cpu", "--bogus"], "unknown option '--bogus'", "see: kitbench container --help"),
        (["run", "--quik"], "unknown option '--quik'; did you mean '--quick'?", "see: kitbench run --help"),
        (
            ["install-cmd", "--jsn"],
            "unknown option '--jsn'; did you mean '--json'?",
            "see: kitbench install-cmd --help",
        ),
        (
            ["install-cmd", "--check", "mnist"],
            "unknown option '--check' for this command; it is an option of kitbench run",
            "see: kitbench install-cmd --help",
        ),
        # An unknown flag is named, not the command (or argument) that argparse then found missing.
        (["--bogus"], "unknown option '--bogus'", "see: kitbench --help"),
        (["fleet", "--bogus"], "unknown option '--bogus'", "see: kitbench fleet --help"),
        (["fleet", "gather", "--bogus"], "unknown option '--bogus'", "see: kitbench fleet gather --help"),
        (["nosuch"], "unknown command 'nosuch'", f"choose one of: {_EVERY_COMMAND}"),
        (["fleet", "nosuch"], "unknown command 'nosuch'", "choose one of: probe, run, gather"),
        (["facts", "nosuch"], "unknown command 'nosuch'", "choose one of: refresh"),
        (["isntall-cmd"], "unknown command 'isntall-cmd'; did you mean 'install-cmd'?", "see: kitbench --help"),
        # With no unknown flag, what is missing is said as before.
        ([], "the following arguments are required: command", "see: kitbench --help"),
        (["fleet", "gather"], "the following arguments are required: job", "see: kitbench fleet gather --help"),
        (["report", "--force"], "the following arguments are required: RECORD_OR_DIR", "see: kitbench report --help"),
        # A missing verb is named by its choices, not by argparse's dest.
        (["facts"], "the following arguments are required: {refresh}", "see: kitbench facts --help"),
        (["fleet"], "the following arguments are required: {probe,run}", "see: kitbench fleet --help"),
    ],
)
def test_an_unknown_word_is_named_with_the_given_commands_help(
    args: list[str], said: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _main(*args) == 2
    assert capsys.readouterr().err == f"ERROR: {said}\nhint: {hint}\n"


@pytest.mark.parametrize("command", ["compare", "verify", "replay", "report"])
@pytest.mark.parametrize(
    ("given", "said", "hint"),
    [
        ("other.json", "is not a kitbench run record (no 'schema' field)", "it is JSON of another kind"),
        ("not.json", "is not JSON (line 1: Expecting value)", "it is not a kitbench record, which is a JSON file"),
        ("cut.json", "is not a complete JSON record", "it may be truncated"),
        ("fifo", "is not a regular file", "give a record kitbench run wrote"),
        ("/dev/zero", "is not a regular file", "give a record kitbench run wrote"),
        ("missing.json", "no such record", "give "),
    ],
)
def test_a_record_that_cannot_be_read_gets_a_hint(
    command: str,
    given: str,
    said: str,
    hint: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if (given == "fifo" and not hasattr(os, "mkfifo")) or (given == "/dev/zero" and not Path(given).exists()):
        pytest.skip(f"no {given} on this system")
    monkeypatch.chdir(tmp_path)
    Path("other.json").write_text('{"job": "1234"}')  # JSON, as a fleet plan is, but no record
    Path("not.json").write_text("not json")
    Path("cut.json").write_text('{"schema": "kitbench.run/2", "sta')
    if given == "fifo":
        os.mkfifo("fifo")
    argv = {
        "compare": [given],
        "verify": [given, given],
        "replay": [given, "--out", "out.json"],
        "report": ["-o", "r.html", given],
    }[command]
    assert main([command, *argv]) != 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith("ERROR: ") and said in err[0], err
    assert err[1].startswith(f"hint: {hint}"), err


_POSIX_ONLY = {
    os: ("killpg", "getuid", "geteuid", "getgid", "chown", "setsid", "getpgid", "uname"),
    signal: ("SIGKILL", "SIGHUP", "SIGQUIT", "SIGUSR1"),
}


@pytest.mark.parametrize(
    "args",
    [
        ["install-cmd", "--no-gpu", "--explain"],
        ["probe", "--json"],
        ["compare", "docs/records", "--format", "csv"],
        ["verify", "docs/records/cpu-bench-fnn.json", "AGAIN"],
        [*AVAIL, "--check", "moves", "--quick"],
    ],
)
def test_the_commands_windows_runs_need_no_posix_only_call(
    args: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    another_run: Callable[[Path, Path], Path],
) -> None:
    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    if "AGAIN" in args:  # another run with the same numbers: a record is never verified against itself
        args = [str(another_run(Path(args[1]), tmp_path / "again.json")) if a == "AGAIN" else a for a in args]
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    if args[0] == "run":
        # torch first: numpy's import takes its Linux branch (os.uname) here, its Windows one there;
        # a half-imported torch would also break every later test of this process.
        pytest.importorskip("torch")
    for module, names in _POSIX_ONLY.items():
        for name in names:
            monkeypatch.delattr(module, name, raising=False)
    assert _main(*args) == 0, capsys.readouterr().err


def test_a_setup_error_makes_a_failed_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here, so --device cuda is not refused")
    out = tmp_path / "r.json"
    assert _main("run", "--check", "availability", "--device", "cuda", "--out", str(out)) == 1
    record = json.loads(out.read_text())
    assert record["status"] == "failed" and record["ended_at"]
    assert record["error"].startswith("device 'cuda' is not usable here")


@pytest.mark.integration
def test_a_diverging_run_is_not_ok(tiny_mnist: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert (
        _main(
            "run",
            "--check",
            "mnist",
            "--device",
            "cpu",
            "--data",
            str(tiny_mnist),
            "--offline",
            "--loop",
            "resident",
            "--lr",
            "1e30",
            "--out",
            str(out),
        )
        == 1
    )
    text = out.read_text()
    assert "NaN" not in text and "Infinity" not in text
    record = json.loads(text)
    assert record["status"] == "diverged"
    mnist = record["checks"]["mnist"]
    assert mnist["status"] == "failed" and "diverged: the training loss is not finite from step" in mnist["summary"]
    assert record["nonfinite"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--lr", "inf"], "--lr must be a positive finite number"),
        (["--lr", "nan"], "--lr must be a positive finite number"),
        (["--threads", "100000"], "--threads 100000 is more than this kit allows"),
        (["--seed", str(2**70)], "--seed must be between 0 and"),
        (["--seed", "9" * 100_000], "longer than any kitbench takes"),
        (["--epochs", "1" * 30], "is more than this kit allows (1000)"),
        (["--epochs", "1" * 50], "expected a whole number of at most 40 digits"),
        (["--device", "x" * 100_000], "longer than any kitbench takes"),
        # Digits of other scripts: str.isdigit() takes '²', int() refuses it; int() takes '٣'. ASCII only, one parser.
        (["--device", "cuda:²"], "bad device 'cuda:²'"),
        (["--device", "cuda:٣"], "bad device 'cuda:٣'"),
        (["--epochs", "٣"], "expected a whole number, not '٣'"),
        (["--epochs", "1_0"], "expected a whole number, not '1_0'"),
        (["--out", "x" * 5000], "longer than any kitbench takes"),
    ],
)
def test_unbounded_values_are_refused(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(*AVAIL, "--check", "mnist", *args) == 2  # MNIST's options act only with its check
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err, err
    assert len(err) < 1000


def test_a_world_that_cannot_fit_is_refused_before_any_rank_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("kitbench.machine.cpus.usable_cores", lambda: 2)
    for nproc in ("9", "500"):
        assert _main("run", "--check", "ddp", "--nproc", nproc) == 2
        assert capsys.readouterr().err.startswith(
            f"ERROR: --nproc must be between 1 and 8 here (4 per usable core, 2 here, 64 at most), not {nproc}"
        )
    monkeypatch.setattr("kitbench.machine.cpus.memory_available", lambda: 3 * 2**30)
    assert _main("run", "--check", "ddp", "--nproc", "8") == 2
    err = capsys.readouterr().err
    assert "ERROR: --nproc 8 needs about 4.0 GiB for its ranks (0.5 GiB each), and 3.0 GiB is available" in err
    assert "hint: at most --nproc 6 on this machine now" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "{long}"],
        ["compare", "{long}/*.json"],
        ["verify", "{long}", "{long}"],
        ["report", "{long}"],
        ["report", "{tmp}", "--out", "{long}.html"],
        ["replay", "{long}"],
        ["compare", "{tmp}", "--plot", "{long}.png"],
        ["install-cmd", "--python", "{long}"],
        ["run", "--check", "mnist", "--offline", "--data", "{long}"],
        [*AVAIL, "--out", "{long}/r.json"],
        ["fleet", "gather", "1"],
        ["container", "cuda126", "--", "--data", "{long}"],
    ],
)
def test_a_path_too_long_for_the_os_is_one_line_everywhere(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENAMETOOLONG (a component over 255 bytes) from any path argument or KITBENCH_RESULTS."""
    long = str(tmp_path / ("x" * 300))
    monkeypatch.setenv("KITBENCH_RESULTS", long)
    code = _main(*[word.format(long=long, tmp=tmp_path) for word in argv])
    err = capsys.readouterr().err
    assert code in (1, 2) and err.startswith("ERROR: ") and err.count("ERROR: ") == 1, err
    assert "Traceback" not in err and len(err.splitlines()) <= 3


def test_an_over_long_file_name_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(*AVAIL, "--out", str(tmp_path / ("x" * 300 + ".json"))) == 1
    assert "cannot write the record" in capsys.readouterr().err


def test_repeated_checks_run_once(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert _main("run", "--check", "availability", "--check", "availability", "--device", "cpu", "--out", str(out)) == 0
    record = json.loads(out.read_text())
    assert list(record["checks"]) == ["availability"]
    assert record["options"]["checks"] == ["availability"]


def test_a_broken_torchvision_fails_only_the_mnist_check(mnist_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code = (
        "import sys, runpy; sys.modules['torchvision'] = None; sys.argv = ['kitbench', 'run', '--device', "
        f"'cpu', '--check', 'availability', '--check', 'mnist', '--quick', '--offline', '--data', "
        f"{str(mnist_root)!r}, '--out', {str(out)!r}]; runpy.run_module('kitbench', run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    record = json.loads(out.read_text())
    assert record["checks"]["availability"]["status"] == "ok"
    assert record["checks"]["mnist"]["status"] == "failed"
    assert "torchvision" in record["checks"]["mnist"]["summary"]
    assert record["environment"]["torchvision"].startswith("unusable: ")


@pytest.mark.parametrize("name", ["torch", "matplotlib"])
def test_a_missing_optional_part_is_named_with_its_installer(name: str) -> None:
    args = ["run", "--check", "availability"] if name == "torch" else ["compare", "docs/records", "--plot", "c.png"]
    code = (
        f"import sys, runpy; sys.modules[{name!r}] = None; sys.argv = ['kitbench', *{args!r}]; "
        "runpy.run_module('kitbench', run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert_clean_error(done, f"needs {name}, which is not installed")
    from kitbench._installed import add_command

    if name == "matplotlib":
        assert add_command(["matplotlib"]) in done.stderr and "kitbench[" not in done.stderr
        return
    # This machine's answer in this Python's installer's words, not a bare extra that would pull PyPI's
    # default build (nor a project called kitbench, which PyPI does not have).
    from kitbench._cli import _this_machines_torch

    answer = _this_machines_torch()
    assert answer is not None and answer[0][0].startswith("torch==")
    assert (
        f"(install-cmd's answer) into the Python kitbench runs in ({sys.executable}): "
        f"{add_command(*answer)};" in done.stderr
    )
    assert "kitbench[" not in done.stderr


def test_the_torch_hint_takes_install_cmd_s_packages_and_index(monkeypatch: pytest.MonkeyPatch) -> None:
    from kitbench import _cli
    from kitbench.advice import selector

    cu126 = (("torch", "2.14.1"), ("torchvision", "0.29.1")), "https://download.pytorch.org/whl/cu126"
    answers = iter([cu126, (cu126[0], None), ((), "https://download.pytorch.org/whl/nightly/cpu")])
    real = selector.select

    def select(*args: Any, **kwargs: Any) -> selector.Selection:
        chosen = real(*args, **kwargs)
        chosen.pins, chosen.index = next(answers)
        return chosen

    monkeypatch.setattr(selector, "select", select)
    assert _cli._this_machines_torch() == (
        ["torch==2.14.1", "torchvision==0.29.1"],
        "https://download.pytorch.org/whl/cu126",
    )
    assert _cli._this_machines_torch() == (["torch==2.14.1", "torchvision==0.29.1"], None)
    assert _cli._this_machines_torch() is None  # nightly pins nothing: only pip's own words carry --pre


@pytest.mark.parametrize("name", ["tomlkit", "packaging"])
def test_project_without_its_dependencies_says_which_in_one_line(name: str, tmp_path: Path) -> None:
    # A pinned environment installs kitbench without its dependencies, from a lock that may predate them.
    args = ["project", str(tmp_path), "--machine", "ci=--os linux --no-gpu"]
    code = (
        f"import sys, runpy; sys.modules[{name!r}] = None; sys.argv = ['kitbench', *{args!r}]; "
        "runpy.run_module('kitbench', run_name='__main__')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert_clean_error(done, f"kitbench project needs {name}, which is not installed")
    # In the installer's words (kitbench._installed): this venv, made by uv, has no pip.
    assert "install --python " in done.stderr and " tomlkit packaging (dependencies of kitbench" in done.stderr
    assert not list(tmp_path.iterdir())


def test_the_plots_hint_never_points_back_to_the_pinned_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kitbench.reading import plots

    env = tmp_path / ".nox" / "cpu"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "pip").touch()
    (env / "pyvenv.cfg").write_text("home = /usr/bin\n")
    monkeypatch.setattr(sys, "prefix", str(env))
    monkeypatch.setattr(sys, "executable", str(env / "bin" / "python"))
    hint = plots._plots_hint()
    assert hint.startswith(
        f"install it into this environment: {env}/bin/python -m pip install matplotlib (`nox -R` keeps it"
    )
    assert "nox -R -s cpu --" not in hint
    # nox's uv backend leaves pip out of the environment: the hint then installs with uv.
    (env / "bin" / "pip").unlink()
    assert plots._plots_hint().startswith(
        f"install it into this environment: uv pip install --python {env}/bin/python matplotlib ("
    )
    monkeypatch.setattr(sys, "prefix", "/usr")
    monkeypatch.setattr(sys, "executable", "/usr/bin/python3")
    assert plots._plots_hint() == "/usr/bin/python3 -m pip install matplotlib"
    # A venv below a session's temporary folder (nox's TMPDIR) is not the pinned environment.
    monkeypatch.setattr(sys, "prefix", str(env / "tmp" / "venv"))
    assert plots._plots_hint() == "/usr/bin/python3 -m pip install matplotlib"


@pytest.mark.parametrize(
    ("plot", "words"), [("c.xyz", "unknown image format .xyz"), ("c", "no image format"), (".", "is a directory")]
)
def test_plot_targets_are_checked_first(
    plot: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = Path(__file__).resolve().parent.parent
    target = str(tmp_path / plot) if plot != "." else str(tmp_path)
    assert _main("compare", str(repo / "docs" / "records"), "--plot", target) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err


@pytest.mark.parametrize(
    ("content", "code"),
    [
        ("cut", 2),
        ("null-section", 2),
        ("dev-zero", 2),
    ],
)
def test_verify_cannot_compare_exits_2(
    tmp_path: Path, content: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    good = Path(__file__).resolve().parent.parent / "docs" / "records" / "h100-fnn.json"
    bad = tmp_path / "bad.json"
    if content == "cut":
        bad.write_text(good.read_text()[:300])
    elif content == "null-section":
        bad.write_text(good.read_text().replace('"checks": {', '"checks": null, "x": {', 1))
    assert _main("verify", str(good), "/dev/zero" if content == "dev-zero" else str(bad)) == code
    assert capsys.readouterr().err.startswith("ERROR: ")


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "--sweep", "--batch-size", "32"], "--sweep and --batch-size cannot combine"),
        (["run", "--sweep", "--batch-size=16,64"], "--sweep and --batch-size cannot combine"),
        (["run", "--nproc", "2"], "--nproc only act on the DDP check"),
        (["run", "--check", "availability", "--loop", "graphed"], "--loop only act on the MNIST check"),
        (["run", "--check", "moves", "--sweep"], "--sweep only act on the MNIST check"),
        (["run", "--check", "ddp", "--epochs", "3"], "--epochs only act on the MNIST check"),
        (
            ["run", "--check", "availability", "--model", "cnn", "--limit", "9"],
            "--model, --limit only act on the MNIST",
        ),
        (["run", "--check", "moves", "--data", "/tmp", "--offline"], "--data, --offline only act on the MNIST"),
        (["run", "--check", "mnist", "--ddp-timeout", "30", "--nnodes", "1"], "--nnodes, --ddp-timeout only act"),
        (["run", "--check", "ddp", "--rdzv-endpoint", "127.0.0.1:70000"], "a port is between 1 and 65535"),
        (["run", "--check", "ddp", "--rdzv-endpoint", "h:0"], "a port is between 1 and 65535"),
        (
            ["run", "--check", "ddp", "--nnodes", "2", "--rdzv-endpoint", "nosuchhost.invalid:29500"],
            "the host 'nosuchhost.invalid' does not resolve",
        ),  # RFC 6761: .invalid never resolves
    ],
)
def test_options_that_cannot_combine_are_refused(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*argv, "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("after", "words"),
    [
        (["--out", "/shared/x.json"], "fleet run sets --out itself"),
        (["--ou=/shared/x.json"], "fleet run sets --out itself"),
        (["--force"], "fleet run sets --force itself"),
        (["--nnodes", "2", "--rdzv-endpoint", "h:1", "--check", "ddp"], "--nnodes, --rdzv-endpoint"),
        (["--no-such-option"], "unknown option '--no-such-option'"),
        (["--epochs", "x"], "expected a whole number"),
        (["--sweep", "--batch-size", "8"], "cannot combine"),
    ],
)
def test_fleet_run_arguments_are_checked_before_slurm(
    after: list[str], words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench.fleet import slurm

    def never(*_: object, **__: object) -> None:
        raise AssertionError("Slurm was asked")

    monkeypatch.setattr(slurm, "nodes", never)
    monkeypatch.setattr(slurm, "submit_held", never)
    assert main(["fleet", "run", "cpu", "--", *after]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["fleet", "run", "nosuch"], "unknown target 'nosuch'"),
        (["fleet", "run", "cpu", "--timeout", "-5"], "--timeout must be a positive number"),
        (["fleet", "run", "cpu", "--timeout", "nan"], "--timeout must be a positive number"),
        (["fleet", "probe", "--timeout", "inf"], "--timeout must be a positive number"),
    ],
)
def test_fleet_local_inputs_are_checked_before_slurm(
    argv: list[str], words: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench.fleet import slurm

    def never(*_: object, **__: object) -> None:
        raise AssertionError("Slurm was asked")

    monkeypatch.setattr(slurm, "nodes", never)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err


@pytest.mark.parametrize(
    "argv",
    [["install-cmd", "--explain"], ["compare", "docs/records"], ["compare", "docs/records", "--format", "markdown"]],
)
def test_stdout_errors_end_cleanly(argv: list[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "kitbench", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=root,
            env=env,
            check=False,
        )
    assert done.returncode == 74, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "ERROR: cannot write the output: No space left on device"
    reader = subprocess.Popen(
        [sys.executable, "-m", "kitbench", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=root, env=env
    )
    assert reader.stdout is not None and reader.stderr is not None
    reader.stdout.read(1)
    reader.stdout.close()  # the reader goes away, as `| head -c1` does
    err = reader.stderr.read().decode()
    assert reader.wait() in (0, 141) and "Traceback" not in err and "ERROR" not in err, err


def test_a_closed_stdout_is_one_error_before_any_work(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench import _cli

    monkeypatch.setattr(_cli, "_main", lambda argv: pytest.fail("a command ran with nowhere to print"))
    monkeypatch.setattr(sys, "stdout", None)  # as Python starts with fd 1 closed (`>&-`)
    assert main(["probe", "--json"]) == 74
    assert capsys.readouterr().err == "ERROR: cannot write the output: Bad file descriptor\n"


def test_a_closed_stderr_keeps_notes_out_of_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stderr", None)  # as Python starts with fd 2 closed (`2>&-`)
    try:
        assert main(["install-cmd", "--no-gpu"]) == 0
    finally:
        if sys.stderr is not None:
            sys.stderr.close()  # main's devnull: this process's own stderr comes back with monkeypatch
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("pip install torch=="), out  # the command alone


@pytest.mark.skipif(sys.platform == "win32", reason="closes fds with a POSIX shell's >&- and 2>&-")
@pytest.mark.parametrize(
    ("closing", "argv"),
    [(">&-", ["probe", "--json"]), (">&-", ["install-cmd", "--no-gpu"]), ("2>&-", ["install-cmd", "--no-gpu"])],
)
def test_closed_standard_streams_never_a_traceback(closing: str, argv: list[str]) -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        ["sh", "-c", f'"$@" {closing}', "sh", sys.executable, "-m", "kitbench", *argv],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    if closing == ">&-":
        assert (done.returncode, done.stderr) == (74, "ERROR: cannot write the output: Bad file descriptor\n")
    else:
        assert done.returncode == 0 and done.stdout.startswith("pip install torch=="), done.stdout
        assert done.stdout.count("\n") == 1, done.stdout  # no note: or # lines in what `eval` runs


def _slurm_never_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from kitbench.fleet import slurm

    def never(*_: object, **__: object) -> None:
        raise AssertionError("Slurm was asked")

    for name in ("nodes", "node_arches", "run", "submit_held", "tasks"):
        monkeypatch.setattr(slurm, name, never)


_BAD_TIMES = ["abc", "1:2:3:4", "1-", "-5", "1.5", "2h", "1-2-3", "1-2:3:4:5", "unlimitedx", ":30", "30:"]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["fleet", "run", "cuda126", "--containers", "bogus"], "unknown --containers 'bogus'"),
        (["fleet", "probe", "--python", "{tmp}", "--per", "rack"], "no such executable"),  # local inputs first
        (["fleet", "run", "cpu", "--venv", sys.prefix, "--per", "rack"], "unknown --per 'rack'"),
        (["fleet", "run", "cpu", "--containers", "bogus"], "unknown --containers 'bogus'"),
        (["fleet", "run", "cpu", "--venv", "/nonexistent"], "--venv /nonexistent: no Python there"),
        (["fleet", "run", "cpu", "--venv", "{tmp}"], "no Python there"),  # a folder that is no venv
        (["fleet", "run", "cpu", "--venv", "{long}"], "no Python there"),  # ENAMETOOLONG
        (["fleet", "run", "cpu", "--containers", "pyxis"], "--containers only acts on docker targets"),
        (["fleet", "run", "cpu", "--image", "docker://x"], "--image only acts on docker targets"),
        (["fleet", "run", "cuda126", "--venv", "{tmp}"], "--venv only acts on venv targets"),
        (["fleet", "run", "cuda126", "--containers", "oci", "--image", "x"], "--image only acts with pyxis"),
        (["fleet", "run", "mps"], "target 'mps' is a conda target: it cannot run on a Slurm cluster"),
        (["fleet", "probe", "--python", "/nonexistent"], "--python /nonexistent: no such executable"),
        (["fleet", "probe", "--python", "{tmp}"], "no such executable"),  # no bin/python in it
        (["fleet", "probe", "--python", "{long}"], "no such executable"),
        (["fleet", "probe", "--release", "9.9.9"], "unknown release '9.9.9'"),
        *[(["fleet", "run", "cpu", "--time", t], f"--time {t!r} is not a Slurm time limit") for t in _BAD_TIMES],
        *[(["fleet", "probe", f"--time={t}"], f"--time {t!r} is not a Slurm time limit") for t in _BAD_TIMES[:3]],
    ],
)
def test_fleet_inputs_of_every_kind_are_checked_before_slurm(
    argv: list[str], words: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23: local inputs are validated before Slurm (or Docker, or nox) is asked anything."""
    _slurm_never_asked(monkeypatch)
    monkeypatch.setattr("kitbench.rebuild.images.build", lambda *a, **k: pytest.fail("an image was built"))
    monkeypatch.setattr("kitbench.fleet.pythons._build_with_nox", lambda *a, **k: pytest.fail("nox was run"))
    long = str(tmp_path / ("x" * 300))  # a name longer than any file system takes: ENAMETOOLONG
    assert main([a.replace("{tmp}", str(tmp_path)).replace("{long}", long) for a in argv]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("ERROR: ") and words in err[0], err
    assert len(err) == 2 and err[1].startswith("hint: "), err


@pytest.mark.parametrize(
    "value", ["30", "0", "30:15", "12:30:15", "2-12", "2-12:30", "2-12:30:15", "UNLIMITED", "infinite"]
)
def test_slurm_time_formats_pass_the_local_check(
    value: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every --time form sbatch takes gets as far as asking Slurm for nodes, as do a real --venv and --python."""
    from kitbench.errors import SlurmError
    from kitbench.fleet import slurm

    def asked(*_: object, **__: object) -> None:
        raise SlurmError("asked Slurm")

    monkeypatch.setattr(slurm, "nodes", asked)
    for argv in (
        ["fleet", "run", "cpu", "--venv", sys.prefix, "--time", value],
        ["fleet", "probe", "--python", sys.executable, "--time", value],
        ["fleet", "probe", "--python", sys.prefix, "--release", "2.11.0", "--time", value],
    ):
        assert main(argv) == 1
        assert capsys.readouterr().err.startswith("ERROR: asked Slurm")


@pytest.mark.parametrize(
    ("machine", "words"),
    [
        ("laptop", "--machine 'laptop' is not NAME=FILE or NAME='FLAGS'"),
        ("Laptop=--os linux --no-gpu", "machine name 'Laptop' is not a lowercase word"),
        ("box=--no-gpu", "a machine described by its flags needs its --os"),
        ("box=--os beos", "unknown --os 'beos'"),
        ("box=--bogus", "unknown option '--bogus'"),
        ("box={tmp}/absent.json", "no such probe file"),
        ("box={tmp}", "is not a regular file"),
        ("box={tmp}/out", "is not a regular file"),
        ("box=--os linux 'unterminated", "its flags do not split as a shell would"),
        ("box=--os linux --release 2.5.0", "--release says nothing about a machine"),
        ("box=--os linux --rel=2.5.0", "--release says nothing about a machine"),
        ("box=--os linux --compute cu126", "--compute says nothing about a machine"),
        ("box=--os linux --explain", "--explain says nothing about a machine"),
        ("box=--os linux --json", "--json says nothing about a machine"),
        ("box=--os linux --refresh", "--refresh says nothing about a machine"),
        ("box=--os linux --python /usr/bin/python3", "--python says nothing about a machine"),
        ("default=--os linux --no-gpu", "machine name 'default' is pixi's own"),
        ("x" * 500 + "=--os linux --no-gpu", "(500 characters)"),
    ],
)
def test_project_refuses_a_machine_it_cannot_read_in_one_line(
    machine: str, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "out").mkdir()
    code = main(["project", str(tmp_path / "out"), "--machine", machine.replace("{tmp}", str(tmp_path))])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and err[0].startswith("ERROR: ") and words in err[0], err
    assert len(err) == 2 and err[1].startswith("hint: "), err
    assert not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize(
    ("more", "words"),
    [
        (["--index", "https://m/{Compute}"], "the only placeholder a mirror's URL takes is {compute}"),
        (["--index", "https://m/{0}"], "the only placeholder"),
        (["--index", "https://m/{"], "the only placeholder"),
        (["--index", "https://m/{compute.x}"], "the only placeholder"),
        (["--index", "ftp://m/{compute}"], "--index is not a usable index URL"),
        (["--index", "https://user:token@m/{compute}"], "holds a user, token"),
        (["--index", "https://m/{compute}?private_token=x"], "holds a user, token, query"),
        (["--name", "my project"], "--name 'my project' is not a valid project name"),
        (
            ["--index", "https://m/simple", "--machine", "h100=--os linux --driver 570.86.10 --gpu-cc 9.0"],
            "has no {compute} to tell them apart",
        ),
        (["--drop", "ci"], "both given (--machine) and dropped (--drop)"),
        (["--machine", "ci=--os linux"], "machine 'ci' is given twice"),
    ],
)
def test_project_refuses_contradictions_and_unusable_mirrors_in_one_line(
    more: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["project", str(tmp_path), "--machine", "ci=--os linux --no-gpu", *more])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and err[0].startswith("ERROR: ") and words in err[0], err
    assert len(err) == 2 and err[1].startswith("hint: "), err
    assert "user:token" not in "".join(err)
    assert not list(tmp_path.iterdir())


def test_project_refuses_a_file_it_cannot_read_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for text in ("tool = 5\n", '[tool.uv]\nsources = "x"\n', "not toml [\n"):
        (tmp_path / "pyproject.toml").write_text(text)
        assert main(["project", str(tmp_path), "--machine", "ci=--os linux --no-gpu"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 2 and err[0].startswith("ERROR: pyproject.toml: ") and err[1].startswith("hint: "), err
        assert (tmp_path / "pyproject.toml").read_text() == text


def test_project_prints_each_machine_s_line_and_writes_the_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    probe = Path(__file__).resolve().parent / "resources" / "project" / "ci-linux-x86_64.probe.json"
    assert (
        main(
            [
                "project",
                str(tmp_path),
                "--machine",
                f"ci={probe}",
                "--machine",
                "h100=--os linux --driver 570.86.10 --gpu-cc 9.0",
                "--pixi",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert [line.split("#")[0].split() for line in out.splitlines()] == [
        ["ci", "uv", "sync", "--extra", "cpu"],
        ["h100", "uv", "sync", "--extra", "cu126"],
    ]
    assert "pixi: pixi install -e h100" in out
    assert err.splitlines()[:2] == [f"wrote {tmp_path / 'pyproject.toml'}", f"wrote {tmp_path / 'pixi.toml'}"]


def test_project_takes_every_node_of_a_fleet_probe_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A fleet probe job writes `kitbench probe --json` of each node as <node>.probe.json (fleet/jobscript.py).
    probe = Path(__file__).resolve().parent / "resources" / "project" / "ci-linux-x86_64.probe.json"
    job = tmp_path / "job"
    job.mkdir()
    for node in ("cpu-01", "CPU_02"):
        (job / f"{node}.probe.json").write_text(probe.read_text())
    (job / "cpu-01.install.json").write_text("{}")
    assert main(["project", str(tmp_path), "--fleet", str(job)]) == 0
    assert sorted(line.split()[0] for line in capsys.readouterr().out.splitlines()) == ["cpu-01", "cpu-02"]
    assert main(["project", str(tmp_path), "--fleet", str(tmp_path / "absent")]) == 2
    assert capsys.readouterr().err.startswith("ERROR: no <node>.probe.json in ")


def test_project_with_no_machine_says_how_to_name_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["project", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "ERROR: no machine given",
        "hint: name each machine: --machine laptop=laptop.json (`kitbench "
        "probe --json` on it) or --machine ci='--os linux --no-gpu'",
    ]
    assert not list(tmp_path.iterdir())


def test_project_s_hints_are_the_project_s_not_install_cmd_s(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["project", str(tmp_path), "--machine", "arm=--os windows --arch aarch64 --python-version 3.14"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "--machine arm='...'" in err[1] and "this machine" not in err[1], err
    assert main(["project", str(tmp_path), "--machine", "box=--os linux --bogus"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "a machine's flags: --os" in err[1], err
    assert main(["project", str(tmp_path), "--machine", "x" * 500 + "=--os linux --no-gpu"]) == 2
    assert "x" * 100 not in capsys.readouterr().err


def test_verify_s_counts_and_conditions_are_worded_once() -> None:
    """replay's summary read as all passed before NOT REPRODUCED ("12 quantities (12 within rtol 0.05), 11 equal"),
    and verify's failed reference as a difference that was fine ("DIFFERS (ok)")."""
    from kitbench._cli import _compared, _counted
    from kitbench.reading.verify import Comparison, Tally

    assert (
        _counted(Tally({"within rtol 0.05": 11}, {"within rtol 0.05": 1}))
        == "12 quantities: 11 agree (within rtol 0.05), 1 differs (within rtol 0.05)"
    )
    assert _counted(Tally({"exact": 24, "bitwise": 4}, {})) == "28 quantities: 28 agree (24 exact, 4 bitwise), 0 differ"
    assert _counted(Tally({}, {"ok": 1})) == "1 quantity: 0 agree, 1 differs (must be ok)"
    assert (
        _counted(Tally({}, {"paired": 2, "equal": 1}))
        == "3 quantities: 0 agree, 3 differ (2 must have a partner, 1 equal)"
    )
    status = Comparison("the reference's status", "ok", False, "failed")
    assert _compared(status, ": failed") == "NOT OK: the reference's status: failed"
    assert _compared(Comparison("x: partner", "paired", False), "") == "UNPAIRED: x: partner"
    assert _compared(Comparison("x: test loss", "exact", True), "") == "equal (exact): x: test loss"
    assert (
        _compared(Comparison("x: test loss", "bitwise", False), " (1 vs 2)")
        == "DIFFERS (bitwise): x: test loss (1 vs 2)"
    )


def test_another_machine_s_answer_says_what_it_took_from_this_host(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 49: --os linux without --python-version and --glibc answers on this host's Python and C library; the
    short answer says so, and --json says nothing of this host's kernel, WSL or container for that machine."""
    from kitbench.machine import probe

    here = probe.probe()
    h100 = ["install-cmd", "--os", "linux", "--driver", "570.86.10", "--gpu-cc", "9.0"]
    assert main(h100) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("# assumed: ")]
    assert len(said) == 1 and f"Python {here.python_version}" in said[0] and "this host's" in said[0]
    if here.libc == "glibc":
        assert f"glibc {here.libc_version}" in said[0] and "--glibc" in said[0]
    assert main([*h100, "--python-version", "3.12", "--glibc", "2.35"]) == 0
    assert "assumed:" not in capsys.readouterr().err
    assert main([*h100, "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)["facts"]
    assert (facts["container"], facts["wsl"], facts["os_version"]) == (None, None, None)
    assert main(["install-cmd", "--json"]) == 0  # this host itself: its own facts, nothing assumed
    mine = json.loads(capsys.readouterr().out)
    assert mine["facts"]["container"] == here.container and not any(n.startswith("assumed:") for n in mine["notes"])


@pytest.mark.parametrize("os", ["windows", "macos"])
def test_another_os_takes_nothing_from_this_host(os: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Another OS's Python is unknown and constrains nothing: no "assumed" note (it said "assumed: Python ,
    this host's" with nothing after "Python"), and the facts say the Python is unknown."""
    assert main(["install-cmd", "--os", os, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "assumed_host" not in [n["kind"] for n in answer["decision"]["notes"]]
    assert answer["facts"]["python_version"] == ""
    assert main(["install-cmd", "--os", os, "--python-version", "3.12", "--json"]) == 0
    assert "assumed_host" not in [n["kind"] for n in json.loads(capsys.readouterr().out)["decision"]["notes"]]


def test_the_assumed_note_names_what_gives_that_machine_its_own() -> None:
    from kitbench.advice.wording import assumed_host

    on_linux = assumed_host({"Python": "3.11.7", "glibc": "2.36"}, "linux")
    assert on_linux.endswith("(--python-version and --glibc give their own)")
    assert assumed_host({"Python": "3.11.7"}, "macos").endswith("(--python-version gives its own)")


def test_a_gpu_no_build_has_kernels_for_is_told_so_not_told_to_update_its_driver(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A GTX 1080 on driver 535: CUDA 13 builds have no Pascal kernels (whatever the driver), which is what the
    rejections say."""
    assert (
        main(
            [
                "install-cmd",
                "--os",
                "linux",
                "--python-version",
                "3.12",
                "--glibc",
                "2.35",
                "--driver",
                "535.247.01",
                "--gpu-cc",
                "6.1",
                "--explain",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "# rejected cu132, cu130: no kernels for sm_61" in err and "< 580" not in err
