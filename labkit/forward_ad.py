"""Jacobian-vector products with PyTorch's dual-tensor API, and ways to check them.

Why hand-written: ``torch.func.jvp`` already computes JVPs. This module shows
what it does underneath, with the public ``torch.autograd.forward_ad`` API
(``dual_level``, ``make_dual``, ``unpack_dual``), and turns the mistakes a
learner makes (an integer primal, a tangent of the wrong shape, an operator
without a forward formula, a nested level) into one clear labkit error instead
of a silent wrong answer or a deep torch traceback. Everything else is torch:
``torch.func`` for the functional versions, for reverse mode and for Hessians.

- :func:`jvp` - ``(output, tangent_out)`` from the dual API; agrees with ``torch.func.jvp``.
- :func:`module_jvp` - the JVP of a module with respect to its parameters, two ways.
- :func:`check_jvp` - dual API vs ``torch.func.jvp`` vs reverse mode vs finite differences.
- :func:`hvp` - Hessian-vector product, forward-over-reverse.
"""
from __future__ import annotations

import copy
import math
import numbers
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Union

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn
from torch.overrides import TorchFunctionMode, resolve_name

from labkit.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.tables import ShowsAsTable, Table

Tensors = Union[torch.Tensor, Sequence[torch.Tensor]]


class ForwardADUnsupportedError(LabkitError, RuntimeError):
    """An operator in the function has no forward-mode (JVP) formula in this torch."""


class NestedForwardADError(LabkitError, RuntimeError):
    """A forward-AD level was opened inside another one."""


# ---------------------------------------------------------------------------
# Input checks shared by every entry point
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


def _check_pairs(primals: tuple[torch.Tensor, ...], tangents: tuple[torch.Tensor, ...]) -> None:
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
                f"has dtype {primal.dtype} (shape {tuple(primal.shape)}); torch would silently convert it. "
                f"Use tangent.to(primal.dtype)."
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
            f"cannot pass through it. Add jvp(ctx, *tangents) (see labkit.custom_function_example.Exp). {advice}"
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
        "(check_jvp shows them), or write the derivative yourself in a torch.autograd.Function with a jvp staticmethod."
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
_PRIVATE_PREFIXES = {"torch.functional.": "torch.", "torch._C._nn.": "torch.nn.functional.", "torch._C._VariableFunctions.": "torch."}


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


def _check_dropped_tangents(
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
    _check_pairs(primal_tuple, tangent_tuple)
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
        _check_dropped_tangents(fn, primal_tuple, tangent_tuple, missing)
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
        raise LabkitTypeError(f"module_jvp needs an nn.Module, got {type(model).__name__}; for a plain function use labkit.forward_ad.jvp.")
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
    _check_pairs(
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
    _check_pairs(primal_tuple, tangent_tuple)
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
# check_jvp: four ways to the same numbers
# ---------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class JvpCheckReport(ShowsAsTable):
    """Maximum absolute difference of each method from the dual-tensor JVP (float64)."""

    errors: dict[str, float]
    scale: float
    exact_tolerance: float
    fd_tolerance: float

    @property
    def max_error(self) -> float:
        return max(self.errors.values())

    @property
    def ok(self) -> bool:
        """Exact methods agree to rounding error; finite differences to their truncation error."""
        return all(
            err <= (self.fd_tolerance if name == FINITE_DIFFERENCES else self.exact_tolerance) * self.scale
            for name, err in self.errors.items()
        )

    def table(self) -> Table:
        rows = [[name, err, "yes" if self._agrees(name, err) else "NO"] for name, err in self.errors.items()]
        return Table(
            ["method", "max |error| vs dual API", "agrees"],
            rows,
            title=f"JVP check in float64 (|jvp| up to {self.scale:.3g})",
            floatfmt=".1e",
        )

    def _agrees(self, name: str, err: float) -> bool:
        tolerance = self.fd_tolerance if name == FINITE_DIFFERENCES else self.exact_tolerance
        return err <= tolerance * self.scale


FINITE_DIFFERENCES = "central finite differences"


def _positive_finite(name: str, value: float, *, zero_ok: bool = False) -> None:
    """Reject a step size or tolerance that would make the check meaningless (nan, 0, negative)."""
    wanted = "a finite number >= 0" if zero_ok else "a positive finite number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LabkitTypeError(f"{name} must be {wanted}, got {value!r} ({type(value).__name__}).")
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise LabkitValueError(f"{name} must be {wanted}, got {value!r}; the default is a good start.")


def check_jvp(
    fn: Callable[..., Any],
    primals: Tensors,
    tangents: Tensors,
    *,
    eps: float = 1e-6,
    exact_tolerance: float = 1e-10,
    fd_tolerance: float = 1e-6,
) -> JvpCheckReport:
    """Compare the dual-API JVP with ``torch.func.jvp``, reverse mode and finite differences.

    Everything runs in float64 on copies (a module ``fn`` is deep-copied and
    converted), so the differences show the methods, not float32 rounding.
    Reverse mode builds the Jacobian with ``torch.func.jacrev`` and applies it
    to the tangent; finite differences use ``(f(x + eps t) - f(x - eps t)) / 2 eps``.
    Tolerances are relative to the largest JVP entry.

    ``fn`` is first called twice on the same input: if the outputs differ (a
    module in training mode with Dropout, or any randomness), the methods could
    only disagree, so that is reported as an error instead of a table of "NO".
    The global RNG is forked, so the check consumes no random numbers.
    """
    primal_tuple = _as_tuple(primals, "Primal", "primals")
    tangent_tuple = _as_tuple(tangents, "Tangent", "tangents")
    _check_pairs(primal_tuple, tangent_tuple)
    _positive_finite("eps", eps)
    _positive_finite("exact_tolerance", exact_tolerance, zero_ok=True)
    _positive_finite("fd_tolerance", fd_tolerance, zero_ok=True)
    in_training = isinstance(fn, nn.Module) and any(m.training for m in fn.modules())
    if isinstance(fn, nn.Module):
        fn = copy.deepcopy(fn).double()
    xs = tuple(p.detach().double() for p in primal_tuple)
    ts = tuple(t.detach().double() for t in tangent_tuple)

    def outputs_of(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return _split_output(fn(*args))[0]

    with _fork_rng(xs):
        _check_deterministic_float64(outputs_of, xs, in_training)
        _, reference = jvp(outputs_of, xs, ts)
        reference = tuple(r.detach() for r in reference)
        with _in_place_explained(in_training):
            _, functional = torch.func.jvp(outputs_of, xs, ts)
            jacobians = torch.func.jacrev(outputs_of, argnums=tuple(range(len(xs))))(*xs)
        reverse = tuple(
            sum(torch.tensordot(jac_oi, t, dims=t.ndim) for jac_oi, t in zip(jac_o, ts)) for jac_o in jacobians
        )
        plus = outputs_of(*(x + eps * t for x, t in zip(xs, ts)))
        minus = outputs_of(*(x - eps * t for x, t in zip(xs, ts)))
    finite = tuple((p - m) / (2 * eps) for p, m in zip(plus, minus))

    def max_diff(candidate: tuple[torch.Tensor, ...]) -> float:
        return max(float((c.detach() - r).abs().max()) if r.numel() else 0.0 for c, r in zip(candidate, reference))

    scale = max(max((float(r.abs().max()) if r.numel() else 0.0) for r in reference), 1.0)
    return JvpCheckReport(
        errors={
            "torch.func.jvp": max_diff(functional),
            "reverse mode (jacrev @ tangent)": max_diff(reverse),
            FINITE_DIFFERENCES: max_diff(finite),
        },
        scale=scale,
        exact_tolerance=exact_tolerance,
        fd_tolerance=fd_tolerance,
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


def _check_deterministic_float64(
    outputs_of: Callable[..., tuple[torch.Tensor, ...]], xs: tuple[torch.Tensor, ...], in_training: bool
) -> None:
    """Say so when ``fn`` cannot be checked in float64, or gives a different output each call."""
    try:
        first = outputs_of(*xs)
    except RuntimeError as exc:
        if not re.search(r"dtype|scalar type", str(exc)):
            raise
        raise LabkitTypeError(
            "check_jvp runs fn in float64, but fn mixes in a tensor of another dtype (e.g. float32) that it "
            "does not receive as a primal: a tensor captured by a closure, or a module attribute. Make it "
            "float64 (w.double()), pass it as a primal, or make it a parameter or buffer of an nn.Module, "
            f"which check_jvp converts. torch said: {exc}"
        ) from None
    lower = sorted({str(out.dtype) for out in first if out.is_floating_point() and out.dtype != torch.float64})
    if lower:
        raise LabkitTypeError(
            f"fn returned {', '.join(lower)} for float64 primals, so check_jvp cannot compare in float64; "
            "remove the conversion inside fn (e.g. .float()), or compute in the input's dtype."
        )
    second = outputs_of(*xs)
    if all(torch.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True) for a, b in zip(first, second)):
        return
    cause = (
        "The model is in training mode, where e.g. Dropout draws a new mask on every call: call model.eval() first."
        if in_training
        else "Remove the randomness (e.g. torch.manual_seed(0) inside fn), or check a deterministic function."
    )
    raise LabkitValueError(
        f"fn gives different outputs for the same input, so its JVP changes from call to call and the methods "
        f"cannot agree. {cause}"
    )
