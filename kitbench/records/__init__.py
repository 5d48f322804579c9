"""The files kitbench reads and writes: the run record (its types, claimed, written and read
defensively), the envs/ manifests, and the JSON Schemas both are validated against.

May import: kitbench's root base modules (errors, _files, ...). Nothing above it.
"""
