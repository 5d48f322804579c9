"""kitbench: a reproducibility kit for PyTorch acceleration.

The package is importable without torch: ``install-cmd``, ``probe`` and the
manifest tooling must answer on a bare Python. Only modules of ``kitbench.suite``
import torch (its checks, models, digests and the DDP worker), and only when a suite
actually runs. The packages and the one rule of their imports: docs/architecture.md.
"""

__version__ = "0.1.0"
