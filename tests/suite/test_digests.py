"""digests.parameters: equal digests only for bitwise-equal parameters, and which tensor differs."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from kitbench.suite import digests, models  # noqa: E402


def _fnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return models.build("fnn")


def test_same_weights_same_digest_one_ulp_names_its_tensor() -> None:
    a, b = _fnn(), _fnn()
    assert digests.parameters(a) == digests.parameters(b)
    with torch.no_grad():
        weight = dict(b.named_parameters())["5.weight"]
        weight[0, 0] = torch.nextafter(weight[0, 0], torch.tensor(1.0))
    da, db = digests.parameters(a), digests.parameters(b)
    assert da.sha256 != db.sha256
    assert [n for n in da.tensors if da.tensors[n] != db.tensors[n]] == ["5.weight"]
    assert all(len(d) == digests.TENSOR_DIGITS for d in da.tensors.values())


def test_shape_and_dtype_are_part_of_the_digest() -> None:
    flat, square = torch.nn.Module(), torch.nn.Module()
    flat.w = torch.nn.Parameter(torch.zeros(4))
    square.w = torch.nn.Parameter(torch.zeros(2, 2))
    assert digests.parameters(flat).sha256 != digests.parameters(square).sha256
    half = torch.nn.Module()
    half.w = torch.nn.Parameter(torch.zeros(4, dtype=torch.bfloat16))  # numpy has no bfloat16: still hashed
    assert digests.parameters(half).sha256 != digests.parameters(flat).sha256
