"""kitbench._reach: a host out of reach is named, with what gets past it, the one way for every caller."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from kitbench import _reach
from kitbench.errors import NetworkError, ReplayError

# uv's words for an index it could not reach (0.13, no DNS), and pip's, which name no host.
UV_OFFLINE = """error: Failed to fetch: `https://download.pytorch.org/whl/cpu/torch/`
  Caused by: Request failed after 3 retries
  Caused by: error sending request for url (https://download.pytorch.org/whl/cpu/torch/)
  Caused by: client error (Connect)
  Caused by: dns error: failed to lookup address information: Name or service not known
"""
PIP_OFFLINE = (
    "WARNING: Retrying (Retry(total=4, connect=None, read=None, redirect=None, status=None)) after "
    "connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object "
    "at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name "
    "resolution')': /simple/torch/\n"
    "ERROR: Could not find a version that satisfies the requirement torch==2.14.1\n"
)


@pytest.fixture(autouse=True)
def _no_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        _reach.INDEX_VARIABLE,
        _reach.PYTORCH_VARIABLE,
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


def test_an_installers_output_gives_the_cause_and_the_host() -> None:
    assert _reach.network_cause(UV_OFFLINE) == (
        "dns error: failed to lookup address information: Name or service not known"
    )
    assert _reach.host_in(UV_OFFLINE) == "download.pytorch.org"
    assert _reach.network_cause(PIP_OFFLINE) is not None and _reach.host_in(PIP_OFFLINE) is None
    assert _reach.network_cause("error: Because there is no version of numpy==0.0.999") is None


def test_an_invalid_host_does_not_resolve_and_is_the_one_named() -> None:
    """RFC 6761: .invalid never resolves; each host is asked once, and a URL behind None (the installer's own
    configuration) is not asked at all."""
    assert _reach.resolves("localhost") is None
    why = _reach.resolves("nosuchhost.invalid")
    assert why is not None and why.startswith("it does not resolve: ")
    found = _reach.first_unresolved([None, "http://localhost:1/simple", "https://nosuchhost.invalid/whl/cpu"])
    assert found is not None and found[0] == "https://nosuchhost.invalid/whl/cpu"


def test_a_resolver_that_never_answers_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    stop = threading.Event()

    def hangs(host: str, port: int) -> None:
        stop.wait(5)

    monkeypatch.setattr(socket, "getaddrinfo", hangs)
    try:
        assert _reach.resolves("slow.invalid", 0.2) == "it does not resolve: no answer within 0.2 s"
    finally:
        stop.set()


def test_a_proxy_decides_so_its_host_is_not_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert _reach.first_unresolved(["https://nosuchhost.invalid/simple"]) is None


def test_a_records_override_is_offered_never_taken() -> None:
    """A replay without the override: the record built its environment from PyPI's simple index, and the hint
    says how to say so, with the command; the error is the caller's class, and carries the host."""
    known = _reach.Known(recorded="https://pypi.org/simple", again="kitbench replay r.json")
    error = _reach.unreachable(
        "https://download.pytorch.org/whl/cpu/torch/",
        "dns error",
        "cannot install the recorded versions",
        known,
        ReplayError,
    )
    assert isinstance(error, ReplayError) and error.host == "download.pytorch.org"
    assert error.message == "cannot install the recorded versions: cannot reach download.pytorch.org (dns error)"
    assert error.hint == (
        "the record's environment was built from https://pypi.org/simple (its index_override): "
        "`KITBENCH_INDEX_URL=https://pypi.org/simple kitbench replay r.json` installs from there, if you trust that "
        "index (kitbench never takes it by itself); or set KITBENCH_PYTORCH_INDEX to a mirror of PyTorch's index "
        "(its whl/ tree); or set KITBENCH_INDEX_URL to an index this machine reaches, or to default for your pip or "
        "uv configuration (a mirror, a proxy): `KITBENCH_INDEX_URL=default kitbench replay r.json`"
    )


def test_the_override_in_force_is_named_when_it_is_the_host_out_of_reach(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_reach.INDEX_VARIABLE, "https://user:token@mirror.invalid/simple")
    error = _reach.unreachable("mirror.invalid", "refused", "cannot install")
    assert isinstance(error, NetworkError)
    assert error.hint == (
        "KITBENCH_INDEX_URL=https://mirror.invalid/simple is in force and names it: check that "
        "index, or unset KITBENCH_INDEX_URL"
    )
    assert "token" not in error.message + str(error.hint)


@pytest.fixture
def closed_port() -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield int(probe.getsockname()[1])  # bound, never listening: a connection is refused


def test_an_index_read_on_a_closed_port_names_the_host_and_the_variable(
    closed_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kitbench import _http

    monkeypatch.setenv(_reach.PYTORCH_VARIABLE, f"http://127.0.0.1:{closed_port}/whl/")
    with pytest.raises(NetworkError) as caught:
        _http.get(f"http://127.0.0.1:{closed_port}/whl/torch/", "*/*", timeout=3)
    assert caught.value.message.startswith(f"cannot reach 127.0.0.1:{closed_port} (")
    assert caught.value.host == f"127.0.0.1:{closed_port}"
    assert caught.value.hint == (
        f"KITBENCH_PYTORCH_INDEX=http://127.0.0.1:{closed_port}/whl/ is in force and names "
        "it: check that mirror; install-cmd answers from the facts it has"
    )


def test_a_host_and_cause_from_a_programs_output_are_shown_escaped() -> None:
    said = "error: Failed to fetch: `https://evil\x1b]0;x\x07.invalid/simple/`\n  Caused by: dns error\x1b[2J\n"
    error = _reach.unreachable(_reach.host_in(said) or "", _reach.network_cause(said) or "", "cannot install")
    assert "\x1b" not in error.message and "\\x1b" in error.message and error.host is not None
    assert "\x1b" not in error.host


def test_a_record_built_under_the_users_configuration_offers_yours() -> None:
    hint = _reach.fixes("download.pytorch.org", _reach.Known(recorded="default", again="kitbench replay r.json"))[0]
    assert hint == (
        "the record's environment was built under its machine's pip or uv configuration (its "
        "index_override: default): `KITBENCH_INDEX_URL=default kitbench replay r.json` installs from "
        "yours (kitbench never takes it by itself)"
    )
