"""TOML written by kitbench, and a file a person also edits updated in place.

The writer covers what kitbench writes (strings, whole numbers, booleans, lists, inline tables, tables and
arrays of tables), deterministic to the byte, so that a file rewritten with the same facts is the same file.
An update works table by table: the file is cut at its table headers, the tables kitbench owns are replaced
by its own, and every other table is kept as its text, comments and all; the result is read back, and the
kept tables must mean what they meant (a cut through a multi-line string would be caught there).
Reading is tomllib's (Python 3.11), or tomli's where it is absent.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kitbench.errors import KitbenchError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover -- Python 3.10
    import tomli as tomllib

_BARE = re.compile(r"[A-Za-z0-9_-]+")
_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')"""
_HEADER = re.compile(rf"\s*(\[\[?)\s*({_KEY}(?:\s*\.\s*{_KEY})*)\s*\]\]?\s*(#.*)?")
_LONG_STRING = re.compile(r'"""|\'\'\'')


def loads(text: str, where: str) -> dict[str, Any]:
    try:
        parsed: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as bad:
        # A refusal of what was given, as every other (exit 2).
        raise UsageError(f"{where}: not TOML: {bad}", hint="fix the file, or move it aside to start anew") from None
    return parsed


def key(name: str) -> str:
    return name if _BARE.fullmatch(name) else json.dumps(name, ensure_ascii=False)


def value(item: object) -> str:
    """``item`` as a TOML value on one line."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, str):
        # JSON's string escapes are TOML's basic string escapes.
        return json.dumps(item, ensure_ascii=False)
    if isinstance(item, Mapping):
        return "{ " + ", ".join(f"{key(k)} = {value(v)}" for k, v in item.items()) + " }" if item else "{}"
    if isinstance(item, Sequence):
        return "[" + ", ".join(value(v) for v in item) + "]"
    raise TypeError(f"no TOML value for {type(item).__name__}")


def pair(name: str, item: object) -> str:
    """``name = item``; a list of more than one entry one entry a line, as a person would lay it out."""
    if isinstance(item, list) and len(item) > 1:
        return f"{key(name)} = [\n" + "".join(f"    {value(v)},\n" for v in item) + "]"
    return f"{key(name)} = {value(item)}"


def table(header: str, items: Mapping[str, object], *, array: bool = False) -> str:
    """One table (``[[header]]`` for an array's entry): its pairs, in the order given."""
    opening = f"[[{header}]]" if array else f"[{header}]"
    return "\n".join([opening, *(pair(k, v) for k, v in items.items())]) + "\n"


@dataclass(frozen=True)
class Block:
    header: str | None      # dotted, unquoted; None: the text before the first table
    array: bool
    text: str


def dotted(header: str) -> str:
    """A header's keys joined by dots, each unquoted (``tool."uv"`` is ``tool.uv``)."""
    parsed = tomllib.loads(f"[{header}]\n")
    parts = []
    while parsed:
        name, parsed = next(iter(parsed.items()))
        parts.append(name)
    return ".".join(parts)


def blocks(text: str) -> list[Block]:
    """``text`` cut before each table header, each piece with its own text."""
    found: list[Block] = []
    header: str | None = None
    array = False
    lines: list[str] = []
    quote: str | None = None       # the multi-line string a line is in, where it is in one
    for line in text.splitlines(keepends=True):
        match = None if quote else _HEADER.fullmatch(line.rstrip("\r\n"))
        for mark in _LONG_STRING.findall(line):
            quote = None if quote == mark else quote or mark
        if match:
            # Comments just above a header are the next table's, as a person reads them (but for the file's
            # own, above its first table).
            cut = len(lines)
            while header is not None and cut and (not lines[cut - 1].strip() or lines[cut - 1].lstrip()[0] == "#"):
                cut -= 1
            if lines[:cut] or header is not None:
                found.append(Block(header, array, "".join(lines[:cut])))
            header, array, lines = dotted(match[2]), match[1] == "[[", [*lines[cut:], line]
            continue
        lines.append(line)
    if lines or header is not None:
        found.append(Block(header, array, "".join(lines)))
    return found


def own(block: Block) -> dict[str, Any]:
    """The pairs written in ``block`` itself (not in its sub-tables)."""
    parsed = loads(block.text, f"the table [{block.header}]")
    for part in (block.header or "").split(".") if block.header else []:
        parsed = parsed[part][-1] if block.array and isinstance(parsed[part], list) else parsed[part]
    return parsed


def update(old: str, ours: Sequence[Block], owned: Callable[[Block], bool], where: str) -> str:
    """``old`` with the blocks ``owned`` says are kitbench's replaced by ``ours``: each of ours where the first
    owned block of its header was (a new header at the end), the rest of ``old`` as it was."""
    loads(old, where)
    kept = [b for b in blocks(old) if not owned(b)]
    placed: set[str | None] = set()
    out: list[tuple[str | None, str]] = []
    positions = {b.header for b in blocks(old) if owned(b)}
    for block in blocks(old):
        if owned(block):
            if block.header not in placed:
                placed.add(block.header)
                out += [(o.header, o.text) for o in ours if o.header == block.header]
            continue
        out.append((block.header, block.text))
    for new in ours:
        if new.header in positions:
            continue
        # A new table goes after the last one of its top-level table ([project.optional-dependencies]
        # after [project]), else at the end.
        top = (new.header or "").split(".")[0]
        at = max((i for i, (h, _) in enumerate(out) if h and h.split(".")[0] == top), default=len(out) - 1)
        out.insert(at + 1, (new.header, new.text))
    text = _spaced([t for _, t in out])
    after = loads(text, where)
    for block in kept:
        if block.header is not None and not _same(after, block):
            raise KitbenchError(f"{where}: the table [{block.header}] would change in an update",
                                hint="kitbench keeps the tables it does not own as they are; check that one "
                                     "(a multi-line string that looks like a table header?)")
    return text


def _same(after: dict[str, Any], block: Block) -> bool:
    """Whether ``after`` holds what ``block`` held (an array's entry: among its entries); not where the block
    alone is no TOML (cut in the middle of a value)."""
    try:
        mine = own(block)
    except KitbenchError:
        return False
    node: Any = after
    for part in (block.header or "").split("."):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    if block.array:
        return isinstance(node, list) and mine in node
    return isinstance(node, dict) and all(node.get(k) == v for k, v in mine.items())


def _spaced(texts: list[str]) -> str:
    """The pieces one blank line apart, however each ended."""
    pieces = [t.strip("\n") for t in texts if t.strip()]
    return "\n\n".join(pieces) + "\n"
