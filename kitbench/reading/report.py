"""One page for any set of run records (``kitbench report``): the records read, their document of
sections built (``report_sections``), rendered as HTML (``report_html``) or Markdown
(``report_markdown``), and written where only a report may be replaced.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kitbench import _files
from kitbench.errors import RecordError, RecordReadError, UsageError
from kitbench.reading import compare, inputs, report_html, report_markdown
from kitbench.reading.report_sections import Item, sections_of

FORMATS = ("html", "markdown")
MARKER = "<!-- kitbench-report -->"  # the first line of every page: what may be replaced without --force


def _short_names(paths: Sequence[Path]) -> list[str]:
    """Names relative to the records' common folder: short, and distinct where the paths are."""
    try:
        absolute = [os.path.abspath(p) for p in paths]
        base = os.path.commonpath([os.path.dirname(p) for p in absolute])
        return [os.path.relpath(p, base) for p in absolute]
    except ValueError:  # different drives on Windows
        return [str(p) for p in paths]


@dataclass
class Report:
    text: str
    records: int
    unreadable: int
    skipped: list[Path]
    sections: list[str]


def build(names: Sequence[str], fmt: str = "html") -> Report:
    """The page for the records ``names`` name (files, directories, globs)."""
    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}", hint=f"choose one of: {', '.join(FORMATS)}")
    try:
        skipped: list[Path] = []
        loaded = inputs.load(names, skipped)
    except RecordReadError:
        raise
    except RecordError as error:  # no records at all: bad input, as for compare
        raise RecordReadError(error.message, hint=error.hint or inputs.GIVE_RECORDS) from None
    short = _short_names([x.path for x in loaded])
    # Each hash is of the bytes the record was parsed from: a file replaced meanwhile cannot lend its hash.
    items = [Item(name, x.sha256 or "-", x.record, x.error) for name, x in zip(short, loaded, strict=True)]
    sections = sections_of(items, compare.rows(loaded))
    unreadable = sum(1 for i in items if i.record is None)
    lead = [
        f"{len(items):,} records",
        f"{unreadable:,} unreadable" if unreadable else "",
        f"{len(skipped):,} other *.json files skipped" if skipped else "",
        f"quick runs: {sum(1 for i in items if i.quick):,}" if any(i.quick for i in items) else "",
    ]
    summary = "; ".join(p for p in lead if p)
    render = report_html.render if fmt == "html" else report_markdown.render
    # The marker heads every page, whatever its format: it is what write may replace without --force.
    return Report(f"{MARKER}\n{render(sections, summary)}", len(items), unreadable, skipped, [s.key for s in sections])


def write(path: Path, text: str, force: bool = False) -> None:
    """Write the page through ``kitbench._files.write`` (no symlink followed, a temporary file fsynced and
    renamed into place). A kitbench report there is replaced; anything else only with ``force``. A target
    refused up front is a usage error (exit 2), as for ``compare --plot`` and ``replay --out``."""
    try:
        _files.check_target(path, force, ours=_is_report)
    except RecordError as refused:
        raise UsageError(refused.message, hint=refused.hint) from None
    _files.write(path, text, force, what="the report", ours=_is_report)


def _is_report(path: Path) -> bool:
    """The page starts with MARKER; read without following a link or blocking on a FIFO swapped in."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        return os.read(fd, len(MARKER)) == MARKER.encode()
    except OSError:
        return False
    finally:
        os.close(fd)


def default_name(fmt: str) -> str:
    return "report.md" if fmt == "markdown" else "report.html"
