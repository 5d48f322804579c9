from __future__ import annotations

import json
from pathlib import Path

import pytest

from kitbench import records
from kitbench.errors import RecordError


def _record(status: str = "ok") -> dict[str, object]:
    return {"schema": records.SCHEMA, "status": status, "checks": {}}


def test_write_atomic_leaves_no_temporary_files(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "r.json"
    records.write_atomic(path, _record())
    records.write_atomic(path, _record("failed"))
    assert records.read(path)["status"] == "failed"
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]
    assert path.stat().st_mode & 0o044 == 0o044       # group and others may read it


def test_failed_write_keeps_the_previous_record(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    records.write_atomic(path, _record())
    with pytest.raises(TypeError):
        records.write_atomic(path, {"schema": records.SCHEMA, "bad": object()})
    assert records.read(path)["status"] == "ok"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


@pytest.mark.parametrize(("text", "words"), [
    ('{"schema": "kitbench.run/1", "status": "ok", "chec', "not a complete JSON record"),
    ('{"schema": "kitbench.run/9", "status": "ok"}', "has schema 'kitbench.run/9'"),
    ('{"status": "ok"}', "not a kitbench run record"),
    ('{"schema": "kitbench.run/1", "status": "great"}', "unknown status 'great'"),
    ("[1, 2]", "not a kitbench run record"),
])
def test_bad_records_are_one_line_errors(tmp_path: Path, text: str, words: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text)
    with pytest.raises(RecordError, match=words.replace("(", r"\(")):
        records.read(path)


def test_default_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KITBENCH_RESULTS", str(tmp_path))
    path = records.default_path("cpu")
    assert path.parent == tmp_path / "cpu" and path.suffix == ".json"
    json.dumps(str(path))
