"""Whether one run reproduced another (``kitbench verify``): the runs paired, the rule each pair is
held to (bitwise, exact or a tolerance) and why, and the verdict."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from kitbench.errors import UsageError
from kitbench.reading.envdiff import diff
from kitbench.records.types import Environment, MnistRun, RunRecord

CROSS_DEVICE_RTOL = 0.05  # loss agreement demanded across devices or builds

# What verify leaves out of every comparison (it says so on every verdict); the fields a pair's runs do
# not both record are added per pair.
NOT_COMPARED = (
    "timings (epoch_s, epoch_s_all, step_s, samples_per_s, data_s, dataset_load_s, warmup_s, eval_s, "
    "capture_s, compute_floor_s, floor_fraction, matmul_gflops, profile, device_init_s)",
    "the MNIST check's speedup, loop-ratio and graph-ratio tables (timings) and its data_root",
    "capture (which mechanism captured a graphed step)",
    "the availability and moves checks",
    "the ddp check (its replicas' own digests are checked within a run)",
    "the sweep and crossover tables (each batch size's run is compared instead)",
)
# What a run was asked to do: a pair that differs in any of these (or in the MNIST data) is not comparable.
_CONFIGURATION = ("batch_size", "epochs", "train_samples", "lr", "steps")
_BUILD = ("torch", "torch_build", "cuda", "cudnn")
# The CPU identity that decides which kernels run; the core counts do not (threads are compared apart).
_CPU_IDENTITY = (
    "vendor",
    "model",
    "family",
    "model_number",
    "stepping",
    "implementer",
    "part",
    "variant",
    "revision",
    "isa",
)
# Settings that do not decide which kernels run: which GPU a process sees, and thread counts the rule
# compares apart (a CPU run's intra-op threads; the inter-op pool splits no reduction here).
_NOT_KERNEL_SETTINGS = {
    "CUDA_VISIBLE_DEVICES",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "num_threads",
    "num_interop_threads",
}
_OPTIONS = ("seed", "epochs", "batch_size", "sweep", "lr", "train_limit", "threads", "deterministic")
_WITHOUT_DIGESTS = (
    "the loss curve, epoch losses, final training loss, test loss and test accuracy: exact on the CPU "
    f"with the same torch, CPU model and threads, within rtol {CROSS_DEVICE_RTOL} otherwise; parameters "
    "not compared"
)


@dataclass
class Comparison:
    """One compared quantity, the rule applied to it, and what came out."""

    quantity: str  # e.g. "fnn/resident on cpu, batch 64: training loss curve"
    rule: str  # "bitwise" (parameter digests), "exact" (recorded numbers) or "within rtol 0.05"
    equal: bool
    detail: str | None = None


@dataclass
class Verdict:
    verdict: str  # reproduced | not reproduced | both diverged
    first_divergence: str | None  # None when reproduced
    comparisons: list[Comparison] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)  # which rule each pair of runs got, and why
    not_compared: list[str] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        return self.verdict == "reproduced"


class Tally(NamedTuple):
    """Compared quantities counted: how many agree and how many differ, each by the rule it was held to (in
    the order first met), so that a summary says what differs before the verdict says why."""

    agree: dict[str, int]
    differ: dict[str, int]


def tally(comparisons: Sequence[Comparison]) -> Tally:
    return Tally(
        dict(Counter(c.rule for c in comparisons if c.equal)), dict(Counter(c.rule for c in comparisons if not c.equal))
    )


_Key = tuple[str, str, str, int]


def _runs(record: RunRecord, name: str = "record") -> dict[_Key, MnistRun]:
    """The runs by model, loop, device and batch size; two under one key are refused, since which of
    them is compared would otherwise be decided silently (kitbench never writes two)."""
    found: dict[_Key, MnistRun] = {}
    for run in record["checks"].get("mnist", {}).get("runs", []):
        key = (run["model"], run["loop"], run["device"], run["batch_size"])
        if key in found:
            raise UsageError(
                f"the {name} holds two MNIST runs of {_label(key)!r}: which one it vouches for is not defined",
                hint="it was not written by kitbench or was edited since",
            )
        found[key] = run
    return found


def _label(key: _Key, other_device: str | None = None) -> str:
    model, loop, device, batch = key
    return (
        f"{model}/{loop} on {device}"
        + (f" vs {other_device}" if other_device and other_device != device else "")
        + f", batch {batch}"
    )


def _pairs(
    ref_runs: dict[_Key, MnistRun], cand_runs: dict[_Key, MnistRun]
) -> tuple[list[tuple[_Key, MnistRun, MnistRun]], list[_Key], list[_Key]]:
    """Runs paired by model, loop, device and batch size; then what is left paired across devices
    by model, loop and batch size (the cross-device comparison); then the runs with no partner."""
    pairs = [(key, ref_runs[key], cand_runs[key]) for key in ref_runs if key in cand_runs]
    # Linear: the candidates left over, by model, loop and batch size, each taken once, in order.
    across: dict[tuple[str, str, int], list[_Key]] = {}
    for key in reversed(cand_runs):
        if key not in ref_runs:
            across.setdefault((key[0], key[1], key[3]), []).append(key)
    left_ref, taken = [], set()
    for key in ref_runs:
        waiting = across.get((key[0], key[1], key[3])) if key not in cand_runs else None
        if waiting:
            taken.add(waiting[-1])
            pairs.append((key, ref_runs[key], cand_runs[waiting.pop()]))
        elif key not in cand_runs:
            left_ref.append(key)
    left_cand = [k for k in cand_runs if k not in ref_runs and k not in taken]
    return pairs, left_ref, left_cand


def _hardware(env: Environment, device: str, full: bool) -> str:
    """The hardware identity a run on ``device`` depends on: in ``full`` where both records hold it,
    else what older records held (the CPU's model string, the GPUs' names)."""
    if device != "cpu":
        gpus = env.get("gpu_identity")
        if full and gpus is not None:
            return ", ".join(f"{g['name']} (sm {g['capability']})" for g in gpus)
        return ", ".join(env.get("gpus") or [])
    cpu = env.get("cpu_identity")
    if full and cpu is not None:
        return " ".join(f"{k}={cpu[k]}" for k in _CPU_IDENTITY if cpu.get(k) is not None)  # type: ignore[literal-required]
    return f"model={env.get('cpu')}"


def _rule(env_a: Environment, env_b: Environment, ref: MnistRun, cand: MnistRun) -> tuple[str, str]:
    """(rule, why): "bitwise" where both runs are deterministic on the same build, hardware identity,
    settings and threads (and, as before, on the CPU with the same torch, CPU and threads); else the
    tolerance, saying what stands in the way."""
    device = ref["device"]
    if device != cand["device"]:
        return f"within rtol {CROSS_DEVICE_RTOL}", f"devices differ ({device} vs {cand['device']})"
    key = "cpu_identity" if device == "cpu" else "gpu_identity"
    full = key in env_a and key in env_b
    hw_a, hw_b = _hardware(env_a, device, full), _hardware(env_b, device, full)
    set_a, set_b = env_a.get("settings"), env_b.get("settings")
    obstacles = [f"{k} differs" for k in _BUILD if env_a.get(k) != env_b.get(k)]
    if hw_a != hw_b:
        obstacles.append(f"hardware differs ({hw_a} vs {hw_b})")
    if device == "cpu" and env_a.get("threads") != env_b.get("threads"):
        obstacles.append(f"threads differ ({env_a.get('threads')} vs {env_b.get('threads')})")
    # A setting one record does not name (written before kitbench recorded it) is unknown, not different.
    kernel_settings = sorted(
        k
        for k in {*(set_a or {}), *(set_b or {})} - _NOT_KERNEL_SETTINGS
        if set_a is not None and set_b is not None and k in set_a and k in set_b and set_a.get(k) != set_b.get(k)
    )
    if kernel_settings:
        obstacles.append("settings differ: " + ", ".join(kernel_settings))
    deterministic = bool(
        set_a and set_b and set_a.get("deterministic_algorithms") and set_b.get("deterministic_algorithms")
    )
    if obstacles:
        return f"within rtol {CROSS_DEVICE_RTOL}", "; ".join(obstacles)
    identity = f"same build ({env_a.get('torch')}), same hardware ({hw_a})" + (
        f" and threads ({env_a.get('threads')})" if device == "cpu" else ""
    )
    if deterministic:
        return "bitwise", f"both deterministic (--deterministic), {identity}" + (
            "" if full else "; a record names the hardware by model name only"
        )
    if device == "cpu":
        return (
            "bitwise",
            f"CPU, {identity}; not in deterministic mode (the CPU's kernels run "
            "deterministically in practice; PyTorch promises it only with --deterministic)",
        )
    return f"within rtol {CROSS_DEVICE_RTOL}", f"{device} without --deterministic on both sides"


def verify(reference: RunRecord, candidate: RunRecord) -> Verdict:
    """Did ``candidate`` reproduce ``reference``'s training? Runs are paired by model, loop,
    device and batch size, every size of a sweep; a run without a partner is a difference.
    Parameter digests and recorded numbers must be equal (rule "bitwise") where both runs are
    deterministic on the same build, hardware identity, settings and threads, and on the CPU
    with the same build, CPU and threads; elsewhere the recorded numbers within
    ``CROSS_DEVICE_RTOL``. Each comparison names its rule; ``rules`` says why each pair got
    its rule, ``not_compared`` what was left out. A diverged run never verifies."""
    ref_runs, cand_runs = _runs(reference, "reference"), _runs(candidate, "candidate")
    # A record that is not ok vouches for nothing, whatever its numbers: said first, and never verified.
    standing = _standing(reference, "reference") + _standing(candidate, "candidate")
    not_compared = list(NOT_COMPARED)
    if not ref_runs or not cand_runs:
        if standing:
            return Verdict(
                "not reproduced", f"{standing[0].quantity}: {standing[0].detail}", standing, not_compared=not_compared
            )
        raise UsageError("both records need MNIST runs to verify", hint="run with --check mnist")
    pairs, only_ref, only_cand = _pairs(ref_runs, cand_runs)
    if not pairs:
        if standing:
            return Verdict(
                "not reproduced", f"{standing[0].quantity}: {standing[0].detail}", standing, not_compared=not_compared
            )
        raise UsageError(
            "the records share no MNIST model, loop and batch size",
            hint="run both with the same --model/--loop/--batch-size",
        )
    env_a, env_b = reference["environment"], candidate["environment"]
    options_a, options_b = reference["options"], candidate["options"]
    differences = [
        f"option {k}: {options_a.get(k)} -> {options_b.get(k)}"
        for k in _OPTIONS
        if options_a.get(k) != options_b.get(k)
    ]
    differences += diff(env_a, env_b)  # each setting that differs among them, once
    rules: list[str] = []
    for name, record in (("reference", reference), ("candidate", candidate)):
        runs = record["checks"].get("mnist", {}).get("runs", [])
        if "settings" not in record["environment"] or any(r.get("params_sha256") is None for r in runs):
            rules.append(
                f"the {name} has no parameter digests or settings (written before kitbench recorded "
                f"them): compared by the rules for records without them: {_WITHOUT_DIGESTS}"
            )
    comparisons: list[Comparison] = list(standing)
    data, data_unrecorded = _data(reference, candidate)
    if options_a.get("seed") != options_b.get("seed"):
        # The seed is configuration: it decides the initial weights and the order of the batches.
        data = [*data, f"seed {options_a.get('seed')} vs {options_b.get('seed')}"]
    if data_unrecorded:
        not_compared.append(data_unrecorded)
    for key in only_ref:
        comparisons.append(
            Comparison(
                f"{_label(key)}: partner",
                "paired",
                False,
                "the candidate has no run of this model, loop, device and batch size",
            )
        )
    for key in only_cand:
        comparisons.append(
            Comparison(
                f"{_label(key)}: partner",
                "paired",
                False,
                "the reference has no run of this model, loop, device and batch size",
            )
        )
    both_diverged = True
    unrecorded: list[str] = []
    for key, ref, cand in pairs:
        label = _label(key, cand["device"])
        rule, why = _rule(env_a, env_b, ref, cand)
        if rule == "bitwise" and (ref.get("params_sha256") is None or cand.get("params_sha256") is None):
            # Without a parameter digest on both sides nothing is compared bit for bit: the numbers, exactly.
            lacking = _lacking(ref.get("params_sha256") is not None, cand.get("params_sha256") is not None)
            rule, why = "exact", f"{why}; {lacking} has no parameter digest"
        rules.append(f"{label}: {rule}: {why}")
        found, diverged, skipped = _compare_run(label, ref, cand, rule, data)
        comparisons += found
        unrecorded += skipped
        both_diverged &= diverged
    # Counted, not named by pair: a pair's label is text from the records, and these lines are not escaped.
    for what, count in Counter(unrecorded).items():
        not_compared.append(f"{what} ({'every pair' if count == len(pairs) else f'{count} of {len(pairs)} pairs'})")
    first = next((f"{c.quantity}: {c.detail}" for c in comparisons if not c.equal), None)
    if first is None:
        return Verdict("reproduced", None, comparisons, differences, rules, not_compared)
    if (
        both_diverged
        and not only_ref
        and not only_cand
        and all(c.equal or c.quantity.endswith("divergence") for c in comparisons)
    ):
        return Verdict("both diverged", first, comparisons, differences, rules, not_compared)
    return Verdict("not reproduced", first, comparisons, differences, rules, not_compared)


def _standing(record: RunRecord, name: str) -> list[Comparison]:
    """Why a record vouches for nothing, if it does not: a status other than ok (its error, where it
    has one), a check that failed, an MNIST check that is not ok. A record whose status is diverged
    vouches for its runs' divergence, which the pairs compare (two alike are BOTH DIVERGED)."""
    found = []
    status, error = record["status"], record.get("error")
    runs = record["checks"].get("mnist", {}).get("runs", [])
    if status in ("failed", "interrupted"):
        why = f": {str(error)[:300]}" if error else " (stopped before it finished)" if status == "interrupted" else ""
        found.append(
            Comparison(
                f"the {name}'s status", "ok", False, f"{status}{why}; a record that is not ok vouches for no result"
            )
        )
    elif status == "diverged" and not any(_diverged_at(run) is not None for run in runs):
        found.append(
            Comparison(f"the {name}'s status", "ok", False, "diverged, yet none of its MNIST runs records a divergence")
        )
    for check_name, check in record["checks"].items():
        state = cast(Mapping[str, Any], check).get("status")
        if state == "failed" or (check_name == "mnist" and state != "ok" and runs):
            summary = str(cast(Mapping[str, Any], check).get("summary") or "")[:300]
            found.append(
                Comparison(
                    f"the {name}'s {check_name} check", "ok", False, f"{state}" + (f": {summary}" if summary else "")
                )
            )
    return found


def _data(reference: RunRecord, candidate: RunRecord) -> tuple[list[str], str | None]:
    """How the MNIST data the two records read differs (per raw file, by SHA-256), or why it was not
    compared (a record that does not say what it read)."""
    digests = []
    for record in (reference, candidate):
        mnist = record["checks"].get("mnist")
        found = mnist.get("sha256") if mnist else None
        digests.append(found or None)  # an empty map names no file either
    a, b = digests
    if a is None or b is None:
        return [], f"the MNIST data (its sha256 is not recorded by {_lacking(a is not None, b is not None, 'record')})"
    return [
        f"data {name} sha256 {a.get(name, 'absent')} vs {b.get(name, 'absent')}"
        for name in sorted(a.keys() | b.keys())
        if a.get(name) != b.get(name)
    ], None


def _lacking(in_reference: bool, in_candidate: bool, kind: str = "run") -> str:
    """Which side lacks a field: the reference, the candidate, or either (neither has it)."""
    return (
        f"either {kind}"
        if not (in_reference or in_candidate)
        else "the reference"
        if not in_reference
        else "the candidate"
    )


def _configuration(ref: MnistRun, cand: MnistRun) -> tuple[list[str], list[str]]:
    """The configuration fields in which a pair differs, and those a side does not record."""
    a, b = cast(Mapping[str, object], ref), cast(Mapping[str, object], cand)
    differ, unrecorded = [], []
    for name in _CONFIGURATION:
        if a.get(name) is None or b.get(name) is None:
            unrecorded.append(f"{name}: not recorded by {_lacking(a.get(name) is not None, b.get(name) is not None)}")
        elif a[name] != b[name]:
            differ.append(f"{name} {a[name]} vs {b[name]}")
    return differ, unrecorded


def _diverged_at(run: MnistRun) -> int | None:
    """The step where training stopped being finite; records older than that field show it
    as null points in their loss curve."""
    step = run.get("diverged_at_step")
    if step is not None:
        return step
    curve = run["loss_curve"]
    return next((i for i, v in enumerate(curve) if v is None), None) if None in curve else None


def _compare_run(
    label: str, ref: MnistRun, cand: MnistRun, rule: str, data: list[str]
) -> tuple[list[Comparison], bool, list[str]]:
    """The comparisons of one pair of runs, whether both diverged identically, and what of the pair
    was not compared. ``data``: how the records' MNIST data differs."""
    exact = rule in ("bitwise", "exact")
    number_rule = "exact" if exact else rule
    differ, skipped = _configuration(ref, cand)
    if differ or data:
        return (
            [
                Comparison(
                    f"{label}: configuration",
                    "equal",
                    False,
                    "not comparable, the runs were configured differently: " + "; ".join(data + differ),
                )
            ],
            False,
            skipped,
        )
    at_ref, at_cand = _diverged_at(ref), _diverged_at(cand)
    if at_ref is not None or at_cand is not None:
        if at_ref == at_cand:
            same = _first_difference(ref["loss_curve"][:at_ref], cand["loss_curve"][:at_cand], exact) is None
            return (
                [
                    Comparison(
                        f"{label}: divergence",
                        number_rule,
                        False,
                        f"both diverged at step {at_ref}" + ("" if same else ", after different curves"),
                    )
                ],
                same,
                skipped,
            )
        return (
            [
                Comparison(
                    f"{label}: divergence",
                    number_rule,
                    False,
                    f"the reference diverged at step {at_ref}, the candidate at {at_cand}",
                )
            ],
            False,
            skipped,
        )
    per_epoch = max(1, len(ref["loss_curve"]) // ref["epochs"])
    curve_a, curve_b = ref["loss_curve"], cand["loss_curve"]
    found = [
        _sequence(
            f"{label}: training loss curve",
            number_rule,
            curve_a,
            curve_b,
            "points",
            lambda i: f"epoch {i // per_epoch + 1}: {curve_a[i]} vs {curve_b[i]} (curve point {i})",
        )
    ]
    if "epoch_losses" in ref and "epoch_losses" in cand:
        losses_a, losses_b = ref["epoch_losses"], cand["epoch_losses"]
        found.append(
            _sequence(
                f"{label}: epoch losses",
                number_rule,
                losses_a,
                losses_b,
                "epochs",
                lambda i: f"epoch {i + 1}: {losses_a[i]} vs {losses_b[i]}",
            )
        )
    else:
        skipped.append(f"epoch losses: not recorded by {_lacking('epoch_losses' in ref, 'epoch_losses' in cand)}")
    for name, what in (
        ("final_loss", "final training loss"),
        ("test_loss", "test loss"),
        ("test_acc", "test accuracy"),
    ):
        x, y = cast(Mapping[str, Any], ref)[name], cast(Mapping[str, Any], cand)[name]
        same = _close(x, y, exact)
        found.append(Comparison(f"{label}: {what}", number_rule, same, None if same else f"{x} vs {y}"))
    acc_a, acc_b = ref["epoch_test_acc"], cand["epoch_test_acc"]
    found.append(
        _sequence(
            f"{label}: test accuracy per epoch",
            number_rule,
            acc_a,
            acc_b,
            "epochs",
            lambda i: f"epoch {i + 1}: {acc_a[i]} vs {acc_b[i]}",
        )
    )
    digest_a, digest_b = ref.get("params_sha256"), cand.get("params_sha256")
    if rule == "bitwise" and digest_a is not None and digest_b is not None:
        found.append(
            Comparison(
                f"{label}: parameters",
                "bitwise",
                digest_a == digest_b,
                "bitwise identical" if digest_a == digest_b else _first_tensor(ref, cand),
            )
        )
    elif exact:
        skipped.append(f"parameters: no digest in {_lacking(digest_a is not None, digest_b is not None)}")
    else:
        skipped.append(f"parameters: digests are compared only under the bitwise rule, not {rule}")
    return found, False, skipped


def _sequence(
    quantity: str,
    rule: str,
    a: Sequence[float | None],
    b: Sequence[float | None],
    unit: str,
    where: Callable[[int], str],
) -> Comparison:
    """One recorded sequence compared under ``rule``: its length first, then its values."""
    if len(a) != len(b):
        return Comparison(quantity, rule, False, f"{len(a)} vs {len(b)} {unit} (the same configuration)")
    index = _first_difference(a, b, rule == "exact")
    return Comparison(quantity, rule, index is None, None if index is None else where(index))


def _first_tensor(ref: MnistRun, cand: MnistRun) -> str:
    """The first parameter (in the digest's order) whose bits differ."""
    a, b = ref.get("tensor_sha256", {}), cand.get("tensor_sha256", {})
    for name in sorted({*a, *b}):
        if a.get(name) != b.get(name):
            if name not in a or name not in b:
                return f"tensor {name} is in {'the candidate' if name not in a else 'the reference'} only"
            return f"tensor {name} differs first ({a[name]} vs {b[name]})"
    return "the digests differ (no per-tensor digests to say where)"


def _close(a: float | None, b: float | None, bitwise: bool) -> bool:
    if a is None or b is None:
        return a is b
    return a == b if bitwise else math.isclose(a, b, rel_tol=CROSS_DEVICE_RTOL, abs_tol=1e-6)


def _first_difference(a: Sequence[float | None], b: Sequence[float | None], bitwise: bool) -> int | None:
    if len(a) != len(b):
        return min(len(a), len(b))
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _close(x, y, bitwise)), None)
