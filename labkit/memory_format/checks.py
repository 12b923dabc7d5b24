"""Checkers for the exercises of notebook 02 (memory formats).

Each checker runs the learner's function on its own inputs and compares with
torch itself: strides with ``torch.empty(..., memory_format=...)``, the
dropped operator with a model whose culprit is known by construction, the
Conv3d conversion with ``Tensor.is_contiguous(memory_format=...)`` and the
unconverted model's output. They never raise, and their messages hold no
timings, so the notebook's stored checker output is reproducible.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from labkit.core.checks import (
    CheckFailed,
    CheckResult,
    LearnerError,
    call_learner,
    expect,
    expect_instance,
    int_tuple,
    run_check,
)
from labkit.core.notebook import seeded

STRIDE_CASES = [
    ((10, 3, 32, 32), "contiguous_format"),
    ((10, 3, 32, 32), "channels_last"),
    ((2, 5, 7, 3), "channels_last"),
    ((4, 1, 4, 4), "channels_last"),
    ((2, 3, 1, 1), "channels_last"),
    ((2, 3, 4, 5, 6), "channels_last_3d"),
    ((2, 3, 4, 5, 6), "contiguous_format"),
]


def check_predict_strides(predict_strides: Callable[[tuple[int, ...], str], tuple[int, ...]]) -> CheckResult:
    """Exercise 2.1: ``predict_strides(shape, format_name)`` gives torch's strides for a new tensor."""

    def check() -> str:
        for shape, name in STRIDE_CASES:
            expected = torch.empty(shape, memory_format=getattr(torch, name)).stride()
            got = call_learner(predict_strides, shape, name)
            expect(
                int_tuple(got) is not None,
                f"For shape {shape} in {name} you predicted {got!r}; return a tuple of ints, one stride per dimension.",
            )
            expect(int_tuple(got) == expected, (
                f"For shape {shape} in {name} you predicted {got}, torch gives {expected}. "
                "Hint: list the dimensions from innermost to outermost; each stride is the product of the sizes inside it."
            ))
        return f"All {len(STRIDE_CASES)} stride tuples match torch, including size-1 and 5-D shapes."

    return run_check("2.1", check, predict_strides)


class _PlusFreshZeros(nn.Module):
    """Adds a freshly made (contiguous) zero tensor: the sum follows its channels_last first operand."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.zeros(x.shape)


class _ChannelSoftmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def _dropper_cases() -> list[tuple[str, nn.Module, str | None]]:
    with seeded(0):
        conv = lambda: nn.Conv2d(8, 8, 3, padding=1)  # noqa: E731
        return [
            ("layer norm model", nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.LayerNorm(8), conv()), "layer_norm"),
            ("softmax model",
             nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), _ChannelSoftmax(), conv()), "softmax"),
            ("clean model", nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), conv()), None),
            # A new NCHW tensor that no channels_last input produced is not a drop: a logger that looks only at
            # outputs would name torch.zeros here.
            ("model with a fresh NCHW offset", nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), _PlusFreshZeros(), conv()), None),
        ]


def check_find_format_dropper(find_format_dropper: Callable[[nn.Module, torch.Tensor], str | None]) -> CheckResult:
    """Exercise 2.2: ``find_format_dropper(model, x)`` names the first operator that loses channels_last."""

    def check() -> str:
        x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
        for label, model, expected in _dropper_cases():
            got = call_learner(find_format_dropper, model.eval(), x.clone())
            expect(
                got is None or isinstance(got, str),
                f"For the {label} you returned a {type(got).__name__}; return the operator's name as a string, or None.",
            )
            short = got.rsplit(".", 1)[-1] if isinstance(got, str) else got
            expect(short == expected, (
                f"For the {label} you answered {got!r}, but the first operator that drops channels_last is {expected!r}. "
                "Hint: convert the model and the input to channels_last; in __torch_function__, call func first, then "
                "compare the strides of its 4-D tensor inputs and its result (is_contiguous(memory_format=...))."
                if expected
                else f"For the {label} you answered {got!r}, but no operator drops channels_last there: return None."
            ))
        return ("You found layer_norm and softmax, saw that the clean model keeps channels_last throughout, and did not "
                "count a fresh NCHW tensor as a drop.")

    return run_check("2.2", check, find_format_dropper)


_CONV3D_LAYERS = ("stem3d", "conv2d", "norm", "head")


def _conv3d_model() -> nn.ModuleDict:
    with seeded(0):
        return nn.ModuleDict({
            "stem3d": nn.Conv3d(2, 4, 3, padding=1),
            "conv2d": nn.Conv2d(4, 4, 3, padding=1),
            "norm": nn.BatchNorm2d(4),
            "head": nn.Linear(4, 3),
        })


def _run(model: nn.ModuleDict, x: torch.Tensor) -> torch.Tensor:
    y = model["stem3d"](x).mean(dim=2)
    y = model["norm"](model["conv2d"](y))
    return model["head"](y.mean(dim=(2, 3)))


def check_convert_conv3d(convert: Callable[[nn.Module], nn.Module]) -> CheckResult:
    """Exercise 2.3: ``convert(model)`` converts a model with a Conv3d: 4-D weights to channels_last, 5-D to channels_last_3d."""

    def check() -> str:
        x = torch.randn(2, 2, 3, 6, 6, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            expected = _run(_conv3d_model().eval(), x)
        converted = call_learner(convert, _conv3d_model().eval())
        expect(isinstance(converted, nn.Module), f"convert must return the model, got {type(converted).__name__}.")
        same_model = "convert must return the model it was given (a ModuleDict with stem3d, conv2d, norm and head), converted."
        model = expect_instance(converted, nn.ModuleDict, same_model)
        expect(set(model) == set(_CONV3D_LAYERS), same_model)
        keep_layers = "Keep the model's layers: stem3d and conv2d must still be convolutions with a weight."
        w3 = expect_instance(getattr(model["stem3d"], "weight", None), torch.Tensor, keep_layers)
        w2 = expect_instance(getattr(model["conv2d"], "weight", None), torch.Tensor, keep_layers)
        expect(
            w3.is_contiguous(memory_format=torch.channels_last_3d) and not w3.is_contiguous(),
            "The Conv3d weight is not channels_last_3d. Hint: 5-D tensors take torch.channels_last_3d; "
            "torch.nn.utils.convert_conv3d_weight_memory_format converts every Conv3d weight.",
        )
        expect(
            w2.is_contiguous(memory_format=torch.channels_last) and not w2.is_contiguous(),
            "The Conv2d weight is not channels_last.",
        )
        expect(isinstance(w2, nn.Parameter), "Keep weights as nn.Parameter: assign to .data.")
        try:
            with torch.inference_mode():
                got = call_learner(_run, model, x.contiguous(memory_format=torch.channels_last_3d))
        except LearnerError as exc:
            raise CheckFailed(f"Running your converted model raised {exc}. Convert layouts, not shapes or values.") from None
        expect(
            isinstance(got, torch.Tensor) and got.shape == expected.shape and got.dtype == expected.dtype,
            "Your converted model no longer gives an output like the original's; convert layouts, not values.",
        )
        expect(torch.allclose(got, expected, atol=1e-5),
               "The converted model gives different outputs; convert layouts, not values.")
        return "Conv3d weight in channels_last_3d, Conv2d weight in channels_last, same outputs as before."

    return run_check("2.3", check, convert)
