"""Checkers for the exercises of notebook 03 (forward-mode AD).

Each checker takes the learner's function or class and returns a
:class:`labkit.core.checks.CheckResult`; it never raises. The reference answers
come from ``torch.func`` (not from the solution files), in float64 and at
tolerances tight enough that finite differences cannot pass for a JVP.

Why the checkers watch, not trust: a reverse-mode answer to 3.1 gives the right
number for a scalar ``f``, and a 3.2 answer can name one transform and run the
other. So the functions handed to the learner run their input through
:class:`_ModeProbe`, a custom Function whose ``jvp`` and ``backward`` record
which mode reached them; 3.3 wraps the learner's class to see its own ``jvp``
called; 3.4 gives the learner a copy of each model and compares it afterwards.
"""
from __future__ import annotations

import ast
import copy
import inspect
import textwrap
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast

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
    is_plain_tensor,
    learner_case,
    run_check,
    tensor_subclass_hint,
)
from labkit.core.context import bound
from labkit.core.notebook import seeded
from labkit.i18n.messages import _


def _float64_pair(shape: tuple[int, ...], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return (
        torch.randn(shape, generator=generator, dtype=torch.float64),
        torch.randn(shape, generator=generator, dtype=torch.float64),
    )


def _expect_comparable(got: object, expected: torch.Tensor, what: str) -> torch.Tensor:
    """``got``, once it is a tensor that can be compared with ``expected``; else fail with a hint (no crash in the checker)."""
    hint = _("{what} is not an ordinary {type} tensor ({type2}); return a tensor like f(x).").format(
               what=what, type=expected.device.type, type2=type(got).__name__)
    tensor = expect_instance(got, torch.Tensor, hint, mistake="not-a-tensor")
    expect(is_plain_tensor(tensor), tensor_subclass_hint(what, tensor), mistake="tensor-subclass")
    expect(tensor.layout == torch.strided and tensor.device == expected.device, hint, mistake="not-a-tensor")
    expect(tensor.dtype.is_floating_point, _("{what} has dtype {dtype}; return a floating-point tensor "
                                             "like f(x).").format(what=what, dtype=tensor.dtype),
           mistake="not-floating-point")
    return tensor


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Equal to rounding in float64: far tighter than any finite difference."""
    return got.shape == expected.shape and torch.allclose(got.detach().to(expected.dtype), expected, rtol=1e-9, atol=1e-12)


def _expect_close(got: object, expected: torch.Tensor, hint: str, mistake: str, atol: float = 1e-8) -> None:
    """``torch.allclose`` that fails with ``hint`` (and ``mistake``) for anything unlike ``expected``, instead of raising."""
    expect(isinstance(got, torch.Tensor) and got.shape == expected.shape, hint, mistake)
    tensor = _expect_comparable(got, expected, "The result")
    expect(torch.allclose(tensor.detach().to(expected.dtype), expected, atol=atol), hint, mistake)


# --- Watching which mode of AD ran (exercises 3.1 and 3.2) -----------------------------------------------------


@dataclass
class _ModesSeen:
    """What reached the checker's function while the learner's code ran."""

    calls: int = 0  # calls of f itself, with or without a tangent
    jvps: int = 0  # forward-mode passes through f
    backwards: int = 0  # reverse-mode passes through f
    batched_jvps: int = 0  # forward-mode passes under vmap: jacfwd builds a whole Jacobian
    batched_backwards: int = 0  # reverse-mode passes under vmap (jacrev)

    @property
    def mode(self) -> str | None:
        """'forward', 'reverse', 'both', or None when no derivative pass went through f."""
        if self.jvps and self.backwards:
            return "both"
        return "forward" if self.jvps else "reverse" if self.backwards else None


_seen: ContextVar[_ModesSeen | None] = ContextVar("labkit_fwad_modes_seen", default=None)


def _under_vmap() -> bool:
    """Whether a torch.func.vmap is running (jacfwd and jacrev batch their passes with it)."""
    functorch = torch._C._functorch
    stack = getattr(functorch, "get_interpreter_stack", lambda: None)()
    vmap = getattr(getattr(functorch, "TransformType", None), "Vmap", None)
    return vmap is not None and any(interpreter.key() == vmap for interpreter in stack or ())


class _ModeProbe(torch.autograd.Function):
    """The identity, with both derivative rules: each records that its mode of AD went through it.

    ``generate_vmap_rule`` lets jacfwd and jacrev batch it; the records go to the
    :class:`_ModesSeen` of the check that is running (none outside a check).
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
        pass

    @staticmethod
    def jvp(ctx: Any, x_tangent: torch.Tensor) -> torch.Tensor:
        seen = _seen.get()
        if seen is not None:
            seen.jvps += 1
            seen.batched_jvps += _under_vmap()
        return x_tangent.clone()

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> torch.Tensor:
        seen = _seen.get()
        if seen is not None:
            seen.backwards += 1
            seen.batched_backwards += _under_vmap()
        return grad_output.clone()


def _watched(function: Callable[[torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``function`` with its input run through :class:`_ModeProbe`: the same values, the modes recorded."""

    def f(x: torch.Tensor) -> torch.Tensor:
        seen = _seen.get()
        if seen is not None:
            seen.calls += 1
        return function(cast(torch.Tensor, _ModeProbe.apply(x)))

    return f


def _watching() -> AbstractContextManager[_ModesSeen]:
    return bound(_seen, _ModesSeen())


# --- Exercise 3.1 ----------------------------------------------------------------------------------------------

# (name, function, input shape): the "given" function of exercise 3.1 comes first; it is a scalar, where a
# reverse-mode answer gives the right number, so the mode is watched, not inferred from the value.
DIRECTIONAL_CASES: list[tuple[str, Callable[[torch.Tensor], torch.Tensor], tuple[int, ...]]] = [
    ("f(x) = sum(sin(x) * x**2)", lambda x: (torch.sin(x) * x**2).sum(), (5,)),
    ("f(x) = tanh(A @ x)", lambda x: torch.tanh(torch.arange(12.0, dtype=x.dtype).reshape(3, 4) / 10 @ x), (4,)),
    ("f(X) = X @ X.T", lambda x: x @ x.T, (3, 2)),
]


def _returns_a_value(function: Callable[..., object]) -> bool | None:
    """Whether ``function``'s own body has a ``return`` with a value (nested functions left out); None when its
    source cannot be read. Tells "forgot to return" from "returned something that was None"."""
    if getattr(function, "__name__", "") == "<lambda>":
        return True
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    pending: list[ast.AST] = list(definition.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def _none_failure(name: str, seen: _ModesSeen, returns: bool | None) -> CheckFailed:
    if returns is False:
        return CheckFailed(_("For {name} your function returned None: it has no `return` with a value. "
                             "Return the derivative.").format(name=name), mistake="no-return")
    if seen.jvps:
        return CheckFailed(
            _("For {name} you returned None, though your code did push v through f as a tangent: the "
              "tangent was read after the `with fwAD.dual_level():` block closed, so it was gone (a "
              "tangent lives only inside its level, and unpack_dual then gives None). Unpack the result "
              "inside the block.").format(name=name),
            mistake="tangent-read-after-level",
        )
    return CheckFailed(_("For {name} you returned None; return the derivative, a tensor shaped like f(x).").format(name=name),
                       mistake="returned-none")


def _expect_a_derivative_tensor(got: object, expected: torch.Tensor, name: str, seen: _ModesSeen,
                                learner: Callable[..., object]) -> torch.Tensor:
    """``got`` as a tensor shaped like f(x); else a hint that names what came back instead."""
    if got is None:
        raise _none_failure(name, seen, _returns_a_value(learner))
    expect(not isinstance(got, tuple), (
        _("For {name} you returned a tuple of {value}; return the derivative alone, a tensor "
          "(torch.func.jvp gives the pair (f(x), derivative)).").format(
            name=name, value=len(got) if isinstance(got, tuple) else 0)
    ), mistake="returned-pair")
    expect(isinstance(got, torch.Tensor), _("For {name} you returned a {type}; return a tensor.").format(
                                              name=name, type=type(got).__name__),
           mistake="not-a-tensor")
    tensor = cast(torch.Tensor, got)
    expect(tensor.shape == expected.shape, (
        _("For {name} the result has shape {shape}, but f(x) has shape {shape2}: a directional derivative "
          "is shaped like the output.").format(name=name, shape=tuple(tensor.shape), shape2=tuple(expected.shape))
    ), mistake="wrong-shape")
    return _expect_comparable(tensor, expected, _("For {name} your result").format(name=name))


def _expect_forward_mode(name: str, seen: _ModesSeen, x: torch.Tensor, error: float) -> None:
    """The answer ran f once with v as a forward-mode tangent, not reverse mode, finite differences or a Jacobian."""
    expect(not (seen.backwards and seen.jvps), (
        _("For {name} your code ran f's backward pass as well as a forward-mode pass: reverse mode is not "
          "needed here. One forward pass with v as the tangent gives the directional derivative by itself.").format(name=name)
    ), mistake="forward-and-reverse")
    if seen.backwards:
        raise CheckFailed(
            _("For {name}, this is reverse mode: your code ran f's backward pass (as torch.autograd.grad, "
              ".backward(), torch.func.vjp and jacrev do, and torch.autograd.functional.jvp by the "
              "double-backward trick), and no tangent went forward through f. The exercise asks for "
              "forward mode: push v through f as a tangent, in one forward pass.").format(name=name),
            mistake="reverse-mode",
        )
    if not seen.jvps and seen.calls >= 2:
        raise CheckFailed(
            _("For {name} your answer is off by {error:.1e}: your code evaluated f {calls} times without a "
              "tangent, which is finite differences, an approximation whose error depends on the step. "
              "Forward mode carries v through f as a tangent, in one pass, and is exact up to rounding.").format(
                name=name, error=error, calls=seen.calls),
            mistake="finite-differences",
        )
    expect(seen.jvps, (
        _("For {name} your code never pushed a tangent through f (f ran {calls} time(s), always without "
          "one). Compute the derivative in forward mode: run f once, with v as the tangent of x.").format(
            name=name, calls=seen.calls)
    ), mistake="no-tangent")
    expect(not seen.batched_jvps, (
        _("For {name} your code built the whole Jacobian in forward mode (jacfwd: one pass per entry of x, "
          "{value} here) and then contracted it with v. A directional derivative is one JVP: a single "
          "forward pass with v as the tangent, no Jacobian.").format(name=name, value=x.numel())
    ), mistake="whole-jacobian")


def _wrong_derivative(name: str, got: torch.Tensor, f: Callable[[torch.Tensor], torch.Tensor],
                      x: torch.Tensor, v: torch.Tensor) -> CheckFailed:
    """Name what a wrong forward-mode value is, when it is a common slip."""
    if _close(got, f(x)):
        return CheckFailed(_("For {name} your answer is f(x) itself, the primal: return the tangent part "
                             "of the result, not the value.").format(name=name), mistake="returned-primal")
    if x.shape == v.shape and _close(got, torch.func.jvp(f, (v,), (x,))[1]):
        return CheckFailed(_("For {name} your answer is the derivative at v along x: the point and the "
                             "direction are swapped. The primal (the point x) comes first, the tangent "
                             "(the direction v) second.").format(name=name),
                           mistake="point-and-direction-swapped")
    if _close(got, torch.func.jvp(f, (x,), (torch.ones_like(x),))[1]):
        return CheckFailed(_("For {name} your answer is the derivative along a vector of ones, not along "
                             "v: the tangent must be v.").format(name=name), mistake="tangent-of-ones")
    return CheckFailed(_("For {name} your answer is not the derivative along v: check which tensor you "
                         "gave as the tangent.").format(name=name), mistake="wrong-tangent")


def _call_with_tangent(directional_derivative: Callable, name: str, f: Callable, x: torch.Tensor,
                       v: torch.Tensor) -> object:
    """The learner's answer on copies of x and v; torch's refusal of a tangent of another shape than x, named."""
    try:
        return call_learner(directional_derivative, _watched(f), x.clone(), v.clone())
    except LearnerError as exc:
        expect("forward gradient that has a different size" not in str(exc.original), (
            _("For {name}, torch refused the tangent: it is not shaped like x, {shape} (v[None] or a "
              "reshape adds a dimension). A tangent has exactly its primal's shape: give v as it is.").format(
                name=name, shape=tuple(x.shape))
        ), mistake="tangent-shape")
        raise


def check_directional_derivative(directional_derivative: Callable) -> CheckResult:
    """Exercise 3.1: ``directional_derivative(f, x, v)`` equals the JVP of ``f`` at ``x`` along ``v``, taken in
    forward mode (watched through the checker's ``f``: reverse mode gives the same number for a scalar ``f``)."""

    def check() -> str:
        for seed, (name, f, shape) in enumerate(DIRECTIONAL_CASES):
            x, v = _float64_pair(shape, seed)
            with _watching() as seen:
                got = _call_with_tangent(directional_derivative, name, f, x, v)
            expected = torch.func.jvp(f, (x,), (v,))[1]  # only now: while the answer ran there was none to find
            tensor = _expect_a_derivative_tensor(got, expected, name, seen, directional_derivative)
            error = float((tensor.detach().to(expected.dtype) - expected).abs().max())
            _expect_forward_mode(name, seen, x, error)
            if not _close(tensor, expected):
                raise _wrong_derivative(name, tensor.detach().to(expected.dtype), f, x, v)
        return _("Your forward-mode JVP matches torch.func.jvp on {cases} functions to "
                 "1e-9.").format(cases=len(DIRECTIONAL_CASES))

    return run_check("3.1", check, directional_derivative)


# --- Exercise 3.2 ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _JacobianCase:
    """f: a float64 tanh layer from x's shape to ``out_shape``, with fixed random weights."""

    in_shape: tuple[int, ...]
    out_shape: tuple[int, ...]

    @property
    def sizes(self) -> tuple[int, int]:
        return _numel(self.in_shape), _numel(self.out_shape)

    @property
    def label(self) -> str:
        n_in, n_out = self.sizes
        return f"f: R^{n_in} -> R^{n_out}"

    def function(self) -> Callable[[torch.Tensor], torch.Tensor]:
        n_in, n_out = self.sizes
        generator = torch.Generator().manual_seed(n_in * 1000 + n_out)
        weight = torch.randn(n_out, n_in, dtype=torch.float64, generator=generator) / n_in**0.5
        return lambda x: torch.tanh(weight @ x.reshape(-1)).reshape(self.out_shape)

    def point(self) -> torch.Tensor:
        return torch.randn(self.in_shape, dtype=torch.float64, generator=torch.Generator().manual_seed(sum(self.sizes)))


def _numel(shape: tuple[int, ...]) -> int:
    return int(torch.Size(shape).numel())


# Clearly wide, clearly tall, a matrix input and a matrix output (where counting the first dimension instead of
# every entry picks the other mode), and a square one, where the pass counts tie and either mode is right.
MODE_CASES = [
    _JacobianCase((64,), (2,)),
    _JacobianCase((4,), (32,)),
    _JacobianCase((8, 4), (16,)),
    _JacobianCase((6,), (4, 3)),
    _JacobianCase((8,), (8,)),
]

_MODE_OF = {"jacfwd": "forward", "jacrev": "reverse"}


def _cheaper(in_features: int, out_features: int) -> str | None:
    """The transform with fewer passes; None at a tie, where both need the same number."""
    if in_features == out_features:
        return None
    return "jacfwd" if out_features > in_features else "jacrev"


def _expect_transform_name(mode: object) -> str:
    if isinstance(mode, str) and mode.lower().startswith(("forward", "reverse", "fwd", "rev")):
        raise CheckFailed(
            _("Return the string 'jacfwd' or 'jacrev' first, not {mode!r}: name the transform "
              "(torch.func.jacfwd is forward mode, torch.func.jacrev reverse mode), not the mode.").format(mode=mode),
            mistake="named-the-mode",
        )
    expect(isinstance(mode, str) and mode in _MODE_OF, _("Return the string 'jacfwd' or 'jacrev' first, not "
                                                         "{short}.").format(short=_short(mode)),
           mistake="not-a-transform-name")
    return cast(str, mode)


def _short(value: object) -> str:
    """``value`` as a message names it in a few words: a tensor by its shape, never its entries."""
    if isinstance(value, torch.Tensor):
        return _("a tensor of shape {shape}").format(shape=tuple(value.shape))
    text = repr(value)
    if len(text) <= 60:
        return text
    cut = text[:58]  # cut between words, as torch's refusals are quoted, never mid-word
    return f"{cut.rsplit(' ', 1)[0] if ' ' in cut and not text[58].isspace() else cut.rstrip()} …"


def _wrong_choice(case: _JacobianCase, mode: str) -> CheckFailed:
    n_in, n_out = case.sizes
    first_in, first_out = case.in_shape[0], case.out_shape[0]
    if len(case.in_shape) + len(case.out_shape) > 2 and mode == _cheaper(first_in, first_out):
        return CheckFailed(
            _("For {label} (x of shape {in_shape}, f(x) of shape {out_shape}) you chose {mode}, as if in = "
              "{first_in} and out = {first_out}: that is the first dimension. Count every entry (numel): "
              "jacfwd needs {n_in} passes here, jacrev {n_out}.").format(
                label=case.label, in_shape=case.in_shape, out_shape=case.out_shape, mode=mode, first_in=first_in,
                first_out=first_out, n_in=n_in, n_out=n_out),
            mistake="counted-first-dimension",
        )
    return CheckFailed(
        _("For {label} you chose {mode}. Count the passes: jacfwd needs one per input dimension ({n_in}), "
          "jacrev one per output dimension ({n_out}); read both sizes from x and f(x).").format(
            label=case.label, mode=mode, n_in=n_in, n_out=n_out),
        mistake="more-passes",
    )


def _expect_jacobian_tensor(jacobian: object, case: _JacobianCase, reference: torch.Tensor) -> torch.Tensor:
    """The learner's Jacobian as torch.func shapes it (out shape + in shape); a flat (out, in) matrix is accepted."""
    expect(not callable(jacobian) or isinstance(jacobian, torch.Tensor), (
        _("For {label} you returned the transform itself ({type}), not the Jacobian: the transform gives a "
          "function, to be called at x.").format(label=case.label, type=type(jacobian).__name__)
    ), mistake="transform-not-called")
    n_in, n_out = case.sizes
    shapes = {tuple(reference.shape), (n_out, n_in)}
    got = tuple(jacobian.shape) if isinstance(jacobian, torch.Tensor) else type(jacobian).__name__
    transposed = _(" (in, out): it is transposed") if got in {case.in_shape + case.out_shape, (n_in, n_out)} - shapes else ""
    expect(isinstance(jacobian, torch.Tensor) and got in shapes, (
        _("For {label} the Jacobian has shape {shape} (out, in); you returned {got}{transposed}.").format(
            label=case.label, shape=tuple(reference.shape), got=got, transposed=transposed)
    ), mistake="transposed" if transposed else "wrong-shape")
    return _expect_comparable(jacobian, reference, _("For {label} your Jacobian").format(
        label=case.label)).reshape(reference.shape)


def _expect_named_transform_ran(case: _JacobianCase, mode: str, seen: _ModesSeen) -> None:
    """The Jacobian came from the transform the answer named, as watched through f, not from the other one."""
    expect(seen.mode is not None, (
        _("For {label} your Jacobian came from neither transform: no forward-mode or reverse-mode pass "
          "went through f (finite differences, or a formula of your own?). Compute it with the transform "
          "you chose, {mode}.").format(label=case.label, mode=mode)
    ), mistake="neither-transform")
    expect(seen.mode != "both", (
        _("For {label} your code ran both forward and reverse mode through f, and so paid for both; "
          "compute the Jacobian with {mode} alone.").format(label=case.label, mode=mode)
    ), mistake="both-transforms")
    if seen.mode == _MODE_OF[mode]:
        return
    loop, mistake = "", "other-transform"
    if seen.backwards > 1 and not seen.batched_backwards:
        loop = (_(" (backward ran {backwards} times, one call per output: "
                  "torch.autograd.functional.jacobian works that way unless given strategy='forward-mode')").format(
                    backwards=seen.backwards))
        mistake = "backward-loop"
    raise CheckFailed(
        _("For {label} you named {mode}, but your Jacobian was computed in {mode2} mode{loop}. The name "
          "must say which transform did the work: compute it with {mode}.").format(
            label=case.label, mode=mode, mode2=seen.mode, loop=loop),
        mistake=mistake,
    )


def check_cheaper_jacobian(jacobian_the_cheaper_way: Callable[..., object]) -> CheckResult:
    """Exercise 3.2: ``jacobian_the_cheaper_way(f, x)`` returns (the transform with fewer passes, the Jacobian of f
    at x), the Jacobian computed by the transform it names (watched through the checker's f, not trusted)."""

    def check() -> str:
        for case in MODE_CASES:
            f, x = case.function(), case.point()
            with _watching() as seen:
                answer = call_learner(jacobian_the_cheaper_way, _watched(f), x.clone())
            expect(isinstance(answer, tuple) and len(answer) == 2, _("Return a pair: (the mode's name, the Jacobian)."),
                   mistake="not-a-pair")
            expect(not (isinstance(answer[1], str) and answer[1] in _MODE_OF), (  # type: ignore[index]
                _("Your pair is the wrong way round: you returned ({short}, {answer!r}). Return the "
                  "transform's name first, then the Jacobian.").format(short=_short(answer[0]), answer=answer[1])  # type: ignore[index]
            ), mistake="pair-swapped")
            mode = _expect_transform_name(answer[0])  # type: ignore[index]
            if _cheaper(*case.sizes) not in (None, mode):
                raise _wrong_choice(case, mode)
            reference = torch.func.jacrev(f)(x)
            jacobian = _expect_jacobian_tensor(answer[1], case, reference)  # type: ignore[index]
            _expect_named_transform_ran(case, mode, seen)
            if not _close(jacobian, reference):
                expect(not (reference.dim() == 2 and _close(jacobian.mT, reference)), (
                    _("For {label} your Jacobian is transposed: rows are outputs, columns inputs, (out, "
                      "in).").format(label=case.label)
                ), mistake="transposed")
                raise CheckFailed(
                    _("For {label} your Jacobian's values are off, although {mode} ran: compute the "
                      "Jacobian of f itself, at x, and return what the transform gives.").format(label=case.label, mode=mode),
                    mistake="wrong-values",
                )
        return (_("You chose the transform with fewer passes on {cases} shapes (matrices too; "
                  "at in = out, where the counts tie, either is right) and computed the exact Jacobian "
                  "with the one you named.").format(cases=len(MODE_CASES)))

    return run_check("3.2", check, jacobian_the_cheaper_way)


# --- Exercise 3.3 ----------------------------------------------------------------------------------------------

_LIBRARIES = ("torch", "labkit")


def _owner(cls: type, name: str) -> type | None:
    """The class in ``cls``'s MRO that defines ``name``."""
    return next((owner for owner in cls.__mro__ if name in vars(owner)), None)


def _own_method(cls: type, name: str) -> Callable[..., Any] | None:
    """``cls.name`` when a class of the learner's defines it (not torch's Function, not a labkit example class)."""
    owner = _owner(cls, name)
    if owner is None or owner.__module__.split(".")[0] in _LIBRARIES:
        return None
    value = vars(owner)[name]
    return cast(Callable[..., Any], value.__func__ if isinstance(value, (staticmethod, classmethod)) else value)


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _parameter_count(function: Callable[..., Any]) -> int:
    try:
        return len(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return 0


def _expect_modern_function(cls: object) -> type[torch.autograd.Function]:
    """The class the exercise asks for: a Function subclass whose own forward, setup_context and jvp torch calls."""
    expect(
        isinstance(cls, type) and issubclass(cls, torch.autograd.Function),
        _("Pass the class itself (a subclass of torch.autograd.Function), e.g. check_custom_sin(Sin)."),
        mistake="not-a-function-class",
    )
    function = cast(type[torch.autograd.Function], cls)
    missing = [name for name in ("forward", "setup_context", "jvp") if _own_method(function, name) is None]
    none_of = _(", and defines no {either} of its own").format(either=_either(missing)) if missing else ""
    expect(_own_method(function, "apply") is None, (
        _("Your class replaces apply itself{none_of}: then torch never runs a forward-mode rule of yours, "
          "whatever comes out. Leave apply to torch.autograd.Function (it calls your forward, "
          "setup_context and jvp) and write those three as staticmethods.").format(none_of=none_of)
    ), mistake="replaced-apply")
    forward = _own_method(function, "forward")
    if "setup_context" in missing and forward is not None and _parameter_count(forward) >= 2:
        raise CheckFailed(
            _("Your forward takes ctx: that is the old style, which torch.func.jvp rejects. Write "
              "forward(x) without ctx, and save tensors in a separate setup_context(ctx, inputs, output) "
              "staticmethod."),
            mistake="old-style",
            method="forward",  # the mistake is in forward, whatever the jvp says
        )
    if "jvp" in missing:
        owner = _owner(function, "jvp")
        inherited = (_(" (it inherits {type}'s)").format(type=owner.__name__)
                     if owner and not owner.__module__.startswith("torch.") else "")
        raise CheckFailed(
            _("{type} has no jvp of its own{inherited}: define the staticmethod jvp(ctx, x_tangent), the "
              "forward-mode rule, which returns the output's tangent.").format(type=function.__name__, inherited=inherited),
            mistake="no-jvp",
        )
    if missing:
        raise CheckFailed(
            _("{type} has no {either} of its own; the modern style needs forward(x) without ctx, "
              "setup_context(ctx, inputs, output) and jvp(ctx, x_tangent), each a staticmethod.").format(
                type=function.__name__, either=_either(missing)),
            mistake="missing-staticmethod",
        )
    if forward is not None and _parameter_count(forward) >= 2:
        raise CheckFailed(_("Your forward takes ctx although you wrote setup_context: in the modern style forward(x) "
                            "has no ctx; setup_context receives it instead."),
                          mistake="forward-takes-ctx", method="forward")
    return function


@dataclass
class _JvpCalls:
    """How often torch called the learner's jvp, and whether their setup_context saved for backward only."""

    count: int = 0
    saved_for_backward_only: bool = False


def _observed(function: type[torch.autograd.Function], calls: _JvpCalls) -> type[torch.autograd.Function]:
    """A subclass that runs the learner's own setup_context and jvp, recording what they save and return."""
    setup_context = cast(Callable[..., None], _own_method(function, "setup_context"))
    jvp = cast(Callable[..., object], _own_method(function, "jvp"))

    def observed_setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        setup_context(ctx, inputs, output)
        if getattr(ctx, "to_save", None) and not getattr(ctx, "saved_for_forward", None):
            calls.saved_for_backward_only = True

    def observed_jvp(ctx: Any, *tangents: Any) -> object:
        calls.count += 1
        return jvp(ctx, *tangents)

    namespace = {"setup_context": staticmethod(observed_setup_context), "jvp": staticmethod(observed_jvp)}
    return cast(type[torch.autograd.Function], type(function.__name__, (function,), namespace))


def _wrong_jvp(where: str, got: torch.Tensor, x: torch.Tensor, v: torch.Tensor) -> CheckFailed:
    """Name the usual wrong rules: the derivative alone, a sign, the output used as the input."""
    known = [
        (torch.cos(x), _("cos(x), the derivative alone: multiply it by x_tangent, the direction"), "forgot-the-tangent"),
        (-torch.cos(x) * v, _("-cos(x) * x_tangent: the sign is wrong, d/dx sin(x) = +cos(x)"), "wrong-sign"),
        (torch.sin(x) * v, _("sin(x) * x_tangent: the derivative of sin is cos"), "sin-for-cos"),
        (v, _("x_tangent unchanged: the rule must multiply it by the derivative, cos(x)"), "tangent-unchanged"),
        (torch.cos(torch.sin(x)) * v, _("cos(sin(x)) * x_tangent: it uses the output, sin(x), where the "
                                        "rule needs the input x (setup_context gets both: inputs and "
                                        "output)"), "used-the-output"),
    ]
    for value, what, mistake in known:
        if _close(got, value):
            return CheckFailed(_("{where}, your jvp returns {what}.").format(where=where, what=what), mistake)
    return CheckFailed(_("{where}, your jvp does not return cos(x) * x_tangent.").format(where=where), mistake="wrong-jvp")


def _run_jvp(label: str, run: Callable[[], object], calls: _JvpCalls, x: torch.Tensor, v: torch.Tensor) -> None:
    """One JVP through the learner's class: their jvp must be called, and its result must be cos(x) * v."""
    before = calls.count
    try:
        got = call_learner(run)
    except LearnerError:
        if calls.saved_for_backward_only:
            raise CheckFailed(
                _("{label}, your jvp found nothing in ctx.saved_tensors: setup_context saved x with "
                  "ctx.save_for_backward, which keeps it for backward (reverse mode) only. In forward mode "
                  "ctx.saved_tensors holds what ctx.save_for_forward(...) saved: that is the one jvp can "
                  "read.").format(label=label),
                mistake="save-for-backward",
                method="setup_context",  # the slip is what setup_context saved, not how jvp reads it
            ) from None
        raise
    expect(calls.count > before, _("{label}, torch never called your jvp, so the tangent did not come from "
                                   "it.").format(label=label),
           mistake="jvp-not-called")
    tensor = _expect_comparable(got, x, _("{label}, the output tangent").format(label=label))
    if not _close(tensor, torch.cos(x) * v):
        raise _wrong_jvp(label, tensor.detach().to(x.dtype), x, v)


def check_custom_sin(sin_function: type[torch.autograd.Function]) -> CheckResult:
    """Exercise 3.3: a modern-style Function for sin whose own ``jvp`` torch calls, under the dual API and
    torch.func.jvp, and which passes gradcheck(check_forward_ad=True)."""

    def check() -> str:
        from labkit.forward_ad.custom_function import gradcheck_forward
        from labkit.forward_ad.derivatives import jvp

        function = _expect_modern_function(sin_function)
        x, v = _float64_pair((6,), seed=3)
        try:
            _expect_close(call_learner(function.apply, x), torch.sin(x), _("forward(x) does not return sin(x)."),
                          mistake="forward-not-sin")
        except CheckFailed as exc:  # the wrong value is forward's: point at forward, not at jvp
            raise CheckFailed(str(exc), exc.mistake, method="forward") from None
        calls = _JvpCalls()
        observed = _observed(function, calls)
        _run_jvp(_("Under the dual API"), lambda: jvp(observed.apply, x, v)[1], calls, x, v)
        _run_jvp("Under torch.func.jvp", lambda: torch.func.jvp(observed.apply, (x,), (v,))[1], calls, x, v)
        try:
            call_learner(gradcheck_forward, function, x, include_backward=False)
        except LearnerError as exc:
            if isinstance(exc.original, GradcheckError):
                raise CheckFailed(f"gradcheck(check_forward_ad=True) failed: {str(exc.original).splitlines()[0]}",
                                  mistake="gradcheck-failed") from None
            raise
        return (_("torch calls your own jvp under the dual API and torch.func.jvp, it gives cos(x) * "
                  "x_tangent, and gradcheck(check_forward_ad=True) passes."))

    # an instance (Sin()) is a slip in the call, not in its jvp: no pointer into the class
    return run_check("3.3", check, sin_function if isinstance(sin_function, type) else None, "jvp")


# --- Exercise 3.4 ----------------------------------------------------------------------------------------------

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
    return [(_("a Tanh MLP"), tanh_mlp.double()), (_("a ReLU MLP without biases"), relu_mlp.double()),
            (_("an MLP with an eval-mode BatchNorm1d"), with_bn.double().eval())]


def _jvp_along(model: nn.Module, x: torch.Tensor, tangent: Callable[[str, torch.Tensor], torch.Tensor]) -> torch.Tensor:
    """The JVP along ``tangent(name, p)`` for each parameter, by the dual API's parameter swap (not the
    functional_call the learner writes); the checker's private model only."""
    from labkit.forward_ad.derivatives import module_jvp

    tangents = {name: tangent(name, p.detach()) for name, p in model.named_parameters()}
    return module_jvp(model, (x,), tangents, method="swap")[1]


_MODULE_HOOKS = (
    "_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
)
_TENSOR_HOOKS = ("_backward_hooks", "_post_accumulate_grad_hooks")


def _hook_keys(owner: object, names: tuple[str, ...]) -> dict[str, dict[Any, Any]]:
    return {name: dict(getattr(owner, name, None) or {}) for name in names}


@dataclass
class _TensorState:
    tensor: torch.Tensor
    value: torch.Tensor
    requires_grad: bool
    had_grad: bool
    hooks: dict[str, dict[Any, Any]]


@dataclass
class _ModuleState:
    module: nn.Module
    training: bool
    slots: dict[str, dict[str, Any]]  # _parameters, _buffers, _modules: name -> object
    hooks: dict[str, dict[Any, Any]]


def _slots(module: nn.Module) -> dict[str, dict[str, Any]]:
    return {kind: dict(getattr(module, kind)) for kind in ("_parameters", "_buffers", "_modules")}


# (the mistake's slug, what changed: "requires_grad turned off") -> where (parameter or module names)
Changes = dict[tuple[str, str], list[str]]


def _listed(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 3 else f"{', '.join(names[:3])} and {len(names) - 3} more"


@dataclass
class _ModelSnapshot:
    """Everything of a model an answer could leave changed, so the checker can put it back and say what it was."""

    modules: dict[str, _ModuleState]
    tensors: dict[str, _TensorState]

    @classmethod
    def take(cls, model: nn.Module) -> _ModelSnapshot:
        modules = {name: _ModuleState(module, module.training, _slots(module), _hook_keys(module, _MODULE_HOOKS))
                   for name, module in model.named_modules()}
        named = [*model.named_parameters(), *model.named_buffers()]
        tensors = {name: _TensorState(t, t.detach().clone(), t.requires_grad, t.grad is not None,
                                      _hook_keys(t, _TENSOR_HOOKS)) for name, t in named}
        return cls(modules, tensors)

    def restore(self) -> list[tuple[str, str]]:
        """Put the model back as it was; return what had changed, as (the mistake's slug, in words), empty when
        nothing did."""
        changes: Changes = {}
        for name, module in self.modules.items():
            _restore_module(f"{type(module.module).__name__} {name!r}" if name else "the model", module, changes)
        for name, tensor in self.tensors.items():
            _restore_tensor(name, tensor, changes)
        return [(mistake, f"{what}: {_listed(where)}") for (mistake, what), where in changes.items()]


def _restore_hooks(owner: object, saved: dict[str, dict[Any, Any]], where: str, changes: Changes) -> None:
    for kind, hooks in saved.items():
        now = getattr(owner, kind, None)
        if now is not None and set(now) != set(hooks):
            verb = "left on" if set(now) - set(hooks) else "removed from"
            now.clear()
            now.update(hooks)
            changes.setdefault(("changed-hooks", f"{kind.strip('_').replace('_', ' ')} {verb}"), []).append(where)


def _restore_module(name: str, state: _ModuleState, changes: Changes) -> None:
    module = state.module
    _restore_hooks(module, state.hooks, name, changes)
    for kind, saved in state.slots.items():
        current = getattr(module, kind)
        if set(current) != set(saved) or any(current[key] is not value for key, value in saved.items()):
            for key in saved:
                module.__dict__.pop(key, None)  # a plain attribute set after delattr would hide the restored one
            current.clear()
            current.update(saved)
            changes.setdefault(("replaced-parameters", f"{kind.strip('_')} replaced"), []).append(name)
    if module.training != state.training:
        module.training = state.training
        changes.setdefault(("changed-train-mode", _("left in {value} mode").format(
            value='eval' if state.training else 'train')), []).append(name)


def _restore_tensor(name: str, state: _TensorState, changes: Changes) -> None:
    tensor = state.tensor
    if tensor.requires_grad != state.requires_grad:
        tensor.requires_grad_(state.requires_grad)
        what = f"requires_grad turned {'off' if state.requires_grad else 'on'}"
        changes.setdefault(("changed-requires-grad", what), []).append(name)
    if not (tensor.shape == state.value.shape and torch.equal(tensor.detach(), state.value)):
        tensor.data = state.value.clone()
        changes.setdefault(("changed-values", "values changed"), []).append(name)
    if tensor.grad is not None and not state.had_grad:
        tensor.grad = None
        changes.setdefault(("left-grad", _(".grad left on")), []).append(name)
    _restore_hooks(tensor, state.hooks, name, changes)


@contextmanager
def _counting_calls(model: nn.Module) -> Iterator[tuple[list[int], _ModesSeen]]:
    """Count the forward passes of ``model`` (one JVP is one pass, a finite difference two), and watch which mode of
    AD went through its output (:class:`_ModeProbe`): reverse mode gives the same number in one pass too."""
    calls = [0]
    counting = model.register_forward_pre_hook(lambda module, args: calls.__setitem__(0, calls[0] + 1))
    probing = model.register_forward_hook(
        lambda module, args, output: _ModeProbe.apply(output) if isinstance(output, torch.Tensor) else output)
    try:
        with _watching() as seen:
            yield calls, seen
    finally:
        counting.remove()
        probing.remove()


def _expect_no_buffer_tangent(exc: LearnerError, label: str, model: nn.Module) -> None:
    """Name the mistake behind torch's refusal of a tangent for a buffer (running statistics, an integer counter):
    the running statistics when torch named them, the integer counter when it refused an integer tangent."""
    message = str(exc.original)
    integer_buffers = any(not buffer.is_floating_point() for buffer in model.buffers())
    statistics, counter = "running_mean" in message, "floating point" in message and integer_buffers
    which = _("its running statistics") if statistics else \
        _("its integer num_batches_tracked; its running statistics cannot carry one either")
    expect(not (statistics or counter), (
        _("On {label}, torch refused a tangent ({value}): your code gave one to the BatchNorm's buffers "
          "({which}). Buffers are not parameters and cannot carry a tangent: give tangents to the "
          "parameters only (named_parameters, not the state_dict).").format(
            label=label, value=textwrap.shorten(message.splitlines()[0], 120, placeholder=" …"), which=which)
    ), mistake="buffer-tangents")


def _expect_no_known_refusal(exc: LearnerError, label: str, changes: list[tuple[str, str]]) -> None:
    """Name the mistakes behind two refusals of torch.func, whose own words do not say what to change."""
    message = str(exc.original)
    expect(not ("mutate a captured Tensor" in message and any(kind == "changed-train-mode" for kind, _ in changes)), (
        _("On {label}, your code switched the model to training mode (model.train()): its BatchNorm then "
          "updates its running statistics in place, and torch.func refuses that inside a transform "
          "(\"mutate a captured Tensor\"). Leave the model's mode as it was given: the derivative is that of "
          "the model as it is.").format(label=label)
    ), mistake="train-mode-inside")
    expect("parameter_and_buffer_dicts to be dictionaries" not in message, (
        _("On {label}, torch.func.functional_call refused your parameters: it takes them as a dict {{name: "
          "tensor}} (from named_parameters), not as a list, since the names say which module each tensor "
          "belongs to.").format(label=label)
    ), mistake="parameters-as-a-list")


def _run_on_a_copy(answer: Callable, label: str, model: nn.Module, x: torch.Tensor) -> tuple[object, int, _ModesSeen]:
    """The learner's answer on a copy of ``model``: (what it returned, forward passes, the modes of AD seen); fails
    naming anything it left changed on the copy (hooks, requires_grad, parameters, buffers, train/eval), which is put
    back first."""
    theirs = copy.deepcopy(model)
    with _counting_calls(theirs) as (calls, seen):
        snapshot = _ModelSnapshot.take(theirs)
        changes: list[tuple[str, str]] | None = None
        try:
            with learner_case(label):
                got = call_learner(answer, theirs, x.clone())
        except LearnerError as exc:
            changes = snapshot.restore()
            _expect_no_buffer_tangent(exc, label, model)
            _expect_no_known_refusal(exc, label, changes)
            raise
        finally:
            if changes is None:
                changes = snapshot.restore()
    if changes:
        raise CheckFailed(
            _("For {label}, your code changed the model it was given: {value}. The checker put it back. "
              "torch.func.functional_call runs a model with other tensors and leaves it as it is.").format(
                label=label, value='; '.join(what for _, what in changes)),
            mistake=changes[0][0],  # the first change names the mistake: the others usually follow from it
        )
    return got, calls[0], seen


def _wrong_scaling(label: str, got: torch.Tensor, model: nn.Module, x: torch.Tensor, seen: _ModesSeen) -> CheckFailed:
    """Name the usual wrong directions: the output, zeros, no JVP at all, ones, the weights without the biases."""
    with torch.no_grad():
        output = model(x)
    start = _("For {label}, your derivative differs from the JVP along the parameters.").format(label=label)
    if _close(got, output):
        return CheckFailed(_("{start} That is model(x) itself: return the tangent part of the JVP, not the "
                             "output.").format(start=start),
                           mistake="returned-output")
    if not torch.any(got):
        return CheckFailed(_("{start} It is all zeros: the tangents never reached the parameters (an "
                             "nn.Parameter drops a tangent).").format(start=start), mistake="tangents-dropped")
    if not seen.jvps:
        return CheckFailed(_("{start} No tangent went through the model's forward pass: your code ran the model "
                             "without a JVP, so what it returned is computed from the output, not a derivative. "
                             "Carry the parameters as their own tangents through one forward pass "
                             "(torch.func.jvp with torch.func.functional_call).").format(start=start),
                           mistake="no-jvp")
    if _close(got, _jvp_along(model, x, lambda name, p: torch.ones_like(p))):
        return CheckFailed(_("{start} It is the derivative along ones: the tangent of each parameter p is "
                             "p itself, not ones.").format(start=start), mistake="tangent-of-ones")
    if _close(got, _jvp_along(model, x, lambda name, p: p if name.endswith("weight") else torch.zeros_like(p))):
        return CheckFailed(_("{start} Only the weights moved: the biases are parameters too, and each "
                             "parameter p, a bias included, has tangent p.").format(start=start), mistake="weights-only")
    return CheckFailed(_("{start} The direction is the parameters themselves: the tangent of each "
                         "parameter p is p.").format(start=start),
                       mistake="wrong-direction")


def check_weight_scaling_derivative(weight_scaling_derivative: Callable) -> CheckResult:
    """Exercise 3.4: d/dt model(x; (1 + t) * params) at t = 0, by a JVP in parameter space.

    The learner gets a copy of each model; the checker keeps the original for its reference and compares the copy
    afterwards: an answer that leaves a hook, a requires_grad, a parameter, a buffer or the train/eval flag changed
    is told so (and the copy is put back), not passed.
    """

    def check() -> str:
        x = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        for label, model in _scaling_cases():
            got, passes, seen = _run_on_a_copy(weight_scaling_derivative, label, model, x)
            expected = _jvp_along(model, x, lambda name, p: p)  # only now: while the answer ran there was none to find
            expect(not isinstance(got, tuple), _("For {label} you returned a tuple; return the derivative "
                                                 "only (torch.func.jvp gives (output, derivative)).").format(label=label),
                                                 mistake="returned-pair")
            expect(passes == 1, _("For {label} your code ran the model {passes} times; one JVP runs it "
                                  "once, carrying the derivative along with the output (finite differences "
                                  "need two passes, and are not exact).").format(label=label, passes=passes),
                                  mistake="not-one-pass")
            expect(not seen.backwards, (
                _("For {label}, this is reverse mode: a backward pass went through the model's output (as "
                  "torch.autograd.functional.jvp's double-backward trick, torch.autograd.grad and "
                  "torch.func.vjp do). The exercise asks for a JVP in forward mode: carry the parameters "
                  "as their own tangents through one forward pass (torch.func.jvp with "
                  "torch.func.functional_call).").format(label=label)
            ), mistake="reverse-mode")
            tensor = _expect_comparable(got, expected, _("For {label}, the result").format(label=label))
            expect(tensor.shape == expected.shape, _("For {label} the result has shape {shape}; the "
                                                     "derivative is shaped like model(x), {shape2}.").format(
                                                       label=label, shape=tuple(tensor.shape), shape2=tuple(expected.shape)),
                                                       mistake="wrong-shape")
            tensor = tensor.detach().to(expected.dtype)
            if not _close(tensor, expected):
                raise _wrong_scaling(label, tensor, model, x, seen)
        return (_("On 3 models (one with a BatchNorm), your derivative equals the JVP along the parameters "
                  "to 1e-9, and each model was left as it was given (hooks, requires_grad, parameters, "
                  "buffers, train/eval)."))

    return run_check("3.4", check, weight_scaling_derivative)
