"""The fleet: install advice and the suite on every node of a Slurm cluster, through Slurm's own
commands and the container support the cluster already has.

May import: every package below it. Only the CLI imports it.
"""
