"""Reading records: the records given (``inputs``), compare's rows (``compare``) and what differs between
environments (``envdiff``), whether one run reproduced another (``verify``; its availability and moves
checks: ``verify_checks``), the report page (``report``, its
sections in ``report_sections``, rendered by ``report_html`` and ``report_markdown``), the plots and their SVG.

May import: the root's base modules, records, machine, advice and environments (a lock's package
names). Nothing in it runs a check or needs torch.
"""
