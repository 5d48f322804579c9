"""envs/scripts/run_schema.py: run.schema.json is what kitbench/records/types.py declares, and a change to the
types reaches the schema by the rule the script states."""

from __future__ import annotations

import json
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pytest

from kitbench.errors import RecordReadError
from kitbench.records import record as records
from kitbench.records import types as record
from kitbench.records.types import Amount, Count, Json, Text

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = runpy.run_path(str(ROOT / "envs" / "scripts" / "run_schema.py"))
FILE = ROOT / "kitbench" / "records" / "schemas" / "run.schema.json"


def test_the_schema_file_is_what_the_types_declare() -> None:
    """Rewrite it with `PYTHONPATH=. python envs/scripts/run_schema.py kitbench/records/schemas/run.schema.json`."""
    assert FILE.read_text() == SCRIPT["render"]()


class _Part(TypedDict):
    name: Annotated[str, Json(maxLength=8)]
    size: Count | None
    rate: NotRequired[Amount]
    kind: NotRequired[Literal["a", "b"] | None]
    where: NotRequired[Annotated[Text, Json(description="why")]]
    sums: NotRequired[dict[str, Annotated[str, Json(pattern="^[0-9a-f]{4}$")]]]
    extra: dict[str, Any]


class _Open(TypedDict, total=False):
    one: int


def test_a_declaration_becomes_its_schema_by_the_stated_rule() -> None:
    assert SCRIPT["_node"](_Part) == {
        "type": "object",
        "required": ["name", "size", "extra"],
        "properties": {
            "name": {"type": "string", "maxLength": 8},
            "size": {"type": ["integer", "null"], "minimum": 0, "maximum": 2**53},
            "rate": {"type": "number", "minimum": 0},
            "kind": {"enum": ["a", "b", None]},
            # A shared type with a word added stays a reference, the word beside it.
            "where": {"$ref": "#/$defs/text", "description": "why"},
            "sums": {"type": "object", "additionalProperties": {"type": "string", "pattern": "^[0-9a-f]{4}$"}},
            "extra": {"type": "object"},
        },
    }
    assert SCRIPT["_node"](_Open) == {"type": "object", "properties": {"one": {"type": "integer"}}}
    assert SCRIPT["_node"](Annotated[_Open, Json(additionalProperties=record.Check)])["additionalProperties"] == {
        "$ref": "#/$defs/check"
    }


@pytest.mark.parametrize("annotation", [int | str, dict[int, str], record.Environment | None, set[str]])
def test_what_json_cannot_say_is_refused_by_name(annotation: Any) -> None:
    with pytest.raises(TypeError, match=r"X \| None|keys are strings|cannot also be null|no JSON type"):
        SCRIPT["_node"](annotation)


def test_the_schema_written_keeps_what_records_are_held_to() -> None:
    """The words that make a file invalid reach the schema records are read with: a bound, a pattern, a required
    field, an open check's shape."""
    full = json.loads((ROOT / "docs" / "records" / "h100-fnn.json").read_text())
    records.validate(full)
    run = full["checks"]["mnist"]["runs"][0]
    for field, value in [("test_acc", 1.5), ("epoch_s_all", []), ("params_sha256", "XYZ"), ("batch_size", 0)]:
        bad = json.loads(json.dumps(full))
        bad["checks"]["mnist"]["runs"][0] = {**run, field: value}
        with pytest.raises(RecordReadError, match=f"field checks/mnist/runs/0/{field}"):
            records.validate(bad)
    for bad, named in [
        ({**full, "run_id": "not-hex"}, "field run_id"),
        ({**full, "checks": {**full["checks"], "later": {"status": "ok"}}}, "field checks/later: .*summary"),
        ({k: v for k, v in full.items() if k != "environment"}, "environment"),
    ]:
        with pytest.raises(RecordReadError, match=named):
            records.validate(bad)


def test_the_script_writes_the_file_and_refuses_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "run.schema.json"
    script = [sys.executable, str(ROOT / "envs" / "scripts" / "run_schema.py")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    assert subprocess.run([*script, str(out)], env=env, check=False).returncode == 0
    assert out.read_text() == FILE.read_text()
    for args in ([], ["--help"], [str(tmp_path)], [str(tmp_path / "missing" / "x.json")]):
        done = subprocess.run([*script, *args], env=env, capture_output=True, text=True, check=False)
        assert done.returncode != 0 and done.stdout == "", args
        assert done.stderr.startswith(("usage: ", "ERROR: ")) and "Traceback" not in done.stderr, done.stderr
    assert not (Path.cwd() / "--help").exists()
