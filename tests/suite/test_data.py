"""kitbench.suite.data: what a failed MNIST download says."""

from __future__ import annotations

import urllib.error
from pathlib import Path

import pytest

from kitbench.errors import DataError
from kitbench.suite import data


def test_a_failed_download_keeps_its_cause() -> None:
    # torchvision's MNIST.download message (0.29), both mirrors unreachable.
    message = ("Error downloading train-images-idx3-ubyte.gz:\n"
               "Tried https://ossci-datasets.s3.amazonaws.com/mnist/, got:\n"
               f"{urllib.error.URLError('[Errno -2] Name or service not known')}\n"
               "Tried http://yann.lecun.com/exdb/mnist/, got:\n"
               f"{urllib.error.URLError('[Errno -2] Name or service not known')}\n")
    assert data.download_cause(RuntimeError(message)) == (
        "Error downloading train-images-idx3-ubyte.gz: <urlopen error [Errno -2] Name or service not known>")
    assert data.download_cause(PermissionError(13, "Permission denied")) == "[Errno 13] Permission denied"
    assert data.download_cause(OSError()) == "OSError"


def test_a_huge_file_is_refused_before_it_is_hashed(tmp_path: Path) -> None:
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in data.expected_checksums():
        with (raw / name).open("wb") as handle:
            handle.truncate(1 << 40)        # sparse: a terabyte that would take an hour to hash
    with pytest.raises(DataError, match="is 1,099,511,627,776 bytes: no MNIST file is larger than 67,108,864"):
        data.verify(tmp_path)       # the size, not a digest mismatch: nothing was hashed


def test_before_a_build_a_missing_mnist_is_said_with_where_to_put_it(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The session says before installing that the run will download MNIST (an offline machine otherwise
    learns it minutes later), and nothing where the four raw files are."""
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    note = data.ahead()
    assert note == (f"MNIST is not in KITBENCH_DATA={tmp_path} (4 of 4 raw files missing): the run's MNIST check "
                    "will download it; on a machine that cannot, set KITBENCH_DATA to a folder holding MNIST/raw")
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in data.expected_checksums():
        (raw / name).write_bytes(b"")
    assert data.ahead() is None
