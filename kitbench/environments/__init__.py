"""The pinned environments: targets (envs/targets/*.yaml), their hash-pinned locks, and
whether a target fits this host before anything is built (preflight).

May import: the root's base modules, records, machine and advice.
"""
