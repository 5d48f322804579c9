"""Records: claimed before a run, never clobbering, strict JSON, read back only when valid."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import threading
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kitbench import _files
from kitbench.errors import KitbenchError, RecordError, RecordReadError, UsageError
from kitbench.reading import compare, inputs
from kitbench.reading.verify import verify
from kitbench.records import record as records
from kitbench.records import types as _types

REPO = Path(__file__).resolve().parents[2]
KEPT = sorted((REPO / "docs" / "records").glob("*.json"))
FULL = REPO / "docs" / "records" / "h100-fnn.json"  # all three checks, on a real H100


def _record(status: str = "ok") -> dict[str, typing.Any]:
    """The smallest valid record: a real one with its checks emptied."""
    data = json.loads(FULL.read_text())
    data.update(status=status, checks={})
    return data


def test_write_atomic_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    records.write_atomic(path, _record())
    records.write_atomic(path, _record("failed"))
    assert records.read(path)["status"] == "failed"
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
    assert path.stat().st_mode & 0o044 == 0o044  # group and others may read it


def test_failed_write_keeps_the_previous_record(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    records.write_atomic(path, _record())
    with pytest.raises(TypeError):
        records.write_atomic(path, {"schema": records.SCHEMA, "bad": object()})
    assert records.read(path)["status"] == "ok"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_non_finite_numbers_are_null_and_named(tmp_path: Path) -> None:
    record = _record()
    record["device_init_s"] = math.inf
    record["checks"] = {
        "mnist": {"status": "failed", "summary": "diverged", "runs": [], "curve": [1.0, math.nan, -math.inf]}
    }
    text = records.to_json(record)
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} token written"))
    assert data["device_init_s"] is None and data["checks"]["mnist"]["curve"] == [1.0, None, None]
    assert data["nonfinite"] == ["/device_init_s", "/checks/mnist/curve/1", "/checks/mnist/curve/2"]


def test_default_names_never_collide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    claimed: list[Path] = []
    threads = [threading.Thread(target=lambda: claimed.append(records.claim(None, target="cpu"))) for _ in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(claimed)) == 50
    assert {p.parent for p in claimed} == {tmp_path / "cpu"}
    assert len(list((tmp_path / "cpu").iterdir())) == 50


@pytest.mark.parametrize("name", ["../escape", "a/b", "/abs", ".", "..", ".hidden", "x" * 65, "tab\there"])
def test_target_names_are_plain(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("KITBENCH_TARGET", name)
    with pytest.raises(UsageError, match="is not a plain name"):
        records.claim(None)
    assert not (tmp_path / "escape").exists()


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo.json"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda p: p.mkdir() or p, "is a directory"),
        (lambda p: (p.symlink_to(p.parent / "elsewhere.json"), p)[1], "is a symlink"),
        (lambda p: Path("/dev/null"), "not a regular file"),
        (lambda p: _fifo(p.parent), "not a regular file"),
        (lambda p: (p.write_text("my thesis"), p)[1], "is not a kitbench record"),
    ],
)
def test_out_never_replaces_what_is_not_a_record(tmp_path: Path, make: typing.Any, words: str) -> None:
    target = make(tmp_path / "out.json")
    before = sorted(tmp_path.iterdir())
    for force in (False, True):
        with pytest.raises(RecordError, match=words):
            records.claim(target, force=force)
    assert sorted(tmp_path.iterdir()) == before
    assert not (tmp_path / "elsewhere.json").exists()


def test_an_existing_record_is_replaced_only_with_force(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    records.write_atomic(out, _record())
    with pytest.raises(RecordError, match="already holds a kitbench record"):
        records.claim(out)
    assert records.claim(out, force=True) == out


def test_over_long_names_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(RecordError, match="cannot write the record"):
        records.claim(tmp_path / ("x" * 300 + ".json"))


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"schema": "kitbench.run/1", "status": "ok", "chec', "not a complete JSON record"),
        ('{"schema": "kitbench.run/9", "status": "ok"}', "has schema 'kitbench.run/9'"),
        ('{"status": "ok"}', "not a kitbench run record"),
        ("[1, 2]", "not a kitbench run record"),
        ('{"schema": "kitbench.run/1", "x": NaN}', "not strict JSON"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"schema": "kitbench.run/1"}', "field (top level)"),
    ],
)
def test_bad_records_are_one_line_errors(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(RecordReadError, match=words.replace("(", r"\(").replace(")", r"\)")):
        records.read(path)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.update(status="great"), "status"),
        (lambda r: r.update(environment=None), "environment"),
        (lambda r: r["checks"].update(mnist=None), "checks/mnist"),
        (lambda r: r["checks"]["mnist"]["runs"][0].update(epoch_s="fast"), "checks/mnist/runs/0/epoch_s"),
        (lambda r: r["checks"]["moves"].update(transfers={"a": 1}), "checks/moves/transfers"),
        (lambda r: r["options"].pop("seed"), "options"),
    ],
)
def test_malformed_sections_name_the_field(tmp_path: Path, change: typing.Any, field: str) -> None:
    record = json.loads(FULL.read_text())
    change(record)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    with pytest.raises(RecordReadError, match=f"field {field}"):
        records.read(path)


def test_only_bounded_regular_files_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = _fifo(tmp_path)
    done: list[BaseException] = []

    def reading() -> None:
        try:
            records.read(fifo)
        except BaseException as exc:
            done.append(exc)

    reader = threading.Thread(target=reading, daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert done and isinstance(done[0], RecordReadError), "reading a FIFO blocked or did not refuse"
    with pytest.raises(RecordReadError, match="not a regular file"):
        records.read(Path("/dev/zero"))
    with pytest.raises(RecordReadError, match="not a regular file"):  # a glob in compare may match one
        records.read(tmp_path)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (records.MAX_BYTES + 1))
    with pytest.raises(RecordReadError, match="a record is at most"):
        records.read(big)


@pytest.mark.parametrize("path", KEPT, ids=lambda p: p.name)
def test_the_kept_records_are_valid(path: Path) -> None:
    assert records.read(path)["status"] == "ok"


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)
_keys = st.sampled_from(
    [
        "schema",
        "status",
        "checks",
        "environment",
        "options",
        "runs",
        "mnist",
        "moves",
        "device",
        "transfers",
        "loss_curve",
        "epoch_s",
        "model",
        "loop",
    ]
)


def _near_record(value: typing.Any) -> dict[str, typing.Any]:
    """A real record with one part replaced by arbitrary JSON: the inputs that reach deepest."""
    record = json.loads(FULL.read_text())
    return {**record, **value} if isinstance(value, dict) else {**record, "checks": value}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_json, st.dictionaries(_keys, _json, max_size=6).map(_near_record)))
def test_readers_only_ever_refuse_cleanly(value: typing.Any) -> None:
    text = json.dumps(value)
    try:
        record = records.parse(text, "arbitrary.json")
    except RecordReadError:
        return
    compare.rows([inputs.Loaded(Path("a.json"), record)])
    with contextlib.suppress(KitbenchError):
        verify(record, record)


def test_the_environment_and_options_written_are_the_typed_ones() -> None:
    """The writer's untyped parts, fingerprint and options, emit only what the model declares."""
    pytest.importorskip("torch")
    from kitbench.machine import probe
    from kitbench.suite import fingerprint
    from kitbench.suite import runner as suite
    from kitbench.suite.checks.base import Options

    written = fingerprint.collect(probe.probe())
    assert set(written) <= set(typing.get_type_hints(_types.Environment)), sorted(
        set(written) - set(typing.get_type_hints(_types.Environment))
    )
    assert set(suite.options_record(Options())) == set(typing.get_type_hints(_types.RunOptions))
    # The interpreter beyond X.Y.Z, as this one says it otherwise: a free-threaded build's ABI flags carry a "t"
    # (PEP 703; Windows' Pythons have ABI flags from 3.14), its build line is sys.version.
    free_threaded = "t" in getattr(sys, "abiflags", "")
    assert written["python_build"] == {
        "implementation": sys.implementation.name,
        "version": sys.version,
        "free_threaded": free_threaded,
    }
    records.validate(
        {
            **json.loads(FULL.read_text()),
            "environment": {**json.loads(FULL.read_text())["environment"], "python_build": written["python_build"]},
        }
    )


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda t: t.replace('"status": "ok"', '"status": "failed", "status": "ok"', 1), "'status' appears twice"),
        (lambda t: t.replace('"checks": {}', '"checks": {"a": 1, "a": 2}', 1), "'a' appears twice"),
        (lambda t: t.replace('"status": "ok"', '"status": "ok", "x": 1e999', 1), "overflows to infinity"),
        (lambda t: t.replace('"status": "ok"', '"status": "ok", "x": -1E+400', 1), "overflows to infinity"),
    ],
)
def test_reader_refuses_duplicate_keys_and_overflowing_numbers(
    tmp_path: Path, edit: typing.Callable[[str], str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    path = tmp_path / "r.json"
    text = records.to_json(_record())
    path.write_text(edit(text))
    assert path.read_text() != text
    assert main(["compare", str(path)]) != 0
    err = capsys.readouterr().err
    assert err.startswith("ERROR: ") and words in err and "Traceback" not in err


def _run_edit(**changes: object) -> typing.Callable[[dict[str, typing.Any]], None]:
    def edit(data: dict[str, typing.Any]) -> None:
        data["checks"]["mnist"]["runs"][0].update(changes)

    return edit


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (_run_edit(epoch_s=-0.21), "checks/mnist/runs/0/epoch_s"),
        (_run_edit(epoch_s_all=[1.0, -1.0]), "checks/mnist/runs/0/epoch_s_all/1"),
        (_run_edit(warmup_s=-1e-9), "checks/mnist/runs/0/warmup_s"),
        (_run_edit(epochs=int("9" * 4000)), "checks/mnist/runs/0/epochs"),
        (_run_edit(steps=-1), "checks/mnist/runs/0/steps"),
        (_run_edit(steps=2**53 + 1), "checks/mnist/runs/0/steps"),
        (_run_edit(lr=-0.01), "checks/mnist/runs/0/lr"),
        (_run_edit(epoch_test_acc=[1.5]), "checks/mnist/runs/0/epoch_test_acc/0"),
        (_run_edit(diverged_at_step=-3), "checks/mnist/runs/0/diverged_at_step"),
        (lambda r: r["options"].update(seed=2**63), "options/seed"),
        (lambda r: r["options"].update(epochs=-1), "options/epochs"),
        (lambda r: r.update(device_init_s=-0.5), "device_init_s"),
        (lambda r: r["environment"].update(ram_bytes=10**30), "environment/ram_bytes"),
        (lambda r: r["checks"]["moves"]["transfers"][0].update(gb_per_s=-3.0), "checks/moves/transfers/0/gb_per_s"),
        (lambda r: r["checks"]["mnist"]["sha256"].update(x="not a digest"), "checks/mnist/sha256/x"),
    ],
    ids=[
        "epoch_s",
        "epoch_s_all",
        "warmup_s",
        "epochs-4000-digits",
        "steps-negative",
        "steps-2**53+1",
        "lr",
        "accuracy",
        "diverged_at_step",
        "seed",
        "options-epochs",
        "device_init_s",
        "ram_bytes",
        "gb_per_s",
        "data-sha256",
    ],
)
def test_times_and_counts_are_bounded(
    edit: typing.Any, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No negative time, count or rate, no integer past 2**53 (a seed past torch's 64 bits): the reader
    refuses them, naming the field, so that compare never shows an epoch of -0.21 s."""
    from kitbench._cli import main

    record = json.loads(FULL.read_text())
    record["checks"]["mnist"].setdefault("sha256", {})
    edit(record)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))
    for command, code in ((["compare", str(path)], 1), (["verify", str(path), str(path)], 2)):
        assert main(command) == code
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"ERROR: {path}: field {field}: ") and "Traceback" not in err, err


def test_the_bounds_keep_what_kitbench_writes() -> None:
    record = json.loads(FULL.read_text())
    record["options"]["seed"] = 2**63 - 2  # the largest seed `kitbench run` takes
    record["checks"]["mnist"]["runs"][0].update(epoch_s=0.0, diverged_at_step=0, steps=2**53)
    records.validate(record)


def test_the_validator_cache_is_keyed_by_the_schemas_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An edited schema (a new bound) compiles a new validator: the cached one is named by the schema's
    text, never by its name alone."""
    import hashlib

    import fastjsonschema

    from kitbench.records import schemas

    monkeypatch.setenv(_files.CACHE_VARIABLE, str(tmp_path))
    text = (REPO / "kitbench" / "records" / "schemas" / "run.schema.json").read_text()
    validate = schemas.validator("run")  # this cache folder is new: compiled here, not reused
    key = hashlib.sha256(f"{fastjsonschema.VERSION}\0{text}".encode()).hexdigest()[:16]
    assert [p.name for p in (tmp_path / "validators").glob("*.py")] == [f"kitbench_validator_run_{key}.py"]
    record = json.loads(FULL.read_text())
    record["checks"]["mnist"]["runs"][0]["epoch_s"] = -0.21
    with pytest.raises(fastjsonschema.JsonSchemaValueException, match="bigger than or equal to 0"):
        validate(record)


@pytest.mark.parametrize(
    ("content", "words", "hint"),
    [
        (b"", "is empty (0 bytes)", "a kitbench run killed before its first write leaves its claimed record empty"),
        (b"\0" * 4096, "holds only NUL bytes (4,096)", "never reached the disk"),
        (b"\0" * 4097, "holds only NUL bytes (4,097)", "never reached the disk"),
        (b'{"schema": "kitbench.run/2"\0}', "holds NUL bytes (the first at byte 27)", "not a kitbench record"),
        ('{"schema": "kitbench.run/2"}'.encode("utf-16"), "holds NUL bytes (the first at byte 3)", "UTF-16 or binary"),
        (b'{"schema": "\xff"}', "is not UTF-8 text (byte 12 is 0xff)", "not a kitbench record"),
        (b" \n\t ", "holds only whitespace, no JSON", "not a kitbench record"),
        (b'{"schema": "kitbench.run/2", "sta', "is not a complete JSON record", "cut it short"),
        (b" not json", "is not JSON (line 1: Expecting value)", "not a kitbench record, which is a JSON file"),
    ],
    ids=["empty", "nul-4096", "nul-4097", "nul-inside", "utf-16", "latin-1", "whitespace", "cut", "not-json"],
)
def test_unreadable_files_are_named_for_what_they_are(
    content: bytes, words: str, hint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    path = tmp_path / "r.json"
    path.write_bytes(content)
    assert main(["verify", str(path), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: {path} {words}") and hint in err and "Traceback" not in err, err
    assert "not UTF-8" not in err or words.startswith("is not UTF-8")


def test_an_empty_out_is_named_as_such(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.touch()  # what a run killed between claiming its record and writing it leaves
    with pytest.raises(RecordError, match="is an empty file"):
        records.claim(out)
    assert records.claim(out, force=True) == out


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda r: r["checks"]["mnist"]["runs"][0].update(epoch_s=10**400), "is beyond 2**63"),
        (lambda r: r["checks"]["mnist"]["runs"][0].update(loss_curve=[1e308, 1e308]), "is beyond 1e+100"),
        (lambda r: r["environment"].update(cpu="x\ud800"), "a lone surrogate, which is not text"),
        (lambda r: r["environment"].update({"\udfff": 1}), "a lone surrogate, which is not text"),
    ],
    ids=["epoch_s-10**400", "curve-1e308", "surrogate-value", "surrogate-key"],
)
def test_numbers_and_text_no_encoder_can_take_are_refused_on_read(
    edit: typing.Any, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each was a traceback in report, compare or verify (OverflowError, UnicodeEncodeError): now the record
    is refused where it is read, one ERROR line naming the field, by every command."""
    from kitbench._cli import main

    record = json.loads(FULL.read_text())
    edit(record)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(record))  # ensure_ascii: "\ud800" as JSON writes it
    other = tmp_path / "other.json"
    other.write_text(FULL.read_text())
    for command in (
        ["compare", str(path)],
        ["compare", "--format", "markdown", str(path)],
        ["verify", str(other), str(path)],
        ["report", str(path), "-o", str(tmp_path / "p.html")],
    ):
        assert main(command) in (1, 2)
        out, err = capsys.readouterr()
        assert out == "" and err.startswith(f"ERROR: {path}: field ") and words in err, err
        assert len(err.splitlines()) <= 2 and "Traceback" not in err
    assert not (tmp_path / "p.html").exists()


def test_of_two_runs_writing_one_out_only_one_claims_it(tmp_path: Path) -> None:
    """``run --out X --force`` twice at once: the second is refused while the first holds X, never both
    told that they wrote it; the claim ends with the run."""
    import threading

    out = tmp_path / "same.json"
    out.write_text(FULL.read_text())
    barrier, won, lost = threading.Barrier(8), [], []

    def racer() -> None:
        barrier.wait()
        try:
            won.append(records.claim(out, force=True))
        except RecordError as refused:
            lost.append(refused.message)

    threads = [threading.Thread(target=racer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert won == [out] and len(lost) == 7 and all("is being written by another run" in m for m in lost)
    records.release(out)
    assert records.claim(out, force=True) == out and records.read(out)["status"] == "ok"
    records.release(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["same.json"]


def test_run_out_ending_in_a_separator_is_refused_never_a_file_of_that_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    assert main(["run", "--check", "availability", "--out", str(tmp_path / "folder") + "/"]) == 2
    assert "ends in a separator: give a file name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_two_runs_given_one_out_with_force_one_writes_and_the_other_is_refused(tmp_path: Path) -> None:
    """Through the real command: both started at once, each with --force; exactly one record is written and
    exactly one run says it wrote it."""
    import subprocess

    out = tmp_path / "same.json"
    out.write_text(FULL.read_text())
    command = [
        sys.executable,
        "-m",
        "kitbench",
        "run",
        "--check",
        "availability",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--force",
    ]
    started = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    done = [(p.wait(timeout=300), *p.communicate()) for p in started]
    codes = sorted(code for code, _, _ in done)
    refused = [err for code, _, err in done if code != 0]
    assert codes[0] == 0 and codes[1] != 0, done
    assert len(refused) == 1 and "is being written by another run" in refused[0] and "Traceback" not in refused[0]
    assert records.read(out)["status"] == "ok" and not (tmp_path / ".same.json.claim").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="the claim is a flock where the OS has one")
def test_a_claim_ends_with_its_run_even_one_killed_with_sigkill(tmp_path: Path) -> None:
    import signal
    import subprocess

    out = tmp_path / "r.json"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from kitbench.records import record as records; "
            "records.claim(Path(sys.argv[1])); print('held', "
            "flush=True); time.sleep(120)",
            str(out),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(RecordError, match="is being written by another run"):
            records.claim(out, force=True)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert records.claim(out, force=True) == out  # the kernel gave the lock back with the process
    records.release(out)
