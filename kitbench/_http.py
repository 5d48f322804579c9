"""The one way kitbench reads a URL: a GET with a short timeout, conditional on what it read before.

Standard library only (the light install has no HTTP client). The CA bundle is the one pip and
OpenSSL users point at (``PIP_CERT``, ``SSL_CERT_FILE``), so a proxy's own CA works here as it
does for pip. Every failure is one ``NetworkError`` naming the host, never an OSError.
"""

from __future__ import annotations

import base64
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import cache
from typing import Any

from kitbench.errors import NetworkError

TIMEOUT = 5.0       # seconds: an index that answers at all answers well within this


@dataclass(frozen=True)
class Response:
    url: str
    status: int             # 200, or 304: unchanged since the validators sent
    body: bytes
    content_type: str
    etag: str | None
    last_modified: str | None


def _context() -> ssl.SSLContext:
    """Made once per CA bundle: the one PIP_CERT or SSL_CERT_FILE names now, where it is a file."""
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    return _context_for(os.path.abspath(bundle) if bundle and os.path.isfile(bundle) else None)


@cache
def _context_for(bundle: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=bundle)


MAX_BYTES = 64 * 2**20     # torch's whole PEP 691 page is a few MB; a page without end is not an index
DEADLINE = 30.0             # seconds for one whole page: a server that drips a byte at a time is cut off


def host(url: str) -> str:
    """Where ``url`` points, for messages: host and port, never the credentials a URL may carry."""
    parts = urllib.parse.urlsplit(url)
    return (parts.hostname or url[:100]) + (f":{parts.port}" if _port(parts) else "")


def bare(url: str) -> str:
    """``url`` without the ``user:token@`` it may carry: what kitbench writes to disk."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def shown(url: str) -> str:
    """``url`` for a message: bare, as pip shows index URLs, and of a length a line can hold."""
    return bare(url)[:300]


def _port(parts: urllib.parse.SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def get(url: str, accept: str, etag: str | None = None, last_modified: str | None = None,
        timeout: float = TIMEOUT) -> Response:
    """GET ``url``; with ``etag``/``last_modified`` from an earlier read, an unchanged page is a 304.

    Credentials in the URL (``https://user:token@host/simple``, as pip takes them) become a Basic
    Authorization header that goes to that host only: it is not sent again after a redirect."""
    headers = {"Accept": accept, "User-Agent": "kitbench"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    parts = urllib.parse.urlsplit(url)
    asked = bare(url)
    try:
        request = urllib.request.Request(asked, headers=headers)
        if parts.username is not None:
            token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(token.encode()).decode())
        with urllib.request.urlopen(request, timeout=timeout,
                                    context=_context() if url.startswith("https:") else None) as answer:
            return Response(_with_credentials(answer.geturl(), parts), answer.status, _body(answer, asked),
                            answer.headers.get("Content-Type", ""), answer.headers.get("ETag"),
                            answer.headers.get("Last-Modified"))
    except urllib.error.HTTPError as failed:
        if failed.code == 304:
            return Response(url, 304, b"", "", failed.headers.get("ETag") or etag,
                            failed.headers.get("Last-Modified") or last_modified)
        raise NetworkError(f"{host(url)} answered {failed.code} {failed.reason} for {shown(url)}",
                           hint="check the index URL (PIP_INDEX_URL, KITBENCH_PYTORCH_INDEX)") from None
    except (urllib.error.URLError, OSError, ValueError) as failed:
        why = getattr(failed, "reason", None) or failed
        raise NetworkError(f"cannot reach {host(url)}: {str(why).replace(url, shown(url))[:300]}",
                           hint="check the network or the index URL; install-cmd answers from the facts it has")\
            from None


def _with_credentials(final: str, asked: urllib.parse.SplitResult) -> str:
    """The page's URL, carrying the asked URL's credentials while it is on the same host: links on the
    page (a wheel's .metadata) resolve against it and reach that host as the page did, and no other."""
    parts = urllib.parse.urlsplit(final)
    if asked.username is None or (parts.hostname, _port(parts)) != (asked.hostname, _port(asked)):
        return final
    return urllib.parse.urlunsplit(parts._replace(netloc=asked.netloc))


def _body(answer: Any, url: str) -> bytes:
    chunks: list[bytes] = []
    size, started = 0, time.monotonic()
    while chunk := answer.read1(2**16):      # what has arrived: read() would wait for all 64 kB
        size += len(chunk)
        if size > MAX_BYTES:
            raise NetworkError(f"{host(url)} sent more than {MAX_BYTES // 2**20} MB for {shown(url)}; an index "
                               "page is never that large",
                               hint="check the index URL (PIP_INDEX_URL, KITBENCH_PYTORCH_INDEX)")
        if time.monotonic() - started > DEADLINE:
            raise NetworkError(f"{host(url)} took over {DEADLINE:g} s to send {shown(url)}",
                               hint="check the network or the index URL; install-cmd answers from the facts it has")
        chunks.append(chunk)
    return b"".join(chunks)
