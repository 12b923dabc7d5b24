import torch
from torch import nn

import labkit


def profile_my_model() -> labkit.ProfileReport:
    """Exercise 1.1: profile a small model of your own.

    Build a small CNN (at least three layers, one of them an ``nn.Conv2d``),
    put it in eval mode, make a random input batch for it, and return
    ``labkit.profile_model(model, x, ...)`` with at least 3 timed runs.
    """
    model = nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    ).eval()
    x = torch.randn(4, 3, 32, 32)
    return labkit.profile_model(model, x, warmup=1, runs=3)
