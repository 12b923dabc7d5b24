"""Checker for the capstone challenge: make a small model at least 1.3x faster, same outputs.

Why the checker times both models itself: a speedup claimed by the learner is
not evidence. It measures the original and the learner's version interleaved in
one process (labkit.timing.compare), so machine noise hits both alike, and it
checks the learner did not change the original model in place.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from labkit.capstone import challenge_input, challenge_model
from labkit.checks import CheckResult, run_check
from labkit.timing import compare

REQUIRED_SPEEDUP = 1.3
RTOL = 1e-3


def check_make_faster(make_faster: Callable[[nn.Module, torch.Tensor], tuple[nn.Module, torch.Tensor]], *, rounds: int = 10) -> CheckResult:
    """Exercise 4.1: ``make_faster(model, x) -> (faster_model, faster_x)``."""

    def check() -> str:
        model, x = challenge_model(), challenge_input()
        with torch.inference_mode():
            expected = model(x)
        result = make_faster(model, x.clone())
        assert isinstance(result, tuple) and len(result) == 2, "make_faster must return a pair: (faster_model, input_for_it)."
        faster_model, faster_x = result
        with torch.inference_mode():
            assert torch.equal(model(x), expected), "The original model changed: work on a copy (e.g. fuse(model, inplace=False))."
            got = faster_model(faster_x)
            assert got.shape == expected.shape, f"Output shape {tuple(got.shape)} differs from the original's {tuple(expected.shape)}."
            scale = expected.abs().max().item()
            assert torch.allclose(got.float(), expected, rtol=RTOL, atol=RTOL * scale), (
                f"Outputs differ from the original (max abs difference {(got.float() - expected).abs().max().item():.3g})."
            )
            stats = compare({"original": lambda: model(x), "yours": lambda: faster_model(faster_x)}, rounds=rounds, warmup=2)
        speedup = stats["yours"].ratio_to(stats["original"])
        assert speedup >= REQUIRED_SPEEDUP, (
            f"Outputs match, but your version is {speedup:.2f}x the original's speed; at least {REQUIRED_SPEEDUP}x is needed. "
            "Hint: look at MaxPool2d in the profile."
        )
        return f"Outputs match, and your version is at least {REQUIRED_SPEEDUP}x faster than the original."

    return run_check("4.1", check)
