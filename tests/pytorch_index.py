"""A package index on 127.0.0.1 shaped like PyTorch's, and a PyPI stand-in beside it.

PyTorch's index (``https://download.pytorch.org/whl/<compute>``) serves the torch
family and some of the dependencies of its wheels, copied from PyPI at the versions
PyTorch chose to copy, often old ones, and nothing else: ``rich`` or ``pyyaml`` are
not there at all, ``numpy`` is there at one old version. An installer that takes
everything from it fails, one that takes the first index having a name (uv's
first-index strategy) fails on the pins PyTorch's copies lack, and only one that
scopes it to the torch family gets the pinned set. This server has the same shape:
PEP 691 JSON and PEP 503 HTML simple pages for the names ``serves`` admits, 404 for
the rest; ``partial()`` serves the mirrored names (``MIRRORED``) at their one old
version, as the real pages do, and one of those pages lists a file of another
project, as the real index's pages sometimes do (``ODD``).

Pages come from folders of recorded PEP 691 pages (``tests/resources/indexes/``,
trimmed to the pinned versions, and ``tests/resources/indexes/mirrored/``, the old
ones: a test resolves the same set tomorrow) or, live, from an upstream JSON simple
index (``nox -s lock`` where PyTorch's index is out of reach). File URLs stay the
upstream's (files.pythonhosted.org): the stand-in serves PyPI's wheels of the torch
family under PyTorch's layout (on Linux and Windows those are CUDA builds: see
``kitbench.environments.locks`` for why a lock resolved here is never committed).

``python tests/pytorch_index.py record`` rewrites the recorded pages from PyPI (the
pinned versions of every name recorded, and ``MIRRORED``'s old ones);
``python tests/pytorch_index.py serve`` serves the partial index (CI's stand-in for
download.pytorch.org, ``KITBENCH_PYTORCH_INDEX``).
"""

from __future__ import annotations

import html
import json
import re
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "resources" / "indexes"
MIRRORED_PAGES = RECORDED / "mirrored"
PYPI_JSON = "https://pypi.org/simple"
_JSON = "application/vnd.pypi.simple.v1+json"
# What PyTorch's index lists beside its own builds (https://download.pytorch.org/whl/cpu/ and its siblings):
# the torch family, and the dependencies of its wheels it mirrors from PyPI.
FAMILY = frozenset(
    {
        "torch",
        "torchvision",
        "torchaudio",
        "torchdata",
        "torchtext",
        "triton",
        "pytorch-triton",
        "pytorch-triton-rocm",
        "pytorch-triton-xpu",
        "numpy",
        "sympy",
        "mpmath",
        "networkx",
        "jinja2",
        "markupsafe",
        "filelock",
        "fsspec",
        "typing-extensions",
        "pillow",
        "setuptools",
        "cuda-bindings",
        "cuda-pathfinder",
        "cuda-toolkit",
        "mkl",
        "tbb",
        "tcmlib",
        "umf",
        "intel-openmp",
        "dpcpp-cpp-rt",
        "onemkl-sycl-blas",
    }
)
FAMILY_PREFIXES = ("nvidia-", "intel-", "onemkl-", "impi-")
# The names it mirrors, each at one version older than kitbench's locks pin (PyTorch copies a version when
# its wheels need one and seldom moves it): what a first-index resolution would wrongly take from there.
MIRRORED = {
    "numpy": "2.1.2",
    "typing-extensions": "4.12.2",
    "jinja2": "3.1.4",
    "filelock": "3.13.1",
    "fsspec": "2024.6.1",
    "sympy": "1.13.3",
    "networkx": "3.3",
    "pillow": "11.0.0",
    "markupsafe": "2.1.5",
    "mpmath": "1.2.1",
    "setuptools": "70.2.0",
}
# A page that lists a file of another project (name -> the project whose file it lists): installers must
# skip a file whose name is not the page's project.
ODD = {"jinja2": "markupsafe"}


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def in_family(name: str) -> bool:
    name = normalize(name)
    return name in FAMILY or name.startswith(FAMILY_PREFIXES)


def everything(name: str) -> bool:
    return True


Pages = Callable[[str], dict[str, Any] | None]


def recorded(folder: Path = RECORDED) -> Pages:
    """Pages from ``folder/<name>.json`` (PEP 691)."""

    def page(name: str) -> dict[str, Any] | None:
        path = folder / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    return page


def live(upstream: str = PYPI_JSON) -> Pages:
    """Pages read from an upstream PEP 691 index when asked (cached for the server's life)."""
    cache: dict[str, dict[str, Any] | None] = {}

    def page(name: str) -> dict[str, Any] | None:
        if name not in cache:
            request = urllib.request.Request(f"{upstream}/{name}/", headers={"Accept": _JSON})
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    cache[name] = json.load(response)
            except OSError:
                cache[name] = None
        return cache[name]

    return page


def partial(family: Pages | None = None, mirrored: Pages | None = None) -> Pages:
    """PyTorch's index as partial as the real one: ``family``'s pages (default: the recorded ones) for the
    torch family, ``mirrored``'s (default: the recorded old versions) for the names in ``MIRRORED``."""
    family = family or recorded()
    mirrored = mirrored or recorded(MIRRORED_PAGES)

    def page(name: str) -> dict[str, Any] | None:
        return mirrored(name) if name in MIRRORED else family(name)

    return page


def _html(page: dict[str, Any]) -> bytes:
    links = []
    for f in page["files"]:
        digest = "".join(f"#{k}={v}" for k, v in list(f.get("hashes", {}).items())[:1])
        python = f' data-requires-python="{html.escape(f["requires-python"])}"' if f.get("requires-python") else ""
        links.append(f'<a href="{html.escape(f["url"] + digest)}"{python}>{html.escape(f["filename"])}</a><br/>')
    return ("<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n").encode()


Files = Callable[[str], bytes | None]


def _send_file(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    """A file whole, or the one byte range asked for (``bytes=0-99``, ``bytes=-22``) as a 206, as PyPI's CDN does."""
    asked = re.fullmatch(r"bytes=([0-9]*)-([0-9]*)", handler.headers.get("Range") or "")
    if asked and asked.group(1) + asked.group(2):
        first, last = asked.groups()
        start = max(len(body) - int(last), 0) if not first else int(first)
        end = min(int(last), len(body) - 1) if first and last else len(body) - 1
        handler.send_response(206)
        handler.send_header("Content-Range", f"bytes {start}-{end}/{len(body)}")
        body = body[start : end + 1]
    else:
        handler.send_response(200)
    handler.send_header("Content-Type", "application/octet-stream")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@contextmanager
def serving(pages: Pages, serves: Callable[[str], bool] = in_family, files: Files | None = None) -> Iterator[str]:
    """An index at ``http://127.0.0.1:<port>/simple`` (port 0: the system's choice), for the ``with``; it
    answers under ``/whl/<compute>/`` as well, as PyTorch's does, and ``files``' under ``/files/<name>`` (a
    page's ``"url": "/files/<name>"``), byte ranges included, where given."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if files is not None and self.path.startswith("/files/"):
                body = files(self.path.removeprefix("/files/"))
                if body is None:
                    self.send_error(404)
                else:
                    _send_file(self, body)
                return
            # /simple/<name>/, or PyTorch's /whl/<compute>/<name>/: every compute has the same pages here.
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if len(parts) < 2 or not serves(parts[-1]):
                self.send_error(404)
                return
            name = normalize(parts[-1])
            if name != parts[-1]:  # PEP 503: the normalized name is the page
                self.send_response(301)
                self.send_header("Location", "/" + "/".join([*parts[:-1], name]) + "/")
                self.end_headers()
                return
            page = pages(name)
            if page is None:
                self.send_error(404)
                return
            wants_json = _JSON in (self.headers.get("Accept") or "")
            body = json.dumps(page).encode() if wants_json else _html(page)
            self.send_response(200)
            self.send_header("Content-Type", _JSON if wants_json else "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def record(wanted: dict[str, set[str]], folder: Path = RECORDED, upstream: str = PYPI_JSON) -> list[Path]:
    """Write ``folder/<name>.json``: upstream's page for each name, its files trimmed to the wanted versions."""
    from packaging.utils import parse_sdist_filename, parse_wheel_filename

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    fetch = live(upstream)
    for name, versions in sorted(wanted.items()):
        page = fetch(name)
        if page is None:
            raise SystemExit(f"ERROR: {upstream} has no page for {name}")
        files = []
        for f in page["files"]:
            filename = f["filename"]
            try:
                version = str(
                    parse_wheel_filename(filename)[1]
                    if filename.endswith(".whl")
                    else parse_sdist_filename(filename)[1]
                )
            except ValueError:
                continue
            if version in versions:
                files.append(f)
        trimmed = {"meta": {"api-version": "1.1"}, "name": name, "versions": sorted(versions), "files": files}
        path = folder / f"{name}.json"
        path.write_text(json.dumps(trimmed, indent=0, sort_keys=True) + "\n")
        written.append(path)
    return written


def record_mirrored(folder: Path = MIRRORED_PAGES, upstream: str = PYPI_JSON) -> list[Path]:
    """Write ``folder/<name>.json`` for each of ``MIRRORED`` at its one version, and ``ODD``'s stray file."""
    written = record({name: {version} for name, version in MIRRORED.items()}, folder, upstream)
    for name, other in ODD.items():
        path = folder / f"{name}.json"
        page = json.loads(path.read_text())
        stray = json.loads((folder / f"{other}.json").read_text())["files"]
        page["files"].append(
            next(f for f in stray if f["filename"].endswith("-py3-none-any.whl"))
            if any(f["filename"].endswith("-py3-none-any.whl") for f in stray)
            else stray[0]
        )
        path.write_text(json.dumps(page, indent=0, sort_keys=True) + "\n")
    return written


def _locked() -> dict[str, set[str]]:
    """Every (name, version) the recorded pages and the committed locks name."""
    import tomllib

    wanted: dict[str, set[str]] = {}
    for path in sorted(RECORDED.glob("*.json")):
        wanted[path.stem] = set(json.loads(path.read_text())["versions"])
    for path in sorted((Path(__file__).resolve().parent.parent / "envs" / "locks").glob("pylock.*.toml")):
        for package in tomllib.loads(path.read_text()).get("packages", []):
            wanted.setdefault(normalize(package["name"]), set()).add(package["version"].partition("+")[0])
    return wanted


def _serve() -> None:
    """Serve the recorded pages until stopped, the base URL of PyTorch's layout on stdout's first line
    (``http://127.0.0.1:<port>/whl``: give it to ``KITBENCH_PYTORCH_INDEX``)."""
    import signal

    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # before the server's thread starts: it inherits the mask
    with serving(partial()) as url:
        print(url.removesuffix("/simple") + "/whl", flush=True)
        signal.sigwait(stop)


if __name__ == "__main__":
    if sys.argv[1:] == ["record"]:
        for written in [*record(_locked()), *record_mirrored()]:
            print(written)
    elif sys.argv[1:] == ["serve"]:
        _serve()
    else:
        raise SystemExit("usage: python tests/pytorch_index.py record|serve")
