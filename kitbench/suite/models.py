"""The two models the suite trains, with their optimizers and FLOP counts."""

from __future__ import annotations

import itertools

import torch
from torch import nn

_FNN_WIDTHS = (784, 512, 256, 128, 64, 10)


# Each model's learning rate in the recipe it comes from (fnn: the tutorials' SGD; cnn: pytorch/examples).
RECIPE_LR = {"fnn": 0.01, "cnn": 1.0}


def build(name: str) -> nn.Module:
    if name == "fnn":
        # The fully-connected net of the common MNIST tutorials.
        layers: list[nn.Module] = [nn.Flatten()]
        for fan_in, fan_out in itertools.pairwise(_FNN_WIDTHS):
            layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]
        return nn.Sequential(*layers[:-1])
    if name == "cnn":
        # The architecture of pytorch/examples' mnist/main.py.
        return nn.Sequential(
            nn.Conv2d(1, 32, 3, 1),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3, 1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Dropout(0.25),
            nn.Flatten(),
            nn.Linear(9216, 128),
            nn.ReLU(),
            nn.Dropout(0.5),
            nn.Linear(128, 10),
        )
    raise ValueError(f"unknown model {name!r}")


def optimizer(name: str, params: list[nn.Parameter], lr: float | None = None) -> torch.optim.Optimizer:
    # Each model keeps the optimizer its reference recipe trains it with. The
    # fused SGD kernel (CPU, CUDA, MPS) does the same update as the per-tensor
    # loop but takes a third off a small model's step on a 2-core CPU.
    if name == "cnn":
        return torch.optim.Adadelta(params, lr=RECIPE_LR[name] if lr is None else lr)
    return torch.optim.SGD(params, lr=RECIPE_LR[name] if lr is None else lr, momentum=0.9, fused=True)
