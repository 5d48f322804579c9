"""install-cmd's question answered from start to end: the facts refreshed when they are due, the
choice for the machine as given, and where the answer's facts came from (a refresh's cache rather
than the kept tables, and whether they are old).

The command line only parses, calls ``answer`` and prints; how a refresh reports its progress is its
own (``refresh``), and a refresh that fails is a note (``not_refreshed`` is given the error), never the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kitbench.advice import facts, wheels
from kitbench.advice.rejections import note
from kitbench.advice.selector import Selection, select
from kitbench.errors import KitbenchError
from kitbench.machine import probe


def answer(
    given: dict[str, Any],
    *,
    refresh: Callable[[], None],
    force_refresh: bool,
    not_refreshed: Callable[[KitbenchError], None],
    release_spec: str = "stable",
    package: str = "pip",
    compute: str = "auto",
    fmt: str = "pinned",
) -> Selection:
    """The install command for this machine with ``given`` facts put in place of probed ones (the
    keywords of ``probe.override``)."""
    if force_refresh or facts.due():
        try:
            refresh()
        except KitbenchError as error:
            # Advice from the facts at hand beats none: an index out of reach, a cache that cannot be written.
            # What was refreshed before the failure, if any, is the error's to say (indexes.RefreshFailed).
            not_refreshed(error)
    machine = probe.override(probe.probe(), **given)
    chosen = select(machine, release_spec=release_spec, package=package, compute=compute, fmt=fmt)
    origin = next((d.origin for d in facts.derived() if d.version == chosen.release), None)
    if origin is not None:
        # Not envs/wheels.yaml: this release's tags and builds were read into the cache by a refresh.
        chosen.facts["derived_from"] = {"index": origin["index"], "read": origin["read"]}
        chosen.facts["wheels"].update(source=f"{origin['wheels_from']} (the fact cache)", read=origin["wheels_read"])
    # A cache partly unreadable changes which facts answered: said whole, even in the short answer.
    chosen.noted.extend(note("cache_warning", text=text) for text in facts.notes())
    stale = facts.stale_note(wheels.load().read)
    if stale:
        chosen.noted.append(note("stale", text=stale))
    return chosen
