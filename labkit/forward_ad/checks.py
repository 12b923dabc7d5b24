"""Checkers for the exercises of notebook 03 (forward-mode AD).

Each checker takes the learner's function or class and returns a
:class:`labkit.core.checks.CheckResult`; it never raises. The reference answers
come from ``torch.func`` (not from the solution files), in float64 and at
tolerances tight enough that finite differences cannot pass for a JVP.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import cast

import torch
from torch import nn
from torch.autograd.gradcheck import GradcheckError

from labkit.core.checks import (
    CheckFailed,
    CheckResult,
    LearnerError,
    call_learner,
    expect,
    expect_instance,
    learner_case,
    run_check,
)
from labkit.core.notebook import seeded

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
                f"Push the tangent v through f with one JVP: torch.func.jvp(f, (x,), (v,))."
            ))
            expect(error < 1e-10, (
                f"For {name} your answer is off by {error:.1e}, close but not exact. Use one JVP "
                f"(torch.func.jvp(f, (x,), (v,))), which is exact; finite differences are only accurate to about 1e-7."
            ))
        return f"Your JVP matches torch.func.jvp on {len(DIRECTIONAL_CASES)} functions to 1e-10."

    return run_check("3.1", check, directional_derivative)


# (in, out): clearly wide or clearly tall Jacobians, where the rule of thumb is safe.
MODE_CASES = [(64, 2), (32, 4), (4, 32), (2, 64)]


def _tanh_layer(in_features: int, out_features: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """f: R^in -> R^out, a float64 tanh(Linear) with fixed random weights."""
    generator = torch.Generator().manual_seed(in_features * 1000 + out_features)
    weight = torch.randn(out_features, in_features, dtype=torch.float64, generator=generator)
    return lambda x: torch.tanh(weight @ x)


def _wrong_mode_hint(mode: str, in_features: int, out_features: int) -> str:
    return (
        f"For f: R^{in_features} -> R^{out_features} you chose {mode}. Count the passes: jacfwd needs one per input "
        f"dimension ({in_features}), jacrev one per output dimension ({out_features}); read both sizes from x and f(x)."
    )


def check_cheaper_jacobian(jacobian_the_cheaper_way: Callable[..., object]) -> CheckResult:
    """Exercise 3.2: ``jacobian_the_cheaper_way(f, x)`` returns (the mode with fewer passes, the Jacobian of f at x)."""

    def check() -> str:
        for in_features, out_features in MODE_CASES:
            f = _tanh_layer(in_features, out_features)
            x = torch.randn(in_features, dtype=torch.float64, generator=torch.Generator().manual_seed(in_features))
            answer = call_learner(jacobian_the_cheaper_way, f, x)
            expect(isinstance(answer, tuple) and len(answer) == 2, "Return a pair: (the mode's name, the Jacobian).")
            mode: object = answer[0]  # type: ignore[index]
            jacobian: object = answer[1]  # type: ignore[index]
            expect(isinstance(mode, str) and mode in ("jacfwd", "jacrev"),
                   f"Return the string 'jacfwd' or 'jacrev' first, not {mode!r}.")
            expected_mode = "jacfwd" if out_features > in_features else "jacrev"
            expect(mode == expected_mode, _wrong_mode_hint(str(mode), in_features, out_features))
            reference = torch.func.jacrev(f)(x)
            expect(
                isinstance(jacobian, torch.Tensor) and jacobian.shape == reference.shape,
                f"For f: R^{in_features} -> R^{out_features} the Jacobian has shape {tuple(reference.shape)} (out, in); "
                f"you returned {tuple(jacobian.shape) if isinstance(jacobian, torch.Tensor) else type(jacobian).__name__}.",
            )
            _expect_close(jacobian, reference, (
                "Your Jacobian's values are off. Compute it with the mode you chose: torch.func.jacfwd(f)(x) or "
                "torch.func.jacrev(f)(x)."
            ))
        return f"You chose the mode with fewer passes and computed the exact Jacobian on {len(MODE_CASES)} shapes."

    return run_check("3.2", check, jacobian_the_cheaper_way)


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

    return run_check("3.3", check, sin_function, "jvp")


def _scaling_cases() -> list[tuple[str, nn.Module]]:
    """(what it is, model) in float64: a smooth MLP, a bias-free ReLU MLP (its answer is depth * output) and
    an MLP with an eval BatchNorm, whose running statistics are buffers: they cannot carry a tangent."""
    with seeded(0):
        tanh_mlp = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))
        relu_mlp = nn.Sequential(nn.Linear(4, 8, bias=False), nn.ReLU(), nn.Linear(8, 8, bias=False), nn.ReLU(),
                                 nn.Linear(8, 3, bias=False))
        with_bn = nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Tanh(), nn.Linear(6, 2))
        with torch.no_grad():
            cast(torch.Tensor, with_bn[1].running_mean).uniform_(-1, 1)
            cast(torch.Tensor, with_bn[1].running_var).uniform_(0.5, 2)
    return [("a Tanh MLP", tanh_mlp.double()), ("a ReLU MLP without biases", relu_mlp.double()),
            ("an MLP with an eval-mode BatchNorm1d", with_bn.double().eval())]


def _scaled_jvp(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """The reference, by the dual API's parameter swap (not the functional_call the learner writes)."""
    from labkit.forward_ad.derivatives import module_jvp

    return module_jvp(model, (x,), {name: p.detach() for name, p in model.named_parameters()}, method="swap")[1]


@contextmanager
def _counting_calls(model: nn.Module) -> Iterator[list[int]]:
    """Count the forward passes of the checker's own ``model``: one JVP is one pass, a finite difference two."""
    calls = [0]
    handle = model.register_forward_pre_hook(lambda module, args: calls.__setitem__(0, calls[0] + 1))
    try:
        yield calls
    finally:
        handle.remove()


def check_weight_scaling_derivative(weight_scaling_derivative: Callable) -> CheckResult:
    """Exercise 3.4: d/dt model(x; (1 + t) * params) at t = 0, by a JVP in parameter space."""

    def check() -> str:
        x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        for label, model in _scaling_cases():
            before = {name: t.clone() for name, t in model.state_dict().items()}
            parameters, modes = list(model.parameters()), [m.training for m in model.modules()]
            expected = _scaled_jvp(model, x)
            with learner_case(label), _counting_calls(model) as calls:
                got = call_learner(weight_scaling_derivative, model, x.clone())
            state = model.state_dict()
            unchanged = list(model.parameters()) == parameters and [m.training for m in model.modules()] == modes
            expect(unchanged and all(torch.equal(before[k], state[k]) for k in before),
                   f"For {label}, your code changed the model; torch.func.functional_call runs it with other tensors "
                   f"and leaves it as it is.")
            expect(not isinstance(got, tuple), f"For {label} you returned a tuple; return the derivative only (torch.func.jvp "
                                               f"gives (output, derivative)).")
            expect(calls[0] == 1, f"For {label} your code ran the model {calls[0]} times; one JVP runs it once, carrying "
                                  "the derivative along with the output (finite differences need two passes, and are not "
                                  f"exact).")
            tensor = _expect_comparable(got, expected, f"For {label}, the result")
            expect(tensor.shape == expected.shape, f"For {label} the result has shape {tuple(tensor.shape)}; the derivative "
                                                   f"is shaped like model(x), {tuple(expected.shape)}.")
            tensor = tensor.detach().to(expected.dtype)
            if torch.allclose(tensor, expected, rtol=1e-9, atol=1e-12):
                continue
            with torch.no_grad():
                output = model(x)
            if torch.allclose(tensor, output):
                hint = " That is model(x) itself: return the tangent part of the JVP, not the output."
            elif not torch.any(tensor):
                hint = " It is all zeros: the tangents never reached the parameters (an nn.Parameter drops a tangent)."
            else:
                hint = " The direction is the parameters themselves: the tangent of each parameter p is p."
            raise CheckFailed(f"For {label}, your derivative differs from the JVP along the parameters.{hint}")
        return ("on 3 models (one with a BatchNorm), your derivative equals the JVP along the parameters to 1e-9, "
                "and the models are unchanged.")

    return run_check("3.4", check, weight_scaling_derivative)
