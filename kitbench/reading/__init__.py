"""Reading records: compare, verify, the report page, the plots and their SVG.

May import: the root's base modules and records. Nothing in it runs a check or needs torch.
"""
