"""The pinned environments: targets (envs/targets/*.yaml), their hash-pinned locks, the one
installer every session, image, replay and the fleet use (the torch family from PyTorch's index,
the rest from PyPI), and whether a target fits this host before anything is built (preflight).

May import: the root's base modules, records, machine and advice.
"""
