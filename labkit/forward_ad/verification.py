"""``verify_jvp``: the dual-API JVP against ``torch.func.jvp``, reverse mode and finite differences.

Why four methods: one JVP on its own can be wrong without a sign. The dual API
and ``torch.func.jvp`` share the forward formulas, reverse mode and finite
differences are independent evidence, so the report can name the odd method out
(a wrong ``jvp`` of a custom Function, a wrong ``backward``, a finite-difference
step too large). Everything runs in float64 on fresh copies, so the caller's
tensors never change and the differences show the methods, not rounding.
"""
from __future__ import annotations

import dataclasses
import html
import math
import numbers
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from labkit.core.copies import private_copy, warn_hooks_reaching_out
from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.untouched import left_as_found
from labkit.forward_ad.dual import jvp
from labkit.forward_ad.inputs import (
    Tensors,
    _as_tuple,
    _differentiable,
    _first_line,
    _fork_rng,
    _split_output,
    _tensors_in,
    _validate_pairs,
)
from labkit.i18n.messages import N_, _

DUAL_API = N_("dual API")
FUNC_JVP = "torch.func.jvp"
REVERSE_MODE = N_("reverse mode (jacrev @ tangent)")
FINITE_DIFFERENCES = N_("central finite differences")
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
                rows.append([_(name), None, _("unavailable")])
            elif self.compared.get(name) == 0:
                rows.append([_(name), None, _("not compared")])
            elif name in self.errors:
                verdict = _("NO") if name in self.disagreeing else _("yes")
                rows.append([_(name), self.errors[name], verdict + (_(" (not counted)") if name in self.uncounted else "")])
        return Table(
            [_("method"), _("max |error| vs dual API"), _("agrees")],
            rows,
            title=_("JVP verification in float64 (|jvp| up to {scale})").format(scale=f"{self.scale:.3g}"),
            floatfmt=".1e",
        )

    def explanations(self) -> list[str]:
        """One line per method that could not run or does not count, then the notes."""
        lines = [_("{method}: unavailable, because {why}").format(method=_(name), why=why)
                 for name, why in self.unavailable.items()]
        lines += [_("{method}: not counted, because {why}").format(method=_(name), why=why)
                  for name, why in self.uncounted.items()]
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
    _FORWARD_MODE: N_("the forward-mode rule is the odd one out: the dual API and torch.func.jvp use the same jvp "
                      "formula and agree with each other, not with reverse mode and finite differences, so a jvp "
                      "formula (a custom Function's jvp, or an operator's forward formula) is likely wrong"),
    (DUAL_API,): N_("the dual API is the odd one out (a bug in how fn treats dual tensors, e.g. .data or a detach)"),
    (FUNC_JVP,): N_("torch.func.jvp is the odd one out (fn behaves differently under torch.func transforms)"),
    (REVERSE_MODE,): N_("reverse mode is the odd one out: a backward formula (e.g. a custom Function's backward) is "
                        "likely wrong"),
    (FINITE_DIFFERENCES,): N_("finite differences are the odd one out: truncation or rounding error, or a kink "
                              "near x; try another eps"),
}


def _odd_note(odd: tuple[str, ...] | None) -> str:
    """The note that names the odd method out (or says that none can be named)."""
    if odd is None:
        return _("the methods disagree, and it cannot be told which is wrong")
    return _(_WHY_ODD[odd]) if odd in _WHY_ODD else _("odd one out: {methods}").format(
        methods=", ".join(_(name) for name in odd))


def _positive_finite(name: str, value: float, *, zero_ok: bool = False) -> None:
    """Reject a step size or tolerance that would make the verification meaningless (nan, 0, negative)."""
    wanted = _("a finite number >= 0") if zero_ok else _("a positive finite number")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise LabkitTypeError(_("{name} must be {wanted}, got {value} ({type}).").format(
            name=name, wanted=wanted, value=repr(value), type=type(value).__name__))
    if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
        raise LabkitValueError(_("{name} must be {wanted}, got {value}; the default is a good start.").format(
            name=name, wanted=wanted, value=repr(value)))


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
    rounding; every call of fn gets fresh copies of the primals, so a fn that
    works in place changes neither the caller's tensors nor the next method's
    input. Reverse mode builds the Jacobian with ``torch.func.jacrev`` and
    applies it to the tangent; finite differences use
    ``(f(x + eps t) - f(x - eps t)) / 2 eps``. Each element is compared with
    its own tolerance, ``tol * (1 + |jvp|)``, so a wrong small entry is found
    beside a large one; the report names the odd method out.

    A method that cannot run here (torch.func with an old-style custom
    Function, jacrev on a complex input) is reported as unavailable and the
    others still compare; bool/int outputs are skipped as not differentiable;
    NaN/inf positions are not compared. When fn lowers the precision inside
    (e.g. to float32 or bfloat16), finite differences are shown but not counted,
    and the exact methods may also differ by 8 eps of that precision times the
    largest |jvp|: its rounding is relative to the terms an operator sums, not to
    each small result. An empty input or output cannot be verified (an error). When
    methods disagree on a square input and agree once its tangent is made
    symmetric, the report says so and blames no method: fn treats that input
    as symmetric or Hermitian (linalg.cholesky, eigh, pinv(hermitian=True)).

    ``fn`` is first called twice on the same input: if the outputs differ (a
    module in training mode with Dropout, or any randomness), the methods could
    only disagree, so that is reported as an error instead of a table of "NO".
    A method that fails where a plain call of fn now fails too (fn keeps state
    and breaks on a later call) is an error, never an "unavailable" beside an ok.
    The global RNG is forked, so the verification consumes no random numbers. A module's hooks run
    on its copy (they are part of what it computes); one that holds the caller's object gets a
    :class:`~labkit.core.copies.HookSideEffectWarning` naming it.
    """
    with left_as_found():
        primal_tuple = _as_tuple(primals, "Primal", "primals")
        tangent_tuple = _as_tuple(tangents, "Tangent", "tangents")
        _validate_pairs(primal_tuple, tangent_tuple)
        _positive_finite("eps", eps)
        _positive_finite("exact_tolerance", exact_tolerance, zero_ok=True)
        _positive_finite("fd_tolerance", fd_tolerance, zero_ok=True)
        if not callable(fn) or isinstance(fn, torch.Tensor):
            raise LabkitTypeError(
                _("{call} wants a function (or a module) as fn, the thing to differentiate, and got a {kind}. Pass a "
                  "function of the primals, e.g. jvp(torch.sin, (x,), (v,)), or lambda x: (x ** 2).sum().").format(
                    call="verify_jvp(fn, primals, tangents)", kind=type(fn).__name__)
            )
        in_training = isinstance(fn, nn.Module) and any(m.training for m in fn.modules())
        if isinstance(fn, nn.Module):
            warn_hooks_reaching_out(fn)  # its hooks run on the copy: one holding the learner's object reaches it
            fn = private_copy(fn, share_parameters=False).double()  # own buffers, attributes and parameters; its hooks
        if primal_tuple and all(p.numel() == 0 for p in primal_tuple):
            raise LabkitValueError(_(
                "verify_jvp cannot verify an empty input: the primals have no elements, so there is no direction to "
                "differentiate along and every method would trivially agree. Pass primals with at least one element."
            ))
        xs = tuple(_wide(p) for p in primal_tuple)
        ts = tuple(_wide(t) for t in tangent_tuple)

        def all_outputs(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            # each call gets fresh copies (clone keeps a dual's tangent and is differentiable under torch.func), so a
            # fn that works in place changes neither the caller's tensors nor what the next method sees
            return _split_output(fn(*(a.clone() for a in args)))[0]

        with _fork_rng(xs):
            first = _deterministic_float64_outputs(all_outputs, xs, in_training)
            keep = [i for i, out in enumerate(first) if _differentiable(out)]
            if not keep:
                dtypes = ", ".join(str(out.dtype) for out in first)
                raise LabkitTypeError(_(
                    "fn returns only bool or integer tensors ({dtypes}), which are not differentiable: there is no "
                    "JVP to verify. Verify a function with a floating-point output."
                ).format(dtypes=dtypes))

            def outputs_of(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
                outs = all_outputs(*args)
                return tuple(outs[i] for i in keep)

            if not any(first[i].numel() for i in keep):
                raise LabkitValueError(_(
                    "verify_jvp cannot verify fn here: its floating-point outputs are empty, so there is no JVP entry to "
                    "compare and every method would trivially agree. Verify it at an input where fn's output has elements."
                ))
            notes = [_("output {index} is {dtype}: not differentiable, skipped").format(index=i, dtype=out.dtype)
                     for i, out in enumerate(first) if i not in keep]
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
            "agree: fn treats that input as symmetric or Hermitian (linalg.cholesky, eigh, eigvalsh and "
            "pinv(hermitian=True) read one triangle), so a non-symmetric tangent leaves the set of valid inputs and the "
            "methods see different functions. Pass a symmetric tangent."
        )
        # the tangent is the cause, so no method is the odd one out (finite differences were blamed before)
        kept = tuple(line for line in report.notes if line != _odd_note(report.odd_one_out))
        return dataclasses.replace(report, notes=(*kept, note), odd_one_out=None, symmetric_tangent_agrees=True)


class _Unavailable(Exception):
    """A verify_jvp method that cannot give a meaningful answer here; the message says why."""


def _wide(tensor: torch.Tensor) -> torch.Tensor:
    """A detached float64 copy (complex128 for complex), so verify_jvp compares methods, not rounding.

    Always a copy, even of a float64 tensor: the caller's tensor must stay as it was.
    """
    return tensor.detach().to(torch.complex128 if tensor.is_complex() else torch.float64, copy=True)


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
    # Rounding in a lower precision is relative to the size of what an operator sums (a matmul's terms), not to
    # each small result: beside each entry's own tolerance, allow 8 eps of that precision times the largest |jvp|.
    precision_floor = 0.0
    if recorder.lowered:
        lowest = max(recorder.lowered, key=lambda d: torch.finfo(d).eps)
        uncounted[FINITE_DIFFERENCES] = (
            f"fn lowers the precision to {lowest} inside, so finite differences with eps={eps:g} measure its "
            "rounding, not the derivative"
        )
        precision_floor = 8 * torch.finfo(lowest).eps
        exact_tolerance = max(exact_tolerance, precision_floor)
        notes.append(
            f"fn computes in {lowest} inside: exact methods compared to {exact_tolerance:.1e} of each entry, "
            f"plus {precision_floor:.1e} of the largest |jvp| (rounding there is relative to the terms summed)"
        )

    try:
        _outputs, reference = jvp(outputs_of, xs, ts)
    except LabkitError:
        raise
    except Exception as exc:
        _raise_if_fn_now_fails(outputs_of, xs, DUAL_API, exc)
        raise
    results: dict[str, tuple[torch.Tensor, ...]] = {DUAL_API: tuple(r.detach() for r in reference)}
    unavailable: dict[str, str] = {}
    fd_rounding = torch.zeros(0)

    def functional() -> tuple[torch.Tensor, ...]:
        return torch.func.jvp(outputs_of, xs, ts)[1]

    def reverse() -> tuple[torch.Tensor, ...]:
        if any(x.is_complex() for x in xs):
            raise _Unavailable(_(
                "a primal is complex, and jacrev's Jacobian then follows the conjugate (Wirtinger) convention, "
                "which is not J applied to the tangent"
            ))

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
            _raise_if_fn_now_fails(outputs_of, xs, name, exc)
            unavailable[name] = _("torch says: {message}").format(message=_first_line(exc))
            continue
        if [r.shape for r in result] != [r.shape for r in reference]:
            unavailable[name] = _("its result has other shapes than fn's outputs")
            continue
        results[name] = result

    flat = {name: _flat(result) for name, result in results.items()}
    finite_values = flat[DUAL_API][flat[DUAL_API].isfinite()]
    scale = max(float(finite_values.abs().max()) if finite_values.numel() else 0.0, 1.0)

    def tolerance(name: str, magnitude: torch.Tensor) -> torch.Tensor:
        if name == FINITE_DIFFERENCES:
            return fd_tolerance * (1 + magnitude) + fd_rounding + precision_floor * scale
        return exact_tolerance * (1 + magnitude) + precision_floor * scale

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
            notes.append(_("{method}: {left} of {size} positions not finite here or in the dual API, not compared")
                         .format(method=_(name), left=size - compared, size=size))
        if size and not compared:
            uncounted.setdefault(name, _("it has no finite position in common with the dual API"))
    counted = [DUAL_API, *(n for n in errors if n not in uncounted)]
    odd = None
    if any(name in counted for name in disagreeing):
        odd = _odd_one_out(counted, lambda a, b: agree(a, b)[0])
        notes.append(_odd_note(odd))
    return JvpVerification(
        errors=errors,
        scale=scale,
        exact_tolerance=exact_tolerance,
        fd_tolerance=fd_tolerance,
        disagreeing=tuple(disagreeing),
        unavailable=unavailable,
        uncounted=uncounted,
        odd_one_out=odd,
        notes=tuple(notes),
        compared=compared_counts,
    )


def _raise_if_fn_now_fails(
    outputs_of: Callable[..., tuple[torch.Tensor, ...]], xs: tuple[torch.Tensor, ...], method: str, exc: Exception
) -> None:
    """Tell "this method cannot run here" from "fn itself fails on a later call" after ``method`` raised.

    Why: fn ran fine on the first calls, so if a plain call at the same input now
    fails too, fn keeps state between calls (a counter, an iterator, a cache):
    reporting the method as unavailable and the rest as agreeing would call ok a
    function that does not even give the same result twice.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a diagnostic rerun: fn's warnings were shown by the first run
            outputs_of(*xs)
    except Exception as again:  # noqa: BLE001 - any failure of a plain call means fn changed between calls
        raise LabkitValueError(_(
            "fn ran on verify_jvp's first calls but fails on a later one (while computing {method}: "
            "{error}; a plain call at the same input now raises {again}). verify_jvp calls fn once per method, so "
            "it cannot verify a fn that changes between calls: remove the state it keeps (a counter, an iterator, "
            "a cache) and call verify_jvp again.").format(
                method=_(method), error=_first_line(exc), again=f"{type(again).__name__}: {_first_line(again)}")
        ) from None


@contextmanager
def _in_place_explained(in_training: bool) -> Iterator[None]:
    """torch.func refuses a module that updates its buffers in place: in train mode, say why."""
    try:
        yield
    except RuntimeError as exc:
        if not (in_training and "in-place operation" in str(exc)):
            raise
        raise LabkitValueError(_(
            "The model is in training mode, where BatchNorm updates its running statistics in place on every "
            "call, and torch.func (jvp, jacrev) refuses to differentiate through that: call model.eval() first."
        )) from None


def _deterministic_float64_outputs(
    outputs_of: Callable[..., tuple[torch.Tensor, ...]], xs: tuple[torch.Tensor, ...], in_training: bool
) -> tuple[torch.Tensor, ...]:
    """Fn's outputs; says so when ``fn`` cannot be verified in float64, or gives a different output each call."""
    try:
        first = outputs_of(*xs)
    except RuntimeError as exc:
        if not re.search(r"dtype|scalar type", str(exc)):
            raise
        raise LabkitTypeError(_(
            "verify_jvp runs fn in float64, but fn mixes in a tensor of another dtype (e.g. float32) that it "
            "does not receive as a primal: a tensor captured by a closure, or a module attribute. Make it "
            "float64 (w.double()), pass it as a primal, or make it a parameter or buffer of an nn.Module, "
            "which verify_jvp converts. torch said: {error}").format(error=exc)
        ) from None
    sparse = sorted({str(out.layout) for out in first if out.layout != torch.strided})
    if sparse:
        raise LabkitTypeError(_(
            "fn returns a {layout} tensor; verify_jvp compares dense outputs element by element. "
            "Return out.to_dense() from fn to verify its JVP.").format(layout=", ".join(sparse))
        )
    lower = sorted({str(out.dtype) for out in first if out.is_floating_point() and out.dtype != torch.float64})
    if lower:
        raise LabkitTypeError(_(
            "fn returned {dtypes} for float64 primals, so verify_jvp cannot compare in float64; "
            "remove the conversion inside fn (e.g. .float()), or compute in the input's dtype.").format(
                dtypes=", ".join(lower))
        )
    second = outputs_of(*xs)
    if all(torch.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True) for a, b in zip(first, second)):
        return first
    cause = (
        _("The model is in training mode, where e.g. Dropout draws a new mask on every call: call model.eval() first.")
        if in_training
        else _("Remove the randomness (e.g. torch.manual_seed(0) inside fn), or verify a deterministic function.")
    )
    raise LabkitValueError(_(
        "fn gives different outputs for the same input, so its JVP changes from call to call and the methods "
        "cannot agree. {cause}").format(cause=cause)
    )
