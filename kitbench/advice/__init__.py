"""What to install: install-cmd's question start to end (answer), the command that fits a machine
(selector decides, over the releases and their published commands; wording words the answer), the
wheels that install on it, the vendors' build lists, the fact cache read from the package indexes, and a team's
machines as one uv or pixi project (project, project_files).

May import: the root's base modules, records and machine. Never torch.
"""
