"""The series a record's charts draw, read from the record here only: the report's SVG charts (``svg``) and
``kitbench compare --plot`` (``plots``, matplotlib) draw these, so the two never disagree on which points a
line has, its name, or its units. Sizes are in KiB, bandwidths in GB/s, step times in ms.
"""

from __future__ import annotations

from collections.abc import Iterable

from kitbench.reading.svg import Series
from kitbench.records.types import DdpRun, RunRecord


def transfers(record: RunRecord) -> list[Series]:
    """The moves check's median bandwidth against transfer size, one line per direction and memory, with its
    interquartile range as the band; pageable dashed, so that it reads apart from pinned in any colour."""
    found: dict[tuple[str, str], Series] = {}
    for t in record["checks"].get("moves", {}).get("transfers", []):
        line = found.setdefault(
            (t["direction"], t["memory"]),
            Series(f"{t['direction']} {t['memory']}", [], dashed=t["memory"] == "pageable"),
        )
        line.points.append((t["bytes"] / 1024, t["gb_per_s"]))
        line.band.append((t["bytes"] / 1024, t["gb_per_s_q1"], t["gb_per_s_q3"]))
    return _left_to_right(found.values())


def is_sweep(record: RunRecord) -> bool:
    """Whether the record's MNIST runs span batch sizes: then their step times make a line each."""
    return len({r["batch_size"] for r in record["checks"].get("mnist", {}).get("runs", [])}) > 1


def step_times(record: RunRecord) -> list[Series]:
    """Time per optimizer step against batch size, one line per model, loop and device; the CPU dashed. A run
    without ``step_s`` is left out: every record that sweeps batch sizes has it (both came in one release)."""
    found: dict[tuple[str, str, str], Series] = {}
    for r in record["checks"].get("mnist", {}).get("runs", []):
        step = r.get("step_s")
        if step is not None:
            key = (r["model"], r["loop"], r["device"])
            found.setdefault(key, Series(" ".join(key), [], dashed=r["device"] == "cpu")).points.append(
                (float(r["batch_size"]), step * 1e3)
            )
    return _left_to_right(found.values())


def allreduce(run: DdpRun) -> list[Series]:
    """A DDP run's all-reduce bus bandwidth against message size, one line per world size."""
    found: dict[int, Series] = {}
    for b in run["allreduce"]:
        found.setdefault(b["world_size"], Series(f"{run['backend']} x{b['world_size']}", [])).points.append(
            (b["bytes"] / 1024, b["busbw_gb_s"])
        )
    return _left_to_right(found.values())


def _left_to_right(series: Iterable[Series]) -> list[Series]:
    """Each line's points by size: --batch-size 256,16 runs, and so records, the sizes in the order given."""
    out = list(series)
    for line in out:
        line.points.sort()
        line.band.sort()
    return out
