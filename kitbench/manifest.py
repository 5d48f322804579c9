"""Loading and validating the YAML manifests in ``envs/``.

Every manifest is checked against a JSON Schema shipped in
``kitbench/schemas/`` (``additionalProperties: false`` throughout, so an
unknown or misspelt key is refused). Errors name the file and the line of the
offending node, which is why the YAML is composed into a node tree first: the
tree keeps source positions that plain ``yaml.safe_load`` throws away.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from kitbench.errors import ManifestError

ENVS_VARIABLE = "KITBENCH_ENVS"


def envs_dir() -> Path:
    """The manifest directory: ``$KITBENCH_ENVS`` or the repository's ``envs/``."""
    override = os.environ.get(ENVS_VARIABLE)
    if override:
        return Path(override)
    return Path(__file__).resolve().parent.parent / "envs"


@dataclass(frozen=True)
class Manifest:
    """A validated manifest: its parsed data, where it came from, its hash."""

    path: Path
    data: dict[str, Any]
    sha256: str


@cache
def _schema(name: str) -> dict[str, Any]:
    text = resources.files("kitbench.schemas").joinpath(f"{name}.schema.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


def load(path: Path, schema: str) -> Manifest:
    """Read ``path``, parse it as YAML and validate it against ``schema``."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ManifestError(path, "no such manifest",
                            hint=f"set {ENVS_VARIABLE} to a directory that has it") from None
    except OSError as exc:
        raise ManifestError(path, f"cannot read: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ManifestError(path, "not UTF-8 text") from None
    data, root = parse(text, path)
    validate(data, root, schema, path)
    return Manifest(path=path, data=data, sha256=hashlib.sha256(raw).hexdigest())


def parse(text: str, path: Path) -> tuple[dict[str, Any], yaml.Node]:
    """Parse YAML text into (data, node tree); refuse anything but a mapping."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ManifestError(path, f"invalid YAML: {exc.problem or exc.context}", line) from None
    except yaml.YAMLError as exc:
        raise ManifestError(path, f"invalid YAML: {exc}") from None
    if root is None or data is None:
        raise ManifestError(path, "empty manifest")
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode):
        raise ManifestError(path, f"expected a mapping at the top, found {type(data).__name__}",
                            root.start_mark.line + 1)
    return data, root


def validate(data: dict[str, Any], root: yaml.Node, schema: str, path: Path) -> None:
    """Validate against the named schema; raise on the first (deepest-path) error."""
    validator = jsonschema.Draft202012Validator(_schema(schema))
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(e.absolute_path), e.message))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    location = list(best.absolute_path)
    if best.validator == "additionalProperties":
        # Point at the offending key itself, not at the mapping holding it.
        line = node_line(root, [*location, _extra_keys(best)[0]], key=True)
    else:
        line = node_line(root, location)
    where = "/".join(str(p) for p in location)
    message = _describe(best)
    raise ManifestError(path, f"{where + ': ' if where else ''}{message}", line)


def _allowed_keys(error: jsonschema.ValidationError) -> list[str]:
    schema = error.schema if isinstance(error.schema, dict) else {}
    return sorted(schema.get("properties", {}))


def _extra_keys(error: jsonschema.ValidationError) -> list[str]:
    instance = error.instance if isinstance(error.instance, dict) else {}
    return sorted(set(instance) - set(_allowed_keys(error)))


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        extra = ", ".join(map(repr, _extra_keys(error)))
        return f"unknown key {extra} (allowed: {', '.join(_allowed_keys(error))})"
    if error.validator == "type":
        return f"expected {error.validator_value}, found {type(error.instance).__name__} {error.instance!r}"
    return str(error.message)


def node_line(root: yaml.Node, location: list[str | int], key: bool = False) -> int:
    """The 1-based line of the node at ``location``, or of its nearest ancestor.

    With ``key``, the last step resolves to the mapping key rather than its
    value (the line to show for a key that should not be there).
    """
    node = root
    for i, part in enumerate(location):
        child = _child(node, part, key and i == len(location) - 1)
        if child is None:
            break
        node = child
    return node.start_mark.line + 1


def _child(node: yaml.Node, part: str | int, key: bool = False) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, value in node.value:
            if k.value == str(part):
                found: yaml.Node = k if key else value
                return found
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        child: yaml.Node = node.value[part]
        return child
    return None


def iter_manifests(directory: Path, schema: str) -> Iterator[Manifest]:
    """Every ``*.yaml`` in ``directory``, validated, in name order."""
    if not directory.is_dir():
        raise ManifestError(directory, "no such manifest directory",
                            hint=f"set {ENVS_VARIABLE} to the kit's envs/ directory")
    for path in sorted(directory.glob("*.yaml")):
        yield load(path, schema)
