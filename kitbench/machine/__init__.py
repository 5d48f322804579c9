"""What this machine is, read without torch: the probe (OS, chip, GPUs of each vendor, drivers,
containers), its CPUs, NVIDIA's driver <-> CUDA rules, and the version strings a machine reports.

May import: the root's base modules and records.
"""
