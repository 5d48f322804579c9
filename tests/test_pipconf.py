from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kitbench import _pipconf


def test_pip_s_index_is_read_from_its_configuration_file_then_its_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex_url = https://mirror.example/simple\n[install]\nfind-links = /wheels\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    found = _pipconf.pip_configuration()
    assert found["index-url"] == ["https://mirror.example/simple"] and found["find-links"] == ["/wheels"]
    monkeypatch.setenv("PIP_INDEX_URL", "https://other.example/simple")
    assert _pipconf.pip_configuration()["index-url"] == ["https://other.example/simple"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX's")
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_configuration_that_is_no_file_is_skipped_at_once(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PIP_CONFIG_FILE naming a FIFO nobody writes, or an endless device, held a refresh until killed."""
    path = tmp_path / "pip.conf"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path(kind)
    monkeypatch.setenv("PIP_CONFIG_FILE", str(path))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    started = time.monotonic()
    _pipconf.pip_configuration()
    assert time.monotonic() - started < 1
