"""The JSON Schemas kitbench ships, and their validators.

fastjsonschema turns a schema into Python source; compiling that source is most of what a
validator costs (15 ms for a release manifest's schema, 70 ms for the run record's, on a
2-core VM), and install-cmd pays it for every schema it reads on every start. So the source
is kept in the user's cache, named by the schema's and fastjsonschema's hashes, and imported
from there: Python's own bytecode cache then makes a validator cost about a millisecond.
Where the cache cannot be written, the validator is compiled in memory as before.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

CACHE_VARIABLE = "KITBENCH_CACHE"


def cache_dir() -> Path:
    """``KITBENCH_CACHE``, else ``$XDG_CACHE_HOME/kitbench``, else ``~/.cache/kitbench``."""
    given = os.environ.get(CACHE_VARIABLE)
    if given:
        return Path(given)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kitbench"


def validator(name: str) -> Callable[[Any], Any]:
    """The validator of ``<name>.schema.json``; it raises fastjsonschema's JsonSchemaValueException.
    Made once per schema and cache folder (KITBENCH_CACHE read at each call)."""
    return _validator(name, cache_dir())


@cache
def _validator(name: str, folder: Path) -> Callable[[Any], Any]:
    import hashlib
    import importlib.util
    import json
    from importlib import resources

    import fastjsonschema

    text = resources.files(__name__).joinpath(f"{name}.schema.json").read_text()
    key = hashlib.sha256(f"{fastjsonschema.VERSION}\0{text}".encode()).hexdigest()[:16]
    module = f"kitbench_validator_{name.replace('-', '_')}_{key}"
    path = folder / "validators" / f"{module}.py"
    try:
        if not path.is_file():
            write_atomically(path, fastjsonschema.compile_to_code(json.loads(text)).encode())
        spec = importlib.util.spec_from_file_location(module, path)
        if spec is None or spec.loader is None:
            raise ImportError(path)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        compiled: Callable[[Any], Any] = loaded.validate
    except (OSError, ImportError, SyntaxError, AttributeError):    # no usable cache here: compile in memory
        compiled = fastjsonschema.compile(json.loads(text))
    return compiled


def write_atomically(path: Path, content: bytes) -> None:
    """Whole or not at all: another process may be writing the same file at the same moment."""
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
