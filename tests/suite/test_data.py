"""kitbench.suite.data: what a failed MNIST download says."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest

from kitbench.errors import DataError
from kitbench.suite import data


def test_a_failed_download_keeps_its_cause() -> None:
    # torchvision's MNIST.download message (0.29), both mirrors unreachable.
    message = (
        "Error downloading train-images-idx3-ubyte.gz:\n"
        "Tried https://ossci-datasets.s3.amazonaws.com/mnist/, got:\n"
        f"{urllib.error.URLError('[Errno -2] Name or service not known')}\n"
        "Tried http://yann.lecun.com/exdb/mnist/, got:\n"
        f"{urllib.error.URLError('[Errno -2] Name or service not known')}\n"
    )
    assert data.download_cause(RuntimeError(message)) == (
        "Error downloading train-images-idx3-ubyte.gz: <urlopen error [Errno -2] Name or service not known>"
    )
    assert data.download_cause(PermissionError(13, "Permission denied")) == "[Errno 13] Permission denied"
    assert data.download_cause(OSError()) == "OSError"


def test_a_huge_file_is_refused_before_it_is_hashed(tmp_path: Path) -> None:
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in data.expected_checksums():
        with (raw / name).open("wb") as handle:
            handle.truncate(1 << 40)  # sparse: a terabyte that would take an hour to hash
    with pytest.raises(DataError, match="is 1,099,511,627,776 bytes: no MNIST file is larger than 67,108,864"):
        data.verify(tmp_path)  # the size, not a digest mismatch: nothing was hashed


def test_before_a_build_a_missing_mnist_is_said_with_where_to_put_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session says before installing that the run will download MNIST (an offline machine otherwise
    learns it minutes later), and nothing where the four raw files are."""
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    note = data.ahead()
    assert note == (
        f"MNIST is not in KITBENCH_DATA={tmp_path} (4 of 4 raw files missing): the run's MNIST check "
        "will download it; on a machine that cannot, set KITBENCH_DATA to a folder holding MNIST/raw"
    )
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in data.expected_checksums():
        (raw / name).write_bytes(b"")
    assert data.ahead() is None


def test_a_download_no_mirror_answered_names_every_host_and_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchvision's own failure (both mirrors out of reach) is said by kitbench._reach: the hosts, the cause,
    and what gets past them; the error carries the hosts for the record (``failure.host``)."""
    import sys
    import types

    message = (
        "Error downloading train-images-idx3-ubyte.gz:\n"
        "Tried https://ossci-datasets.invalid/mnist/, got:\n"
        f"{urllib.error.URLError('[Errno -2] Name or service not known')}\n"
        "Tried http://yann.invalid/exdb/mnist/, got:\n"
        f"{urllib.error.URLError('[Errno -2] Name or service not known')}\n"
    )

    def mnist(root: str, train: bool, download: bool) -> None:
        raise RuntimeError(message)

    fake = types.ModuleType("torchvision.datasets")
    fake.MNIST = mnist  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torchvision.datasets", fake)
    with pytest.raises(DataError) as caught:
        data._download(tmp_path / "data")
    assert caught.value.message == (
        f"could not download MNIST into {tmp_path / 'data'}: cannot reach "
        "ossci-datasets.invalid and yann.invalid (<urlopen error [Errno -2] Name or "
        "service not known>)"
    )
    assert caught.value.host == "ossci-datasets.invalid and yann.invalid"
    assert caught.value.hint is not None and caught.value.hint.endswith(
        "copy MNIST/raw into a folder and point --data (or KITBENCH_DATA) at it"
    )
