"""compare's table: one row of values per record, read from the records, and the warning where a link
runs below its band (``kitbench._ui.comparison`` shows the rows as a table, Markdown or CSV; the CLI as JSON).

A record that cannot be read is a row marked unreadable; each row says how its environment differs
from the baseline's, the first ok record.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import NamedTuple, TypeVar

from kitbench.reading.envdiff import Change, changes
from kitbench.reading.inputs import Loaded
from kitbench.records import manifest
from kitbench.records.types import DdpRun, RunRecord


@dataclass
class Row:
    path: str
    status: str
    target: str | None = None
    machine: str | None = None
    torch: str | None = None
    device: str | None = None
    mnist: str | None = None  # model/loop the epoch columns describe
    cpu_epoch_s: float | None = None
    accel_epoch_s: float | None = None
    speedup: float | None = None
    test_acc: float | None = None
    h2d_pinned_gb_s: float | None = None
    d2h_pinned_gb_s: float | None = None
    link: str | None = None
    crossover: str | None = None  # e.g. "fnn/resident from batch 256": where the accelerator starts to win
    ddp: str | None = None  # e.g. "gloo x2 fnn 30%": the largest world size's scaling efficiency
    busbw_gb_s: float | None = None  # the peak all-reduce bus bandwidth
    differs: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    baseline: bool = False  # the record the others' differences are measured from


_Key = TypeVar("_Key")


def _peaks(points: Iterable[tuple[_Key, int, float]]) -> dict[_Key, tuple[int, float]]:
    """Each key's peak: (the size that first reached it, its value), keys in their first order."""
    found: dict[_Key, tuple[int, float]] = {}
    for key, size, value in points:
        if key not in found or value > found[key][1]:
            found[key] = (size, value)
    return found


def transfer_peaks(record: RunRecord) -> dict[tuple[str, str], tuple[int, float]]:
    """The moves check's peak bandwidth per (direction, memory): (bytes, GB/s); compare's row and the
    report's table read it here."""
    return _peaks(
        ((t["direction"], t["memory"]), t["bytes"], t["gb_per_s"])
        for t in record["checks"].get("moves", {}).get("transfers", [])
    )


def allreduce_peaks(run: DdpRun) -> dict[int, tuple[int, float]]:
    """A DDP run's peak all-reduce bus bandwidth per world size: (bytes, GB/s)."""
    return _peaks((b["world_size"], b["bytes"], b["busbw_gb_s"]) for b in run["allreduce"])


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
    return (
        f"{model}/{loop}",
        cpu["epoch_s"] if cpu else None,
        accel["epoch_s"] if accel else None,
        best["test_acc"] if best else None,
    )


def _ddp(record: RunRecord) -> tuple[str | None, float | None]:
    runs = record["checks"].get("ddp", {}).get("runs", [])
    if not runs:
        return None, None
    run = runs[-1]  # NCCL where it ran, else gloo
    last = [r for r in run["scaling"] if r["world_size"] == max(run["world_sizes"], default=0)]
    label = None
    if last:
        row = last[0]
        eff = "-" if row["efficiency"] is None else f"{row['efficiency']:.0%}"
        label = f"{run['backend']} x{row['world_size']} {row['model']} {eff}"
    return label, max((peak for _, peak in allreduce_peaks(run).values()), default=None)


def rows(loaded: Sequence[Loaded]) -> list[Row]:
    readable = [item.record for item in loaded if item.record is not None]
    # links.yaml read once per call, where a row first needs it (about 0.2 ms a read): kept by no module,
    # so a test's own envs/ or an edited file is always read afresh.
    links = cache(_links)
    # A failed run's environment may be half known (torch None): the first ok record is the baseline.
    base = next((r for r in readable if r["status"] == "ok"), readable[0] if readable else None)
    reference = base["environment"] if base is not None else None
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
            link = links()[2]
        peaks = transfer_peaks(rec)
        h2d, d2h = (peaks[(way, "pinned")][1] if (way, "pinned") in peaks else None for way in ("h2d", "d2h"))
        ddp, busbw = _ddp(rec)
        crossings = rec["checks"].get("mnist", {}).get("crossovers", [])
        crossover = "; ".join(f"{c['model']}/{c['loop']} {c['text']}" for c in crossings) or None
        out.append(
            Row(
                path=str(item.path),
                status=rec["status"],
                target=env.get("target"),
                machine=f"{env.get('cpu')} x{env.get('cpu_count')}; {gpus}",
                torch=env.get("torch"),
                device=rec["device"],
                mnist=config,
                cpu_epoch_s=cpu_s,
                accel_epoch_s=accel_s,
                speedup=cpu_s / accel_s if cpu_s and accel_s else None,
                test_acc=acc,
                h2d_pinned_gb_s=h2d,
                d2h_pinned_gb_s=d2h,
                link=link,
                crossover=crossover,
                ddp=ddp,
                busbw_gb_s=busbw,
                differs=changes(reference, env) if reference is not None and env is not reference else [],
                warnings=link_warnings(link, h2d, d2h, links=links),
                baseline=rec is base,
            )
        )
    return out


class Group(NamedTuple):
    """One difference from the baseline and the records that have it: ``quantity`` is ``before`` in the
    baseline and ``after`` in each of ``paths``."""

    quantity: str
    before: object
    after: object
    paths: list[str]


class Differences(NamedTuple):
    """compare's differences from the baseline, grouped: the baseline's path (None where no record reads),
    how many other records were compared with it, and each difference once, in the order first met."""

    baseline: str | None
    compared: int
    groups: list[Group]


def differences(table: Sequence[Row]) -> Differences:
    base = next((row for row in table if row.baseline), None)
    others = [row for row in table if not row.baseline and not row.status.startswith("unreadable")]
    groups: dict[tuple[str, str, str], Group] = {}
    for row in others:
        for change in row.differs:
            # Keyed by the values' text: a GPU list is a list, and one equal to another is the same difference.
            key = (change.quantity, repr(change.before), repr(change.after))
            groups.setdefault(key, Group(change.quantity, change.before, change.after, [])).paths.append(row.path)
    return Differences(base.path if base is not None else None, len(others), list(groups.values()))


_Links = tuple[dict[int, float], tuple[float, float], str]


def _links() -> _Links:
    """envs/links.yaml: GB/s per PCIe lane by generation, the band a pinned peak should reach, and what
    Apple's unified memory is called."""
    data = manifest.load(manifest.envs_dir() / "links.yaml", "links").data
    return (
        {row["gen"]: row["lane_gb_s"] for row in data["pcie"]},
        (data["band"][0], data["band"][1]),
        data["apple_unified_memory"],
    )


def link_warnings(
    link: str | None, h2d: float | None, d2h: float | None, *, links: Callable[[], _Links] = _links
) -> list[str]:
    """A warning per direction whose pinned peak is below the band of its link; ``links`` reads links.yaml."""
    match = re.fullmatch(r"PCIe ([0-9]{1,2}) x([0-9]{1,2})", link or "")
    if match is None:
        return []
    lanes, (low, high), _ = links()
    peak = lanes.get(int(match[1]), 0.0) * int(match[2])
    if not peak:
        return []
    return [
        f"{name} pinned {value:.1f} GB/s is {value / peak:.0%} of {link}'s {peak:.1f} GB/s peak "
        f"(expected {low:.0%}-{high:.0%}): check the slot's link width and NUMA placement"
        for name, value in (("H2D", h2d), ("D2H", d2h))
        if value is not None and value < low * peak
    ]
