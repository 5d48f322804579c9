"""Comparing run records: one row per record, what differs between their
environments, and whether one run reproduced another.

Records that cannot be read are kept as rows marked unreadable when other
records could be read, so one bad file never hides the rest; when nothing
can be read, the first error is raised.
"""

from __future__ import annotations

import glob
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from kitbench import manifest, records
from kitbench.errors import RecordError, UsageError

# The fingerprint fields that most often explain a difference in numbers.
DIFF_FIELDS = ("target", "torch", "torch_build", "cuda", "cudnn", "driver", "gpus", "cpu", "cpu_count", "threads",
               "image", "image_id", "manifest_sha256", "python", "os_version")
CROSS_DEVICE_RTOL = 0.05        # loss agreement demanded across devices or builds


@dataclass
class Loaded:
    path: Path
    record: dict[str, Any] | None
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


def _peak(record: dict[str, Any], direction: str) -> float | None:
    rows = [t["gb_per_s"] for t in record.get("checks", {}).get("moves", {}).get("transfers", [])
            if t["direction"] == direction and t["memory"] == "pinned"]
    return max(rows) if rows else None


def _epochs(record: dict[str, Any]) -> tuple[str | None, float | None, float | None, float | None]:
    """(config, CPU epoch s, accelerator epoch s, test acc) for the record's first model and loop."""
    runs = record.get("checks", {}).get("mnist", {}).get("runs", [])
    if not runs:
        return None, None, None, None
    model, loop = runs[0]["model"], runs[0]["loop"]
    same = [r for r in runs if (r["model"], r["loop"]) == (model, loop)]
    cpu = next((r for r in same if r["device"] == "cpu"), None)
    accel = next((r for r in same if r["device"] != "cpu"), None)
    best = accel or cpu
    return (f"{model}/{loop}", cpu["epoch_s"] if cpu else None, accel["epoch_s"] if accel else None,
            best["test_acc"] if best else None)


def rows(loaded: Sequence[Loaded]) -> list[Row]:
    readable = [item.record for item in loaded if item.record is not None]
    reference = readable[0]["environment"] if readable else {}
    out = []
    for item in loaded:
        if item.record is None:
            out.append(Row(str(item.path), f"unreadable: {item.error}"))
            continue
        rec = item.record
        env = rec.get("environment", {})
        config, cpu_s, accel_s, acc = _epochs(rec)
        gpus = ", ".join(env.get("gpus") or []) or "no GPU"
        link = next(iter(env.get("gpu_links") or []), None)
        if rec.get("device") == "mps":
            link = _links()[2]
        h2d, d2h = _peak(rec, "h2d"), _peak(rec, "d2h")
        out.append(Row(
            path=str(item.path), status=rec["status"], target=env.get("target"),
            machine=f"{env.get('cpu')} x{env.get('cpu_count')}; {gpus}", torch=env.get("torch"),
            device=rec.get("device"), mnist=config, cpu_epoch_s=cpu_s, accel_epoch_s=accel_s,
            speedup=cpu_s / accel_s if cpu_s and accel_s else None, test_acc=acc,
            h2d_pinned_gb_s=h2d, d2h_pinned_gb_s=d2h, link=link,
            differs=diff(reference, env) if env is not reference else [],
            warnings=link_warnings(link, h2d, d2h)))
    return out


@cache
def _links() -> tuple[dict[int, float], tuple[float, float], str]:
    data = manifest.load(manifest.envs_dir() / "links.yaml", "links").data
    return ({row["gen"]: row["lane_gb_s"] for row in data["pcie"]}, (data["band"][0], data["band"][1]),
            data["apple_unified_memory"])


def link_warnings(link: str | None, h2d: float | None, d2h: float | None) -> list[str]:
    """A warning per direction whose pinned peak is below the band of its link."""
    if link is None or not link.startswith("PCIe "):
        return []
    gen_text, width_text = link.removeprefix("PCIe ").split(" x")
    lanes, (low, high), _ = _links()
    lane = lanes.get(int(gen_text))
    if lane is None:
        return []
    peak = lane * int(width_text)
    return [f"{name} pinned {value:.1f} GB/s is {value / peak:.0%} of {link}'s {peak:.1f} GB/s peak "
            f"(expected {low:.0%}-{high:.0%}): check the slot's link width and NUMA placement"
            for name, value in (("H2D", h2d), ("D2H", d2h)) if value is not None and value < low * peak]


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """``field: a -> b`` for each fingerprint field that differs."""
    return [f"{key}: {a.get(key)} -> {b.get(key)}" for key in DIFF_FIELDS if a.get(key) != b.get(key)]


@dataclass
class Verdict:
    reproduced: bool
    compared: str                   # what was compared, and how strictly
    first_divergence: str | None    # None when reproduced
    differences: list[str] = field(default_factory=list)


def _runs(record: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["model"], r["loop"], r["device"]): r
            for r in record.get("checks", {}).get("mnist", {}).get("runs", [])}


def verify(reference: dict[str, Any], candidate: dict[str, Any]) -> Verdict:
    """Did ``candidate`` reproduce ``reference``'s training? Bitwise on the same CPU
    build and settings; within ``CROSS_DEVICE_RTOL`` across devices or builds."""
    ref_runs, cand_runs = _runs(reference), _runs(candidate)
    if not ref_runs or not cand_runs:
        raise UsageError("both records need MNIST runs to verify", hint="run with --check mnist")
    pairs = [(key, ref_runs[key], cand_runs[key]) for key in ref_runs if key in cand_runs]
    if not pairs:
        # Same model and loop on another device: the cross-device comparison.
        by_config = {(m, lp): r for (m, lp, _), r in cand_runs.items()}
        pairs = [(key, run, by_config[key[:2]]) for key, run in ref_runs.items() if key[:2] in by_config]
    if not pairs:
        raise UsageError("the records share no MNIST model and loop", hint="run both with the same --model/--loop")
    env_a, env_b = reference["environment"], candidate["environment"]
    same_build = all(env_a.get(k) == env_b.get(k) for k in ("torch", "cpu", "threads"))
    differences = [f"option {k}: {v} -> {candidate['options'].get(k)}" for k, v in reference["options"].items()
                   if k in ("seed", "epochs", "batch_size", "lr", "train_limit") and candidate["options"].get(k) != v]
    differences += diff(env_a, env_b)
    for (model, loop, device), ref, cand in pairs:
        bitwise = same_build and device == cand["device"] == "cpu"
        label = f"{model}/{loop} on {device}" + ("" if device == cand["device"] else f" vs {cand['device']}")
        divergence = _first_divergence(ref, cand, bitwise)
        if divergence:
            return Verdict(False, f"{label}, {'bitwise' if bitwise else f'rtol {CROSS_DEVICE_RTOL}'}",
                           divergence, differences)
    strictness = "bitwise" if same_build else f"within rtol {CROSS_DEVICE_RTOL}"
    return Verdict(True, f"{len(pairs)} MNIST run(s), loss curves and accuracy {strictness}", None, differences)


def _close(a: float, b: float, bitwise: bool) -> bool:
    return a == b if bitwise else math.isclose(a, b, rel_tol=CROSS_DEVICE_RTOL, abs_tol=1e-6)


def _first_divergence(ref: dict[str, Any], cand: dict[str, Any], bitwise: bool) -> str | None:
    if len(ref["loss_curve"]) != len(cand["loss_curve"]):
        return f"different training lengths ({ref['epochs']} vs {cand['epochs']} epochs, " \
               f"{ref['train_samples']} vs {cand['train_samples']} samples)"
    per_epoch = max(1, len(ref["loss_curve"]) // ref["epochs"])
    for index, (a, b) in enumerate(zip(ref["loss_curve"], cand["loss_curve"], strict=True)):
        if not _close(a, b, bitwise):
            epoch = index // per_epoch + 1
            return f"epoch {epoch}: training loss {a:.6f} vs {b:.6f} (curve point {index})"
    for epoch, (a, b) in enumerate(zip(ref["epoch_test_acc"], cand["epoch_test_acc"], strict=True), start=1):
        if not _close(a, b, bitwise):
            return f"epoch {epoch}: test accuracy {a:.4f} vs {b:.4f}"
    return None
