"""kitbench.advice.answer: install-cmd's question start to end, with no printing of its own."""

from __future__ import annotations

import pytest

from kitbench.advice.answer import answer
from kitbench.errors import NetworkError

H100 = {"os": "linux", "arch": "x86_64", "driver": "570.86.10", "gpu_capabilities": ["9.0"]}


def _unreachable() -> None:
    raise NetworkError("download.pytorch.org did not answer")


def test_a_refresh_that_fails_is_a_note_and_the_answer_comes_from_the_facts_at_hand() -> None:
    notes: list[str] = []
    chosen = answer(H100, refresh=_unreachable, force_refresh=True, not_refreshed=notes.append)
    assert notes == ["the facts were not refreshed: download.pytorch.org did not answer; answering from those "
                     "at hand"]
    # 2.15 has no CUDA 12 build (pytorch/pytorch#190385); 2.14.1's cu126 is the newest a 570 driver runs.
    assert chosen.compute == "cu126" and chosen.release == "2.14.1"


def test_no_refresh_unless_asked_or_due(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_FACTS_MAX_AGE", raising=False)
    chosen = answer({**H100, "no_gpu": False}, refresh=lambda: pytest.fail("refreshed"), force_refresh=False,
                    not_refreshed=lambda note: pytest.fail(note), compute="cpu")
    assert chosen.compute == "cpu" and chosen.command.endswith("/whl/cpu")
