"""Records made by really running the suite on the CPU, shared by the reading tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kitbench.suite import runner as suite
from kitbench.suite.checks.base import Options


@pytest.fixture(scope="session")
def runs(mnist_root: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = dict(checks=("moves", "mnist"), device="cpu", data=mnist_root, offline=True, quick=True,
                loops=("resident",), train_limit=1500, epochs=2, threads=1)
    made = {}
    for name, changes in (("a", {}), ("b", {}), ("seed", {"seed": 1}), ("lr", {"lr": 0.05})):
        out = tmp_path_factory.mktemp(name) / f"{name}.json"
        suite.run(Options(**{**base, **changes}), out)
        made[name] = out
    return made

