"""kitbench._files: every file kitbench writes follows run --out's rules, tried through the real CLI."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kitbench import _files
from kitbench._cli import main
from kitbench.errors import RecordError

DOCS = Path(__file__).resolve().parents[1] / "docs" / "records"
RECORDS = [str(p) for p in sorted(DOCS.glob("cpu-bench-*.json"))[:2]]
PNG = b"\x89PNG\r\n\x1a\n"


def _plot(out: Path, *extra: str) -> int:
    return main(["compare", *RECORDS, "--format", "csv", "--plot", str(out), *extra])


@pytest.mark.parametrize("kind", ["symlink-to-file", "symlink-dangling", "directory", "fifo", "foreign-file"])
def test_plot_never_replaces_or_follows_what_is_there(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    out = tmp_path / "compare.png"
    if kind == "symlink-to-file":
        out.symlink_to(victim)
    elif kind == "symlink-dangling":
        out.symlink_to(tmp_path / "created-through-link.png")
    elif kind == "directory":
        out.mkdir()
    elif kind == "fifo":
        os.mkfifo(out)
    else:
        out.write_text("someone's notes")
    assert _plot(out) != 0
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and "Traceback" not in err
    assert victim.read_text() == "precious"
    assert not (tmp_path / "created-through-link.png").exists()
    if kind == "foreign-file":
        assert out.read_text() == "someone's notes" and "--force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["victim.txt", "compare.png"])


def test_plot_replaces_a_file_only_with_force(tmp_path: Path) -> None:
    out = tmp_path / "compare.png"
    assert _plot(out) == 0 and out.read_bytes()[:8] == PNG
    assert _plot(out) == 2  # refused before any record is read, like any bad --plot
    assert _plot(out, "--force") == 0 and out.read_bytes()[:8] == PNG
    assert [p.name for p in tmp_path.iterdir()] == ["compare.png"]


@pytest.mark.parametrize("fail_at", [0, 1, 3])
def test_full_disk_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_at: int, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "compare.png"
    out.write_bytes(b"old plot")
    real_write, calls = os.write, []

    def full(fd: int, data: bytes) -> int:
        calls.append(fd)
        if len(calls) > fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, bytes(data)[:4096])  # short writes, as a filling disk gives

    monkeypatch.setattr(os, "write", full)
    assert _plot(out, "--force") == 1
    monkeypatch.undo()
    assert "No space left on device" in capsys.readouterr().err
    assert out.read_bytes() == b"old plot"
    assert [p.name for p in tmp_path.iterdir()] == ["compare.png"]


def test_over_long_and_unreachable_names_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for out in (tmp_path / ("x" * 300 + ".png"), tmp_path / "missing" / "c.png", Path("/proc/1/nope/c.png")):
        assert _plot(out) in (1, 2)
        err = capsys.readouterr().err
        assert err.startswith("ERROR: ") and "Traceback" not in err


def test_write_helper_refuses_a_symlink_swapped_in(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    _files.write(target, "one")
    with pytest.raises(RecordError, match="already there"):
        _files.write(target, "two")
    target.unlink()
    target.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(RecordError, match="symlink"):
        _files.write(target, "three", replace=True)
    assert not (tmp_path / "elsewhere").exists()


# --- reading: one bounded, typed reader for every file kitbench opens ---


@pytest.mark.parametrize("kind", ["fifo", "device", "directory", "too big", "not UTF-8", "lone surrogate"])
def test_the_reader_refuses_what_is_not_a_bounded_text_file_at_once(kind: str, tmp_path: Path) -> None:
    import time

    from kitbench.errors import KitbenchError

    path = tmp_path / "f"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "too big":
        path.write_bytes(b"x" * 1001)
    else:
        path.write_bytes(b"ok \xff" if kind == "not UTF-8" else b"ok \xed\xa0\x80")  # UTF-8 of U+D800
    started = time.monotonic()
    with pytest.raises(KitbenchError) as refused:
        _files.read_text(path, 1000, "record")
    assert time.monotonic() - started < 2
    words = {
        "fifo": "not a regular file",
        "device": "not a regular file",
        "directory": "not a regular file",
        "too big": "is 1,001 bytes; a record is at most 1,000",
        "not UTF-8": "is not UTF-8 text (byte 3",
        "lone surrogate": "is not UTF-8 text (byte 3",
    }[kind]
    assert words in refused.value.message
    (tmp_path / "g").write_bytes("héllo".encode())
    assert _files.read_text(tmp_path / "g", 6, "record") == "héllo"


def test_a_part_of_a_file_of_any_length_is_read_from_its_start_or_its_end(tmp_path: Path) -> None:
    from kitbench.errors import KitbenchError

    log = tmp_path / "log"
    log.write_bytes(b"".join(b"line %d\n" % i for i in range(100_000)))
    assert _files.read_part(log, 14) == b"line 0\nline 1\n"
    assert _files.read_part(log, 12, end=True) == b"\nline 99999\n"
    assert _files.read_part(tmp_path / "log", 10**9) == log.read_bytes()
    os.mkfifo(tmp_path / "fifo")
    for path in (tmp_path / "fifo", Path("/dev/zero")):
        with pytest.raises(KitbenchError, match="not a regular file"):
            _files.read_part(path, 20, "log", end=True)


def test_a_small_kernel_file_is_read_or_none_never_an_error(tmp_path: Path) -> None:
    """sysfs, procfs and cgroup files, as every probe reads them: text (odd bytes replaced) or None."""
    from kitbench._files import read_small

    (tmp_path / "model").write_bytes(b"Radeon \xff RX\n")
    assert read_small(tmp_path / "model") == "Radeon \ufffd RX\n"
    assert read_small(tmp_path / "absent") is None
    assert read_small(tmp_path) is None  # a directory where a file was expected


def test_one_cache_folder_for_everything_kitbench_keeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """KITBENCH_CACHE, else $XDG_CACHE_HOME/kitbench, else ~/.cache/kitbench: read by every cache's user."""
    from kitbench.advice import facts
    from kitbench.rebuild import replay
    from kitbench.suite import data

    monkeypatch.undo()  # conftest's stand-in fact cache: the real lookup here
    for name in (_files.CACHE_VARIABLE, "XDG_CACHE_HOME", data.DATA_VARIABLE, replay.CACHE_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert _files.cache_dir() == tmp_path / "home" / ".cache" / "kitbench"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert _files.cache_dir() == tmp_path / "xdg" / "kitbench"
    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "mine"))
    mine = tmp_path / "mine"
    assert (_files.cache_dir(), facts.cache_dir(), data.default_root(), replay.cache_root()) == (
        mine,
        mine / "facts",
        mine / "data",
        mine / "replay",
    )
    monkeypatch.setenv(_files.CACHE_VARIABLE, "")  # empty: not given
    assert _files.cache_dir() == tmp_path / "xdg" / "kitbench"
    monkeypatch.setenv(_files.CACHE_VARIABLE, "~/kb")  # quoted, so no shell expanded it
    assert _files.cache_dir() == tmp_path / "home" / "kb"


def test_a_cache_folder_that_is_a_file_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing can be kept there: install-cmd answers all the same (validators compiled in memory, manifests
    parsed), and the file is left as it was."""
    (tmp_path / "file").write_text("")
    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "file"))
    assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
    assert capsys.readouterr().out.startswith("pip install torch==")
    assert (tmp_path / "file").read_text() == ""


def test_the_validators_and_manifests_are_kept_in_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kitbench.records import manifest, schemas

    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "c"))
    schemas.validator("suite")
    manifest.load(manifest.envs_dir() / "suite.yaml", "suite")
    assert [p.parent.name for p in sorted((tmp_path / "c").rglob("*.*"))] == ["manifests", "validators"]
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "manifests").symlink_to(tmp_path / "elsewhere")  # never written through: still answers
    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path / "d"))
    assert manifest.load(manifest.envs_dir() / "suite.yaml", "suite").data["requirements"]
    assert not (tmp_path / "elsewhere").exists()
