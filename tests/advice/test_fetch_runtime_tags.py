"""envs/scripts/fetch_runtime_tags.py against a PEP 691 index on 127.0.0.1 (tests/pytorch_index.py) as awkward as
PyPI and its mirrors: core metadata announced and served, announced and missing, not announced at all (the wheel's
own METADATA then read by byte ranges), under the older ``dist-info-metadata`` key; a torch wheel uploaded again
with a build number; yanked files; another project's file on torch's page; a pre-release; names in Requires-Dist
that are not normalized; a dependency that requires torch back; a runtime package with no wheel for one arch."""

from __future__ import annotations

import hashlib
import io
import random
import runpy
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytorch_index import everything, serving

from kitbench import _http
from kitbench.records import manifest

SCRIPT = Path(__file__).resolve().parents[2] / "envs" / "scripts" / "fetch_runtime_tags.py"
LINUX = 'platform_system == "Linux"'
TORCH_REQUIRES = [
    "filelock",
    'mkl; platform_system == "Windows"',
    'optree>=0.13.0; extra == "optree"',
    f"cuda-toolkit[cublas]==13.2.2; {LINUX}",
    f"NVIDIA_cudnn_cu13==9.26.0.51; {LINUX}",
    f'triton~=3.9.0; {LINUX} and python_version < "3.16"',
    f'cuda-bindings<14,>=13.0.3; {LINUX} and python_version < "3.13"',
]
BUILDS = """builds:
  - torch: "2.11.0"
    compute: cu130
    arch: x86_64
    pythons: "cp312"
    glibc: "2.28"
    needs: "2.28"
    requires:
      - {requirement: "triton==3.6.0", glibc: "2.27"}
    source: "a real install"
"""


def _metadata(name: str, version: str, requires: list[str]) -> bytes:
    return "".join(
        [f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\n", *(f"Requires-Dist: {r}\n" for r in requires)]
    ).encode()


def _wheel(name: str, version: str, requires: list[str]) -> bytes:
    """A wheel whose METADATA comes first and 300 kB of its library after: the end of the file, read first,
    does not hold it. A vendored package's METADATA deeper inside is not the wheel's."""
    buffer = io.BytesIO()
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr(f"{dist}/METADATA", _metadata(name, version, requires))
        wheel.writestr(f"{name}/_C.so", random.Random(0).randbytes(300_000), compress_type=zipfile.ZIP_STORED)
        wheel.writestr(f"{name}/_vendor/other-1.0.dist-info/METADATA", _metadata("other", "1.0", ["nvidia-x==1"]))
        wheel.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\n")
    return buffer.getvalue()


class Stand:
    """The stand-in index's pages and files: each file with its Requires-Dist, how its metadata is served."""

    def __init__(self) -> None:
        self.pages: dict[str, list[dict[str, Any]]] = {}
        self.files: dict[str, bytes] = {}
        self.ranges: list[str] = []  # the byte range of each read of a wheel ("whole": none)
        self.url = ""

    def add(
        self,
        page: str,
        filename: str,
        requires: list[str] | None = None,
        *,
        metadata: str = "served",
        yanked: bool = False,
        requires_python: str = "",
    ) -> None:
        """metadata: served (announced, served), missing (announced, 404), unannounced, legacy (the
        dist-info-metadata key)."""
        entry: dict[str, Any] = {
            "filename": filename,
            "url": f"/files/{filename}",
            "yanked": yanked,
            "hashes": {"sha256": hashlib.sha256(filename.encode()).hexdigest()},
        }
        if requires_python:
            entry["requires-python"] = requires_python
        if metadata in ("served", "missing"):
            entry["core-metadata"] = {"sha256": "0" * 64}
        if metadata == "legacy":
            entry["dist-info-metadata"] = True
        self.pages.setdefault(page, []).append(entry)
        if filename.endswith(".whl"):
            name, version = filename.split("-")[:2]
            self.files[filename] = _wheel(name, version, requires or [])
            if metadata in ("served", "legacy"):
                self.files[filename + ".metadata"] = _metadata(name, version, requires or [])

    def page(self, name: str) -> dict[str, Any] | None:
        files = self.pages.get(name)
        return None if files is None else {"meta": {"api-version": "1.1"}, "name": name, "files": files}


def _stand() -> Stand:
    stand = Stand()
    torch = stand.add
    x86, arm = "manylinux_2_28_x86_64", "manylinux_2_28_aarch64"
    torch("torch", f"torch-2.15.0-cp312-cp312-{x86}.whl", TORCH_REQUIRES)
    torch("torch", f"torch-2.15.0-cp313-cp313-{x86}.whl", TORCH_REQUIRES, metadata="missing")
    # Uploaded again with a build number (2.10.0's -3- wheels): pip takes the higher; the first one's metadata
    # would pull in a package that the real one does not.
    torch("torch", f"torch-2.15.0-cp312-cp312-{arm}.whl", [f"nvidia-bogus==1; {LINUX}"], metadata="unannounced")
    torch("torch", f"torch-2.15.0-1-cp312-cp312-{arm}.whl", TORCH_REQUIRES, metadata="unannounced")
    torch("torch", f"torch-2.15.0-cp311-cp311-{x86}.whl", TORCH_REQUIRES, yanked=True)
    torch("torch", "torch-2.15.0-cp312-cp312-macosx_14_0_arm64.whl", [])
    torch("torch", "torch-2.15.0-cp312-cp312-win_amd64.whl", [])
    torch("torch", "torch-2.15.0.tar.gz")
    torch("torch", "triton-3.9.0-cp312-cp312-manylinux_2_27_x86_64.whl", [])  # another project's file
    tri = "manylinux_2_27_{0}.manylinux_2_28_{0}"
    for python in ("cp312", "cp313"):
        stand.add(
            "triton",
            f"triton-3.9.0-{python}-{python}-{tri.format('x86_64')}.whl",
            ["torch", 'importlib-metadata; python_version < "3.10"', 'cmake>=3.20; extra == "build"'],
            requires_python=">=3.10,<3.16",
        )
    stand.add("triton", f"triton-3.9.0-cp312-cp312-{tri.format('aarch64')}.whl", ["torch"])
    stand.add("triton", "triton-3.9.1-cp313-cp313-manylinux_2_17_x86_64.whl", [], yanked=True)
    stand.add("triton", "triton-3.9.2rc1-cp313-cp313-manylinux_2_17_x86_64.whl", [])
    stand.add("triton", "triton-3.10.0-cp313-cp313-manylinux_2_17_x86_64.whl", [])
    stand.add("triton", "triton-3.9.0-cp311-cp311-manylinux_2_17_x86_64.whl", [], requires_python=">=3.11,<3.12")
    stand.add(
        "cuda-toolkit",
        "cuda_toolkit-13.2.2-py2.py3-none-any.whl",
        ['nvidia-cublas==13.3.0.5.*; extra == "cublas"', 'nvidia-cufft==12.1.*; extra == "cufft"'],
    )
    for arch in ("x86_64", "aarch64"):
        stand.add(
            "nvidia-cublas",
            f"nvidia_cublas-13.3.0.5-py3-none-manylinux_2_27_{arch}.whl",
            ["cuda-pathfinder~=1.1"],
            metadata="legacy",
        )
    stand.add("cuda-pathfinder", "cuda_pathfinder-1.3.0-py3-none-any.whl", [])
    # No aarch64 wheel; and on x86_64 newer than torch's own floor.
    stand.add("nvidia-cudnn-cu13", "nvidia_cudnn_cu13-9.26.0.51-py3-none-manylinux_2_34_x86_64.whl", [])
    stand.add(
        "cuda-bindings",
        "cuda_bindings-13.3.1-cp312-cp312-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
        ["cuda-pathfinder~=1.1"],
    )
    stand.add("cuda-bindings", "cuda_bindings-13.0.3-cp312-cp312-manylinux_2_17_x86_64.whl", [])
    stand.add("cuda-bindings", "cuda_bindings-13.3.1-cp312-cp312-manylinux_2_24_aarch64.whl", [])
    stand.add("cuda-bindings", "cuda_bindings-14.0.0-cp312-cp312-manylinux_2_17_aarch64.whl", [])
    return stand


@pytest.fixture
def stand(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stand]:
    stand = _stand()
    read = _http.get

    def spied(url: str, accept: str, *args: Any, byte_range: str | None = None, **kwargs: Any) -> _http.Response:
        if url.endswith(".whl"):
            stand.ranges.append(byte_range or "whole")
        return read(url, accept, *args, byte_range=byte_range, **kwargs)

    monkeypatch.setattr(_http, "get", spied)
    with serving(stand.page, everything, stand.files.get) as url:
        monkeypatch.setenv("PIP_INDEX_URL", url)
        stand.url = url
        yield stand


def _main() -> Callable[..., int]:
    run: Callable[..., int] = runpy.run_path(str(SCRIPT))["main"]
    return run


def _refused(capsys: pytest.CaptureFixture[str], *args: Any, **kwargs: Any) -> str:
    """The script as `python envs/scripts/fetch_runtime_tags.py` runs it, refusing: its one ERROR line."""
    module = runpy.run_path(str(SCRIPT))
    with pytest.raises(SystemExit) as done:
        module["_shared"].run(lambda: module["main"](*args, **kwargs))
    err = capsys.readouterr().err
    assert done.value.code == 1 and "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("ERROR: ") and lines[1].startswith("hint: "), err
    return lines[0]


def test_each_linux_wheel_s_runtime_packages_and_their_floors_are_written(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runtime_tags.yaml"
    out.write_text("releases: []\n" + BUILDS)
    assert _main()(["2.15.0"], out) == 0
    text = out.read_text()
    data = manifest.load(out, "runtime_tags").data
    assert data["builds"] == yaml.safe_load(BUILDS)["builds"]  # the rows recorded from real installs, kept
    assert data["kind"] == "published" and data["source"].startswith(stand.url)
    rows = {(r["arch"], r["pythons"]): r for r in data["releases"]}
    # No cp311 row (its only wheel is yanked); build 1 of the aarch64 wheel, not the first upload.
    assert set(rows) == {("aarch64", "cp312"), ("x86_64", "cp312"), ("x86_64", "cp313")}

    def requires(arch: str, python: str) -> dict[str, tuple[str, str]]:
        return {r["requirement"]: (r.get("via", ""), r["glibc"]) for r in rows[arch, python]["requires"]}

    assert requires("x86_64", "cp312") == {
        "cuda-toolkit[cublas]==13.2.2": ("", "any"),
        "nvidia-cudnn-cu13==9.26.0.51": ("", "2.34"),
        "triton~=3.9.0": ("", "2.27"),
        "cuda-bindings<14,>=13.0.3": ("", "2.17"),
        "nvidia-cublas==13.3.0.5.*": ("cuda-toolkit", "2.27"),
    }
    # Python 3.13: no cuda-bindings (its marker); triton's yanked 3.9.1 (2.17) is no candidate for ~=3.9.0,
    # nor is the pre-release 3.9.2rc1.
    assert requires("x86_64", "cp313") == {
        k: v for k, v in requires("x86_64", "cp312").items() if not k.startswith("cuda-bindings")
    }
    assert requires("aarch64", "cp312")["nvidia-cudnn-cu13==9.26.0.51"] == ("", "no wheel")
    assert requires("aarch64", "cp312")["cuda-bindings<14,>=13.0.3"] == ("", "2.24")
    assert (rows["x86_64", "cp312"]["glibc"], rows["x86_64", "cp312"]["needs"]) == ("2.28", "2.34")
    assert rows["aarch64", "cp312"]["needs"] == "2.28"
    assert "nvidia-bogus" not in text and "nvidia-x" not in text and "cuda-pathfinder" not in text
    assert "#   x86_64, torch 2.15.0: 2.28 -> 2.34, by nvidia-cudnn-cu13\n" in text
    # Wheels without metadata served are read by parts, never whole.
    assert stand.ranges and "whole" not in stand.ranges
    assert f"wrote {out} (1 releases, 3 rows" in capsys.readouterr().out


def test_a_release_pypi_has_no_linux_wheel_of_writes_nothing(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runtime_tags.yaml"
    assert _refused(capsys, ["2.15.0", "2.99.0"], out).startswith("ERROR: torch 2.99.0: no Linux wheel on")
    assert not out.exists()


def test_a_wheel_whose_server_sends_no_parts_writes_nothing(
    stand: Stand, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    read = _http.get
    monkeypatch.setattr(_http, "get", lambda url, accept, **kw: read(url, accept))  # the Range header dropped
    assert "announces no core metadata and its server sends no parts of it (answered 200" in _refused(
        capsys, ["2.15.0"], tmp_path / "runtime_tags.yaml"
    )


def test_the_baked_table_covers_every_baked_release_on_both_arches() -> None:
    from kitbench.advice import releases

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "envs" / "runtime_tags.yaml").read_text())
    covered = {(r["torch"], r["arch"]) for r in data["releases"]}
    assert covered == {
        (rel.version, arch) for rel in releases.newest_first(derived=False) for arch in ("x86_64", "aarch64")
    }
    assert {(b["torch"], b["compute"], b["arch"]) for b in data["builds"]} == {("2.11.0", "cu130", "x86_64")}


# --- a hostile index: every odd answer is one ERROR line, nothing written ------------------------------------------

ARM_WHEEL = "torch-2.15.0-1-cp312-cp312-manylinux_2_28_aarch64.whl"  # read by byte ranges: no metadata announced
METADATA = "torch-2.15.0.dist-info/METADATA"


def _patched(
    wheel: bytes,
    member: str,
    *,
    flag: int = 0,
    method: int | None = None,
    size: int | None = None,
    name: bytes | None = None,
) -> bytes:
    """``wheel`` with ``member``'s local and central headers changed: flag bits set, compression method, declared
    size (uncompressed), name (the central directory's, the same length)."""
    data = bytearray(wheel)
    # Each header: its signature, where its flags are (method after them, sizes 12 on), its name's length, its name.
    for signature, fields, at_length, at_name in ((b"PK\x03\x04", 6, 26, 30), (b"PK\x01\x02", 8, 28, 46)):
        start = data.find(signature)
        while start != -1:
            length = int.from_bytes(data[start + at_length : start + at_length + 2], "little")
            if bytes(data[start + at_name : start + at_name + length]) == member.encode():
                flags = int.from_bytes(data[start + fields : start + fields + 2], "little") | flag
                data[start + fields : start + fields + 2] = flags.to_bytes(2, "little")
                if method is not None:
                    data[start + fields + 2 : start + fields + 4] = method.to_bytes(2, "little")
                if size is not None:
                    data[start + fields + 16 : start + fields + 20] = size.to_bytes(4, "little")
                if name is not None and signature == b"PK\x01\x02":
                    data[start + at_name : start + at_name + length] = name
            start = data.find(signature, start + 4)
    return bytes(data)


def _big_metadata_wheel(size: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as wheel:
        wheel.writestr(METADATA, _metadata("torch", "2.15.0", TORCH_REQUIRES) + b"X-Padding: " + b"0" * size + b"\n")
    return buffer.getvalue()


def _corrupt(wheel: bytes) -> bytes:
    """The METADATA member's deflate stream with bytes in its middle flipped."""
    start = wheel.find(b"PK\x03\x04")
    length, extra = (int.from_bytes(wheel[start + at : start + at + 2], "little") for at in (26, 28))
    compressed = int.from_bytes(wheel[start + 18 : start + 22], "little")
    middle = start + 30 + length + extra + compressed // 2
    return wheel[:middle] + bytes(b ^ 0xFF for b in wheel[middle : middle + 8]) + wheel[middle + 8 :]


@pytest.mark.parametrize(
    ("wheel", "said"),
    [
        (lambda w: _patched(w, METADATA, method=99), "its METADATA cannot be read"),
        (lambda w: _patched(w, METADATA, flag=0x1), "its METADATA cannot be read"),
        (_corrupt, "is not a zip file as served"),
        (lambda w: _patched(w, "torch/_C.so", flag=0x800, name=b"torch/\xff\xfe.so"), "is not a zip file as served"),
        (lambda w: b"not a zip" * 10, "is not a zip file as served"),
        (lambda w: w[-2000:], "is not a zip file as served"),
        (lambda w: _big_metadata_wheel(3 * 2**20), "its METADATA inflates to 3,1"),
        # Declared small, inflating to 3 MB: never more than the cap is inflated, and the CRC does not hold.
        (lambda w: _patched(_big_metadata_wheel(3 * 2**20), METADATA, size=1000), "is not a zip file as served"),
    ],
)
def test_a_wheel_that_is_no_zip_pip_would_read_writes_nothing(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str], wheel: Callable[[bytes], bytes], said: str
) -> None:
    stand.files[ARM_WHEEL] = wheel(stand.files[ARM_WHEEL])
    out = tmp_path / "runtime_tags.yaml"
    out.write_text("releases: []\n" + BUILDS)
    before = out.read_bytes()
    line = _refused(capsys, ["2.15.0"], out)
    assert line.startswith(f"ERROR: {ARM_WHEEL}") and said in line
    assert out.read_bytes() == before


@pytest.mark.parametrize(
    "content_range",
    [
        "bytes 0-1/" + "9" * 5000,  # the sweep's: more digits than int() takes
        "bytes 0-99/50",  # a part past the whole
        "bytes 5-4/100",
        "bytes */100",
        "bytes 0-9/100",  # ten bytes said, others sent
        "bytes 0-65535/400000",  # the length sent, but not the end asked for
        None,
    ],
)
def test_a_part_whose_content_range_does_not_say_what_was_sent_writes_nothing(
    stand: Stand,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content_range: str | None,
) -> None:
    import dataclasses

    read = _http.get

    def lying(url: str, accept: str, *args: Any, **kwargs: Any) -> _http.Response:
        answer = read(url, accept, *args, **kwargs)
        return dataclasses.replace(answer, content_range=content_range) if url.endswith(".whl") else answer

    monkeypatch.setattr(_http, "get", lying)
    line = _refused(capsys, ["2.15.0"], tmp_path / "runtime_tags.yaml")
    assert "a part whose Content-Range does not say what was sent" in line
    assert not (tmp_path / "runtime_tags.yaml").exists()


def test_metadata_that_is_no_core_metadata_writes_nothing(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runtime_tags.yaml"
    served = "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl.metadata"
    good = stand.files[served]
    for body, said in (
        (good + b"Requires-Dist: nvidia-x >=; platform_system == 'Linux'\n", "a Requires-Dist that does not parse"),
        (good + b"Summary: \xff\xfe\n", "is not UTF-8 text"),
        (
            good + b'Requires-Dist: nvidia-x; python_version ~= "3"\n',
            'a Requires-Dist whose marker cannot be decided (nvidia-x; python_version ~= "3"',
        ),
        (good + b"X: " + b"0" * 2**20 + b"\n", "core metadata is at most 1,048,576"),
    ):
        stand.files[served] = body
        assert said in _refused(capsys, ["2.15.0"], out)
        assert not out.exists()


def test_a_torch_wheel_tagged_for_no_cpython_minor_writes_nothing(
    stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The sweep's cp3: a tag packaging reads, naming no CPython the table can be about."""
    stand.add("torch", "torch-2.15.0-cp3-cp3-manylinux_2_28_x86_64.whl", TORCH_REQUIRES)
    line = _refused(capsys, ["2.15.0"], tmp_path / "runtime_tags.yaml")
    assert line.startswith(
        "ERROR: torch-2.15.0-cp3-cp3-manylinux_2_28_x86_64.whl: a Python tag (cp3) that names no CPython 3 minor"
    )


def test_every_read_shares_one_deadline(stand: Stand, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _refused(capsys, ["2.15.0"], tmp_path / "runtime_tags.yaml", deadline=0)
    assert line.startswith("ERROR: cannot reach 127.0.0.1:")
    assert "the time given to all of the reads had run out" in line


def test_the_index_s_token_is_not_written(
    stand: Stand, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", stand.url.replace("http://", "http://bot:s3cr3t@"))
    out = tmp_path / "runtime_tags.yaml"
    assert _main()(["2.15.0"], out) == 0
    assert "s3cr3t" not in out.read_text() + capsys.readouterr().out
    assert manifest.load(out, "runtime_tags").data["source"].startswith(stand.url + "/<project>/")
