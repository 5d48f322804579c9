"""kitbench: a reproducibility kit for PyTorch acceleration.

The package is importable without torch: ``install-cmd``, ``probe`` and the
manifest tooling must answer on a bare Python. Only ``kitbench.suite.checks`` and
``kitbench.suite.runner`` import torch, and only when a suite actually runs.
"""

__version__ = "0.1.0"
