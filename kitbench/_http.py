"""The one way kitbench reads a URL: a GET with a short timeout, conditional on what it read before.

Standard library only (the light install has no HTTP client). The CA bundle is the one pip and
OpenSSL users point at (``PIP_CERT``, ``SSL_CERT_FILE``), so a proxy's own CA works here as it
does for pip. Every failure is one ``NetworkError`` naming the host, never an OSError.
"""

from __future__ import annotations

import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import cache

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


@cache
def _context() -> ssl.SSLContext:
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    return ssl.create_default_context(cafile=bundle if bundle and os.path.isfile(bundle) else None)


def host(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


def get(url: str, accept: str, etag: str | None = None, last_modified: str | None = None,
        timeout: float = TIMEOUT) -> Response:
    """GET ``url``; with ``etag``/``last_modified`` from an earlier read, an unchanged page is a 304."""
    headers = {"Accept": accept, "User-Agent": "kitbench"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout,
                                    context=_context() if url.startswith("https:") else None) as answer:
            return Response(answer.geturl(), answer.status, answer.read(), answer.headers.get("Content-Type", ""),
                            answer.headers.get("ETag"), answer.headers.get("Last-Modified"))
    except urllib.error.HTTPError as failed:
        if failed.code == 304:
            return Response(url, 304, b"", "", failed.headers.get("ETag") or etag,
                            failed.headers.get("Last-Modified") or last_modified)
        raise NetworkError(f"{host(url)} answered {failed.code} {failed.reason} for {url[:300]}",
                           hint="check the index URL (PIP_INDEX_URL, KITBENCH_PYTORCH_INDEX)") from None
    except (urllib.error.URLError, OSError, ValueError) as failed:
        why = getattr(failed, "reason", None) or failed
        raise NetworkError(f"cannot reach {host(url)}: {why}",
                           hint="check the network or the index URL; install-cmd answers from the facts it has")\
            from None
