"""Checker for the capstone challenge: make a small model at least 1.3x faster, same outputs.

Why the checker times the whole path itself: a speedup claimed by the learner
is not evidence, and work done outside the timed region (converting the input
to channels_last once, or computing the output once and returning it again) is
not a speedup. ``make_faster(model)`` returns one callable that takes the
plain NCHW input; the checker times it against its own untouched copy of the
original, interleaved in one process (labkit.core.timing.compare) so machine noise
hits both alike, feeds every call a fresh random batch, and checks every
output of the timed calls against the original's on the same batch. It also
checks the learner did not change the model it was given.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from labkit.capstone.variants import challenge_input, challenge_model
from labkit.core.checks import CheckFailed, CheckResult, LearnerError, call_learner, expect, run_check
from labkit.core.errors import LabkitValueError
from labkit.core.timing import SideBySide, compare

REQUIRED_SPEEDUP = 1.3
RTOL = 1e-3
WARMUP = 2


def _expect_matches(got: object, expected: torch.Tensor, where: str) -> None:
    """Fail with a hint unless ``got`` is the original's output ``expected`` up to fp32 rounding."""
    if not isinstance(got, torch.Tensor):  # an if, not expect(): it tells the type checker ``got`` is a tensor below
        raise CheckFailed(f"{where} your callable returned a {type(got).__name__}; return the model's output tensor.")
    expect(
        got.shape == expected.shape,
        f"{where} the output shape {tuple(got.shape)} differs from the original's {tuple(expected.shape)}.",
    )
    expect(
        got.layout == torch.strided and got.device == expected.device and got.is_floating_point(),
        f"{where} the output is not an ordinary floating-point {expected.device.type} tensor like the original's.",
    )
    got = got.detach().float()
    scale = float(expected.abs().max())
    expect(
        torch.allclose(got, expected, rtol=RTOL, atol=RTOL * scale),
        f"{where} the outputs differ from the original (max abs difference {float((got - expected).abs().max()):.3g}). "
        "Compute from the input every time: a stored result does not count.",
    )


def _expect_original_unchanged(model: nn.Module, x: torch.Tensor, expected: torch.Tensor) -> None:
    message = "The original model changed: work on a copy (e.g. fuse(model, inplace=False))."
    try:
        with torch.inference_mode():
            got = call_learner(model, x)
    except LearnerError:
        raise CheckFailed(message) from None
    expect(isinstance(got, torch.Tensor) and torch.equal(got, expected), message)


def check_make_faster(
    make_faster: Callable[[nn.Module], Callable[[torch.Tensor], torch.Tensor]], *, rounds: int = 10
) -> CheckResult:
    """Exercise 4.1: ``make_faster(model) -> faster``, where ``faster(x)`` equals ``model(x)`` for a plain NCHW ``x``.

    ``rounds`` (timed calls of each version) is the caller's choice, not the
    learner's answer, so a bad value raises :class:`LabkitValueError`.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise LabkitValueError(
            f"rounds must be a positive integer, e.g. check_make_faster(make_faster, rounds=10); got {rounds!r}."
        )

    def check() -> str:
        original, given, x = challenge_model(), challenge_model(), challenge_input()
        with torch.inference_mode():
            expected = original(x)
        faster = call_learner(make_faster, given)
        expect(
            not isinstance(faster, tuple),
            "Return one callable that takes the plain NCHW input batch, not a pair: converting the input is part of "
            "the work that is timed.",
        )
        expect(
            callable(faster),
            "make_faster must return a callable (a model or a function) that takes the input batch, "
            f"not a {type(faster).__name__}.",
        )
        _expect_original_unchanged(given, x, expected)
        with torch.inference_mode():
            _expect_matches(call_learner(faster, x.clone()), expected, "On the challenge input")
            # Fresh batches, from a generator of the checker's own: nothing can be cached or prepared.
            generator = torch.Generator()
            generator.seed()
            fresh = torch.randn(x.shape, generator=generator)
            _expect_matches(call_learner(faster, fresh.clone()), original(fresh), "On a fresh input batch")
            batches = [torch.randn(x.shape, generator=generator) for _ in range(WARMUP + rounds)]
            original_in, yours_in = iter(batches), iter([b.clone() for b in batches])
            original_out: list[torch.Tensor] = []
            yours_out: list[object] = []
            stats = compare(
                {
                    "original": lambda: original_out.append(original(next(original_in))),
                    "yours": lambda: yours_out.append(call_learner(faster, next(yours_in))),
                },
                rounds=rounds,
                warmup=WARMUP,
            )
            for call, (got, reference) in enumerate(zip(yours_out, original_out, strict=True), start=1):
                _expect_matches(got, reference, f"On fresh input batch {call} of {len(batches)},")
        _expect_original_unchanged(given, x, expected)
        speedup = SideBySide(stats, "original").speedup("yours")
        expect(
            speedup >= REQUIRED_SPEEDUP,
            f"Outputs match, but your version is {speedup:.2f}x the original's speed; at least {REQUIRED_SPEEDUP}x is needed. "
            "Hint: look at MaxPool2d in the profile.",
        )
        return (
            f"Outputs match on fresh inputs, and your version is at least {REQUIRED_SPEEDUP}x faster than the original, "
            "input conversion included."
        )

    return run_check("4.1", check, make_faster)
