"""Shared inputs of the forward-AD tests: seeded primal/tangent pairs, the functions every method must agree on."""
from __future__ import annotations

import torch
from torch import nn


def pair(*shape, dtype=torch.float64, seed=0):
    """A seeded (primal, tangent) pair of the same shape: every test gets the same numbers on every run."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype), torch.randn(shape, generator=generator, dtype=dtype)


def assert_same(a, b):
    """Two JVP results agree: tensors close, or tuples of the same length whose tensors are close."""
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    else:
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y)


FUNCTIONS = {
    "tensor -> tensor": (lambda x: torch.sin(x) * x**2, 1),
    "tuple -> tensor": (lambda x, y: x**2 + y**2, 2),
    "tuple -> tuple": (lambda x, y: (x * y, (x - y).exp().sum()), 2),
    "softmax": (lambda x: torch.softmax(x, dim=-1), 1),
}


def small_model():
    """A seeded 3 -> 4 -> 2 tanh MLP: small enough for exact comparisons, with two layers of parameters."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
