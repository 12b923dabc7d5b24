"""Checkers for the exercises of notebook 03 (forward-mode AD).

Each checker takes the learner's function or class and returns a
:class:`labkit.checks.CheckResult`; it never raises. The reference answers
come from ``torch.func`` (not from the solution files), in float64 and at
tolerances tight enough that finite differences cannot pass for a JVP.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch.autograd.gradcheck import GradcheckError

from labkit.checks import CheckResult, run_check

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


def check_directional_derivative(directional_derivative: Callable) -> CheckResult:
    """Exercise 3.1: ``directional_derivative(f, x, v)`` equals the JVP of ``f`` at ``x`` along ``v``."""

    def check() -> str:
        for seed, (name, f, shape) in enumerate(DIRECTIONAL_CASES):
            x, v = _float64_pair(shape, seed)
            expected = torch.func.jvp(f, (x,), (v,))[1]
            got = directional_derivative(f, x.clone(), v.clone())
            assert isinstance(got, torch.Tensor), f"For {name} you returned a {type(got).__name__}; return a tensor."
            assert got.shape == expected.shape, (
                f"For {name} the result has shape {tuple(got.shape)}, but f(x) has shape {tuple(expected.shape)}: "
                f"a directional derivative is shaped like the output."
            )
            error = float((got.detach() - expected).abs().max())
            assert error < 1e-5, (
                f"For {name} your answer is off by {error:.1e}: it is not the derivative along v. "
                f"Push the tangent v through f with one JVP: labkit.forward_ad.jvp(f, x, v)."
            )
            assert error < 1e-10, (
                f"For {name} your answer is off by {error:.1e}, close but not exact. Use one JVP "
                f"(labkit.forward_ad.jvp(f, x, v)), which is exact; finite differences are only accurate to about 1e-7."
            )
        return f"Your JVP matches torch.func.jvp on {len(DIRECTIONAL_CASES)} functions to 1e-10."

    return run_check("3.1", check)


# (in, out): clearly wide or clearly tall Jacobians, where the rule of thumb is safe.
MODE_CASES = [(1000, 1), (512, 8), (64, 32), (8, 512), (1, 1000), (32, 64)]


def check_predict_mode(predict_faster_mode: Callable[[int, int], str]) -> CheckResult:
    """Exercise 3.2: ``predict_faster_mode(in, out)`` returns the mode the pass counts favour."""

    def check() -> str:
        for in_features, out_features in MODE_CASES:
            got = predict_faster_mode(in_features, out_features)
            assert got in ("jacfwd", "jacrev"), f"Return the string 'jacfwd' or 'jacrev', not {got!r}."
            expected = "jacfwd" if out_features > in_features else "jacrev"
            assert got == expected, (
                f"For R^{in_features} -> R^{out_features} you predicted {got}. Count the passes: jacfwd needs "
                f"one per input dimension ({in_features}), jacrev one per output dimension ({out_features})."
            )
        got = predict_faster_mode(16, 16)
        assert got in ("jacfwd", "jacrev"), f"For a square Jacobian return either 'jacfwd' or 'jacrev', not {got!r}."
        return f"Your predictions follow the pass counts on {len(MODE_CASES)} shapes. Now measure them below."

    return run_check("3.2", check)


def check_custom_sin(sin_function: type[torch.autograd.Function]) -> CheckResult:
    """Exercise 3.3: a modern-style Function for sin with a correct ``jvp``, usable under torch.func."""

    def check() -> str:
        from labkit.custom_function_example import gradcheck_forward
        from labkit.forward_ad import jvp

        assert isinstance(sin_function, type) and issubclass(sin_function, torch.autograd.Function), (
            "Pass the class itself (a subclass of torch.autograd.Function), e.g. check_custom_sin(Sin)."
        )
        x, v = _float64_pair((6,), seed=3)
        assert torch.allclose(sin_function.apply(x), torch.sin(x)), "forward(x) does not return sin(x)."
        expected = torch.cos(x) * v
        dual = jvp(sin_function.apply, x, v)[1]
        assert torch.allclose(dual, expected, atol=1e-12), "Under the dual API, your jvp does not return cos(x) * x_tangent."
        try:
            functional = torch.func.jvp(sin_function.apply, (x,), (v,))[1]
        except RuntimeError as exc:
            if "setup_context" in str(exc):
                raise AssertionError(
                    "torch.func.jvp rejects your Function: write forward(x) without ctx and save tensors "
                    "in a separate setup_context(ctx, inputs, output) staticmethod."
                ) from None
            raise
        assert torch.allclose(functional, expected, atol=1e-12), "Under torch.func.jvp, your jvp does not return cos(x) * x_tangent."
        try:
            gradcheck_forward(sin_function, x, check_backward=False)
        except GradcheckError as exc:
            raise AssertionError(f"gradcheck(check_forward_ad=True) failed: {str(exc).splitlines()[0]}") from None
        return "forward and jvp are right, gradcheck(check_forward_ad=True) passes, and torch.func.jvp accepts it."

    return run_check("3.3", check)
