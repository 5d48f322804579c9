"""Comparing run records: one row per record, what differs between their
environments, and whether one run reproduced another.

Records that cannot be read are kept as rows marked unreadable when other
records could be read, so one bad file never hides the rest; when nothing
can be read, the first error is raised.
"""

from __future__ import annotations

import glob
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from kitbench import manifest, records
from kitbench._types import Environment, MnistRun, RunRecord
from kitbench.errors import RecordError, UsageError

# The fingerprint fields that most often explain a difference in numbers.
DIFF_FIELDS = ("target", "torch", "torch_build", "cuda", "cudnn", "driver", "gpus", "cpu", "cpu_count", "threads",
               "image", "image_id", "manifest_sha256", "python", "os_version")
CROSS_DEVICE_RTOL = 0.05        # loss agreement demanded across devices or builds


@dataclass
class Loaded:
    path: Path
    record: RunRecord | None
    error: str | None = None


@dataclass
class Row:
    path: str
    status: str
    target: str | None = None
    machine: str | None = None
    torch: str | None = None
    device: str | None = None
    mnist: str | None = None             # model/loop the epoch columns describe
    cpu_epoch_s: float | None = None
    accel_epoch_s: float | None = None
    speedup: float | None = None
    test_acc: float | None = None
    h2d_pinned_gb_s: float | None = None
    d2h_pinned_gb_s: float | None = None
    link: str | None = None
    crossover: str | None = None         # e.g. "fnn/resident from batch 256": where the accelerator starts to win
    ddp: str | None = None               # e.g. "gloo x2 fnn 30%": the largest world size's scaling efficiency
    busbw_gb_s: float | None = None      # the peak all-reduce bus bandwidth
    differs: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def expand(inputs: Sequence[str]) -> list[Path]:
    """Files, directories (their *.json, recursively) and globs, in a stable order."""
    found: list[Path] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            inside = sorted(path.rglob("*.json"))
            if not inside:
                raise RecordError(f"no records (*.json) in directory {path}")
            found += inside
        elif path.exists():
            found.append(path)
        else:
            matches = sorted(Path(p) for p in glob.glob(item, recursive=True))
            if not matches:
                raise RecordError(f"no such record, directory or match: {item}")
            found += matches
    return found


def load(inputs: Sequence[str]) -> list[Loaded]:
    loaded = []
    for path in expand(inputs):
        try:
            loaded.append(Loaded(path, records.read(path)))
        except RecordError as error:
            loaded.append(Loaded(path, None, error.message))
    if not any(item.record for item in loaded):
        first = loaded[0]
        raise RecordError(first.error or f"{first.path} is unreadable")
    return loaded


def _peak(record: RunRecord, direction: str) -> float | None:
    rows = [t["gb_per_s"] for t in record["checks"].get("moves", {}).get("transfers", [])
            if t["direction"] == direction and t["memory"] == "pinned"]
    return max(rows) if rows else None


def _epochs(record: RunRecord) -> tuple[str | None, float | None, float | None, float | None]:
    """(config, CPU epoch s, accelerator epoch s, test acc) for the record's first model and loop."""
    runs = record["checks"].get("mnist", {}).get("runs", [])
    if not runs:
        return None, None, None, None
    model, loop = runs[0]["model"], runs[0]["loop"]
    same = [r for r in runs if (r["model"], r["loop"]) == (model, loop)]
    cpu = next((r for r in same if r["device"] == "cpu"), None)
    accel = next((r for r in same if r["device"] != "cpu"), None)
    best = accel or cpu
    return (f"{model}/{loop}", cpu["epoch_s"] if cpu else None, accel["epoch_s"] if accel else None,
            best["test_acc"] if best else None)


def _ddp(record: RunRecord) -> tuple[str | None, float | None]:
    runs = record["checks"].get("ddp", {}).get("runs", [])
    if not runs:
        return None, None
    run = runs[-1]              # NCCL where it ran, else gloo
    last = [r for r in run["scaling"] if r["world_size"] == max(run["world_sizes"], default=0)]
    label = None
    if last:
        row = last[0]
        eff = "-" if row["efficiency"] is None else f"{row['efficiency']:.0%}"
        label = f"{run['backend']} x{row['world_size']} {row['model']} {eff}"
    peak = max((b["busbw_gb_s"] for b in run["allreduce"]), default=None)
    return label, peak


def rows(loaded: Sequence[Loaded]) -> list[Row]:
    readable = [item.record for item in loaded if item.record is not None]
    reference = readable[0]["environment"] if readable else None
    out = []
    for item in loaded:
        if item.record is None:
            out.append(Row(str(item.path), f"unreadable: {item.error}"))
            continue
        rec = item.record
        env = rec["environment"]
        config, cpu_s, accel_s, acc = _epochs(rec)
        gpus = ", ".join(env.get("gpus") or []) or "no GPU"
        link = next(iter(env.get("gpu_links") or []), None)
        if rec["device"] == "mps":
            link = _links()[2]
        h2d, d2h = _peak(rec, "h2d"), _peak(rec, "d2h")
        ddp, busbw = _ddp(rec)
        crossings = rec["checks"].get("mnist", {}).get("crossovers", [])
        crossover = "; ".join(f"{c['model']}/{c['loop']} {c['text']}" for c in crossings) or None
        out.append(Row(
            path=str(item.path), status=rec["status"], target=env.get("target"),
            machine=f"{env.get('cpu')} x{env.get('cpu_count')}; {gpus}", torch=env.get("torch"),
            device=rec["device"], mnist=config, cpu_epoch_s=cpu_s, accel_epoch_s=accel_s,
            speedup=cpu_s / accel_s if cpu_s and accel_s else None, test_acc=acc,
            h2d_pinned_gb_s=h2d, d2h_pinned_gb_s=d2h, link=link, crossover=crossover, ddp=ddp, busbw_gb_s=busbw,
            differs=diff(reference, env) if reference is not None and env is not reference else [],
            warnings=link_warnings(link, h2d, d2h)))
    return out


@cache
def _links() -> tuple[dict[int, float], tuple[float, float], str]:
    data = manifest.load(manifest.envs_dir() / "links.yaml", "links").data
    return ({row["gen"]: row["lane_gb_s"] for row in data["pcie"]}, (data["band"][0], data["band"][1]),
            data["apple_unified_memory"])


def link_warnings(link: str | None, h2d: float | None, d2h: float | None) -> list[str]:
    """A warning per direction whose pinned peak is below the band of its link."""
    match = re.fullmatch(r"PCIe (\d{1,2}) x(\d{1,2})", link or "")
    if match is None:
        return []
    lanes, (low, high), _ = _links()
    peak = lanes.get(int(match[1]), 0.0) * int(match[2])
    if not peak:
        return []
    return [f"{name} pinned {value:.1f} GB/s is {value / peak:.0%} of {link}'s {peak:.1f} GB/s peak "
            f"(expected {low:.0%}-{high:.0%}): check the slot's link width and NUMA placement"
            for name, value in (("H2D", h2d), ("D2H", d2h)) if value is not None and value < low * peak]


def diff(a: Environment, b: Environment) -> list[str]:
    """``field: a -> b`` for each fingerprint field that differs, then one line per package and per
    setting that differs (``package numpy: 2.4.6 -> 2.4.5``, ``absent`` where one side lacks it).
    Packages are compared only where both records list them (a /1 record does not)."""
    found = [f"{key}: {a.get(key)} -> {b.get(key)}" for key in DIFF_FIELDS if a.get(key) != b.get(key)]
    if "packages" in a and "packages" in b:
        found += _keyed("package", {_name(p["name"]): p["version"] for p in a["packages"]},
                        {_name(p["name"]): p["version"] for p in b["packages"]})
    settings_a, settings_b = a.get("settings"), b.get("settings")
    if isinstance(settings_a, dict) and isinstance(settings_b, dict):
        found += _keyed("setting", settings_a, settings_b)
    return found


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _keyed(kind: str, a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    return [f"{kind} {key}: {a.get(key, 'absent')} -> {b.get(key, 'absent')}"
            for key in sorted(a.keys() | b.keys()) if a.get(key, "absent") != b.get(key, "absent")]


@dataclass
class Comparison:
    """One compared quantity, the rule applied to it, and what came out."""

    quantity: str           # e.g. "fnn/resident on cpu: training loss curve"
    rule: str               # "bitwise" or "within rtol 0.05"
    equal: bool
    detail: str | None = None


@dataclass
class Verdict:
    verdict: str                    # reproduced | not reproduced | both diverged
    first_divergence: str | None    # None when reproduced
    comparisons: list[Comparison] = field(default_factory=list)
    differences: list[str] = field(default_factory=list)

    @property
    def reproduced(self) -> bool:
        return self.verdict == "reproduced"


def _runs(record: RunRecord) -> dict[tuple[str, str, str], MnistRun]:
    return {(r["model"], r["loop"], r["device"]): r for r in record["checks"].get("mnist", {}).get("runs", [])}


def _diverged_at(run: MnistRun) -> int | None:
    """The step where training stopped being finite; records older than that field show it
    as null points in their loss curve."""
    step = run.get("diverged_at_step")
    if step is not None:
        return step
    curve = run["loss_curve"]
    return next((i for i, v in enumerate(curve) if v is None), None) if None in curve else None


def verify(reference: RunRecord, candidate: RunRecord) -> Verdict:
    """Did ``candidate`` reproduce ``reference``'s training? Bitwise where both ran on the
    CPU with the same torch build, CPU model and threads; within ``CROSS_DEVICE_RTOL``
    otherwise. Each comparison names the rule it applied. A diverged run never verifies."""
    ref_runs, cand_runs = _runs(reference), _runs(candidate)
    if not ref_runs or not cand_runs:
        raise UsageError("both records need MNIST runs to verify", hint="run with --check mnist")
    pairs = [(ref_runs[key], cand_runs[key]) for key in ref_runs if key in cand_runs]
    if not pairs:
        # Same model and loop on another device: the cross-device comparison.
        by_config = {(m, lp): r for (m, lp, _), r in cand_runs.items()}
        pairs = [(run, by_config[key[:2]]) for key, run in ref_runs.items() if key[:2] in by_config]
    if not pairs:
        raise UsageError("the records share no MNIST model and loop", hint="run both with the same --model/--loop")
    env_a, env_b = reference["environment"], candidate["environment"]
    same_build = all(env_a.get(k) == env_b.get(k) for k in ("torch", "cpu", "threads"))
    options_a, options_b = reference["options"], candidate["options"]
    differences = [f"option {k}: {options_a[k]} -> {options_b[k]}"
                   for k in ("seed", "epochs", "batch_size", "lr", "train_limit")
                   if options_a[k] != options_b[k]]
    differences += diff(env_a, env_b)
    comparisons: list[Comparison] = []
    both_diverged = True
    for ref, cand in pairs:
        label = f"{ref['model']}/{ref['loop']} on {ref['device']}" + (
            "" if ref["device"] == cand["device"] else f" vs {cand['device']}")
        rule = "bitwise" if same_build and ref["device"] == cand["device"] == "cpu" else \
            f"within rtol {CROSS_DEVICE_RTOL}"
        found, diverged = _compare_run(label, ref, cand, rule)
        comparisons += found
        both_diverged &= diverged
    first = next((f"{c.quantity}: {c.detail}" for c in comparisons if not c.equal), None)
    if first is None:
        return Verdict("reproduced", None, comparisons, differences)
    if both_diverged and all(c.equal or c.quantity.endswith("divergence") for c in comparisons):
        return Verdict("both diverged", first, comparisons, differences)
    return Verdict("not reproduced", first, comparisons, differences)


def _compare_run(label: str, ref: MnistRun, cand: MnistRun, rule: str) -> tuple[list[Comparison], bool]:
    """The comparisons of one pair of runs, and whether both diverged identically."""
    bitwise = rule == "bitwise"
    at_ref, at_cand = _diverged_at(ref), _diverged_at(cand)
    if at_ref is not None or at_cand is not None:
        if at_ref == at_cand:
            same = _first_difference(ref["loss_curve"][:at_ref], cand["loss_curve"][:at_cand], bitwise) is None
            return [Comparison(f"{label}: divergence", rule, False,
                               f"both diverged at step {at_ref}" + ("" if same else ", after different curves"))], same
        return [Comparison(f"{label}: divergence", rule, False,
                           f"the reference diverged at step {at_ref}, the candidate at {at_cand}")], False
    if (ref["epochs"], ref["train_samples"]) != (cand["epochs"], cand["train_samples"]) or \
            len(ref["loss_curve"]) != len(cand["loss_curve"]):
        return [Comparison(f"{label}: training length", "equal", False,
                           f"{ref['epochs']} vs {cand['epochs']} epochs, {ref['train_samples']} vs "
                           f"{cand['train_samples']} samples")], False
    per_epoch = max(1, len(ref["loss_curve"]) // ref["epochs"])
    found = []
    index = _first_difference(ref["loss_curve"], cand["loss_curve"], bitwise)
    found.append(Comparison(f"{label}: training loss curve", rule, index is None, None if index is None else
                            f"epoch {index // per_epoch + 1}: {ref['loss_curve'][index]} vs "
                            f"{cand['loss_curve'][index]} (curve point {index})"))
    index = _first_difference(ref["epoch_test_acc"], cand["epoch_test_acc"], bitwise)
    found.append(Comparison(f"{label}: test accuracy per epoch", rule, index is None, None if index is None else
                            f"epoch {index + 1}: {ref['epoch_test_acc'][index]:.4f} vs "
                            f"{cand['epoch_test_acc'][index]:.4f}"))
    return found, False


def _close(a: float | None, b: float | None, bitwise: bool) -> bool:
    if a is None or b is None:
        return a is b
    return a == b if bitwise else math.isclose(a, b, rel_tol=CROSS_DEVICE_RTOL, abs_tol=1e-6)


def _first_difference(a: Sequence[float | None], b: Sequence[float | None], bitwise: bool) -> int | None:
    if len(a) != len(b):
        return min(len(a), len(b))
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if not _close(x, y, bitwise)), None)
