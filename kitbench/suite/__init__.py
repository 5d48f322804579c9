"""Does it work and how fast: the suite runner, its checks (``checks/``: the training step eager,
captured and profiled in ``checks/steps``), devices, timing and its statistics (``stats``), the models
and data, deterministic mode, parameter digests, the DDP worker, run's options and the fingerprint a
record keeps.

May import: the root's base modules, records, machine, advice and environments. torch only lazily.
"""
