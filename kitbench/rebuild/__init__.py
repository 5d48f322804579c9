"""Can I rebuild it: a record replayed here (``planning`` reads its plan from the record alone, on a
bare Python; ``replay`` rebuilds the environment, reruns the same checks and verifies the two records),
and a docker target's image (``engine`` talks to Docker, ``images`` builds or reuses and exports the
image, ``containers`` runs the suite inside it).

May import: the root's base modules and every package listed before it (records ... reading).
"""
