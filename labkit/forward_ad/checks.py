"""Checkers for the exercises of notebook 03 (forward-mode AD).

Each checker takes the learner's function or class and returns a
:class:`labkit.core.checks.CheckResult`; it never raises. The reference answers
come from ``torch.func`` (not from the solution files), in float64 and at
tolerances tight enough that finite differences cannot pass for a JVP.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.gradcheck import GradcheckError

from labkit.core.checks import CheckFailed, CheckResult, LearnerError, call_learner, expect, expect_instance, run_check

# (name, function, input shape): the "given" function of exercise 3.1 comes first.
DIRECTIONAL_CASES: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], tuple[int, ...]]] = [
    ("f(x) = sum(sin(x) * x**2)", lambda x: (torch.sin(x) * x**2).sum(), (5,)),
    ("f(x) = tanh(A @ x)", lambda x: torch.tanh(torch.arange(12.0, dtype=x.dtype).reshape(3, 4) / 10 @ x), (4,)),
    ("f(X) = X @ X.T", lambda x: x @ x.T, (3, 2)),
]


def _float64_pair(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(shape, generator=generator, dtype=torch.float64),
        torch.randn(shape, generator=generator, dtype=torch.float64),
    )


def _expect_comparable(got: object, expected: torch.Tensor, what: str) -> torch.Tensor:
    """``got``, once it is a tensor that can be compared with ``expected``; else fail with a hint (no crash in the checker)."""
    hint = f"{what} is not an ordinary {expected.device.type} tensor ({type(got).__name__}); return a tensor like f(x)."
    tensor = expect_instance(got, torch.Tensor, hint)
    expect(tensor.layout == torch.strided and tensor.device == expected.device, hint)
    expect(tensor.dtype.is_floating_point, f"{what} has dtype {tensor.dtype}; return a floating-point tensor like f(x).")
    return tensor


def _expect_close(got: object, expected: torch.Tensor, hint: str, atol: float = 1e-8) -> None:
    """``torch.allclose`` that fails with ``hint`` for anything unlike ``expected``, instead of raising."""
    expect(isinstance(got, torch.Tensor) and got.shape == expected.shape, hint)
    tensor = _expect_comparable(got, expected, "The result")
    expect(torch.allclose(tensor.detach().to(expected.dtype), expected, atol=atol), hint)


def check_directional_derivative(directional_derivative: Callable) -> CheckResult:
    """Exercise 3.1: ``directional_derivative(f, x, v)`` equals the JVP of ``f`` at ``x`` along ``v``."""

    def check() -> str:
        for seed, (name, f, shape) in enumerate(DIRECTIONAL_CASES):
            x, v = _float64_pair(shape, seed)
            expected = torch.func.jvp(f, (x,), (v,))[1]
            got = call_learner(directional_derivative, f, x.clone(), v.clone())
            expect(isinstance(got, torch.Tensor), f"For {name} you returned a {type(got).__name__}; return a tensor.")
            expect(got.shape == expected.shape, (
                f"For {name} the result has shape {tuple(got.shape)}, but f(x) has shape {tuple(expected.shape)}: "
                f"a directional derivative is shaped like the output."
            ))
            _expect_comparable(got, expected, f"For {name} your result")
            error = float((got.detach() - expected).abs().max())
            expect(error < 1e-5, (
                f"For {name} your answer is off by {error:.1e}: it is not the derivative along v. "
                f"Push the tangent v through f with one JVP: labkit.forward_ad.jvp(f, x, v)."
            ))
            expect(error < 1e-10, (
                f"For {name} your answer is off by {error:.1e}, close but not exact. Use one JVP "
                f"(labkit.forward_ad.jvp(f, x, v)), which is exact; finite differences are only accurate to about 1e-7."
            ))
        return f"Your JVP matches torch.func.jvp on {len(DIRECTIONAL_CASES)} functions to 1e-10."

    return run_check("3.1", check)


# (in, out): clearly wide or clearly tall Jacobians, where the rule of thumb is safe.
MODE_CASES = [(1000, 1), (512, 8), (64, 32), (8, 512), (1, 1000), (32, 64)]


def check_predict_mode(predict_faster_mode: Callable[[int, int], str]) -> CheckResult:
    """Exercise 3.2: ``predict_faster_mode(in, out)`` returns the mode the pass counts favour."""

    def check() -> str:
        for in_features, out_features in MODE_CASES:
            got = call_learner(predict_faster_mode, in_features, out_features)
            expect(isinstance(got, str) and got in ("jacfwd", "jacrev"), f"Return the string 'jacfwd' or 'jacrev', not {got!r}.")
            expected = "jacfwd" if out_features > in_features else "jacrev"
            expect(got == expected, (
                f"For R^{in_features} -> R^{out_features} you predicted {got}. Count the passes: jacfwd needs "
                f"one per input dimension ({in_features}), jacrev one per output dimension ({out_features})."
            ))
        got = call_learner(predict_faster_mode, 16, 16)
        expect(
            isinstance(got, str) and got in ("jacfwd", "jacrev"),
            f"For a square Jacobian return either 'jacfwd' or 'jacrev', not {got!r}.",
        )
        return f"Your predictions follow the pass counts on {len(MODE_CASES)} shapes. Now measure them below."

    return run_check("3.2", check)


def check_custom_sin(sin_function: type[torch.autograd.Function]) -> CheckResult:
    """Exercise 3.3: a modern-style Function for sin with a correct ``jvp``, usable under torch.func."""

    def check() -> str:
        from labkit.forward_ad.custom_function import gradcheck_forward
        from labkit.forward_ad.derivatives import jvp

        expect(
            isinstance(sin_function, type) and issubclass(sin_function, torch.autograd.Function),
            "Pass the class itself (a subclass of torch.autograd.Function), e.g. check_custom_sin(Sin).",
        )
        x, v = _float64_pair((6,), seed=3)
        _expect_close(call_learner(sin_function.apply, x), torch.sin(x), "forward(x) does not return sin(x).")
        expected = torch.cos(x) * v
        dual = call_learner(jvp, sin_function.apply, x, v)[1]
        _expect_close(dual, expected, "Under the dual API, your jvp does not return cos(x) * x_tangent.", atol=1e-12)
        try:
            functional = call_learner(torch.func.jvp, sin_function.apply, (x,), (v,))[1]
        except LearnerError as exc:
            if isinstance(exc.original, RuntimeError) and "setup_context" in str(exc.original):
                raise CheckFailed(
                    "torch.func.jvp rejects your Function: write forward(x) without ctx and save tensors "
                    "in a separate setup_context(ctx, inputs, output) staticmethod."
                ) from None
            raise
        _expect_close(functional, expected, "Under torch.func.jvp, your jvp does not return cos(x) * x_tangent.", atol=1e-12)
        try:
            call_learner(gradcheck_forward, sin_function, x, include_backward=False)
        except LearnerError as exc:
            if isinstance(exc.original, GradcheckError):
                raise CheckFailed(f"gradcheck(check_forward_ad=True) failed: {str(exc.original).splitlines()[0]}") from None
            raise
        return "forward and jvp are right, gradcheck(check_forward_ad=True) passes, and torch.func.jvp accepts it."

    return run_check("3.3", check)
