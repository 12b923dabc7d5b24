"""Why forward mode failed or gave no tangent: the labkit errors for it, and the reruns that find the cause.

Why: torch names an operator without a forward formula by its internal ATen
name, raises on a nested level in a way a learner cannot act on, and silently
returns no tangent for some operators (torch.special.bessel_j0). This module
turns each into one :class:`ForwardADUnsupportedError` or
:class:`NestedForwardADError` naming the public call, and only suggests reverse
mode when a rerun shows that it works.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
import torch.autograd.forward_ad as fwAD
from torch.overrides import TorchFunctionMode, resolve_name

from labkit.core.errors import LabkitError
from labkit.forward_ad.inputs import (
    _differentiable,
    _first_line,
    _fork_rng,
    _split_output,
    _tensors_in,
)
from labkit.i18n.messages import _


class ForwardADUnsupportedError(LabkitError, RuntimeError):
    """An operator in the function has no forward-mode (JVP) formula in this torch."""


class NestedForwardADError(LabkitError, RuntimeError):
    """A forward-AD level was opened inside another one."""

_OP_NAME = re.compile(r"forward AD with (\S+)")


def _is_missing_forward_formula(exc: NotImplementedError) -> bool:
    return "forward AD" in str(exc) or "forward mode AD" in str(exc)


# torch's error messages name some operators by an internal ATen name; learners call the public one.
_PUBLIC_NAMES = {
    "_cdist_forward": "torch.cdist",
    "_cdist_backward": "torch.cdist",
    "grid_sampler_2d": "torch.nn.functional.grid_sample",
    "grid_sampler_3d": "torch.nn.functional.grid_sample",
    "_pdist_forward": "torch.nn.functional.pdist",
}


def _public_name(aten_name: str) -> str:
    """``'aten::_cdist_forward.default'`` -> ``'torch.cdist'``: no namespace, no overload, public where known."""
    name = aten_name.strip("'\"").removeprefix("aten::").split(".")[0]
    return _PUBLIC_NAMES.get(name, name)


def _unsupported(
    exc: NotImplementedError, *, operator: str | None = None, reverse_problem: str | None = None
) -> ForwardADUnsupportedError:
    """The labkit error for a missing forward formula; suggests reverse mode unless ``reverse_problem`` says why not."""
    advice = _advice(reverse_problem)
    if "custom autograd.Function" in str(exc):
        return ForwardADUnsupportedError(
            _("A custom torch.autograd.Function in your function has no jvp staticmethod, so forward mode "
              "cannot pass through it. Add jvp(ctx, *tangents) (see "
              "labkit.forward_ad.custom_function.Exp). {advice}").format(advice=advice)
        )
    if operator is None:
        found = _OP_NAME.search(str(exc))
        operator = _public_name(found.group(1)) if found else None
    subject = _("The operator {operator}").format(operator=operator) if operator else _("An operator in your function")
    return ForwardADUnsupportedError(
        _("{subject} has no forward-mode AD formula in torch {version}, so no JVP can be computed through it. "
          "{advice}").format(subject=subject, version=torch.__version__.split("+")[0], advice=advice)
    )


def _advice(reverse_problem: str | None) -> str:
    """What to do instead of forward mode: reverse mode only when it was not found to fail too."""
    if reverse_problem is None:
        return (
            _("Use reverse mode instead: torch.func.jacrev(fn) for the Jacobian (then multiply by the "
              "tangent), or torch.func.vjp for vector-Jacobian products.")
        )
    return (
        _("{problem}: estimate the JVP with finite differences (verify_jvp shows them), or "
          "write the derivative yourself in a torch.autograd.Function with a jvp staticmethod.").format(
            problem=reverse_problem[:1].upper() + reverse_problem[1:])
    )

# Calls whose result has no tangent on purpose: a stop-gradient, or a new tensor shaped like the input.
_ON_PURPOSE = {"torch.Tensor.detach", "torch.Tensor.detach_", "torch.detach", "torch.Tensor.data.__get__"}


def _drops_on_purpose(name: str) -> bool:
    last = name.rsplit(".", 1)[-1]
    return name in _ON_PURPOSE or last.endswith("_like") or last.startswith("new_")


# resolve_name reports where a function is defined; learners call it from the public namespace.
_PRIVATE_PREFIXES = {
    "torch.functional.": "torch.",
    "torch._C._nn.": "torch.nn.functional.",
    "torch._C._VariableFunctions.": "torch.",
}


def _public_call_name(func: Callable[..., Any]) -> str:
    name = resolve_name(func) or getattr(func, "__name__", repr(func))
    for private, public in _PRIVATE_PREFIXES.items():
        if name.startswith(private):
            return public + name[len(private):]
    return name


class _TangentRecorder(TorchFunctionMode):
    """Names the torch calls (as learners write them) that lose a tangent or raise for forward AD.

    A ``TorchFunctionMode`` sees each top-level call by its public name
    (``torch.special.bessel_j0``, ``torch.Tensor.scatter_reduce``), which is
    the name a learner can act on, unlike the ATen names in torch's messages.
    """

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[str] = []
        self.raised: str | None = None

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = _public_call_name(func)
        try:
            result = func(*args, **kwargs)
        except NotImplementedError:
            self.raised = self.raised or name
            raise
        carried = any(fwAD.unpack_dual(t).tangent is not None for t in _tensors_in((args, kwargs)))
        lost = any(_differentiable(t) and fwAD.unpack_dual(t).tangent is None for t in _tensors_in(result))
        if carried and lost and not _drops_on_purpose(name) and name not in self.dropped:
            self.dropped.append(name)
        return result


def _record_calls(fn: Callable[..., Any], primals: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor]) -> _TangentRecorder:
    """Run ``fn`` once more on dual tensors under the recorder; the RNG is forked and the level closed."""
    recorder = _TangentRecorder()
    with _fork_rng(primals), warnings.catch_warnings(), fwAD.dual_level():
        warnings.simplefilter("ignore")  # fn's own warnings were shown by the first run
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        try:
            with recorder:
                fn(*duals)
        except Exception:  # noqa: BLE001 - a diagnostic rerun; the caller reports the first run's error
            pass
    return recorder

def _reverse_problem(fn: Callable[..., Any], primals: Sequence[torch.Tensor], outputs: Sequence[int] | None = None) -> str | None:
    """Why reverse mode cannot differentiate ``fn`` (``None`` when it can), so advice never points to a dead end.

    ``outputs`` picks the outputs that matter (default: every floating one).
    """
    xs = tuple(p.detach().requires_grad_() for p in primals)
    try:
        with _fork_rng(xs), torch.enable_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a diagnostic rerun: fn's warnings were shown by the first run
            results = _split_output(fn(*xs))[0]
            picked = [results[i] for i in outputs] if outputs is not None else [o for o in results if _differentiable(o)]
            if not picked:
                dtypes = ", ".join(sorted({str(o.dtype) for o in results}))
                return _("the outputs are bool or integer tensors ({dtypes}), which are not differentiable").format(
                           dtypes=dtypes)
            if not all(o.requires_grad for o in picked):
                return _("reverse mode has no derivative for it either (its result does not require grad)")
            torch.autograd.grad(picked, xs, [torch.ones_like(o) for o in picked], allow_unused=True)
    except Exception as exc:  # noqa: BLE001 - any failure means: do not suggest reverse mode
        return _("reverse mode has no derivative for it either (torch says: {first_line})").format(first_line=_first_line(exc))
    return None


def _moves_along(
    fn: Callable[..., Any], primals: Sequence[torch.Tensor], tangents: Sequence[torch.Tensor], outputs: Sequence[int]
) -> bool:
    """Whether the picked outputs change when the primals take a small step along the tangents."""

    def step(sign: float) -> tuple[torch.Tensor, ...]:
        moved = []
        for p, t in zip(primals, tangents):
            size = torch.finfo(p.dtype).eps ** 0.5 * max(1.0, float(p.abs().max()) if p.numel() else 1.0)
            moved.append(p.detach() + sign * size / max(float(t.abs().max()) if t.numel() else 1.0, 1e-30) * t)
        with torch.no_grad():
            results = _split_output(fn(*moved))[0]
        return tuple(results[i] for i in outputs)

    with _fork_rng(primals), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a diagnostic rerun: fn's warnings were shown by the first run
        return any(not torch.equal(a, b) for a, b in zip(step(1.0), step(-1.0)))


def _raise_on_dropped_tangents(
    fn: Callable[..., Any],
    primals: Sequence[torch.Tensor],
    tangents: Sequence[torch.Tensor],
    missing: Sequence[int],
) -> None:
    """Raise when a floating output lost its tangent in an operator and truly depends on the input.

    ``unpack_dual`` gives no tangent both for a result that does not depend on
    the input (a zero JVP) and for an operator that silently has no forward
    formula (torch.special.bessel_j0): reporting zero for the second would be a
    wrong answer. A stop-gradient (detach, *_like) or an output that does not
    move along the tangent (histc) keeps its zero.
    """
    culprits = _record_calls(fn, primals, tangents).dropped
    if not culprits or not _moves_along(fn, primals, tangents, missing):
        return
    advice = _advice(_reverse_problem(fn, primals, missing))
    which = ", ".join(str(i) for i in missing)
    raise ForwardADUnsupportedError(
        _("{culprits} returned a result without a tangent: torch {version} has no forward-mode derivative for "
          "it, yet output {which} changes when the input moves along the tangent, so its JVP is not zero, "
          "and labkit will not report a zero. {advice}").format(
            culprits=" and ".join(culprits), version=torch.__version__.split("+")[0], which=which, advice=advice)
    )


@contextmanager
def forward_level() -> Iterator[None]:
    """``fwAD.dual_level()`` with labkit errors for nesting and unsupported operators."""
    try:
        level = fwAD.dual_level()
        level.__enter__()
    except RuntimeError as exc:
        if "Nested forward mode AD" not in str(exc):
            raise
        raise NestedForwardADError(
            _("A forward-AD level is already open: torch does not support nested forward-mode AD "
              "(dual_level inside dual_level, or labkit.jvp inside a dual_level block). Compute the JVP "
              "outside the other level, or use torch.func.jvp / torch.func.jacfwd, which nest with each "
              "other.")
        ) from None
    try:
        yield
    except NotImplementedError as exc:
        if not _is_missing_forward_formula(exc):
            raise
        raise _unsupported(exc) from exc
    except RuntimeError as exc:
        if "cannot resize variables that has a forward grad" not in str(exc):
            raise
        raise ForwardADUnsupportedError(
            _("fn resizes a dual tensor in place (Tensor.resize_ or resize_as_), which forward-mode AD "
              "cannot follow: the tangent would no longer match its primal's shape. Resize a copy instead, "
              "e.g. x.clone().resize_(...), or use reshape / new tensors.")
        ) from None
    finally:
        level.__exit__(None, None, None)
