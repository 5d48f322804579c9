"""Whether a rerun's availability, moves and DDP checks agree with the record's: what a record without
MNIST runs (``run --check availability --check moves --quick``, a DDP check) can be verified by, and what
a replay shows beside verify's MNIST verdict. Timings (transfer and all-reduce bandwidths, matmul speed,
kernel seconds, DDP's scaling) are never compared: they are the machine's, not the environment's."""

from __future__ import annotations

from typing import Any

from kitbench.reading.verify import Comparison
from kitbench.records.types import RunRecord

_EXACT = "exact"


def compare(
    reference: RunRecord, candidate: RunRecord, same_hardware: bool = True
) -> tuple[list[Comparison], list[str]]:
    """(comparisons, not compared) of the checks both records ran but MNIST (verify's): each check's status;
    availability's torch build, usable devices (where ``same_hardware``) and kernel against the float64
    reference; moves' correctness (a tensor on the wrong device refused alike, the round trip's device);
    DDP's correctness (every rank's replica identical, per backend, model and world size)."""
    ref_checks: dict[str, Any] = dict(reference["checks"])
    cand_checks: dict[str, Any] = dict(candidate["checks"])
    found: list[Comparison] = []
    left: list[str] = []
    for name in ("availability", "moves", "ddp"):
        if name not in ref_checks:
            continue
        if name not in cand_checks:
            found.append(Comparison(f"{name}: ran", _EXACT, False, "the rerun did not run it"))
            continue
        ref, cand = ref_checks[name], cand_checks[name]
        found.append(_same(f"{name}: status", ref.get("status"), cand.get("status")))
        if name == "availability":
            found += _availability(ref, cand, same_hardware, left)
        elif name == "moves":
            found += _moves(ref, cand, same_hardware, left)
        else:
            found += _ddp(ref, cand, left)
    return found, left


def _same(quantity: str, a: object, b: object) -> Comparison:
    return Comparison(quantity, _EXACT, a == b, None if a == b else f"{a} -> {b}")


def _availability(ref: dict[str, Any], cand: dict[str, Any], same_hardware: bool, left: list[str]) -> list[Comparison]:
    found = [
        _same(
            "availability: torch version and build",
            (ref.get("torch_version"), ref.get("build_tag")),
            (cand.get("torch_version"), cand.get("build_tag")),
        )
    ]
    if same_hardware:

        def usable(check: dict[str, Any]) -> list[str]:
            return [f"{d.get('name')} (sm {d.get('capability')})" for d in check.get("devices") or []]

        found.append(
            _same(
                "availability: usable devices",
                (ref.get("selected_device"), usable(ref)),
                (cand.get("selected_device"), usable(cand)),
            )
        )
    else:
        left.append(f"availability's usable devices (the record's {ref.get('selected_device')} is not on this machine)")
    a, b = ref.get("kernel"), cand.get("kernel")
    if isinstance(a, dict) and isinstance(b, dict):
        where = a.get("device") if a.get("device") == b.get("device") else f"{a.get('device')} vs {b.get('device')}"
        found.append(
            Comparison(
                f"availability: the matmul kernel against float64 on {where}",
                f"each within its tolerance {a.get('tolerance')}",
                bool(a.get("passed")) == bool(b.get("passed")),
                f"relative error {_shown(a.get('relative_error'))} -> {_shown(b.get('relative_error'))}",
            )
        )
    elif isinstance(a, dict) or isinstance(b, dict):
        found.append(
            Comparison(
                "availability: the kernel check",
                _EXACT,
                False,
                "ran in one record only" + ("" if same_hardware else " (the GPU is not here)"),
            )
        )
    return found


def _shown(value: object) -> str:
    return f"{value:.2g}" if isinstance(value, float) else str(value)


def _moves(ref: dict[str, Any], cand: dict[str, Any], same_hardware: bool, left: list[str]) -> list[Comparison]:
    left.append("moves' transfer bandwidths and matmul times (timings)")
    if not same_hardware:
        left.append("moves' device-mismatch refusal and round trip with copies (they need the record's GPU)")
        return []
    return [
        _same(
            "moves: a tensor on the wrong device is refused",
            ref.get("mismatch_error") is not None,
            cand.get("mismatch_error") is not None,
        ),
        _same(
            "moves: the round trip's device",
            (ref.get("round_trip") or {}).get("device"),
            (cand.get("round_trip") or {}).get("device"),
        ),
    ]


def _ddp(ref: dict[str, Any], cand: dict[str, Any], left: list[str]) -> list[Comparison]:
    def identical(check: dict[str, Any]) -> dict[tuple[str, str, int], bool]:
        return {
            (str(run.get("backend")), str(s.get("model")), int(s.get("world_size") or 0)): bool(s.get("identical"))
            for run in check.get("runs") or []
            for s in run.get("scaling") or []
        }

    had, has = identical(ref), identical(cand)
    found = [
        _same(
            f"ddp: {backend} {model} x{world}: replicas identical",
            had[(backend, model, world)],
            has[(backend, model, world)],
        )
        for backend, model, world in had
        if (backend, model, world) in has
    ]
    missing = sorted({key[0] for key in had if key not in has})
    if missing:
        left.append(f"ddp's {', '.join(missing)} runs (the rerun has none: another device or fewer GPUs)")
    left.append("ddp's scaling efficiency and all-reduce bandwidth (timings)")
    return found
