"""kitbench._toml: TOML written deterministically, and a file updated table by table."""

from __future__ import annotations

import sys

import pytest

from kitbench import _toml
from kitbench.errors import KitbenchError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_values_read_back_as_written() -> None:
    values = {"text": 'a "quoted"\\ line\nand a tab\t, é', "n": 3, "yes": True, "empty": [],
              "list": ["a", "b"], "tables": [{"index": "pytorch-cpu", "extra": "cpu"}], "inline": {"k.dot": 1}}
    assert tomllib.loads(_toml.table("t", values))["t"] == values


def test_a_file_is_cut_at_its_headers_not_inside_a_string_or_an_array() -> None:
    text = ('# top\n[project]\nx = [\n  ["a", "b"]\n]\ns = """\n[not.a.header]\n"""\n\n# about the sources\n'
            '[tool."uv" . sources]  # c\ny = 1\n[[tool.uv.index]]\nname = "a"\n')
    assert [(b.header, b.array) for b in _toml.blocks(text)] == [
        (None, False), ("project", False), ("tool.uv.sources", False), ("tool.uv.index", True)]
    assert _toml.blocks(text)[2].text.lstrip("\n").startswith("# about the sources\n")
    assert "".join(b.text for b in _toml.blocks(text)) == text


def test_an_update_replaces_the_owned_tables_in_place_and_keeps_the_rest() -> None:
    old = '# mine\n[a]\nx = 1  # kept\n\n[b]\ny = 2\n\n[c]\nz = 3\n'
    ours = [_toml.Block("b", False, _toml.table("b", {"y": 20})), _toml.Block("b.d", False, "[b.d]\nw = 4\n")]
    new = _toml.update(old, ours, lambda block: block.header == "b", "f.toml")
    assert new == '# mine\n\n[a]\nx = 1  # kept\n\n[b]\ny = 20\n\n[b.d]\nw = 4\n\n[c]\nz = 3\n'


def test_a_file_an_update_would_cut_wrong_is_refused_not_changed() -> None:
    # A one-string array on a line of its own reads like a table header.
    old = '[a]\nx = [\n  ["b"]\n]\n'
    with pytest.raises(KitbenchError, match=r"the table \[a\] would change in an update"):
        _toml.update(old, [], lambda block: False, "f.toml")
