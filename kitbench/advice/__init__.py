"""What to install: the install command that fits a machine (selector decides, over the releases
and their published commands; wording words the answer), the wheels that install on it, the vendors'
build lists, and the fact cache read from the package indexes.

May import: the root's base modules, records and machine. Never torch.
"""
