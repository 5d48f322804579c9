"""kitbench._http against servers on 127.0.0.1: credentials as pip takes them, kept to their host and out
of every message; pages without end cut off by size and by time, headers dripped included; http(s) only,
redirects too; every URL kitbench is given parsed up front into one error that never quotes it."""

from __future__ import annotations

import base64
import contextlib
import http.server
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from kitbench import _http, _reach
from kitbench.errors import NetworkError, UsageError

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


def _send(
    handler: http.server.BaseHTTPRequestHandler, code: int, body: bytes = b"{}", headers: dict[str, str] | None = None
) -> None:
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
    assert _reach.host(f"https://me:{TOKEN}@mirror.example:8443/simple") == "mirror.example:8443"


def test_a_redirect_to_another_host_gets_no_credentials() -> None:
    with (
        _server(lambda h: _send(h, 200)) as (elsewhere, seen_there),
        _server(lambda h: _send(h, 302, b"", {"Location": f"http://{elsewhere}/landed"})) as (first, _),
    ):
        page = _http.get(f"http://me:{TOKEN}@{first}/simple/", "application/json")
    assert page.status == 200 and seen_there[-1]["path"] == "/landed"
    assert "authorization" not in seen_there[-1]
    assert TOKEN not in page.url


def test_a_byte_range_is_asked_for_and_the_part_s_place_comes_back() -> None:
    whole = bytes(range(200))

    def ranged(handler: http.server.BaseHTTPRequestHandler) -> None:
        start = len(whole) - int(handler.headers["Range"].removeprefix("bytes=-"))
        _send(handler, 206, whole[start:], {"Content-Range": f"bytes {start}-{len(whole) - 1}/{len(whole)}"})

    with _server(ranged) as (where, seen):
        part = _http.get(f"http://{where}/x.whl", "*/*", byte_range="-22")
    assert seen[-1]["range"] == "bytes=-22"
    assert (part.status, part.body, part.content_range) == (206, whole[-22:], "bytes 178-199/200")
    with _server(lambda h: _send(h, 200)) as (where, seen):
        assert _http.get(f"http://{where}/x", "*/*").content_range is None and "range" not in seen[-1]


def test_a_page_without_end_is_cut_off_by_size_and_by_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "MAX_BYTES", 100_000)
    with _server(lambda h: _send(h, 200, b"x" * 200_000)) as (where, _), pytest.raises(NetworkError) as big:
        _http.get(f"http://{where}/simple/torch/", "application/json")
    assert "sent more than" in big.value.message

    def drip(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100000")
        handler.end_headers()
        for _ in range(100):  # a byte every 50 ms: each read well within the socket timeout
            handler.wfile.write(b"x")
            handler.wfile.flush()
            time.sleep(0.05)

    monkeypatch.setattr(_http, "DEADLINE", 0.5)
    with _server(drip) as (where, _):
        started = time.monotonic()
        with pytest.raises(NetworkError) as slow:
            _http.get(f"http://{where}/simple/torch/", "application/json")
        waited = time.monotonic() - started
    assert "took over 0.5 s" in slow.value.message and waited < 4  # the drip would take 5 s


@contextmanager
def _raw_server(reply: Callable[[socket.socket], None]) -> Iterator[str]:
    """A server that answers each connection with ``reply`` on the bare socket (whatever bytes, at whatever pace)."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(65536)
            with contextlib.suppress(OSError):  # the client hung up: what a deadline does
                reply(self.request)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _drip(data: bytes, every: float, stop: float = 3.0) -> Callable[[socket.socket], None]:
    def reply(sock: socket.socket) -> None:
        ends = time.monotonic() + stop  # the server stops by itself, whatever the client does
        for byte in data:
            if time.monotonic() > ends:
                return
            sock.sendall(bytes([byte]))
            time.sleep(every)

    return reply


def test_headers_dripped_after_the_status_line_are_cut_off_by_the_headers_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_http, "TIMEOUT", 0.3)
    headers = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"y" * 200 + b"\r\n\r\n{}"
    with _raw_server(lambda sock: (sock.sendall(headers[:17]), _drip(headers[17:], 0.05)(sock))) as where:
        started = time.monotonic()
        with pytest.raises(NetworkError, match=r"took over 0\.3 s"):
            _http.get(f"http://{where}/simple/torch/", "application/json")
        assert time.monotonic() - started < 1.5  # every header byte arrives within the 50 ms a read waits


def test_several_reads_share_one_end(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b"x" * 100
    page = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + body
    with _raw_server(lambda sock: (sock.sendall(page[:-100]), _drip(body, 0.05)(sock))) as where:
        until = time.monotonic() + 0.6
        started = time.monotonic()
        for _ in range(3):  # three slow bodies of 5 s each: together, still the one end
            with pytest.raises(NetworkError, match=r"took over|had run out"):
                _http.get(f"http://{where}/files/a.whl.metadata", "*/*", until=until)
        assert time.monotonic() - started < 1.5
        with pytest.raises(NetworkError, match=r"the time given to all of the reads had run out before http://"):
            _http.get(f"http://{where}/files/b.whl.metadata", "*/*", until=until)


@pytest.mark.parametrize("target", ["ftp://127.0.0.1:{port}/simple/", "file:///etc/passwd"])
def test_a_redirect_is_followed_to_http_s_only(target: str) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.2)
        location = target.format(port=listener.getsockname()[1])
        with (
            _server(lambda h: _send(h, 302, b"", {"Location": location})) as (where, _),
            pytest.raises(NetworkError, match=r"kitbench follows http\(s\) only"),
        ):
            _http.get(f"http://{where}/simple/", "application/json")
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing connected to the ftp listener


def test_redirects_are_bounded() -> None:
    with (
        _server(lambda h: _send(h, 302, b"", {"Location": h.path + "x"})) as (where, seen),
        pytest.raises(NetworkError, match="answered 302"),
    ):
        _http.get(f"http://{where}/simple/", "application/json")
    assert len(seen) == _http.MAX_REDIRECTS + 1


@pytest.mark.parametrize(
    "url", ["file:///dev/stdin#", "file:///etc/passwd", "ftp://127.0.0.1/simple/", "data:text/plain,hello"]
)
def test_only_http_s_is_ever_read(url: str) -> None:
    with pytest.raises(NetworkError, match=r"over http\(s\) only") as refused:
        _http.get(url, "*/*")
    assert "stdin" not in refused.value.message and "passwd" not in refused.value.message


def test_a_url_that_does_not_parse_is_refused_by_the_reader_too_and_never_quoted() -> None:
    """A caller that did not check its URL first (a lock's index) still gets one error without the token."""
    with pytest.raises(NetworkError, match="do not parse") as refused:
        _http.get("https://me:S3/CR3T@mirror.example/simple/torch/", "*/*")
    assert "S3" not in refused.value.message


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://[::1", "do not parse"),
        ("https://user:S3/CR3T@mirror.example/simple", "do not parse"),
        ("https://user:S3#CR3T@mirror.example/simple", "do not parse"),
        ("https://S3/CR3T@mirror.example/simple", "holds / ? or #"),
        ("https://mirror.example/sim ple", "a space"),
        ("https://mirror.example/simple\n", "control character"),
        ("https://mirror\uff0eexample/simple", "NFKC"),
        ("https://mirror.\u2460.example/simple", "NFKC"),
        ("ftp://mirror.example/simple", "http(s) only"),
        ("/srv/simple", "http(s) only"),
        ("https:///simple", "names no host"),
    ],
)
def test_an_unusable_index_url_is_one_error_that_never_quotes_it(url: str, why: str) -> None:
    with pytest.raises(UsageError) as refused:
        _http.checked(url, "PIP_INDEX_URL")
    assert refused.value.message.startswith("PIP_INDEX_URL is not a usable index URL: ")
    assert why in refused.value.message
    assert "CR3T" not in refused.value.message + (refused.value.hint or "") and "mirror" not in refused.value.message


def test_a_percent_encoded_token_is_a_usable_index_url() -> None:
    url = "https://me:to%2Fk%23en@mirror.example:8443/simple/"
    assert _http.checked(url, "PIP_INDEX_URL") == url
