"""The JSON Schemas kitbench ships, and their validators.

fastjsonschema turns a schema into Python source; compiling that source is most of what a
validator costs (15 ms for a release manifest's schema, 70 ms for the run record's, on a
2-core VM), and install-cmd pays it for every schema it reads on every start. So the source
is kept in the user's cache, named by the schema's and fastjsonschema's hashes, and imported
from there: Python's own bytecode cache then makes a validator cost about a millisecond.
Where the cache cannot be written, the validator is compiled in memory as before.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from kitbench import _files
from kitbench.errors import RecordError


def validator(name: str) -> Callable[[Any], Any]:
    """The validator of ``<name>.schema.json``; it raises fastjsonschema's JsonSchemaValueException.
    Made once per schema and cache folder (KITBENCH_CACHE read at each call)."""
    return _validator(name, _files.cache_dir())


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
            path.parent.mkdir(parents=True, exist_ok=True)
            _files.write(path, fastjsonschema.compile_to_code(json.loads(text)), replace=True)
        spec = importlib.util.spec_from_file_location(module, path)
        if spec is None or spec.loader is None:
            raise ImportError(path)
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        compiled: Callable[[Any], Any] = loaded.validate
    except (OSError, RecordError, ImportError, SyntaxError, AttributeError):  # no usable cache: compile in memory
        compiled = fastjsonschema.compile(json.loads(text))
    return compiled
