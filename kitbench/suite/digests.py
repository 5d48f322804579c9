"""The SHA-256 of a model's parameters: equal digests are bitwise-equal parameters.

The digest covers, for each parameter in the order of its name, the name, dtype,
shape and raw bytes (native byte order, which every platform torch ships for is
little-endian), so two models agree only if each tensor agrees bit for bit. Each
tensor's own digest is kept too, shortened to 16 hex digits (64 bits: enough to
name the first tensor that differs, and compact in a record).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch
from torch import nn

TENSOR_DIGITS = 16


@dataclass(frozen=True)
class ParamDigest:
    sha256: str  # over every parameter
    tensors: dict[str, str]  # name -> the first TENSOR_DIGITS hex digits of that tensor's own SHA-256


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    # Viewed as bytes: numpy has no bfloat16, and the bits are what is compared.
    return flat.view(torch.uint8).numpy().tobytes()


def parameters(model: nn.Module) -> ParamDigest:
    whole = hashlib.sha256()
    tensors = {}
    for name, param in sorted(model.named_parameters(), key=lambda item: item[0]):
        header = f"{name}\0{str(param.dtype).removeprefix('torch.')}\0{tuple(param.shape)}\0".encode()
        data = _tensor_bytes(param)
        whole.update(header)
        whole.update(data)
        tensors[name] = hashlib.sha256(header + data).hexdigest()[:TENSOR_DIGITS]
    return ParamDigest(whole.hexdigest(), tensors)
