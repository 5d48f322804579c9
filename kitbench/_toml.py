"""A TOML file a person also edits, updated in place: kitbench's entries replaced as values, every other
byte kept.

The file is read twice: by tomllib (what uv and pixi read, and what kitbench checks) and by tomlkit, the
style-preserving library Poetry and pdm edit pyproject.toml with, which keeps each item's own text, its
comments and the layout around it. Each edit is made on both: on tomlkit's document, and on a plain copy of
what tomllib read. The edited text is read back by tomllib and must be that copy exactly, so an edit tomlkit
would place wrong (a table defined by dotted keys, say) is refused before anything is written, never
written as a file that means something else. A UTF-8 byte order mark, which tomllib does not take and uv
does, is set aside and put back.

Only ``kitbench project`` imports this module: tomlkit is not on install-cmd's start-up path.
"""

from __future__ import annotations

import copy
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import tomlkit
import tomlkit.exceptions
from tomlkit.container import Container, OutOfOrderTableProxy
from tomlkit.items import AoT, Array, Comment, InlineTable, Item, Null, Table, Whitespace

from kitbench.errors import KitbenchError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover -- Python 3.10
    import tomli as tomllib

_BOM = "\ufeff"
KeyPath = tuple[str, ...]


class Headed(dict):  # type: ignore[type-arg]
    """A table within a value that is written as a table of its own (``[a.b]``) where it can be, not inline."""


def loads(text: str, where: str) -> dict[str, Any]:
    """What tomllib (and uv) read in ``text``; a byte order mark is no part of it."""
    try:
        parsed: dict[str, Any] = tomllib.loads(text.removeprefix(_BOM))
    except tomllib.TOMLDecodeError as bad:
        # A refusal of what was given, as every other (exit 2).
        raise UsageError(f"{where}: not TOML: {bad}", hint="fix the file, or move it aside to start anew") from None
    return parsed


def _same(one: object, other: object) -> bool:
    # NaN is not equal to itself, and a person may write one; order within a table means nothing to TOML.
    return json.dumps(one, sort_keys=True, default=repr) == json.dumps(other, sort_keys=True, default=repr)


class Document:
    """``text`` (a file's, or "" for a new one) as it is edited: ``data`` is what it held, ``text()`` what
    it holds after the edits."""

    def __init__(self, text: str, where: str) -> None:
        self.where = where
        self.original = text
        self.bom = text.startswith(_BOM)
        self.data = loads(text, where)
        self._want = copy.deepcopy(self.data)
        try:
            self._doc = tomlkit.parse(text.removeprefix(_BOM))
        except tomlkit.exceptions.TOMLKitError as bad:
            raise KitbenchError(
                f"{where}: tomllib reads it, but tomlkit, which edits it, does not: {bad}",
                hint="move the file aside and run again, then copy your own parts back "
                "(and tell kitbench's maintainers which TOML it was)",
            ) from None
        self._above = _comments_to_headers(self._doc.body)
        self._made: list[Table] = []  # the tables kitbench adds, each to end in a blank line
        self._gone: Counter[str] = Counter()  # the comment lines of what kitbench takes out

    def get(self, path: KeyPath) -> Any:
        """The value at ``path`` as the edits so far leave it; None where there is none."""
        found: Any = self._want
        for key in path:
            if not isinstance(found, dict) or key not in found:
                return None
            found = found[key]
        return found

    def set(self, path: KeyPath, value: object, keep_others: bool = False) -> None:
        """``value`` at ``path``: a table key by key (what is already so keeps its text; keys it does not
        name go, but ``keep_others``, at any depth), anything else replaced where it differs. Tables on the
        way are made where absent."""
        if _same(self.get(path), value):
            return
        old = self.get(path)
        if isinstance(value, dict) and isinstance(old, dict):
            for key, item in value.items():
                self.set((*path, key), item, keep_others)
            for key in [k for k in old if k not in value and not keep_others]:
                self.delete((*path, key))
            return
        parent, headed = self._parent(path[:-1])
        self._plain(path[:-1])[path[-1]] = copy.deepcopy(value)
        parent[path[-1]] = _item(value, headed, self._made)

    def delete(self, path: KeyPath) -> None:
        """No value at ``path``; a table kitbench leaves empty by it goes too."""
        if self.get(path) is None:
            return
        del self._plain(path[:-1])[path[-1]]
        # The comments of what goes (a table of kitbench's, with those above its header) go with it.
        for piece in _physical(self._doc, path):
            inside = {id(t) for t in [piece, *_tables(piece.value.body)]} if isinstance(piece, Table) else set()
            self._gone += _comment_lines(
                piece.as_string() + "".join(text for table, text, _, _ in self._above if id(table) in inside)
            )
        parent, _ = self._parent(path[:-1])
        del parent[path[-1]]
        if len(path) > 1 and self.get(path[:-1]) == {}:
            self.delete(path[:-1])

    def splice(self, path: KeyPath, ours: Callable[[Any], bool], new: Sequence[object]) -> None:
        """The list at ``path`` with the entries ``ours`` says are kitbench's replaced by ``new``, where the
        first of them was; a person's entries, and their comments, stay as they were. A list
        left empty that held only kitbench's entries goes."""
        old = self.get(path)
        if old is None:
            if new:
                self.set(path, list(new))
            return
        # Where tables of an array of tables stand apart in the file (tomlkit merges them into a copy), each
        # part is edited where it is; the new entries go into the part of the first of kitbench's.
        pieces = _physical(self._doc, path)
        kept = [i for i, entry in enumerate(old) if not ours(entry)]
        # Where none of kitbench's is there yet: last, but first in a list of a line each, where an entry
        # added after a person's last one would put a comma on their line.
        lines = len(pieces) == 1 and isinstance(pieces[0], Array) and "\n" in pieces[0].as_string()
        at = next((i for i, entry in enumerate(old) if ours(entry)), 0 if lines else len(old))
        result = [*old[:at], *[e for e in old[at:] if not ours(e)]]
        position = len([i for i in kept if i < at])
        result[position:position] = list(new)
        if _same(result, old):
            return
        if not result and not kept:
            self.delete(path)
            return
        _, headed = self._parent(path[:-1])
        places = [(piece, i) for piece in pieces for i in range(len(piece))]
        home, at_piece = places[at] if at < len(places) else (pieces[-1], len(pieces[-1]))
        for piece, i in reversed([places[k] for k in range(len(old)) if ours(old[k])]):
            del piece[i]
            if piece is home and i < at_piece:
                at_piece -= 1
        for offset, entry in enumerate(new):
            item = _item(entry, headed and isinstance(home, AoT), self._made, top=not isinstance(home, Array))
            if at_piece + offset >= len(home):
                home.append(item)
            else:
                home.insert(at_piece + offset, item)
        if isinstance(home, Array) and len(result) > 1 and "\n" not in home.as_string() and not kept:
            home.multiline(True)
        self._plain(path[:-1])[path[-1]] = copy.deepcopy(result)

    def text(self) -> str:
        """The edited file, checked: tomllib reads in it exactly what the edits made of what it read."""
        if _same(self._want, self.data):
            return self.original
        order = list(_tables(self._doc.body))
        for table in self._made:
            last = table.value.body[-1][1] if table.value.body else None
            after = next((order[k + 1] for k, t in enumerate(order[:-1]) if t is table), None)
            # A blank line before the table that follows, where tomlkit gives it none.
            if (
                after is not None
                and last is not None
                and not isinstance(last, (Whitespace, Table, AoT))
                and not after.trivia.indent.startswith("\n")
            ):
                table.add(tomlkit.nl())
        for table, comments, supers, _ in self._above:
            first = next((t for t in supers if _has_header(t)), table)
            first.trivia.indent = comments + first.trivia.indent
        out = self._doc.as_string()
        if out.endswith("\n\n") and not self.original.removeprefix(_BOM).endswith("\n\n"):
            out = out.rstrip("\n") + "\n"  # the blank line after a table kitbench added last
        if "\r\n" in self.original and "\n" not in self.original.replace("\r\n", ""):
            out = out.replace("\r\n", "\n").replace("\n", "\r\n")  # a file of CRLF lines stays one
        try:
            read_back: dict[str, Any] = tomllib.loads(out)
        except tomllib.TOMLDecodeError as bad:
            read_back = {"not TOML": str(bad)}
        lost = _comment_lines(self.original) - _comment_lines(out) - self._gone
        if lost or not _same(read_back, self._want):
            raise KitbenchError(
                f"{self.where}: kitbench could not place its entries without "
                + ("losing a comment" if lost else "changing what the rest of the file means")
                + "; nothing was written",
                hint="write the tables kitbench edits ([project], [tool.uv]) as [headers], not "
                "dotted keys, and run again (and tell kitbench's maintainers which TOML "
                "it was)",
            )
        return (_BOM if self.bom else "") + out

    def _plain(self, path: KeyPath) -> dict[str, Any]:
        found = self._want
        for key in path:
            found = found.setdefault(key, {})
        return found

    def _parent(self, path: KeyPath) -> tuple[Any, bool]:
        """tomlkit's table at ``path``, made where absent, and whether a table made in it may have a header
        of its own (not inside an inline table, nor a table that dotted keys define: one there is inline)."""
        found: Any = self._doc
        headed = True
        for key in path:
            if key not in found:
                found[key] = _made(tomlkit.table(), self._made) if headed else tomlkit.inline_table()
            headed = headed and not _dotted(found, key)
            found = found[key]
            headed = headed and not isinstance(found, InlineTable)
        return found, headed


def _comment_lines(text: str) -> Counter[str]:
    """The lines of ``text`` that are a comment alone: none is lost in an edit (kitbench's entries carry
    their comments on their own lines, which go with them)."""
    return Counter(line.strip() for line in text.splitlines() if line.strip().startswith("#"))


def _physical(doc: Any, path: KeyPath) -> list[Any]:
    """Each part of the value at ``path`` as it stands in the file: one, but for an array of tables whose
    tables stand apart (``[[tool.uv.index]]`` above and below another table), which tomlkit reads as a
    merged copy."""
    found = [doc]
    for key in path:
        parts: list[Any] = []
        for container in found:
            # tomlkit keeps the parts of a table that stands apart in _tables, and names them nowhere else.
            tables = container._tables if isinstance(container, OutOfOrderTableProxy) else [container]
            parts += [table[key] for table in tables if key in table]
        found = parts
    return found


def _render_order(body: list[tuple[Any, Any]]) -> Iterator[tuple[list[tuple[Any, Any]], int, Any, bool | None]]:
    """Every item under ``body`` in the order it is written: its body, its place there, the item, and whether
    it is a table with a header of its own (None: a table whose header the file leaves out, ``[tool]`` of
    ``[tool.uv]``)."""
    for i, (key, item) in enumerate(body):
        if isinstance(item, Table) and not (key is not None and key.is_dotted()):
            yield body, i, item, None if item.is_super_table() else True
            yield from _render_order(item.value.body)
        elif isinstance(item, AoT):
            for table in item.body:
                yield body, i, table, True
                yield from _render_order(table.value.body)
        else:
            yield body, i, item, False


def _has_header(table: Table) -> bool:
    """Whether tomlkit writes ``table``'s header: one the file left out is written once it holds a key."""
    return not table.is_super_table() or any(
        not isinstance(v, (Table, AoT, Whitespace, Null)) for _, v in table.value.body
    )


def _tables(body: list[tuple[Any, Any]]) -> Iterator[Table]:
    """Every table under ``body`` in the order it is written, those without a header of their own too."""
    for _, item in body:
        for table in item.body if isinstance(item, AoT) else [item] if isinstance(item, Table) else []:
            yield table
            yield from _tables(table.value.body)


Moved = tuple[Table, str, list[Table], list[tuple[list[tuple[Any, Any]], int, Any]]]


def _comments_to_headers(body: list[tuple[Any, Any]]) -> list[Moved]:
    """Comments just above a table's header taken out of the table before, where tomlkit keeps them (and
    where a key or table kitbench adds there would come between them and their header), each with the
    table whose header they are to be written above (not yet: tomlkit indents a table's new keys as its
    header is), and the header-less tables it opens, whose header, once kitbench gives one a key, is
    written first; and where they were."""
    above = []
    order = list(_render_order(body))
    for at, (_, _, table, headed) in enumerate(order):
        if not headed:
            continue
        prev = at
        while prev > 0 and order[prev - 1][3] is None:
            prev -= 1
        supers = [order[k][2] for k in range(prev, at)]
        run = prev
        while (
            run > 0 and isinstance(order[run - 1][2], (Comment, Whitespace)) and order[run - 1][0] is order[prev - 1][0]
        ):
            run -= 1
        first = next((k for k in range(run, prev) if isinstance(order[k][2], Comment)), None)
        if first is None:
            continue
        text = "".join(order[k][2].as_string() for k in range(first, prev))
        cleared = []
        for k in range(first, prev):
            where, i, _, _ = order[k]
            cleared.append((where, i, where[i]))
            where[i] = (None, Whitespace(""))  # not removed: tomlkit indexes the keys after it by place
        above.append((table, text, supers, cleared))
    return above


def _dotted(parent: Any, key: str) -> bool:
    """Whether ``parent`` holds ``key`` by dotted keys (``project.name = ...``), in any of its parts."""
    containers: list[Container] = []
    if isinstance(parent, Container):
        containers = [parent]
    elif isinstance(parent, Table):
        containers = [parent.value]
    elif isinstance(parent, OutOfOrderTableProxy):
        containers = [t.value for t in parent._tables]
    for container in containers:
        for name, _ in container.body:
            if name is not None and name.key == key and name.is_dotted():
                return True
    return False


def _made(table: Table, made: list[Table]) -> Table:
    made.append(table)
    return table


def _item(value: object, headed: bool, made: list[Table], top: bool = True, in_array: bool = False) -> Item:
    """``value`` as tomlkit writes it: a table (with a header where ``headed``, and each ``Headed`` table
    in it too), a list of more than one entry one entry a line as a person would lay it out, tables within
    lists and other tables inline, a list within a list on one line."""
    if isinstance(value, dict):
        table: Table | InlineTable = (_made(tomlkit.table(), made)) if headed else tomlkit.inline_table()
        for key, item in value.items():
            nested = isinstance(item, (dict, list))
            table[key] = _item(item, headed and isinstance(item, Headed), made) if nested else item
        return table
    if isinstance(value, list):
        if headed and value and all(isinstance(entry, Headed) for entry in value):
            tables = tomlkit.aot()
            for entry in value:
                tables.append(_item(entry, True, made, in_array=True))
            return tables
        array = tomlkit.array()
        for entry in value:
            array.append(_item(entry, False, made, False) if isinstance(entry, (dict, list)) else entry)
        return array.multiline(top and len(value) > 1)
    return tomlkit.item(value)
