"""kitbench.advice.answer: install-cmd's question start to end, with no printing of its own."""

from __future__ import annotations

import pytest

from kitbench.advice.answer import answer
from kitbench.errors import KitbenchError, NetworkError

H100 = {"os": "linux", "arch": "x86_64", "driver": "570.86.10", "gpu_capabilities": ["9.0"]}


def _unreachable() -> None:
    raise NetworkError("download.pytorch.org did not answer")


def test_a_refresh_that_fails_is_a_note_and_the_answer_comes_from_the_facts_at_hand() -> None:
    notes: list[KitbenchError] = []
    chosen = answer(H100, refresh=_unreachable, force_refresh=True, not_refreshed=notes.append)
    assert [type(n) for n in notes] == [NetworkError] and notes[0].message == "download.pytorch.org did not answer"
    # 2.15 has no CUDA 12 build (pytorch/pytorch#190385); 2.14.1's cu126 is the newest a 570 driver runs.
    assert chosen.compute == "cu126" and chosen.release == "2.14.1"


def test_no_refresh_unless_asked_or_due(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITBENCH_FACTS_MAX_AGE", raising=False)
    chosen = answer(
        {**H100, "no_gpu": False},
        refresh=lambda: pytest.fail("refreshed"),
        force_refresh=False,
        not_refreshed=lambda error: pytest.fail(str(error)),
        compute="cpu",
    )
    assert chosen.compute == "cpu" and chosen.command.endswith("/whl/cpu")
