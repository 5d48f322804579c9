"""A host that could not be reached, said one way wherever kitbench meets the network (replay, the facts
refresh, the nox sessions, the fleet, MNIST's download): which host, why, and what would get past it.

What would get past it is built from what is known where the failure happened: the overrides in force
(``KITBENCH_INDEX_URL``, ``KITBENCH_PYTORCH_INDEX``), and a record's ``index_override``, the index the
record's environment was built from. That one is offered, never taken: which index to trust is the
user's to say. Standard library only: nox imports this before any environment exists.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterable
from typing import Literal, NamedTuple, TypeVar

from kitbench.errors import KitbenchError, NetworkError, clean

INDEX_VARIABLE = "KITBENCH_INDEX_URL"
PYTORCH_VARIABLE = "KITBENCH_PYTORCH_INDEX"
PYTORCH_HOST = "download.pytorch.org"
RESOLVE_TIMEOUT_S = 3.0
# How uv, pip, urllib and curl word a host they could not reach (lower case): the deepest such line is the cause.
_WORDS = (
    "lookup address",
    "dns error",
    "name resolution",
    "name or service not known",
    "nodename nor servname",
    "no address associated",
    "could not resolve host",
    "network is unreachable",
    "connection refused",
    "client error (connect)",
    "failed to establish a new connection",
    "timed out",
    "no route to host",
)
_URL = re.compile(r"https?://[^\s'\"`<>()]+", re.I)

E = TypeVar("E", bound=KitbenchError)


class Known(NamedTuple):
    """What may get past an unreachable host, as the caller knows it."""

    # What was going on: "install" (an installer: KITBENCH_INDEX_URL applies), "index" (kitbench reading an
    # index page: the variable or pip setting that named it does), "download" (a file from elsewhere: MNIST).
    doing: Literal["install", "index", "download"] = "install"
    recorded: str | None = None  # the record's index_override: offered, never obeyed
    again: str | None = None  # the command to give again under a variable ("kitbench replay r.json")
    then: str | None = None  # what holds meanwhile ("install-cmd answers from the facts it has")


def network_cause(text: str) -> str | None:
    """What a program's output says kept a host out of reach: of its deepest line that says so (uv and pip put
    the headline first, the cause last), the run of ": "-separated clauses at the end of which each says so
    ("failed to lookup address information: Name or service not known"), without what wraps it; None where
    no line says so."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = next((line for line in reversed(lines) if _says(line)), None)
    if found is None:
        return None
    clauses = found.split(": ")
    last = max(i for i, clause in enumerate(clauses) if _says(clause))
    first = last
    while first > 0 and _says(clauses[first - 1]):
        first -= 1
    cause = ": ".join(clauses[first : last + 1]).strip(" '\"`")
    while cause.count(")") > cause.count("(") and cause.endswith(")"):  # the end of a wrapping parenthesis
        cause = cause[:-1].rstrip(" '\"`")
    return cause[:200]


def _says(text: str) -> bool:
    return any(word in text.lower() for word in _WORDS)


def host(url: str) -> str:
    """Where ``url`` points, for messages: host and port, never the credentials a URL may carry."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "an unparsable URL"
    return (parts.hostname or "a URL without a host")[:100] + (f":{parts.port}" if port(parts) else "")


def bare(url: str) -> str:
    """``url`` without the ``user:token@`` it may carry: what kitbench writes to disk."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "an unparsable URL"
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def shown(url: str) -> str:
    """``url`` for a message: bare, as pip shows index URLs, and of a length a line can hold."""
    return bare(url)[:300]


def port(parts: urllib.parse.SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def host_in(text: str) -> str | None:
    """The host of the last http(s) URL in a program's output (where it was going when it failed)."""
    found = hosts_in(text)
    return found[-1] if found else None


def hosts_in(text: str) -> list[str]:
    """The hosts of the http(s) URLs in a program's output, each once, in order (the mirrors a download tried)."""
    return list(dict.fromkeys(host(url.rstrip(".,:;")) for url in _URL.findall(text)))


def resolves(host: str, timeout_s: float = RESOLVE_TIMEOUT_S) -> str | None:
    """None where ``host`` resolves, else why not: getaddrinfo takes no timeout, and an unreachable resolver
    makes it wait for its own, so it is asked in a thread given ``timeout_s``."""
    failed: list[str] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, 443)
            failed.append("")
        except (OSError, UnicodeError) as exc:
            failed.append(f"it does not resolve: {getattr(exc, 'strerror', None) or exc}")

    thread = threading.Thread(target=lookup, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return (failed[0] or None) if failed else f"it does not resolve: no answer within {timeout_s:g} s"


def proxied(url: str) -> bool:
    """Whether a proxy decides where requests for ``url`` go (then its host's name is the proxy's to resolve)."""
    parts = urllib.parse.urlsplit(url)
    return bool(urllib.request.getproxies().get(parts.scheme)) and not urllib.request.proxy_bypass(parts.hostname or "")


def first_unresolved(urls: Iterable[str | None], timeout_s: float = RESOLVE_TIMEOUT_S) -> tuple[str, str] | None:
    """(url, why) of the first of ``urls`` whose host does not resolve, asking each host once; None where all
    do. A URL reached through a proxy, and None (the installer's own configuration decides), are not asked."""
    asked: set[str] = set()
    for url in urls:
        host = urllib.parse.urlsplit(url).hostname if url else None
        if url is None or host is None or host in asked or proxied(url):
            continue
        asked.add(host)
        why = resolves(host, timeout_s)
        if why:
            return url, why
    return None


NOTHING_KNOWN = Known()


def fixes(name: str, known: Known = NOTHING_KNOWN) -> list[str]:
    """What would get past the host ``name``, most specific first, from the overrides in force and ``known``."""
    override, mirror = os.environ.get(INDEX_VARIABLE), os.environ.get(PYTORCH_VARIABLE)
    found = []
    if override and override != "default" and host(override) == name:
        found.append(
            f"{INDEX_VARIABLE}={shown(override)} is in force and names it: check that index, or unset {INDEX_VARIABLE}"
        )
    if mirror and host(mirror) == name:
        found.append(f"{PYTORCH_VARIABLE}={shown(mirror)} is in force and names it: check that mirror")
    if known.recorded and known.recorded != override and host(known.recorded) != name:
        command = (
            f"`{INDEX_VARIABLE}={shown(known.recorded)} {known.again}`"
            if known.again
            else f"{INDEX_VARIABLE}={shown(known.recorded)}"
        )
        built = (
            "under its machine's pip or uv configuration (its index_override: default)"
            if known.recorded == "default"
            else f"from {shown(known.recorded)} (its index_override)"
        )
        found.append(
            f"the record's environment was built {built}: {command} installs from "
            f"{'yours' if known.recorded == 'default' else 'there, if you trust that index'} "
            "(kitbench never takes it by itself)"
        )
    if name == PYTORCH_HOST and not mirror and known.doing != "download":
        found.append(f"set {PYTORCH_VARIABLE} to a mirror of PyTorch's index (its whl/ tree)")
    if known.doing == "install" and not override:
        found.append(
            f"set {INDEX_VARIABLE} to an index this machine reaches, or to default for your pip or uv "
            "configuration (a mirror, a proxy)" + (f": `{INDEX_VARIABLE}=default {known.again}`" if known.again else "")
        )
    elif known.doing == "index" and name != PYTORCH_HOST and not (mirror and host(mirror) == name):
        found.append("PIP_INDEX_URL (or pip's index-url) names the index read in PyPI's place")
    if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
        found.append("check the proxy HTTPS_PROXY names")
    return found or [
        "check this machine's network and DNS"
        if known.doing != "download"
        else "check this machine's network and DNS, or proxy settings (HTTPS_PROXY)"
    ]


def unreachable(where: str, cause: str, doing: str, known: Known = NOTHING_KNOWN, error: type[E] = NetworkError) -> E:  # type: ignore[assignment]
    """The error for ``where`` (a URL or a host) out of reach: ``doing`` (what could not be done), the host
    and ``cause``, and a hint of ``fixes``; of the caller's class, with ``host`` set for a record to keep."""
    # A program's output names the host and the cause: data, shown escaped.
    name, cause = clean(host(where) if "://" in where else where[:200])[:200], clean(cause)
    hint = "; or ".join(fixes(name, known)) + (f"; {known.then}" if known.then else "")
    found = error(f"{doing + ': ' if doing else ''}cannot reach {name} ({cause})", hint=hint)
    found.host = name
    return found
