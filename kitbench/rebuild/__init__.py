"""Can I rebuild it: a docker target's image built and run, and a record replayed here
(its environment rebuilt, the same checks run, the two records verified).

May import: the root's base modules and every package listed before it (records ... reading).
"""
