"""kitbench._http against servers on 127.0.0.1: credentials as pip takes them, kept to their host and out
of every message; pages without end cut off by size and by time."""

from __future__ import annotations

import base64
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from kitbench import _http
from kitbench.errors import NetworkError

TOKEN = "s3cret-t0ken"


@contextmanager
def _server(handle: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            handle(self)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _send(handler: http.server.BaseHTTPRequestHandler, code: int, body: bytes = b"{}",
          headers: dict[str, str] | None = None) -> None:
    handler.send_response(code)
    for key, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
        handler.send_header(key, value)
    handler.end_headers()
    handler.wfile.write(body)


def test_credentials_in_the_url_authenticate_and_never_reach_a_message() -> None:
    expected = "Basic " + base64.b64encode(f"me:{TOKEN}".encode()).decode()

    def private(handler: http.server.BaseHTTPRequestHandler) -> None:
        ok = handler.headers.get("Authorization") == expected and handler.path == "/simple/torch/"
        _send(handler, 200 if ok else 401)

    with _server(private) as (where, seen):
        page = _http.get(f"http://me:{TOKEN}@{where}/simple/torch/", "application/json")
        assert page.status == 200 and seen[-1]["authorization"] == expected
        with pytest.raises(NetworkError) as refused:
            _http.get(f"http://me:{TOKEN}@{where}/simple/nothing/", "application/json")
    assert f"answered 401 Unauthorized for http://{where}/simple/nothing/" in refused.value.message
    assert TOKEN not in refused.value.message and "me:" not in refused.value.message
    assert _http.host(f"https://me:{TOKEN}@mirror.example:8443/simple") == "mirror.example:8443"


def test_a_redirect_to_another_host_gets_no_credentials() -> None:
    with _server(lambda h: _send(h, 200)) as (elsewhere, seen_there), \
            _server(lambda h: _send(h, 302, b"", {"Location": f"http://{elsewhere}/landed"})) as (first, _):
        page = _http.get(f"http://me:{TOKEN}@{first}/simple/", "application/json")
    assert page.status == 200 and seen_there[-1]["path"] == "/landed"
    assert "authorization" not in seen_there[-1]
    assert TOKEN not in page.url


def test_a_page_without_end_is_cut_off_by_size_and_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "MAX_BYTES", 100_000)
    with _server(lambda h: _send(h, 200, b"x" * 200_000)) as (where, _), pytest.raises(NetworkError) as big:
        _http.get(f"http://{where}/simple/torch/", "application/json")
    assert "sent more than" in big.value.message

    def drip(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        for _ in range(100):            # a byte every 50 ms: each read well within the socket timeout
            handler.wfile.write(b"x")
            handler.wfile.flush()
            time.sleep(0.05)

    monkeypatch.setattr(_http, "DEADLINE", 0.5)
    with _server(drip) as (where, _):
        started = time.monotonic()
        with pytest.raises(NetworkError) as slow:
            _http.get(f"http://{where}/simple/torch/", "application/json")
        waited = time.monotonic() - started
    assert "took over" in slow.value.message and waited < 4     # the drip would take 5 s
