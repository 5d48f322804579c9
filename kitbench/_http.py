"""The one way kitbench reads a URL: a GET under one deadline, conditional on what it read before.

Standard library only (the light install has no HTTP client). The CA bundle is the one pip and
OpenSSL users point at (``PIP_CERT``, ``SSL_CERT_FILE``), so a proxy's own CA works here as it
does for pip. Every failure is one ``NetworkError`` naming the host, never an OSError.

An index is a stranger: the whole exchange (connect, status line and headers, body, every redirect)
has one deadline, checked at every read of the socket, so a server that drips its headers or its body a
byte at a time is cut off at the deadline, not at a per-read timeout it can reset forever; a caller
reading several URLs (a refresh) passes one end for all of them. Only http(s) is spoken, redirects
included (a few of them), and a URL's ``user:token@`` is sent as a header to its own host and never
shown. ``checked`` parses a URL kitbench is given once, up front, into one error that never quotes it.
"""

from __future__ import annotations

import base64
import http.client
import io
import os
import ssl
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from functools import cache
from typing import Any

from kitbench._reach import Known, bare, host, port, shown, unreachable
from kitbench.errors import NetworkError, UsageError

TIMEOUT = 5.0  # seconds to connect and have the status line and headers: an index that answers at all does
DEADLINE = 30.0  # seconds for the whole exchange: torch's page is a few MB
MAX_BYTES = 64 * 2**20  # torch's whole PEP 691 page is a few MB; a page without end is not an index
MAX_REDIRECTS = 5
SCHEMES = ("http", "https")


@dataclass(frozen=True)
class Response:
    url: str
    status: int  # 200, or 304: unchanged since the validators sent
    body: bytes
    content_type: str
    etag: str | None
    last_modified: str | None
    content_range: str | None = None  # a 206's "bytes 0-99/530712279": the part sent, and the whole's size


def _context() -> ssl.SSLContext:
    """Made once per CA bundle: the one PIP_CERT or SSL_CERT_FILE names now, where it is a file."""
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    return _context_for(os.path.abspath(bundle) if bundle and os.path.isfile(bundle) else None)


@cache
def _context_for(bundle: str | None) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=bundle)


def checked(url: str, given_as: str) -> str:
    """``url`` as kitbench may use it: http(s), a host that parses and that NFKC leaves alone, a port, no
    space or control character. Else one UsageError naming where it was given (``given_as``: the variable or
    file) and never quoting the URL itself, which may carry a token."""

    def refuse(why: str) -> UsageError:
        return UsageError(
            f"{given_as} is not a usable index URL: {why}",
            hint="an http(s) URL such as https://host/simple; a user or token in it must be "
            "percent-encoded (/ as %2F, # as %23, @ as %40), as pip requires",
        )

    if any(c.isspace() or unicodedata.category(c)[0] == "C" for c in url):
        raise refuse("it holds a space or a control character")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise refuse("its host and port do not parse") from None
    if parts.scheme.lower() not in SCHEMES:
        raise refuse(f"kitbench reads indexes over http(s) only, not {parts.scheme[:20] or 'a bare path'}")
    host = parts.hostname or ""
    if not host or port == 0:
        raise refuse("it names no host")
    if unicodedata.normalize("NFKC", parts.netloc) != parts.netloc:
        raise refuse("its host holds characters that NFKC normalization changes (it would reach another host)")
    if "@" in parts.path + parts.query + parts.fragment and "@" not in parts.netloc:
        raise refuse("a user or token in it holds / ? or #")
    return url


class _Reader(io.RawIOBase):
    """The socket's reads, each allowed only the time left until ``limit``: a drip cannot outlast it."""

    def __init__(self, sock: Any, fp: Any, limit: float) -> None:
        super().__init__()
        # The socket's own buffered file is kept, unread: dropped, it would close the socket under us.
        self._sock, self._fp, self.limit = sock, fp, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int | None:
        left = self.limit - time.monotonic()
        if left <= 0:
            raise TimeoutError("the deadline passed")
        self._sock.settimeout(left)
        count: int | None = self._fp.raw.readinto(buffer)
        return count

    def close(self) -> None:
        self._fp.close()
        super().close()


def _responses(headers_by: float, end: float) -> type[http.client.HTTPResponse]:
    class Bounded(http.client.HTTPResponse):
        """Status line and headers by ``headers_by``, the rest by ``end``."""

        def __init__(self, sock: Any, debuglevel: int = 0, method: str | None = None, url: str | None = None) -> None:
            super().__init__(sock, debuglevel, method, url)
            self._reader = _Reader(sock, self.fp, headers_by)
            self.fp = io.BufferedReader(self._reader)

        def begin(self) -> None:
            super().begin()
            self._reader.limit = end

    return Bounded


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, *, ends: tuple[float, float], **kwargs: Any) -> None:
        kwargs["timeout"] = _left(ends[0])
        super().__init__(host, **kwargs)
        self._ends = ends
        self.response_class = _responses(*ends)

    def connect(self) -> None:
        self.timeout = _left(self._ends[0])  # connecting (and TLS's handshake) by the headers' deadline too
        super().connect()


class _TLSConnection(_Connection, http.client.HTTPSConnection):
    pass


def _left(until: float) -> float:
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("the deadline passed")
    return left


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, ends: tuple[float, float]) -> None:
        super().__init__()
        self._ends = ends

    def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(lambda host, **kw: _Connection(host, ends=self._ends, **kw), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, ends: tuple[float, float]) -> None:
        super().__init__()
        self._ends = ends

    def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(lambda host, **kw: _TLSConnection(host, ends=self._ends, context=_context(), **kw), req)


class _Redirects(urllib.request.HTTPRedirectHandler):
    max_redirections = MAX_REDIRECTS

    def http_error_302(self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any) -> Any:
        location = headers.get("Location") or headers.get("URI") or ""
        target = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, location))
        if target.scheme.lower() not in SCHEMES:
            raise NetworkError(
                f"{host(req.full_url)} redirected {shown(req.full_url)} to a "
                f"{target.scheme[:20] or 'schemeless'} URL; kitbench follows http(s) only",
                hint="check the index URL (PIP_INDEX_URL, KITBENCH_PYTORCH_INDEX)",
            )
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def _opener(ends: tuple[float, float]) -> urllib.request.OpenerDirector:
    """http(s) and nothing else: no file:, ftp: or data: handler, so no URL or redirect can reach them."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        _HTTP(ends),
        _HTTPS(ends),
        _Redirects(),
        urllib.request.HTTPDefaultErrorHandler(),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
    ):
        opener.add_handler(handler)
    return opener


def get(
    url: str,
    accept: str,
    etag: str | None = None,
    last_modified: str | None = None,
    timeout: float | None = None,
    until: float | None = None,
    byte_range: str | None = None,
) -> Response:
    """GET ``url``; with ``etag``/``last_modified`` from an earlier read, an unchanged page is a 304. The
    whole exchange ends within ``timeout`` seconds (DEADLINE), and by ``until`` (a ``time.monotonic()``) where given:
    a caller's budget for several reads. Connecting and the headers have at most TIMEOUT of it. ``byte_range``
    (``0-99``, ``-65536``: RFC 9110's) asks for part of a file: a server that honours it answers 206.

    Credentials in the URL (``https://user:token@host/simple``, as pip takes them) become a Basic
    Authorization header that goes to that host only: it is not sent again after a redirect."""
    headers = {"Accept": accept, "User-Agent": "kitbench"}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    if byte_range:
        headers["Range"] = f"bytes={byte_range}"
    started = time.monotonic()
    end = min(started + (DEADLINE if timeout is None else timeout), until if until is not None else float("inf"))
    try:
        checked(url, "a URL kitbench was to read")  # every caller's, never quoted: it may carry a token
    except UsageError as refused:
        raise NetworkError(refused.message, hint=refused.hint) from None
    asked = bare(url)
    try:
        parts = urllib.parse.urlsplit(url)
        request = urllib.request.Request(asked, headers=headers)
        if parts.username is not None:
            token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
            request.add_unredirected_header("Authorization", "Basic " + base64.b64encode(token.encode()).decode())
        headers_by = min(started + TIMEOUT, end)
        with _opener((headers_by, end)).open(request) as answer:
            return Response(
                _with_credentials(answer.geturl(), parts),
                answer.status,
                _body(answer, asked),
                answer.headers.get("Content-Type", ""),
                answer.headers.get("ETag"),
                answer.headers.get("Last-Modified"),
                answer.headers.get("Content-Range"),
            )
    except urllib.error.HTTPError as failed:
        if failed.code == 304:
            return Response(
                url,
                304,
                b"",
                "",
                failed.headers.get("ETag") or etag,
                failed.headers.get("Last-Modified") or last_modified,
            )
        raise NetworkError(
            f"{host(url)} answered {failed.code} {str(failed.reason)[:100]} for {shown(url)}",
            hint="check the index URL (PIP_INDEX_URL, KITBENCH_PYTORCH_INDEX)",
        ) from None
    except (urllib.error.URLError, OSError, ValueError, http.client.HTTPException) as failed:
        why = getattr(failed, "reason", None) or failed
        now = time.monotonic()
        if isinstance(why, TimeoutError) or now >= end:
            limit = (end if now >= end else min(started + TIMEOUT, end)) - started
            why = (
                f"it took over {limit:.3g} s to answer"
                if limit > 0.01
                else "the time given to all of the reads had run out before"
            )
            raise _unreachable(url, f"{why} {shown(url)}") from None
        text = str(why).replace(url, shown(url)).replace(asked, shown(url))
        raise _unreachable(url, text[:300] or type(why).__name__) from None


def _unreachable(url: str, cause: str) -> NetworkError:
    return unreachable(url, cause, "", Known(doing="index", then="install-cmd answers from the facts it has"))


def _with_credentials(final: str, asked: urllib.parse.SplitResult) -> str:
    """The page's URL, carrying the asked URL's credentials while it is on the same host: links on the
    page (a wheel's .metadata) resolve against it and reach that host as the page did, and no other."""
    parts = urllib.parse.urlsplit(final)
    if asked.username is None or (parts.hostname, port(parts)) != (asked.hostname, port(asked)):
        return final
    return urllib.parse.urlunsplit(parts._replace(netloc=asked.netloc))


def _body(answer: Any, url: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := answer.read1(2**16):  # what has arrived: read() would wait for all 64 kB
        size += len(chunk)
        if size > MAX_BYTES:
            raise NetworkError(
                f"{host(url)} sent more than {MAX_BYTES // 2**20} MB for {shown(url)}; an index "
                "page is never that large",
                hint="check the index URL (PIP_INDEX_URL, KITBENCH_PYTORCH_INDEX)",
            )
        chunks.append(chunk)
    return b"".join(chunks)
