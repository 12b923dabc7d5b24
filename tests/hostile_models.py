"""One corpus of hostile models: each does something a helper that runs a user's model must survive.

Why one corpus: every labkit helper that runs a model (profiling, the cross-check, fusion, forward-mode
AD, the capstone's variants, the memory-format conversions) promises the same two things: it computes
what ``model(*args)`` computes, and it changes nothing of the user's. ``tests/test_side_effects.py``
runs each helper on each model here. A model joins by being added to :data:`HOSTILE_MODELS`.

Every model takes a ``(2, 4)`` float input, is small (one or two ``Linear`` layers, a ``BatchNorm1d``
where fusion has something to fold) and is built seeded, so the matrix stays fast and repeatable.
"""
from __future__ import annotations

import logging
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

INPUT_SHAPE = (2, 4)


def example_input() -> torch.Tensor:
    return torch.randn(*INPUT_SHAPE, generator=torch.Generator().manual_seed(0))


class LinearBN(nn.Module):
    """The plain case: Linear + BatchNorm1d, which every fusion folds."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.fc1(x)))


class ClampsWeights(LinearBN):
    """Clamps its own weights in place in forward, as a WGAN critic does: a helper must write a copy's."""

    def __init__(self) -> None:
        super().__init__()
        nn.init.uniform_(self.fc1.weight, -0.25, 0.25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for parameter in self.parameters():  # real tensors even while fx traces: the clamp runs for real
            parameter.data.clamp_(-0.05, 0.05)
        return super().forward(x)


class Reseeds(LinearBN):
    """Reseeds torch, Python's random and NumPy in forward: the caller's random streams must not move."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.manual_seed(123)
        random.seed(123)
        np.random.seed(123)
        return super().forward(x)


class Dropping(nn.Module):
    """Linear + Dropout, left in train mode: every call draws a mask from torch's generator."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc1(x))


class OptionalMask(LinearBN):
    """``forward(x, mask=None)``: a None argument must reach every helper as it reaches the model."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        y = super().forward(x)
        if mask is not None:
            y = y * mask
        return y


class VarKeywords(LinearBN):
    """``forward(x, **kwargs)``, reading an option from kwargs, as many Hugging Face models do."""

    def forward(self, x: torch.Tensor, **kwargs: float) -> torch.Tensor:  # type: ignore[override]
        return super().forward(x) * kwargs.get("scale", 1.0)


class Counting(LinearBN):
    """Counts its calls in a buffer and an attribute, and its BatchNorm is left in train mode."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.n_calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.n_calls += 1
        return super().forward(x)


class InPlaceInput(LinearBN):
    """Changes its input in place (``x.add_(1)``)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return super().forward(x)


class Hooked(LinearBN):
    """A forward hook on a child that changes its output, and a pre-hook on the model itself."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1.register_forward_hook(_double_output)
        self.register_forward_pre_hook(_identity_pre_hook)


def _double_output(module: nn.Module, args: object, output: torch.Tensor) -> torch.Tensor:
    return output * 2


def _identity_pre_hook(module: nn.Module, args: object) -> None:
    return None


#: The logger the hostile model adds a handler to (made here, before any helper runs: a logger torch or a library
#: creates during a call is theirs to configure).
HOSTILE_LOGGER = logging.getLogger("tests.hostile_models")


class ChangesWarningsAndLogging(LinearBN):
    """Installs a warning filter and a logging handler in forward: the caller's filters must stay as they were."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        warnings.filterwarnings("ignore", message="hostile model's own filter")
        HOSTILE_LOGGER.addHandler(logging.NullHandler())
        logging.getLogger().setLevel(logging.ERROR)
        return super().forward(x)


class Branching(nn.Module):
    """``torch.cond`` with a submodule in each branch."""

    def __init__(self) -> None:
        super().__init__()
        self.positive = nn.Linear(4, 4)
        self.negative = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda t: self.positive(t).relu(), lambda t: self.negative(t), (x,))


class ScriptedChild(nn.Module):
    """An eager model with a TorchScript submodule."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = _scripted(nn.Linear(4, 4))
        self.fc2 = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _scripted(module: nn.Module) -> nn.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script is deprecated: the model still exists
        return torch.jit.script(module)


def _scripted_model() -> nn.Module:
    return _scripted(LinearBN().eval())


def _lazy() -> nn.Module:
    return nn.Sequential(nn.LazyLinear(4), nn.ReLU())


def _data_parallel() -> nn.Module:
    return nn.DataParallel(LinearBN().eval())


def _counting() -> nn.Module:
    model = Counting().eval()
    model.bn.train()
    return model


@dataclass(frozen=True)
class HostileModel:
    """A model of the corpus: how to build it (seeded), and the keyword inputs it is called with."""

    name: str
    build: Callable[[], nn.Module]
    kwargs: dict[str, object] | None = None

    def make(self) -> nn.Module:
        torch.manual_seed(0)
        return self.build()


HOSTILE_MODELS = (
    HostileModel("plain", lambda: LinearBN().eval()),
    HostileModel("clamps-weights", lambda: ClampsWeights().eval()),
    HostileModel("reseeds", lambda: Reseeds().eval()),
    HostileModel("dropout-train", Dropping),
    HostileModel("mask-none", lambda: OptionalMask().eval()),
    HostileModel("var-kwargs", lambda: VarKeywords().eval(), {"scale": 2.0}),
    HostileModel("var-kwargs-unused", lambda: VarKeywords().eval()),
    HostileModel("counting-bn-train", _counting),
    HostileModel("in-place-input", lambda: InPlaceInput().eval()),
    HostileModel("hooked", lambda: Hooked().eval()),
    HostileModel("warnings-logging", lambda: ChangesWarningsAndLogging().eval()),
    HostileModel("lazy", _lazy),
    HostileModel("torchscript", _scripted_model),
    HostileModel("scripted-child", lambda: ScriptedChild().eval()),
    HostileModel("torch-cond", lambda: Branching().eval()),
    HostileModel("data-parallel", _data_parallel),
)
