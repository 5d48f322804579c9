"""verify: whether one run reproduced another, on records made by really running the suite on the CPU."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

from kitbench.reading.verify import Comparison, Tally, tally, verify
from kitbench.records import record as records
from kitbench.suite import runner as suite
from kitbench.suite.checks.base import Options


@pytest.mark.integration
def test_same_seed_reproduces_bitwise(runs: dict[str, Path]) -> None:
    verdict = verify(records.read(runs["a"]), records.read(runs["b"]))
    assert verdict.reproduced
    assert verdict.comparisons and all(c.equal for c in verdict.comparisons)
    assert {c.rule for c in verdict.comparisons} == {"exact", "bitwise"}
    assert [c.detail for c in verdict.comparisons if c.rule == "bitwise"] == ["bitwise identical"]
    assert verdict.first_divergence is None


@pytest.mark.integration
@pytest.mark.parametrize(
    ("name", "option", "first"),
    [
        (
            "seed",
            "option seed: 0 -> 1",
            "configuration: not comparable, the runs were configured differently: seed 0 vs 1",
        ),
        (
            "lr",
            "option lr: None -> 0.05",
            "configuration: not comparable, the runs were configured differently: lr 0.01 vs 0.05",
        ),
    ],
)
def test_changed_seed_or_rate_names_the_first_difference(
    runs: dict[str, Path], name: str, option: str, first: str
) -> None:
    """Another seed or another rate is another configuration (other initial weights, other batches): not
    comparable at all, and said so before any number."""
    verdict = verify(records.read(runs["a"]), records.read(runs[name]))
    assert not verdict.reproduced
    assert verdict.first_divergence is not None
    assert verdict.first_divergence.startswith(f"fnn/resident on cpu, batch 64: {first}")
    assert option in verdict.differences


@pytest.mark.integration
def test_cross_device_tolerance_is_used_when_builds_differ(runs: dict[str, Path], tmp_path: Path) -> None:
    other = records.read(runs["b"])
    other["environment"]["torch"] = "2.9.1+cu126"
    for run in other["checks"]["mnist"]["runs"]:
        run["loss_curve"] = [x * 1.01 for x in run["loss_curve"]]  # within 5 %
    verdict = verify(records.read(runs["a"]), other)
    assert verdict.reproduced
    assert {c.rule for c in verdict.comparisons} == {"within rtol 0.05"}


@pytest.mark.integration
def test_verify_cli_exit_codes(runs: dict[str, Path]) -> None:
    same = subprocess.run(
        [sys.executable, "-m", "kitbench", "verify", str(runs["a"]), str(runs["b"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert same.returncode == 0
    assert same.stdout.startswith("reproduced\n")
    assert "equal (exact): fnn/resident on cpu, batch 64: training loss curve" in same.stdout
    other = subprocess.run(
        [sys.executable, "-m", "kitbench", "verify", str(runs["a"]), str(runs["seed"])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert other.returncode == 1
    assert other.stdout.startswith(
        "NOT REPRODUCED: fnn/resident on cpu, batch 64: configuration: not comparable, "
        "the runs were configured differently: seed 0 vs 1"
    )


def _diverged(step: int | None, at_point: int) -> dict:
    record = json.loads((Path(__file__).resolve().parents[2] / "docs" / "records" / "h100-fnn.json").read_text())
    for run in record["checks"]["mnist"]["runs"]:
        run["diverged_at_step"] = step
        if step is not None:
            run["loss_curve"][at_point:] = [None] * (len(run["loss_curve"]) - at_point)
    return record


def test_a_diverged_run_never_verifies_and_twins_are_both_diverged() -> None:
    both = verify(_diverged(120, 3), _diverged(120, 3))
    assert both.verdict == "both diverged" and not both.reproduced
    assert both.first_divergence and "both diverged at step 120" in both.first_divergence
    one = verify(_diverged(None, 0), _diverged(120, 3))
    assert one.verdict == "not reproduced"
    assert one.first_divergence and "the reference diverged at step None, the candidate at 120" in one.first_divergence
    assert verify(_diverged(None, 0), _diverged(None, 0)).reproduced


def test_each_comparison_names_its_rule() -> None:
    verdict = verify(_diverged(None, 0), _diverged(None, 0))
    rules = {c.quantity.rsplit(": ", 1)[0]: c.rule for c in verdict.comparisons}
    assert rules["fnn/resident on cpu, batch 64"] == "exact"
    assert rules["fnn/resident on cuda:0, batch 64"] == "within rtol 0.05"


# One float32 ulp above the recipe's 0.01: the parameters are float32, and SGD casts its rate to their
# dtype, so a float64 ulp (math.nextafter(0.01, 1)) would train bit for bit the same.
_ULP_LR = float(np.nextafter(np.float32(0.01), np.float32(1)))


@pytest.fixture(scope="module")
def deterministic(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = dict(
        checks=("mnist",),
        device="cpu",
        data=mnist_root,
        offline=True,
        quick=True,
        loops=("resident",),
        train_limit=1000,
        deterministic=True,
    )
    made = {}
    for name, changes in (
        ("a", {}),
        ("b", {}),
        ("ulp", {"lr": _ULP_LR}),
        ("sweep", {"sweep": (16, 64)}),
        ("sweep2", {"sweep": (16, 64)}),
    ):
        out = tmp_path_factory.mktemp(name) / f"{name}.json"
        suite.run(Options(**{**base, **changes}), out)
        made[name] = out
    return made


def _verify_cli(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kitbench", "verify", *map(str, paths)], capture_output=True, text=True, check=False
    )


@pytest.mark.integration
def test_deterministic_runs_have_identical_digests_and_verify_naming_the_parameters(
    deterministic: dict[str, Path],
) -> None:
    a, b = records.read(deterministic["a"]), records.read(deterministic["b"])
    assert a["environment"]["settings"]["deterministic_algorithms"] is True
    # The hardware identity the bitwise rule checks: the ISA torch dispatches to, the cores this process may use.
    identity = a["environment"]["cpu_identity"]
    assert identity["isa"] and identity["cores_usable"] == a["environment"]["cpu_count"] >= 1
    run_a, run_b = a["checks"]["mnist"]["runs"][0], b["checks"]["mnist"]["runs"][0]
    assert run_a["params_sha256"] == run_b["params_sha256"] and len(run_a["params_sha256"]) == 64
    assert run_a["tensor_sha256"] == run_b["tensor_sha256"] and len(run_a["tensor_sha256"]) == 10
    done = _verify_cli(deterministic["a"], deterministic["b"])
    assert done.returncode == 0, done.stdout
    assert "equal (bitwise): fnn/resident on cpu, batch 64: parameters: bitwise identical" in done.stdout
    assert (
        "rule: fnn/resident on cpu, batch 64: bitwise: both deterministic (--deterministic), same build" in done.stdout
    )
    assert f"isa={identity['isa']})" in done.stdout
    assert "not compared: timings" in done.stdout


@pytest.mark.integration
def test_one_ulp_of_the_learning_rate_is_not_reproduced(deterministic: dict[str, Path], tmp_path: Path) -> None:
    verdict = verify(records.read(deterministic["a"]), records.read(deterministic["ulp"]))
    assert not verdict.reproduced
    # The rate is configuration: runs trained at other rates are not comparable, and verify says so.
    assert verdict.first_divergence == (
        "fnn/resident on cpu, batch 64: configuration: not comparable, the runs "
        f"were configured differently: lr 0.01 vs {_ULP_LR}"
    )
    assert f"option lr: None -> {_ULP_LR}" in verdict.differences
    assert _verify_cli(deterministic["a"], deterministic["ulp"]).returncode == 1
    # With its recorded rate edited back to the reference's, the parameters' bits still give it away.
    edited = records.read(deterministic["ulp"])
    edited["checks"]["mnist"]["runs"][0]["lr"] = 0.01
    records.write_atomic(tmp_path / "edited.json", edited)
    verdict = verify(records.read(deterministic["a"]), records.read(tmp_path / "edited.json"))
    params = next(c for c in verdict.comparisons if c.quantity.endswith(": parameters"))
    assert params.rule == "bitwise" and not params.equal
    assert params.detail and params.detail.startswith("tensor ") and " differs first (" in params.detail


@pytest.mark.integration
def test_every_size_of_a_sweep_is_compared(deterministic: dict[str, Path], tmp_path: Path) -> None:
    ref = records.read(deterministic["sweep"])
    same = verify(ref, records.read(deterministic["sweep2"]))
    assert same.reproduced
    assert {c.quantity for c in same.comparisons if c.quantity.endswith("parameters")} == {
        "fnn/resident on cpu, batch 16: parameters",
        "fnn/resident on cpu, batch 64: parameters",
    }
    other = records.read(deterministic["sweep2"])
    run = next(r for r in other["checks"]["mnist"]["runs"] if r["batch_size"] == 64)
    run["tensor_sha256"]["9.bias"] = "0" * 16
    run["params_sha256"] = "0" * 64
    path = tmp_path / "other.json"
    records.write_atomic(path, other)
    done = _verify_cli(deterministic["sweep"], path)
    assert done.returncode == 1
    assert done.stdout.startswith(
        "NOT REPRODUCED: fnn/resident on cpu, batch 64: parameters: tensor 9.bias differs first"
    )
    assert "equal (bitwise): fnn/resident on cpu, batch 16: parameters: bitwise identical" in done.stdout
    # The first size alone: matched by model, loop and device, the last size (64) hid it.
    first = records.read(deterministic["sweep2"])
    next(r for r in first["checks"]["mnist"]["runs"] if r["batch_size"] == 16)["params_sha256"] = "0" * 64
    records.write_atomic(path, first)
    done = _verify_cli(deterministic["sweep"], path)
    assert done.returncode == 1
    assert done.stdout.startswith("NOT REPRODUCED: fnn/resident on cpu, batch 16: parameters: ")
    assert "equal (bitwise): fnn/resident on cpu, batch 64: parameters: bitwise identical" in done.stdout


@pytest.mark.integration
def test_a_sweep_against_a_single_run_names_the_runs_without_partner(deterministic: dict[str, Path]) -> None:
    verdict = verify(records.read(deterministic["sweep"]), records.read(deterministic["a"]))
    assert not verdict.reproduced
    partners = [f"{c.quantity}: {c.detail}" for c in verdict.comparisons if c.quantity.endswith("partner")]
    assert partners == [
        "fnn/resident on cpu, batch 16: partner: the candidate has no run of this model, loop, device and batch size"
    ]
    assert verdict.first_divergence == partners[0]


@pytest.mark.integration
def test_deterministic_and_default_runs_fall_to_the_tolerance_naming_the_settings(
    runs: dict[str, Path], deterministic: dict[str, Path]
) -> None:
    verdict = verify(records.read(runs["a"]), records.read(deterministic["a"]))
    assert verdict.differences.count("setting deterministic_algorithms: False -> True") == 1
    rule = next(r for r in verdict.rules if r.startswith("fnn/resident on cpu, batch 64: "))
    assert rule.startswith("fnn/resident on cpu, batch 64: within rtol 0.05: ")
    assert "settings differ: " in rule and "deterministic_algorithms" in rule


def test_a_round_2_record_still_verifies_by_the_round_2_rules(
    tmp_path: Path, another_run: typing.Callable[[Path, Path], Path]
) -> None:
    path = Path(__file__).resolve().parents[2] / "docs" / "records" / "cpu-bench-fnn.json"
    record = records.read(path)
    assert "settings" not in record["environment"]
    verdict = verify(record, records.read(path))
    assert verdict.reproduced
    assert verdict.rules[0].startswith(
        "the reference has no parameter digests or settings (written before kitbench "
        "recorded them): compared by the rules for records without them: "
    )
    assert all(not c.quantity.endswith("parameters") for c in verdict.comparisons)
    assert {c.rule for c in verdict.comparisons} == {"exact"}
    changed = records.read(path)
    changed["checks"]["mnist"]["runs"][0]["loss_curve"][5] += 1e-6
    assert not verify(record, changed).reproduced
    done = _verify_cli(path, another_run(path, tmp_path / "again.json"))
    assert done.returncode == 0 and "rules for records without them" in done.stdout


def _deterministic_gpu_record(**settings: object) -> dict:
    """The kept H100 record as deterministic mode would write it (no GPU here: its runs are kept numbers)."""
    record = json.loads((Path(__file__).resolve().parents[2] / "docs" / "records" / "h100-fnn.json").read_text())
    record["environment"]["settings"] = {
        "deterministic_algorithms": True,
        "cudnn_benchmark": False,
        "cudnn_deterministic": True,
        "matmul_allow_tf32": False,
        "cudnn_allow_tf32": False,
        "float32_matmul_precision": "highest",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8",
        "CUDA_VISIBLE_DEVICES": "0",
        **settings,
    }
    record["environment"]["gpu_identity"] = [
        {"name": "NVIDIA H100 80GB HBM3", "capability": "9.0", "uuid": "GPU-00000000-0000-0000-0000-000000000000"}
    ]
    for index, run in enumerate(record["checks"]["mnist"]["runs"]):
        run["params_sha256"] = f"{index:064x}"
        run["tensor_sha256"] = {"1.weight": f"{index:016x}"}
    return record


def test_deterministic_gpu_runs_are_held_to_their_bits_and_tf32_names_itself() -> None:
    same = verify(_deterministic_gpu_record(), _deterministic_gpu_record(CUDA_VISIBLE_DEVICES="3"))
    assert same.reproduced
    gpu_rules = [r for r in same.rules if " on cuda:0, " in r]
    assert gpu_rules and all(": bitwise: both deterministic (--deterministic)" in r for r in gpu_rules)
    assert {c.rule for c in same.comparisons if " on cuda:0, " in c.quantity} == {"exact", "bitwise"}
    tf32 = verify(_deterministic_gpu_record(), _deterministic_gpu_record(cudnn_allow_tf32=True))
    assert tf32.reproduced  # the same kept numbers, now held to 5 %
    assert "setting cudnn_allow_tf32: False -> True" in tf32.differences
    assert any(r.endswith("within rtol 0.05: settings differ: cudnn_allow_tf32") for r in tf32.rules if "cuda:0" in r)


def _edited_record(tmp_path: Path, name: str, edit: object) -> Path:
    data = json.loads((Path(__file__).resolve().parents[2] / "docs" / "records" / "cpu-bench-fnn.json").read_text())
    edit(data)  # type: ignore[operator]
    records.validate(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("side", ["reference", "candidate"])
def test_verify_refuses_a_record_with_two_runs_under_one_key(
    side: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Which of two runs with the same model, loop, device and batch size is vouched for would be
    decided silently (the second, better one used to pass unread)."""
    from kitbench._cli import main

    def twice(data: dict) -> None:  # type: ignore[type-arg]
        runs = data["checks"]["mnist"]["runs"]
        runs.append({**runs[0], "test_acc": 0.99, "epoch_test_acc": [0.99] * len(runs[0]["epoch_test_acc"])})

    good = _edited_record(tmp_path, "good.json", lambda data: None)
    bad = _edited_record(tmp_path, "bad.json", twice)
    pair = [str(good), str(bad)] if side == "candidate" else [str(bad), str(good)]
    assert main(["verify", *pair]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: the {side} holds two MNIST runs of ")


def test_verify_shows_record_text_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], another_run: typing.Callable[[Path, Path], Path]
) -> None:
    from kitbench._cli import main

    def hostile(data: dict) -> None:  # type: ignore[type-arg]
        for run in data["checks"]["mnist"]["runs"]:
            run["model"] += "\x1b]0;pwned\x07\x1b[2J\u202e"
        data["environment"]["cpu"] += "\r\nreproduced"

    path = _edited_record(tmp_path, "hostile.json", hostile)

    def elsewhere(data: dict) -> None:  # type: ignore[type-arg]
        hostile(data)
        data["environment"]["cpu"] = "another"

    other = _edited_record(tmp_path, "other.json", elsewhere)
    for pair in ([path, another_run(path, tmp_path / "again.json")], [other, path]):
        assert main(["verify", *map(str, pair)]) in (0, 1)
        out = capsys.readouterr().out
        assert "pwned" in out and not any(c in out for c in "\x1b\x07\r\u202e")


_ERROR = "CUDA error: an illegal memory access was encountered"


def _status(status: str, error: str | None = None) -> typing.Callable[[dict[str, typing.Any]], None]:
    def edit(data: dict[str, typing.Any]) -> None:
        data.update(status=status, **({"error": error} if error else {}))

    return edit


def _check(name: str, status: str) -> typing.Callable[[dict[str, typing.Any]], None]:
    def edit(data: dict[str, typing.Any]) -> None:
        data["checks"].setdefault(name, {"status": "ok", "summary": "fine"}).update(
            status=status, summary=f"{name} went wrong"
        )

    return edit


def _no_checks(data: dict[str, typing.Any]) -> None:
    data.update(status="interrupted", checks={})


@pytest.mark.parametrize("side", ["reference", "candidate"])
@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (
            _status("failed", _ERROR),
            f"the SIDE's status: failed: {_ERROR}; a record that is not ok vouches for no result",
        ),
        (_status("failed"), "the SIDE's status: failed; a record that is not ok vouches for no result"),
        (
            _status("interrupted"),
            "the SIDE's status: interrupted (stopped before it finished); a record that is not ok",
        ),
        (_status("diverged"), "the SIDE's status: diverged, yet none of its MNIST runs records a divergence"),
        (_check("mnist", "failed"), "the SIDE's mnist check: failed: mnist went wrong"),
        (_check("mnist", "skipped"), "the SIDE's mnist check: skipped: mnist went wrong"),
        (_check("moves", "failed"), "the SIDE's moves check: failed: moves went wrong"),
        (_no_checks, "the SIDE's status: interrupted (stopped before it finished)"),
    ],
    ids=[
        "failed-error",
        "failed",
        "interrupted",
        "diverged",
        "mnist-failed",
        "mnist-skipped",
        "moves-failed",
        "interrupted-empty",
    ],
)
def test_a_record_that_is_not_ok_never_verifies(
    side: str,
    edit: typing.Any,
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    another_run: typing.Callable[[Path, Path], Path],
) -> None:
    """Its numbers may equal the reference's to the bit: a failed, interrupted or falsely diverged record,
    or one with a failed check, vouches for nothing. Exit 1 (a verdict), as for a diverged run."""
    from kitbench._cli import main

    good = _edited_record(tmp_path, "good.json", lambda data: None)
    bad = _edited_record(tmp_path, "bad.json", edit)
    pair = [good, bad] if side == "candidate" else [bad, good]
    assert main(["verify", *map(str, pair)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("NOT REPRODUCED: " + words.replace("SIDE", side)), out
    # Said plainly, not as a difference that was fine ("DIFFERS (ok)"), and counted as one that differs.
    assert f"\n  NOT OK: {words.replace('SIDE', side)}" in out and "(ok)" not in out
    assert re.search(r"^  compared: \d+ quantit(y|ies): \d+ agree.*, [1-9]\d* differs? \(.*must be ok", out, re.M), out
    assert main(["verify", "--json", *map(str, pair)]) == 1
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["reproduced"] is False and verdict["first_divergence"].startswith(words.replace("SIDE", side))
    assert main(["verify", str(good), str(another_run(good, tmp_path / "again.json"))]) == 0


def _run(**changes: object) -> typing.Callable[[dict[str, typing.Any]], None]:
    def edit(data: dict[str, typing.Any]) -> None:
        data["checks"]["mnist"]["runs"][1].update(changes)

    return edit


def _data_digest(data: dict[str, typing.Any]) -> None:
    data["checks"]["mnist"]["sha256"]["t10k-labels-idx1-ubyte"] = "0" * 64


_RESIDENT = "fnn/resident on cpu, batch 64: "
_NOT_COMPARABLE = _RESIDENT + "configuration: not comparable, the runs were configured differently: "


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (_run(lr=0.02), _NOT_COMPARABLE + "lr 0.01 vs 0.02"),
        (_run(lr=0.010000000000000002), _NOT_COMPARABLE + "lr 0.01 vs 0.010000000000000002"),
        (_run(steps=900), _NOT_COMPARABLE + "steps 938 vs 900"),
        (_run(epochs=2), _NOT_COMPARABLE + "epochs 3 vs 2"),
        (_run(train_samples=59999), _NOT_COMPARABLE + "train_samples 60000 vs 59999"),
        (_run(lr=0.02, steps=900), _NOT_COMPARABLE + "lr 0.01 vs 0.02; steps 938 vs 900"),
        (
            _data_digest,
            _NOT_COMPARABLE.replace(_RESIDENT, "fnn/tutorial on cpu, batch 64: ")
            + "data t10k-labels-idx1-ubyte sha256 ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2 vs "
            + "0" * 64,
        ),
        (_run(final_loss=0.0686901), _RESIDENT + "final training loss: 0.06869 vs 0.0686901"),
        (_run(test_acc=0.9761), _RESIDENT + "test accuracy: 0.976 vs 0.9761"),
        (_run(test_loss=1.0), _RESIDENT + "test loss: "),
    ],
)
def test_verify_compares_every_number_it_vouches_for(
    edit: typing.Any, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Configuration (rate, steps, epochs, samples, the data) must be equal for a pair to be comparable;
    the final training loss and test accuracy are held to the pair's rule, as the curve is."""
    from kitbench._cli import main

    good = _edited_record(tmp_path, "good.json", lambda data: None)
    bad = _edited_record(tmp_path, "bad.json", edit)
    assert main(["verify", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"NOT REPRODUCED: {words}"), out
    assert "training length" not in out


def test_the_final_numbers_are_held_to_the_tolerance_across_builds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kitbench._cli import main

    def elsewhere(data: dict[str, typing.Any], acc: float) -> None:
        data["environment"]["torch"] = "2.9.1+cu126"
        data["checks"]["mnist"]["runs"][1].update(test_acc=acc)

    good = _edited_record(tmp_path, "good.json", lambda data: None)
    near = _edited_record(tmp_path, "near.json", lambda data: elsewhere(data, 0.976 * 1.01))
    far = _edited_record(tmp_path, "far.json", lambda data: elsewhere(data, 0.976 * 0.9))
    assert main(["verify", str(good), str(near)]) == 0
    assert f"equal (within rtol 0.05): {_RESIDENT}test accuracy\n" in capsys.readouterr().out
    assert main(["verify", str(good), str(far)]) == 1
    assert capsys.readouterr().out.startswith(f"NOT REPRODUCED: {_RESIDENT}test accuracy: 0.976 vs ")


def _unrecorded(data: dict[str, typing.Any]) -> None:
    for run in data["checks"]["mnist"]["runs"]:
        del run["lr"], run["steps"], run["epoch_losses"]
    del data["checks"]["mnist"]["sha256"]


def test_what_verify_did_not_compare_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kitbench._cli import main

    good = _edited_record(tmp_path, "good.json", lambda data: None)
    bare = _edited_record(tmp_path, "bare.json", _unrecorded)
    assert main(["verify", str(good), str(bare)]) == 0
    out = capsys.readouterr().out
    skipped = next(line for line in out.splitlines() if line.startswith("  not compared: "))[16:].split("; ")
    for item in (
        "the MNIST data (its sha256 is not recorded by the candidate)",
        "lr: not recorded by the candidate (every pair)",
        "steps: not recorded by the candidate (every pair)",
        "epoch losses: not recorded by the candidate (every pair)",
        "parameters: no digest in either run (every pair)",
        "capture (which mechanism captured a graphed step)",
        "the availability and moves checks",
    ):
        assert item in skipped, (item, skipped)
    assert any(s.startswith("timings (epoch_s, ") for s in skipped)
    for quantity in (
        "training loss curve",
        "final training loss",
        "test loss",
        "test accuracy",
        "test accuracy per epoch",
    ):
        assert f"  equal (exact): {_RESIDENT}{quantity}\n" in out


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda run: run["loss_curve"].pop(), "training loss curve: 60 vs 59 points (the same configuration)"),
        (lambda run: run["epoch_losses"].append(0.05), "epoch losses: 3 vs 4 epochs (the same configuration)"),
        (lambda run: run["epoch_test_acc"].pop(0), "test accuracy per epoch: 3 vs 2 epochs (the same configuration)"),
    ],
)
def test_a_length_difference_names_what_differs(
    edit: typing.Any, words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not "training length: 1 vs 1 epochs, 600 vs 600 samples": the sequence whose length differs."""
    from kitbench._cli import main

    good = _edited_record(tmp_path, "good.json", lambda data: None)
    bad = _edited_record(tmp_path, "bad.json", lambda data: edit(data["checks"]["mnist"]["runs"][1]))
    assert main(["verify", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"NOT REPRODUCED: {_RESIDENT}{words}"), out
    assert "Traceback" not in out and "training length" not in out


@pytest.mark.integration
def test_a_side_without_a_parameter_digest_is_compared_exactly_never_called_bitwise(runs: dict[str, Path]) -> None:
    other = records.read(runs["b"])
    for run in other["checks"]["mnist"]["runs"]:
        del run["params_sha256"]  # as a record written without digests
    verdict = verify(records.read(runs["a"]), other)
    assert verdict.reproduced and {c.rule for c in verdict.comparisons} == {"exact"}
    assert not any("bitwise" in line for line in verdict.rules)
    assert any("the candidate has no parameter digest" in line for line in verdict.rules)


def test_verify_pairs_runs_in_linear_time() -> None:
    """Counted, not timed (CPU time on shared cores says little): each run's model name counts the times it
    is compared. Paired across devices, the candidate's runs in the other order, each partner was searched
    for along a list (n * n / 2 comparisons); one dictionary look-up each is a few per run."""
    compared = [0]

    class Counted(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            compared[0] += 1
            return str.__eq__(self, other)

    def record(device: str, sizes: typing.Iterable[int]) -> dict[str, typing.Any]:
        base = json.loads((Path(__file__).resolve().parents[2] / "docs" / "records" / "cpu-bench-fnn.json").read_text())
        run = base["checks"]["mnist"]["runs"][0]
        # A name of its own per run: a comparison of two keys reaches the names (identity would skip it).
        base["checks"]["mnist"]["runs"] = [
            {**run, "model": Counted(run["model"]), "batch_size": size, "device": device} for size in sizes
        ]
        return typing.cast(dict[str, typing.Any], base)

    runs = 4_000
    verdict = verify(
        record("cpu", range(1, runs + 1)),  # type: ignore[arg-type]
        record("cuda", range(runs, 0, -1)),
    )  # type: ignore[arg-type]
    assert len(verdict.rules) >= runs and compared[0] < 20 * runs, compared[0]


def test_a_tally_counts_what_agrees_and_what_differs_by_rule() -> None:
    compared = [
        Comparison("a", "within rtol 0.05", True),
        Comparison("b", "within rtol 0.05", False),
        Comparison("c", "bitwise", True),
        Comparison("d", "within rtol 0.05", True),
        Comparison("the reference's status", "ok", False),
    ]
    assert tally(compared) == Tally({"within rtol 0.05": 2, "bitwise": 1}, {"within rtol 0.05": 1, "ok": 1})
    assert tally([]) == Tally({}, {})
