"""Jacobian-vector products with PyTorch's dual-tensor API, and ways to verify them.

Why hand-written: ``torch.func.jvp`` already computes JVPs. This module shows
what it does underneath, with the public ``torch.autograd.forward_ad`` API
(``dual_level``, ``make_dual``, ``unpack_dual``), and turns the mistakes a
learner makes (an integer primal, a tangent of the wrong shape, an operator
without a forward formula, a nested level) into one clear labkit error instead
of a silent wrong answer or a deep torch traceback. Everything else is torch:
``torch.func`` for the functional versions, for reverse mode and for Hessians.

- :func:`jvp` - ``(output, tangent_out)`` from the dual API; agrees with ``torch.func.jvp``.
- :func:`module_jvp` - the JVP of a module with respect to its parameters, two ways.
- :func:`verify_jvp` - dual API vs ``torch.func.jvp`` vs reverse mode vs finite differences.
- :func:`hvp` - Hessian-vector product, forward-over-reverse.
"""
from __future__ import annotations

import copy
import dataclasses
import html
import math
import numbers
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Union

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.overrides import TorchFunctionMode, resolve_name

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.tables import ShowsAsTable, Table

Tensors = Union[torch.Tensor, Sequence[torch.Tensor]]


class ForwardADUnsupportedError(LabkitError, RuntimeError):
    """An operator in the function has no forward-mode (JVP) formula in this torch."""


class NestedForwardADError(LabkitError, RuntimeError):
    """A forward-AD level was opened inside another one."""


# ---------------------------------------------------------------------------
# Input validation shared by every entry point
# ---------------------------------------------------------------------------
def _as_tuple(value: Tensors, what: str, argument: str | None = None) -> tuple[torch.Tensor, ...]:
    """``value`` as a tuple of tensors; ``argument`` names the parameter in the error."""
    if not isinstance(value, (torch.Tensor, tuple, list)):
        kind = type(value).__name__
        article = "an" if kind[:1].lower() in "aeiou" else "a"
        raise LabkitTypeError(
            f"{argument or what} is {article} {kind}, not a torch.Tensor; pass a tensor or a tuple of tensors, "
            f"e.g. torch.tensor(1.0) instead of 1.0."
        )
    items = (value,) if isinstance(value, torch.Tensor) else tuple(value)
    for index, item in enumerate(items):
        if not isinstance(item, torch.Tensor):
            raise LabkitTypeError(
                f"{what} {index} is a {type(item).__name__}, not a torch.Tensor; "
                f"pass a tensor or a tuple of tensors (e.g. torch.tensor([1.0]))."
            )
    return items


def _validate_pairs(primals: tuple[torch.Tensor, ...], tangents: tuple[torch.Tensor, ...]) -> None:
    if len(primals) != len(tangents):
        raise LabkitValueError(
            f"Got {len(primals)} primal(s) but {len(tangents)} tangent(s); give exactly one tangent per primal."
        )
    for index, (primal, tangent) in enumerate(zip(primals, tangents)):
        for what, tensor in (("Primal", primal), ("Tangent", tangent)):
            if tensor.layout != torch.strided:
                raise LabkitTypeError(
                    f"{what} {index} is a sparse or other non-strided tensor ({tensor.layout}); forward-mode AD "
                    f"(make_dual) needs dense tensors. Convert it first with .to_dense()."
                )
        if not (primal.is_floating_point() or primal.is_complex()):
            raise LabkitTypeError(
                f"Primal {index} has dtype {primal.dtype}; forward-mode AD needs a floating-point "
                f"(or complex) primal, because an integer has no derivative. Convert it first, "
                f"e.g. x.float() or x.double()."
            )
        if tangent.shape != primal.shape:
            raise LabkitValueError(
                f"Tangent {index} has shape {tuple(tangent.shape)} but its primal has shape "
                f"{tuple(primal.shape)}; a tangent must have exactly its primal's shape."
            )
        if tangent.dtype != primal.dtype:
            raise LabkitValueError(
                f"Tangent {index} has dtype {tangent.dtype} (shape {tuple(tangent.shape)}) but its primal "
                f"has dtype {primal.dtype} (shape {tuple(primal.shape)}); torch would keep both precisions side by side "
                f"(a {primal.dtype} value with a {tangent.dtype} tangent), and a matrix multiply would then fail "
                "on the mix. Use tangent.to(primal.dtype)."
            )


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
            "A custom torch.autograd.Function in your function has no jvp staticmethod, so forward mode "
            f"cannot pass through it. Add jvp(ctx, *tangents) (see labkit.forward_ad.custom_function.Exp). {advice}"
        )
    if operator is None:
        found = _OP_NAME.search(str(exc))
        operator = _public_name(found.group(1)) if found else None
    return ForwardADUnsupportedError(
        f"{f'The operator {operator}' if operator else 'An operator in your function'} has no forward-mode AD "
        f"formula in torch {torch.__version__.split('+')[0]}, so no JVP can be computed through it. {advice}"
    )


def _advice(reverse_problem: str | None) -> str:
    """What to do instead of forward mode: reverse mode only when it was not found to fail too."""
    if reverse_problem is None:
        return (
            "Use reverse mode instead: torch.func.jacrev(fn) for the Jacobian (then multiply by the tangent), "
            "or torch.func.vjp for vector-Jacobian products."
        )
    return (
        f"{reverse_problem[:1].upper()}{reverse_problem[1:]}: estimate the JVP with finite differences "
        "(verify_jvp shows them), or write the derivative yourself in a torch.autograd.Function with a jvp staticmethod."
    )


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in nested tuples, lists and dicts (a torch function's arguments or result)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _tensors_in(item)


def _differentiable(tensor: torch.Tensor) -> bool:
    return tensor.is_floating_point() or tensor.is_complex()


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


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


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
                return f"the outputs are bool or integer tensors ({dtypes}), which are not differentiable"
            if not all(o.requires_grad for o in picked):
                return "reverse mode has no derivative for it either (its result does not require grad)"
            torch.autograd.grad(picked, xs, [torch.ones_like(o) for o in picked], allow_unused=True)
    except Exception as exc:  # noqa: BLE001 - any failure means: do not suggest reverse mode
        return f"reverse mode has no derivative for it either (torch says: {_first_line(exc)})"
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
        f"{' and '.join(culprits)} returned a result without a tangent: torch {torch.__version__.split('+')[0]} has "
        f"no forward-mode derivative for it, yet output {which} changes when the input moves along the tangent, so "
        f"its JVP is not zero, and labkit will not report a zero. {advice}"
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
            "A forward-AD level is already open: torch does not support nested forward-mode AD "
            "(dual_level inside dual_level, or labkit.jvp inside a dual_level block). Compute the JVP "
            "outside the other level, or use torch.func.jvp / torch.func.jacfwd, which nest with each other."
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
            "fn resizes a dual tensor in place (Tensor.resize_ or resize_as_), which forward-mode AD cannot follow: "
            "the tangent would no longer match its primal's shape. Resize a copy instead, e.g. x.clone().resize_(...), "
            "or use reshape / new tensors."
        ) from None
    finally:
        level.__exit__(None, None, None)


def _split_output(output: Any) -> tuple[tuple[torch.Tensor, ...], bool]:
    is_tensor = isinstance(output, torch.Tensor)
    if not is_tensor and not isinstance(output, (tuple, list)):
        raise LabkitTypeError(
            f"The function returned a {type(output).__name__}; jvp needs a tensor or a tuple of tensors."
        )
    return _as_tuple(output, "Output"), is_tensor


def _unpack(outputs: tuple[torch.Tensor, ...]) -> tuple[list[torch.Tensor], list[torch.Tensor], list[int]]:
    """Primals, tangents (zero where missing) and the indices of floating outputs that had no tangent."""
    primals_out, tangents_out, missing = [], [], []
    for index, out in enumerate(outputs):
        primal, tangent = fwAD.unpack_dual(out)
        primals_out.append(primal)
        if tangent is None and _differentiable(primal):
            missing.append(index)
        tangents_out.append(torch.zeros_like(primal) if tangent is None else tangent)
    return primals_out, tangents_out, missing


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------
def jvp(fn: Callable[..., Any], primals: Tensors, tangents: Tensors) -> tuple[Any, Any]:
    """Return ``(fn(*primals), J @ tangents)`` computed with dual tensors.

    ``primals`` and ``tangents`` are a tensor each, or tuples of the same
    length; the result mirrors ``fn``'s output (a tensor or a tuple). Agrees
    with ``torch.func.jvp(fn, primals, tangents)``.
    """
    primal_tuple = _as_tuple(primals, "Primal", "primals")
    tangent_tuple = _as_tuple(tangents, "Tangent", "tangents")
    _validate_pairs(primal_tuple, tangent_tuple)
    try:
        with forward_level():
            duals = [fwAD.make_dual(p, t) for p, t in zip(primal_tuple, tangent_tuple)]
            outputs, single = _split_output(fn(*duals))
            primals_out, tangents_out, missing = _unpack(outputs)
    except ForwardADUnsupportedError as exc:
        if not isinstance(exc.__cause__, NotImplementedError):
            raise
        operator = _record_calls(fn, primal_tuple, tangent_tuple).raised
        raise _unsupported(
            exc.__cause__, operator=operator, reverse_problem=_reverse_problem(fn, primal_tuple)
        ) from exc.__cause__
    if missing:
        _raise_on_dropped_tangents(fn, primal_tuple, tangent_tuple, missing)
    if single:
        return primals_out[0], tangents_out[0]
    return tuple(primals_out), tuple(tangents_out)


Method = Literal["swap", "functional_call"]


def module_jvp(
    model: nn.Module,
    inputs: Tensors,
    tangents: Mapping[str, torch.Tensor],
    method: Method = "swap",
) -> tuple[Any, Any]:
    """JVP of ``model(*inputs)`` with respect to its parameters, in direction ``tangents``.

    ``tangents`` maps parameter names (as in ``model.named_parameters()``) to
    tangent tensors; parameters not named are held constant. A tied weight (one
    ``Parameter`` used by several modules) may be named by any of its names; its
    tangent then applies to every use, as ``torch.func.jvp`` would.

    - ``method="swap"``: the classic tutorial's way. Each named parameter is
      removed (``delattr``) and replaced by a dual tensor (``setattr``) for one
      forward pass, in every module that holds it; the original parameters are
      put back afterwards, even when the forward pass raises.
    - ``method="functional_call"``: ``torch.func.functional_call`` runs the
      model with the dual tensors in place of its parameters.

    Either way the module is left untouched, in train mode too: a freshly built
    module *is* in train mode, and a learner probing a derivative expects to
    look at the model, not to train it. So buffers (BatchNorm's running
    statistics, ``num_batches_tracked``) are restored and the global RNG is
    forked (``torch.random.fork_rng``): Dropout still draws a mask, the same one
    on every call, and later random numbers do not change. Call ``model.eval()``
    first for the JVP of the model as used for inference.
    """
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(
            f"module_jvp needs an nn.Module, got {type(model).__name__}; "
            "for a plain function use labkit.forward_ad.jvp."
        )
    if method not in ("swap", "functional_call"):
        raise LabkitValueError(f"method must be 'swap' or 'functional_call', got {method!r}.")
    parameters = dict(model.named_parameters())
    if not isinstance(tangents, Mapping):
        example = next(iter(parameters), "0.weight")
        raise LabkitTypeError(
            f"tangents must be a dict from parameter name to tangent tensor, got a {type(tangents).__name__}; "
            f"e.g. {{{example!r}: torch.randn_like(p)}}, with names from model.named_parameters()."
        )
    names = _canonical_names(model, tangents)
    if not names:
        raise LabkitValueError("tangents is empty; map at least one parameter name to a tangent, e.g. {'0.weight': v}.")
    _validate_pairs(
        tuple(parameters[n].detach() for n in names.values()),
        _as_tuple([tangents[n] for n in names], "Tangent", "tangents"),
    )
    input_tuple = _as_tuple(inputs, "Input", "inputs")
    with _state_kept(model, input_tuple), forward_level():
        duals = {canonical: fwAD.make_dual(parameters[canonical].detach(), tangents[given]) for given, canonical in names.items()}
        if method == "swap":
            with _swapped_parameters(model, duals):
                outputs, single = _split_output(model(*input_tuple))
        else:
            outputs, single = _split_output(torch.func.functional_call(model, duals, input_tuple))
        primals_out, tangents_out, _ = _unpack(outputs)
    if single:
        return primals_out[0], tangents_out[0]
    return tuple(primals_out), tuple(tangents_out)


def _canonical_names(model: nn.Module, tangents: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """Map each name in ``tangents`` to the parameter's first name (tied weights have several)."""
    canonical = {id(p): name for name, p in model.named_parameters()}
    every_name = dict(model.named_parameters(remove_duplicate=False))
    unknown = [name for name in tangents if name not in every_name]
    if unknown:
        verb = "is not a parameter" if len(unknown) == 1 else "are not parameters"
        raise LabkitValueError(
            f"{', '.join(map(repr, unknown))} {verb} of this model; names are e.g. {list(canonical.values())[:4]}."
        )
    names: dict[str, str] = {}
    for given in tangents:
        first = canonical[id(every_name[given])]
        earlier = next((other for other, c in names.items() if c == first), None)
        if earlier is not None:
            raise LabkitValueError(
                f"{earlier!r} and {given!r} are the same parameter (tied weights); give one tangent for it, "
                f"under either name: it applies to every use."
            )
        names[given] = first
    return names


def _fork_rng(tensors: Iterable[torch.Tensor]) -> AbstractContextManager[None]:
    """``torch.random.fork_rng`` for the CPU and the CUDA devices these tensors live on."""
    devices = sorted({t.device.index or 0 for t in tensors if t.device.type == "cuda"})
    return torch.random.fork_rng(devices=devices)


@contextmanager
def _state_kept(model: nn.Module, inputs: tuple[torch.Tensor, ...]) -> Iterator[None]:
    """Restore every buffer and the RNG after the block, so a train-mode forward pass changes nothing."""
    saved = [
        (module, name, buffer, buffer.clone())
        for module in model.modules()
        for name, buffer in module._buffers.items()
        if buffer is not None
    ]
    with _fork_rng([*model.parameters(), *model.buffers(), *inputs]):
        try:
            yield
        finally:
            with torch.no_grad():
                for module, name, buffer, copy in saved:
                    module._buffers[name] = buffer
                    buffer.copy_(copy)


@contextmanager
def _swapped_parameters(model: nn.Module, replacements: Mapping[str, torch.Tensor]) -> Iterator[None]:
    """Replace parameters by plain tensors for the block, in every module holding them; always restore."""
    by_id = {id(model.get_parameter(name)): value for name, value in replacements.items()}
    slots = [
        (module, attr, parameter)
        for module in model.modules()  # each module once, even when shared
        for attr, parameter in module._parameters.items()
        if parameter is not None and id(parameter) in by_id
    ]
    orders = {id(module): (module, list(module._parameters)) for module, _, _ in slots}
    swapped: list[tuple[nn.Module, str, nn.Parameter]] = []
    try:
        for module, attr, parameter in slots:
            delattr(module, attr)
            swapped.append((module, attr, parameter))
            setattr(module, attr, by_id[id(parameter)])  # a plain tensor attribute, not a Parameter: keeps its tangent
        yield
    finally:
        for module, attr, parameter in swapped:
            if attr in module.__dict__:
                delattr(module, attr)
            module.register_parameter(attr, parameter)
        for module, order in orders.values():  # keep model.parameters() in its original order
            for key in order:
                module._parameters[key] = module._parameters.pop(key)


def hvp(f: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Hessian of scalar ``f`` at ``x`` times ``v``, forward-over-reverse: ``jvp(grad(f), x, v)``.

    Costs a small constant times one gradient, never the full Hessian.
    """
    primal_tuple, tangent_tuple = _as_tuple(x, "x", "x"), _as_tuple(v, "v", "v")
    if len(primal_tuple) != 1:
        raise LabkitValueError("hvp takes one tensor x and one tensor v of the same shape.")
    _validate_pairs(primal_tuple, tangent_tuple)
    try:
        return torch.func.jvp(torch.func.grad(f), primal_tuple, tangent_tuple)[1]
    except NotImplementedError as exc:
        if not _is_missing_forward_formula(exc):
            raise
        raise _unsupported(exc) from exc
    except RuntimeError as exc:
        if "Expected f(*args) to return" not in str(exc):
            raise
        raise LabkitValueError(
            "hvp needs f to return a scalar tensor (one element); reduce its output first, e.g. f(x).sum(). "
            f"torch said: {str(exc).split(': ', 1)[-1]}"
        ) from None


# ---------------------------------------------------------------------------
# verify_jvp: four ways to the same numbers
# ---------------------------------------------------------------------------
DUAL_API = "dual API"
FUNC_JVP = "torch.func.jvp"
REVERSE_MODE = "reverse mode (jacrev @ tangent)"
FINITE_DIFFERENCES = "central finite differences"
_FORWARD_MODE = (DUAL_API, FUNC_JVP)  # share the same jvp formulas: one piece of evidence, not two


@dataclass(frozen=True, repr=False)
class JvpVerification(ShowsAsTable):
    """Each method's JVP against the dual API's (float64), compared element by element.

    An element of method ``m`` agrees when ``|m - dual| <= tol * (1 + |dual|)``
    (plus, for finite differences, their rounding error), so a small entry is
    not judged by the scale of a large one. Positions that are NaN or inf in
    either method are not compared (they are counted in ``notes``).
    """

    errors: dict[str, float]
    scale: float
    exact_tolerance: float
    fd_tolerance: float
    disagreeing: tuple[str, ...] = ()
    unavailable: dict[str, str] = field(default_factory=dict)
    uncounted: dict[str, str] = field(default_factory=dict)
    odd_one_out: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()
    symmetric_tangent_agrees: bool = False
    compared: dict[str, int] = field(default_factory=dict)

    @property
    def max_error(self) -> float:
        """Largest |difference| from the dual API at finite positions, over the methods that ran."""
        return max(self.errors.values(), default=0.0)

    @property
    def counted(self) -> tuple[str, ...]:
        """The methods besides the dual API whose comparison decides ``ok``."""
        return tuple(name for name in self.errors if name not in self.uncounted)

    @property
    def ok(self) -> bool:
        """At least one other method ran and counts, and every counted one agrees with the dual API."""
        return bool(self.counted) and not any(name in self.disagreeing for name in self.counted)

    def table(self) -> Table:
        rows: list[list[Any]] = []
        for name in (FUNC_JVP, REVERSE_MODE, FINITE_DIFFERENCES):
            if name in self.unavailable:
                rows.append([name, None, "unavailable"])
            elif self.compared.get(name) == 0:
                rows.append([name, None, "not compared"])
            elif name in self.errors:
                verdict = "NO" if name in self.disagreeing else "yes"
                rows.append([name, self.errors[name], verdict + (" (not counted)" if name in self.uncounted else "")])
        return Table(
            ["method", "max |error| vs dual API", "agrees"],
            rows,
            title=f"JVP verification in float64 (|jvp| up to {self.scale:.3g})",
            floatfmt=".1e",
        )

    def explanations(self) -> list[str]:
        """One line per method that could not run or does not count, then the notes."""
        lines = [f"{name}: unavailable, because {why}" for name, why in self.unavailable.items()]
        lines += [f"{name}: not counted, because {why}" for name, why in self.uncounted.items()]
        return lines + list(self.notes)

    def to_text(self) -> str:
        return "\n".join([self.table().to_text(), *(f"- {line}" for line in self.explanations())])

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.explanations())
        return self.table().to_html() + (f"\n<ul>{items}</ul>" if items else "")


def _flat(outputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """All outputs as one real float64 vector (complex entries as their real and imaginary parts)."""
    parts = [(torch.view_as_real(o.resolve_conj()) if o.is_complex() else o).reshape(-1).double() for o in outputs]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)


def _agreement(
    a: torch.Tensor, b: torch.Tensor, tol_a: torch.Tensor, tol_b: torch.Tensor
) -> tuple[bool, float, int]:
    """(all finite positions within the looser tolerance, max |a - b| there, how many positions were compared)."""
    finite = a.isfinite() & b.isfinite()
    diff = (a - b).abs()[finite]
    limit = torch.maximum(tol_a, tol_b)[finite]
    return bool((diff <= limit).all()), float(diff.max()) if diff.numel() else 0.0, int(finite.sum())


def _odd_one_out(names: Sequence[str], agree: Callable[[str, str], bool]) -> tuple[str, ...] | None:
    """The group of methods that the independent evidence outvotes, or None when it is a tie.

    Methods are grouped by agreement; a group's weight counts independent
    evidence (forward mode once, however many forward methods it holds).
    """
    groups: list[list[str]] = []
    for name in names:
        home = next((g for g in groups if any(agree(name, other) for other in g)), None)
        if home is None:
            groups.append([name])
        else:
            home.append(name)
    if len(groups) != 2:
        return None

    def weight(group: list[str]) -> int:
        return len({"forward" if n in _FORWARD_MODE else n for n in group})

    light, heavy = sorted(groups, key=weight)
    return tuple(light) if weight(light) < weight(heavy) else None


_WHY_ODD = {
    _FORWARD_MODE: "the forward-mode rule is the odd one out: the dual API and torch.func.jvp use the same jvp "
    "formula and agree with each other, not with reverse mode and finite differences, so a jvp formula (a custom "
    "Function's jvp, or an operator's forward formula) is likely wrong",
    (DUAL_API,): "the dual API is the odd one out (a bug in how fn treats dual tensors, e.g. .data or a detach)",
    (FUNC_JVP,): "torch.func.jvp is the odd one out (fn behaves differently under torch.func transforms)",
    (REVERSE_MODE,): "reverse mode is the odd one out: a backward formula (e.g. a custom Function's backward) is "
    "likely wrong",
    (FINITE_DIFFERENCES,): "finite differences are the odd one out: truncation or rounding error, or a kink "
    "near x; try another eps",
}


def _positive_finite(name: str, value: float, *, zero_ok: bool = False) -> None:
    """Reject a step size or tolerance that would make the verification meaningless (nan, 0, negative)."""
    wanted = "a finite number >= 0" if zero_ok else "a positive finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LabkitTypeError(f"{name} must be {wanted}, got {value!r} ({type(value).__name__}).")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise LabkitValueError(f"{name} must be {wanted}, got {value!r}; the default is a good start.")


def verify_jvp(
    fn: Callable[..., Any],
    primals: Tensors,
    tangents: Tensors,
    *,
    eps: float = 1e-6,
    exact_tolerance: float = 1e-10,
    fd_tolerance: float = 1e-6,
) -> JvpVerification:
    """Compare the dual-API JVP with ``torch.func.jvp``, reverse mode and finite differences.

    Everything runs in float64 (complex128) on copies (a module ``fn`` is
    deep-copied and converted), so the differences show the methods, not float32
    rounding. Reverse mode builds the Jacobian with ``torch.func.jacrev`` and
    applies it to the tangent; finite differences use
    ``(f(x + eps t) - f(x - eps t)) / 2 eps``. Each element is compared with
    its own tolerance, ``tol * (1 + |jvp|)``, so a wrong small entry is found
    beside a large one; the report names the odd method out.

    A method that cannot run here (torch.func with an old-style custom
    Function, jacrev on a complex input) is reported as unavailable and the
    others still compare; bool/int outputs are skipped as not differentiable;
    NaN/inf positions are not compared. When fn lowers the precision inside
    (e.g. to bfloat16), finite differences are shown but not counted. When
    methods disagree on a square input and agree once its tangent is made
    symmetric, the report says so: fn treats that input as symmetric or
    Hermitian (linalg.cholesky, eigh).

    ``fn`` is first called twice on the same input: if the outputs differ (a
    module in training mode with Dropout, or any randomness), the methods could
    only disagree, so that is reported as an error instead of a table of "NO".
    The global RNG is forked, so the verification consumes no random numbers.
    """
    primal_tuple = _as_tuple(primals, "Primal", "primals")
    tangent_tuple = _as_tuple(tangents, "Tangent", "tangents")
    _validate_pairs(primal_tuple, tangent_tuple)
    _positive_finite("eps", eps)
    _positive_finite("exact_tolerance", exact_tolerance, zero_ok=True)
    _positive_finite("fd_tolerance", fd_tolerance, zero_ok=True)
    in_training = isinstance(fn, nn.Module) and any(m.training for m in fn.modules())
    if isinstance(fn, nn.Module):
        fn = copy.deepcopy(fn).double()
    xs = tuple(_wide(p) for p in primal_tuple)
    ts = tuple(_wide(t) for t in tangent_tuple)

    def all_outputs(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _split_output(fn(*args))[0]

    with _fork_rng(xs):
        first = _deterministic_float64_outputs(all_outputs, xs, in_training)
        keep = [i for i, out in enumerate(first) if _differentiable(out)]
        if not keep:
            dtypes = ", ".join(str(out.dtype) for out in first)
            raise LabkitTypeError(
                f"fn returns only bool or integer tensors ({dtypes}), which are not differentiable: there is no "
                "JVP to verify. Verify a function with a floating-point output."
            )

        def outputs_of(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            outs = all_outputs(*args)
            return tuple(outs[i] for i in keep)

        notes = [f"output {i} is {out.dtype}: not differentiable, skipped" for i, out in enumerate(first) if i not in keep]
        report = _compare(outputs_of, xs, ts, eps, exact_tolerance, fd_tolerance, in_training, notes)
        square = [
            i for i, (x, t) in enumerate(zip(xs, ts))
            if x.ndim >= 2 and x.shape[-1] == x.shape[-2] and not torch.equal(t, t.mT.conj())
        ]
        if report.ok or not square:
            return report
        symmetric = tuple((t + t.mT.conj()) / 2 if i in square else t for i, t in enumerate(ts))
        if not _compare(outputs_of, xs, symmetric, eps, exact_tolerance, fd_tolerance, in_training, []).ok:
            return report
    which = ", ".join(str(i) for i in square)
    note = (
        f"with the tangent of primal {which} made symmetric ((t + t.mT) / 2, Hermitian for complex) all methods "
        "agree: fn treats that input as symmetric or Hermitian (linalg.cholesky, eigh and eigvalsh read one "
        "triangle), so a non-symmetric tangent leaves the set of valid inputs and the methods see different "
        "functions. Pass a symmetric tangent."
    )
    return dataclasses.replace(report, notes=(*report.notes, note), symmetric_tangent_agrees=True)


class _Unavailable(Exception):
    """A verify_jvp method that cannot give a meaningful answer here; the message says why."""


def _wide(tensor: torch.Tensor) -> torch.Tensor:
    """A detached float64 copy (complex128 for complex), so verify_jvp compares methods, not rounding."""
    return tensor.detach().to(torch.complex128 if tensor.is_complex() else torch.float64)


class _PrecisionRecorder(TorchFunctionMode):
    """Records the floating dtypes narrower than float64 that any torch call in fn returns."""

    def __init__(self) -> None:
        super().__init__()
        self.lowered: set[torch.dtype] = set()

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: Any = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        self.lowered.update(
            t.dtype for t in _tensors_in(result) if _differentiable(t) and t.dtype.itemsize < (16 if t.is_complex() else 8)
        )
        return result


def _compare(
    outputs_of: Callable[..., tuple[torch.Tensor, ...]],
    xs: tuple[torch.Tensor, ...],
    ts: tuple[torch.Tensor, ...],
    eps: float,
    exact_tolerance: float,
    fd_tolerance: float,
    in_training: bool,
    notes: list[str],
) -> JvpVerification:
    """Run the four methods (each that can), compare them element by element, and build the report."""
    notes = list(notes)
    uncounted: dict[str, str] = {}
    recorder = _PrecisionRecorder()
    with recorder:
        outputs_of(*xs)
    if recorder.lowered:
        lowest = max(recorder.lowered, key=lambda d: torch.finfo(d).eps)
        uncounted[FINITE_DIFFERENCES] = (
            f"fn lowers the precision to {lowest} inside, so finite differences with eps={eps:g} measure its "
            "rounding, not the derivative"
        )
        exact_tolerance = max(exact_tolerance, 8 * torch.finfo(lowest).eps)
        notes.append(f"fn computes in {lowest} inside: exact methods compared to {exact_tolerance:.1e}")

    _, reference = jvp(outputs_of, xs, ts)
    results: dict[str, tuple[torch.Tensor, ...]] = {DUAL_API: tuple(r.detach() for r in reference)}
    unavailable: dict[str, str] = {}
    fd_rounding = torch.zeros(0)

    def functional() -> tuple[torch.Tensor, ...]:
        return torch.func.jvp(outputs_of, xs, ts)[1]

    def reverse() -> tuple[torch.Tensor, ...]:
        if any(x.is_complex() for x in xs):
            raise _Unavailable(
                "a primal is complex, and jacrev's Jacobian then follows the conjugate (Wirtinger) convention, "
                "which is not J applied to the tangent"
            )

        def real_outputs(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return tuple(torch.view_as_real(o.resolve_conj()) if o.is_complex() else o for o in outputs_of(*args))

        jacobians = torch.func.jacrev(real_outputs, argnums=tuple(range(len(xs))))(*xs)
        products = [sum(torch.tensordot(j, t, dims=t.ndim) for j, t in zip(jac, ts)) for jac in jacobians]
        return tuple(
            torch.view_as_complex(p.contiguous()) if r.is_complex() else p for p, r in zip(products, reference)
        )

    def finite() -> tuple[torch.Tensor, ...]:
        nonlocal fd_rounding
        plus = outputs_of(*(x + eps * t for x, t in zip(xs, ts)))
        minus = outputs_of(*(x - eps * t for x, t in zip(xs, ts)))
        fd_rounding = 4 * torch.finfo(torch.float64).eps * (_flat(plus).abs() + _flat(minus).abs()) / (2 * eps)
        return tuple((p - m) / (2 * eps) for p, m in zip(plus, minus))

    for name, method in ((FUNC_JVP, functional), (REVERSE_MODE, reverse), (FINITE_DIFFERENCES, finite)):
        try:
            with _in_place_explained(in_training), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # fn's own warnings were shown by the dual-API run
                result = tuple(r.detach() for r in method())
        except _Unavailable as exc:
            unavailable[name] = str(exc)
            continue
        except LabkitError:
            raise
        except Exception as exc:  # noqa: BLE001 - a method that cannot run is reported, the others compare
            unavailable[name] = f"torch says: {_first_line(exc)}"
            continue
        if [r.shape for r in result] != [r.shape for r in reference]:
            unavailable[name] = "its result has other shapes than fn's outputs"
            continue
        results[name] = result

    flat = {name: _flat(result) for name, result in results.items()}

    def tolerance(name: str, magnitude: torch.Tensor) -> torch.Tensor:
        if name == FINITE_DIFFERENCES:
            return fd_tolerance * (1 + magnitude) + fd_rounding
        return exact_tolerance * (1 + magnitude)

    def agree(a: str, b: str) -> tuple[bool, float, int]:
        magnitude = torch.maximum(flat[a].abs(), flat[b].abs()).nan_to_num(posinf=0.0)
        return _agreement(flat[a], flat[b], tolerance(a, magnitude), tolerance(b, magnitude))

    errors: dict[str, float] = {}
    compared_counts: dict[str, int] = {}
    disagreeing = []
    size = flat[DUAL_API].numel()
    for name in results:
        if name == DUAL_API:
            continue
        agrees, errors[name], compared = agree(DUAL_API, name)
        compared_counts[name] = compared
        if not agrees:
            disagreeing.append(name)
        if 0 < compared < size:
            notes.append(f"{name}: {size - compared} of {size} positions not finite here or in the dual API, not compared")
        if size and not compared:
            uncounted.setdefault(name, "it has no finite position in common with the dual API")
    counted = [DUAL_API, *(n for n in errors if n not in uncounted)]
    odd = None
    if any(name in counted for name in disagreeing):
        odd = _odd_one_out(counted, lambda a, b: agree(a, b)[0])
        notes.append(
            _WHY_ODD.get(odd, f"odd one out: {', '.join(odd)}") if odd
            else "the methods disagree, and it cannot be told which is wrong"
        )
    finite_values = flat[DUAL_API][flat[DUAL_API].isfinite()]
    return JvpVerification(
        errors=errors,
        scale=max(float(finite_values.abs().max()) if finite_values.numel() else 0.0, 1.0),
        exact_tolerance=exact_tolerance,
        fd_tolerance=fd_tolerance,
        disagreeing=tuple(disagreeing),
        unavailable=unavailable,
        uncounted=uncounted,
        odd_one_out=odd,
        notes=tuple(notes),
        compared=compared_counts,
    )


@contextmanager
def _in_place_explained(in_training: bool) -> Iterator[None]:
    """torch.func refuses a module that updates its buffers in place: in train mode, say why."""
    try:
        yield
    except RuntimeError as exc:
        if not (in_training and "in-place operation" in str(exc)):
            raise
        raise LabkitValueError(
            "The model is in training mode, where BatchNorm updates its running statistics in place on every "
            "call, and torch.func (jvp, jacrev) refuses to differentiate through that: call model.eval() first."
        ) from None


def _deterministic_float64_outputs(
    outputs_of: Callable[..., tuple[torch.Tensor, ...]], xs: tuple[torch.Tensor, ...], in_training: bool
) -> tuple[torch.Tensor, ...]:
    """Fn's outputs; says so when ``fn`` cannot be verified in float64, or gives a different output each call."""
    try:
        first = outputs_of(*xs)
    except RuntimeError as exc:
        if not re.search(r"dtype|scalar type", str(exc)):
            raise
        raise LabkitTypeError(
            "verify_jvp runs fn in float64, but fn mixes in a tensor of another dtype (e.g. float32) that it "
            "does not receive as a primal: a tensor captured by a closure, or a module attribute. Make it "
            "float64 (w.double()), pass it as a primal, or make it a parameter or buffer of an nn.Module, "
            f"which verify_jvp converts. torch said: {exc}"
        ) from None
    sparse = sorted({str(out.layout) for out in first if out.layout != torch.strided})
    if sparse:
        raise LabkitTypeError(
            f"fn returns a {', '.join(sparse)} tensor; verify_jvp compares dense outputs element by element. "
            "Return out.to_dense() from fn to verify its JVP."
        )
    lower = sorted({str(out.dtype) for out in first if out.is_floating_point() and out.dtype != torch.float64})
    if lower:
        raise LabkitTypeError(
            f"fn returned {', '.join(lower)} for float64 primals, so verify_jvp cannot compare in float64; "
            "remove the conversion inside fn (e.g. .float()), or compute in the input's dtype."
        )
    second = outputs_of(*xs)
    if all(torch.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True) for a, b in zip(first, second)):
        return first
    cause = (
        "The model is in training mode, where e.g. Dropout draws a new mask on every call: call model.eval() first."
        if in_training
        else "Remove the randomness (e.g. torch.manual_seed(0) inside fn), or verify a deterministic function."
    )
    raise LabkitValueError(
        f"fn gives different outputs for the same input, so its JVP changes from call to call and the methods "
        f"cannot agree. {cause}"
    )
