"""Loading and validating the YAML manifests in ``envs/``.

Every manifest is checked against a JSON Schema shipped in
``kitbench/records/schemas/`` (``additionalProperties: false`` throughout, so an
unknown or misspelt key is refused), compiled to plain Python by
fastjsonschema. Errors name the file and the line of the
offending node, which is why the YAML is composed into a node tree first: the
tree keeps source positions that plain ``yaml.safe_load`` throws away.
"""

# Annotations evaluated, not kept as strings: see "Start-up" in docs/architecture.md. The parsers' own types
# are quoted: they are imported only to type-check.
import contextlib
import marshal
import os
import zlib
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kitbench import _files
from kitbench._numbers import is_whole
from kitbench.errors import ManifestError, RecordError
from kitbench.records import schemas

if TYPE_CHECKING:
    import fastjsonschema
    import yaml

ENVS_VARIABLE = "KITBENCH_ENVS"
# The kinds of source a fact in envs/ may rest on, strongest first (docs/facts.md's census): the artifact itself (a
# listing read, PyPI's files, a lock pinning the wheel by URL and hash), the code that builds or enforces it (a
# release branch's build matrix, a check's source), the release team's own statement (release notes, RELEASE.md,
# a release's support-matrix RFC), a page describing it (pytorch.org's selector and previous-versions pages, the
# docs), or an inference. A default answer rests only on the first three: docs lag the code, and the selector
# shows only some of the builds that exist.
SOURCE_KINDS = ("artifact", "code", "release-notes", "docs", "inferred")
ANSWERABLE = frozenset(SOURCE_KINDS[:3])


def checkout_root() -> Path | None:
    """The repository kitbench runs from, when it runs from a checkout (or an image built from one)."""
    return _checkout_root()


@cache
def _checkout_root() -> Path | None:
    # Looked for once: where kitbench runs from does not change while it runs, and the manifests'
    # loaders ask for envs/ on every call (their caches are keyed by the file they read).
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "envs").is_dir() else None


def packaged(name: str) -> Path:
    """A folder the wheel ships inside the package (``envs``, ``dockerfiles``)."""
    from importlib import resources

    return Path(str(resources.files("kitbench").joinpath(name)))


# A manifest that does not read was edited or cut short: kitbench's own copy is the one to go back to.
_RESTORE = "fix the file at that line, or restore it as shipped (git checkout, or reinstall kitbench)"


def envs_dir() -> Path:
    """The manifest directory: ``$KITBENCH_ENVS``, else a checkout's ``envs/``, else the
    copy shipped in the wheel. A checkout wins so that editing ``envs/`` takes effect."""
    override = os.environ.get(ENVS_VARIABLE)
    if override:
        return Path(override)
    root = checkout_root()
    return root / "envs" if root is not None else packaged("envs")


def docker_dir() -> Path:
    """The Dockerfile's folder: a checkout's ``docker/``, else the copy in the wheel."""
    root = checkout_root()
    return root / "docker" if root is not None else packaged("dockerfiles")


class Manifest(NamedTuple):
    """A validated manifest: its parsed data, where it came from, its bytes (a named tuple: "Start-up" in
    docs/architecture.md)."""

    path: Path
    data: dict[str, Any]
    raw: bytes

    @property
    def sha256(self) -> str:
        """The hash of its bytes, made when asked: install-cmd never asks, and is spared hashlib's import."""
        import hashlib

        return hashlib.sha256(self.raw).hexdigest()


def load(path: Path, schema: str) -> Manifest:
    """Read ``path``, parse it as YAML and validate it against ``schema``; or, for the same bytes read and
    validated against the same schema before, the data then kept (``_remembered``)."""
    raw = _read_bytes(path)
    kept = _remembered(raw, schema)
    if kept.data is not None:
        return Manifest(path=path, data=kept.data, raw=raw)
    data, root = parse(_files.decode(raw, path, "manifest", _refused(path)), path)
    validate(data, root, schema, path)
    kept.keep(data)
    return Manifest(path=path, data=data, raw=raw)


class _Kept(NamedTuple):
    """A manifest's validated data as kept in the user's cache, with the bytes and the schema it was read with."""

    file: Path | None
    source: tuple[bytes, bytes]  # the manifest's bytes, its schema's text
    data: dict[str, Any] | None

    def keep(self, data: dict[str, Any]) -> None:
        if self.file is None:
            return
        # Kept or not, the answer stands (ValueError: a YAML date, which marshal cannot keep).
        with contextlib.suppress(OSError, RecordError, ValueError):
            self.file.parent.mkdir(parents=True, exist_ok=True)
            _files.write(self.file, marshal.dumps((*self.source, data)), replace=True)


def _remembered(raw: bytes, schema: str) -> _Kept:
    """Parsing YAML (and importing the parser and the validators) is most of what install-cmd's start-up
    costs, for data that changes only with the file: a manifest read and validated once is kept as
    marshal data beside the bytes it was read from and its schema's text, and read back only where both are
    the same as now. They are compared whole: no hash to compute, nor one to collide (the name's CRC only
    keeps one manifest's versions apart)."""
    try:
        text = (Path(schemas.__file__).parent / f"{schema}.schema.json").read_bytes()
    except OSError:
        return _Kept(None, (raw, b""), None)
    file = _files.cache_dir() / "manifests" / f"{schema}-{zlib.crc32(raw):08x}.marshal"
    try:
        kept = marshal.loads(file.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return _Kept(file, (raw, text), None)
    same = isinstance(kept, tuple) and len(kept) == 3 and kept[:2] == (raw, text) and isinstance(kept[2], dict)
    return _Kept(file, (raw, text), kept[2] if same else None)


MAX_BYTES = 4 * 2**20  # the largest manifest is about 40 KB


def _refused(path: Path) -> Callable[..., ManifestError]:
    return lambda message, hint=None: ManifestError(path, message.removeprefix(f"{path} "), hint=hint)


def _read_bytes(path: Path) -> bytes:
    if not path.exists():
        raise ManifestError(path, "no such manifest", hint=f"set {ENVS_VARIABLE} to a directory that has it")
    return _files.read(path, MAX_BYTES, "manifest", _refused(path))


def read(path: Path) -> tuple[dict[str, Any], "yaml.Node", bytes]:
    """A YAML file of envs/ (a manifest, a conda environment): bounded, strict UTF-8, no aliases, a mapping."""
    raw = _read_bytes(path)
    data, root = parse(_files.decode(raw, path, "manifest", _refused(path)), path)
    return data, root, raw


def _refuse_aliases(root: "yaml.Node", path: Path) -> None:
    """A node reached twice is an alias (``*name``): a manifest needs none, and one refers to itself
    (``&a [*a]``: every walk loops) or doubles at each level (a 1 kB "billion laughs" that takes
    minutes to expand). Refused from the node tree, before anything is built from it."""
    import yaml

    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise ManifestError(
                path,
                "YAML aliases (*name) are not taken in a manifest",
                node.start_mark.line + 1,
                hint="write the value out where it is used",
            )
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack += [key, value]
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def parse(text: str, path: Path) -> tuple[dict[str, Any], "yaml.Node"]:
    """Parse YAML text once into (data, node tree); refuse anything but a mapping."""
    import yaml

    # libyaml when present: its parser is several times faster.
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        root = loader.get_single_node()
        if root is not None:
            _refuse_aliases(root, path)
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ManifestError(path, f"invalid YAML: {exc.problem or exc.context}", line, hint=_RESTORE) from None
    except yaml.YAMLError as exc:
        raise ManifestError(path, f"invalid YAML: {exc}", hint=_RESTORE) from None
    finally:
        loader.dispose()
    if root is None or data is None:
        raise ManifestError(path, "empty manifest", hint=_RESTORE)
    _refuse_duplicate_keys(root, path)
    if not isinstance(data, dict) or not isinstance(root, yaml.MappingNode):
        raise ManifestError(
            path, f"expected a mapping at the top, found {type(data).__name__}", root.start_mark.line + 1, hint=_RESTORE
        )
    return data, root


def _refuse_duplicate_keys(root: "yaml.Node", path: Path) -> None:
    """YAML lets the last of two equal keys win silently; a manifest must not."""
    import yaml

    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        raise ManifestError(
                            path,
                            f"duplicate key {key.value!r} (first on line {seen[key.value]})",
                            key.start_mark.line + 1,
                            hint="keep one of them",
                        )
                    seen[key.value] = key.start_mark.line + 1
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def validate(data: dict[str, Any], root: "yaml.Node", schema: str, path: Path) -> None:
    """Validate against the named schema; raise on the first error, with its line."""
    import fastjsonschema

    try:
        schemas.validator(schema)(data)
    except fastjsonschema.JsonSchemaValueException as error:
        location: list[str | int] = [int(p) if is_whole(p) else p for p in error.path[1:]]
        definition = error.definition if isinstance(error.definition, dict) else {}
        if error.rule == "additionalProperties":
            # Point at the offending key itself, not at the mapping holding it.
            line = node_line(root, [*location, _extra_keys(error.value, definition)[0]], key=True)
        else:
            line = node_line(root, location)
        where = "/".join(str(p) for p in location)
        raise ManifestError(
            path,
            f"{where + ': ' if where else ''}{_describe(error, definition)}",
            line,
            hint=f"fix it to match {schema}'s schema (kitbench/records/schemas/{schema}.schema.json), "
            "or restore the file as shipped",
        ) from None


def _extra_keys(value: object, definition: dict[str, Any]) -> list[str]:
    instance = value if isinstance(value, dict) else {}
    return sorted(set(instance) - set(definition.get("properties", {})))


def _describe(error: "fastjsonschema.JsonSchemaValueException", definition: dict[str, Any]) -> str:
    value = error.value
    if error.rule == "additionalProperties":
        allowed = ", ".join(sorted(definition.get("properties", {})))
        return f"unknown key {', '.join(map(repr, _extra_keys(value, definition)))} (allowed: {allowed})"
    if error.rule == "type":
        return f"expected {definition.get('type')}, found {type(value).__name__} {value!r}"
    if error.rule == "required" and isinstance(value, dict):
        missing = [k for k in definition.get("required", []) if k not in value]
        return f"missing key {', '.join(map(repr, missing))}"
    if error.rule == "enum":
        return f"{value!r} is not one of {', '.join(map(str, definition.get('enum', [])))}"
    if error.rule == "pattern":
        return f"{value!r} does not match {definition.get('pattern')}"
    return str(error.message).replace("data.", "", 1).replace("data ", "", 1)


def node_line(root: "yaml.Node", location: list[str | int], key: bool = False) -> int:
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


def _child(node: "yaml.Node", part: str | int, key: bool = False) -> "yaml.Node | None":
    import yaml

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
        raise ManifestError(
            directory, "no such manifest directory", hint=f"set {ENVS_VARIABLE} to the kit's envs/ directory"
        )
    for path in sorted(directory.glob("*.yaml")):
        yield load(path, schema)
