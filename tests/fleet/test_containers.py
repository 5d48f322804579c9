"""The cluster's container support: runc's default spec, asked through kitbench's one way of running a program."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kitbench.errors import KitbenchError
from kitbench.fleet import containers


@pytest.mark.parametrize(("script", "words"), [
    ("exec sleep 60", "runc spec did not answer in 0 s"),
    ("echo 'runc: permission denied' >&2; exit 1", "runc spec failed: runc: permission denied"),
])
def test_a_runc_that_hangs_or_fails_is_one_error(script: str, words: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "runc"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake) if name == "runc" else None)
    monkeypatch.setattr(containers, "_RUNC_SPEC_TIMEOUT_S", 0.3)
    with pytest.raises(KitbenchError) as caught:
        containers.spec([], tmp_path / "fleet", None)
    assert caught.value.message == words and "runc spec" in (caught.value.hint or "")
