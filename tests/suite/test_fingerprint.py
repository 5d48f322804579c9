"""The environment a record keeps: a package's source names no folder of the machine that made it."""

from __future__ import annotations

import pytest

from kitbench.suite import fingerprint


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("file:///work/main/.whl/fastjsonschema-2.22.3-py3-none-any.whl", "fastjsonschema-2.22.3-py3-none-any.whl"),
        ("file:///home/me/src/kitbench/", "kitbench"),
        ("https://download.pytorch.org/whl/cpu", "https://download.pytorch.org/whl/cpu"),
        (None, None),
    ],
)
def test_a_local_source_keeps_only_its_file_name(url: str | None, kept: str | None) -> None:
    assert fingerprint._shown_source(url) == kept
