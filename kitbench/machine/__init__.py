"""What this machine is, read without torch: the probe (OS, chip, GPUs of each vendor, drivers,
containers), its CPUs, NVIDIA's driver <-> CUDA rules, the version strings a machine reports, and
PyTorch's builds (cpu, cu126, rocm6.4, xpu) as values: what each needs of a machine.

May import: the root's base modules and records.
"""
