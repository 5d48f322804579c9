"""Write ``kitbench/records/schemas/run.schema.json`` from the run record's one declaration,
``kitbench/records/types.py``: each field's JSON type from its annotation, required unless NotRequired (or its
class is ``total=False``), and the ``Json`` words beside it (bounds, patterns, descriptions). A type named in
``types.SHARED`` is written once under ``$defs`` and referred to. ``tests/records/test_run_schema.py`` fails when
the file is not what the types say, so a field is added in one place.

    PYTHONPATH=. python envs/scripts/run_schema.py kitbench/records/schemas/run.schema.json
"""

from __future__ import annotations

import json
import sys
import types
import typing
from typing import Any

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # a dependency on 3.10 only
    from typing_extensions import NotRequired

from kitbench.records import types as record

import _shared

TITLE = "kitbench.run/3 (and /2 and /1, which lack only optional fields): one run of the suite, as kitbench writes it"
DESCRIPTION = (
    "Written from kitbench/records/types.py by envs/scripts/run_schema.py: edit the types, not this file. Every "
    "field a reader (compare, verify, plots, the summary) uses is required and typed here. Losses may be null: a "
    "non-finite number is written as null and named in 'nonfinite'."
)

Node = dict[str, Any]
_PLAIN = {str: "string", bool: "boolean", int: "integer", float: "number"}


def render() -> str:
    """The schema file's text."""
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


def schema() -> Node:
    root: Node = {"$schema": "http://json-schema.org/draft-07/schema#", "title": TITLE, "description": DESCRIPTION}
    root.update(_node(record.RunRecord, top=True))
    root["$defs"] = {name: _node(shared, top=True) for name, shared in record.SHARED.items()}
    return root


def _node(annotation: Any, top: bool = False) -> Node:
    """The schema of a value of ``annotation``; ``top`` for a shared type's own definition (never a reference to
    itself)."""
    if not top and (shared := _reference(annotation)) is not None:
        return shared
    if typing.get_origin(annotation) is typing.Annotated:
        base, *marks = typing.get_args(annotation)
        return {**_node(base), **_words(marks)}
    members = _members(annotation)
    if type(None) in members and len(members) == 2:
        node = _node(next(m for m in members if m is not type(None)))
        if "enum" in node:
            return {**node, "enum": [*node["enum"], None]}
        if "type" not in node:
            raise TypeError(f"{annotation}: a reference or open type cannot also be null here")
        return {"type": [node["type"], "null"], **{k: v for k, v in node.items() if k != "type"}}
    if len(members) > 1:
        raise TypeError(f"{annotation}: a record's unions are X | None")
    if annotation is typing.Any:
        return {}
    if typing.get_origin(annotation) is typing.Literal:
        return {"enum": list(typing.get_args(annotation))}
    if typing.is_typeddict(annotation):
        return _object(annotation)
    origin = typing.get_origin(annotation)
    if origin is list:
        return {"type": "array", "items": _node(typing.get_args(annotation)[0])}
    if origin is dict:
        key, value = typing.get_args(annotation)
        if key is not str:
            raise TypeError(f"{annotation}: a JSON object's keys are strings")
        return {"type": "object"} if value is typing.Any else {"type": "object", "additionalProperties": _node(value)}
    if annotation in _PLAIN:
        return {"type": _PLAIN[annotation]}
    raise TypeError(f"{annotation}: no JSON type for it")


def _object(cls: Any) -> Node:
    # include_extras keeps NotRequired, which from __future__ annotations hides from __required_keys__.
    hints = typing.get_type_hints(cls, include_extras=True)
    required, properties = [], {}
    for name, annotation in hints.items():
        optional = typing.get_origin(annotation) is NotRequired
        if optional:
            annotation = typing.get_args(annotation)[0]
        elif cls.__total__:
            required.append(name)
        properties[name] = _node(annotation)
    return {"type": "object", **({"required": required} if required else {}), "properties": properties}


def _reference(annotation: Any) -> Node | None:
    """A reference to the shared type ``annotation`` is, or begins as (a shared type with words added, which
    Python folds into one Annotated), or None."""
    for name, shared in record.SHARED.items():
        if annotation == shared:
            return {"$ref": f"#/$defs/{name}"}
    if typing.get_origin(annotation) is typing.Annotated:
        base, *marks = typing.get_args(annotation)
        for cut in range(len(marks) - 1, 0, -1):
            if (head := _reference(typing.Annotated[tuple([base, *marks[:cut]])])) is not None:
                return {**head, **_words(marks[cut:])}
    return None


def _words(marks: list[Any]) -> Node:
    words: Node = {}
    for mark in marks:
        if not isinstance(mark, record.Json):
            raise TypeError(f"{mark!r}: a record type's marks are Json words")
        for word, value in mark.words:
            words[word] = _node(value) if _is_type(value) else value
    return words


def _is_type(value: object) -> bool:
    return isinstance(value, type) or typing.get_origin(value) is not None


def _members(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


if __name__ == "__main__":
    _shared.write_rendered(
        render, "PYTHONPATH=. python envs/scripts/run_schema.py kitbench/records/schemas/run.schema.json"
    )
