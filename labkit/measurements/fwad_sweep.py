"""``python -m labkit fwad-sweep``: labkit's ``jvp`` and ``verify_jvp`` on every operator PyTorch describes.

Why: a learner calls :func:`labkit.forward_ad.jvp` and :func:`~labkit.forward_ad.derivatives.verify_jvp`
on whatever operator they are curious about, so a handful of unit tests cannot show that
the helpers are honest everywhere. PyTorch's own test suite describes each operator with
sample inputs (``op_db``); this sweep differentiates the float64 CPU samples of each one with
respect to their first floating tensor input (the other arguments held fixed), in a seeded
random direction, and sorts every outcome into a class:

- ``jvp``: agree (with ``torch.func.jvp``); empty (nothing to compare); not differentiable (no
  floating output); labkit clear error; op fails without AD too (e.g. a CUDA-only op: its own
  error is the right one); labkit warning (a wrong result labkit warned about); raw error (any
  other exception); silent wrong (differs from ``torch.func.jvp``, or a zero tangent where finite
  differences at two step sizes agree on a slope); unverified (no reference could run).
- ``verify_jvp``: agree (its verdict matches the sweep's own comparison of the dual API,
  ``torch.func.jvp`` and finite differences at the positions where all are finite); labkit clear
  error; raw error; false alarm (not ok although those methods agree); miss (ok although they
  clearly disagree).

Sparse or complex inputs, an op past its time budget, and ops without float64 samples are
counted in buckets of their own, so the totals always add up.

Like ``bench`` it is a report, not a test: the counts move with every torch release. Importing
``torch.testing._internal`` takes seconds and changes process-wide state (it freezes the
``torch.backends`` flags), so only this command imports it, when it runs: run it as its own process.
"""
from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import writable_target, write_text
from labkit.core.noise import silence_known_warnings
from labkit.core.tables import ShowsAsTable, Table
from labkit.forward_ad import derivatives as forward_ad

AGREE = "agree"
NOT_DIFFERENTIABLE = "not differentiable (no floating output)"
EMPTY = "empty (nothing to compare)"
LABKIT_ERROR = "labkit clear error"
OP_FAILS = "op fails without AD too"
LABKIT_WARNING = "labkit warning"
RAW_ERROR = "raw error"
SILENT_WRONG = "silent wrong"
FALSE_ALARM = "false alarm"
MISS = "miss"
UNVERIFIED = "unverified (no reference ran)"
SKIPPED_INPUT = "skipped: sparse or complex input"
SKIPPED_JACOBIAN = "skipped: Jacobian too large for verify_jvp"
TOO_SLOW = "too slow (op stopped)"
NO_SAMPLES = "no float64 samples (op)"
CLASSES = (
    AGREE, EMPTY, NOT_DIFFERENTIABLE, LABKIT_ERROR, OP_FAILS, LABKIT_WARNING, RAW_ERROR, SILENT_WRONG, FALSE_ALARM, MISS,
    UNVERIFIED, SKIPPED_INPUT, SKIPPED_JACOBIAN, TOO_SLOW, NO_SAMPLES,
)
GOOD_CLASSES = frozenset({AGREE, EMPTY, NOT_DIFFERENTIABLE, LABKIT_ERROR, OP_FAILS})

EXACT_RTOL, EXACT_ATOL = 1e-6, 1e-8  # dual API vs torch.func.jvp: the same formulas, rounding only
# Finite differences; absolute tolerances are scaled by 1 + |f(x)| at each position, for the rounding in f.
FD_RTOL, FD_ATOL = 1e-5, 1e-7  # a method against FD at step 1e-6 (rounding ~1e-10 |f|, truncation ~1e-12 |3rd derivative|)
FD_LOOSE_RTOL, FD_LOOSE_ATOL = 1e-3, 1e-5  # the two steps against each other, and "clearly nonzero"
FD_STEPS = (1e-6, 1e-4)  # two step sizes: a position where they disagree (a jump, low precision) is unreliable
MAX_JACOBIAN_ELEMENTS = 20_000_000  # verify_jvp builds the whole Jacobian with jacrev (8 bytes each)


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SampleResult:
    """What jvp and verify_jvp did on one sample of one operator."""

    op: str
    sample: int  # -1 for an operator-level entry (no samples, too slow)
    supports_forward_ad: bool  # what the OpInfo declares
    jvp: str
    verify_jvp: str
    detail: str = ""
    warnings: tuple[str, ...] = ()


@dataclass(repr=False)
class SweepReport(ShowsAsTable):
    """All sample results of one sweep; counts per class, split by the OpInfo's forward-AD claim."""

    results: list[SampleResult] = field(default_factory=list)
    samples_per_op: int = 2

    def counts(self, method: str) -> dict[str, Counter[bool]]:
        """``{class: Counter({supports_forward_ad: n})}`` for ``method`` ("jvp" or "verify_jvp")."""
        counts: dict[str, Counter[bool]] = {name: Counter() for name in CLASSES}
        for result in self.results:
            counts[getattr(result, method)][result.supports_forward_ad] += 1
        return counts

    def ops_by_class(self, method: str) -> dict[str, list[str]]:
        """The operators with at least one sample in each class other than the good ones."""
        ops: dict[str, set[str]] = {}
        for result in self.results:
            ops.setdefault(getattr(result, method), set()).add(result.op)
        return {name: sorted(ops[name]) for name in CLASSES if name in ops and name not in GOOD_CLASSES}

    def table(self) -> Table:
        jvp, verification = self.counts("jvp"), self.counts("verify_jvp")
        rows = [
            [name, jvp[name][True], jvp[name][False], verification[name][True], verification[name][False]]
            for name in CLASSES
            if sum(jvp[name].values()) or sum(verification[name].values())
        ]
        rows.append(["total", *(sum(column) for column in list(zip(*rows))[1:])])
        ops = len({r.op for r in self.results})
        return Table(
            ["class", "jvp (fwd AD ops)", "jvp (other ops)", "verify_jvp (fwd AD ops)", "verify_jvp (other ops)"],
            rows,
            title=f"fwad-sweep: {ops} OpInfo ops, up to {self.samples_per_op} float64 samples each (torch {torch.__version__})",
        )

    def details(self) -> str:
        """One line per class that is not good: the operators in it."""
        lines = []
        for method in ("jvp", "verify_jvp"):
            for name, ops in self.ops_by_class(method).items():
                lines.append(f"{method} {name} ({len(ops)} ops): {', '.join(ops)}")
        return "\n".join(lines)

    def to_json(self) -> str:
        payload = {
            "torch": torch.__version__,
            "samples_per_op": self.samples_per_op,
            "counts": {
                method: {name: {"fwd_ad_ops": c[True], "other_ops": c[False]} for name, c in self.counts(method).items() if c}
                for method in ("jvp", "verify_jvp")
            },
            "ops_by_class": {method: self.ops_by_class(method) for method in ("jvp", "verify_jvp")},
            "results": [asdict(result) for result in self.results],
        }
        return json.dumps(payload, indent=2) + "\n"


# ---------------------------------------------------------------------------
# One function, one primal: the three methods and the verdicts
# ---------------------------------------------------------------------------
@dataclass
class _Tangents:
    """Floating output tangents of one method (None: the method raised or the outputs changed shape)."""

    values: list[torch.Tensor] | None
    error: str = ""


def _floating_outputs(output: Any) -> list[torch.Tensor]:
    leaves, _ = tree_flatten(output)
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor) and (leaf.is_floating_point() or leaf.is_complex())]


def _paired_tangents(output: Any, tangent: Any) -> list[torch.Tensor]:
    """The tangents of the floating outputs, in output order."""
    outs, _ = tree_flatten(output)
    tangents, _ = tree_flatten(tangent)
    return [
        t.detach()
        for o, t in zip(outs, tangents)
        if isinstance(o, torch.Tensor) and (o.is_floating_point() or o.is_complex()) and isinstance(t, torch.Tensor)
    ]


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _exact_agree(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and bool(torch.isclose(x, y.to(x.dtype), rtol=EXACT_RTOL, atol=EXACT_ATOL, equal_nan=True).all())
        for x, y in zip(a, b)
    )


@dataclass
class _FiniteDifferences:
    """Central differences at two step sizes; ``reliable`` marks finite positions where both agree."""

    values: list[torch.Tensor]
    scale: list[torch.Tensor]  # 1 + |f(x)| per position
    reliable: list[torch.Tensor]

    def mismatch(self, tangents: list[torch.Tensor]) -> float:
        """Largest |tangent - FD| over reliable positions where it exceeds the tolerance (0.0: none)."""
        worst = 0.0
        for t, fd, scale, ok in zip(tangents, self.values, self.scale, self.reliable):
            if t.shape != fd.shape:
                return float("inf")
            diff = (t - fd).abs()
            bad = ok & torch.isfinite(t) & (diff > FD_ATOL * scale + FD_RTOL * fd.abs())
            if bad.any():
                worst = max(worst, float(diff[bad].max()))
        return worst

    def max_reliable(self) -> float:
        return max((float(fd[ok].abs().max()) for fd, ok in zip(self.values, self.reliable) if ok.any()), default=0.0)

    def has_reliable(self) -> bool:
        return any(bool(ok.any()) for ok in self.reliable)

    def clearly_nonzero(self) -> bool:
        return any(
            bool((ok & (fd.abs() > FD_LOOSE_ATOL * scale)).any()) for fd, scale, ok in zip(self.values, self.scale, self.reliable)
        )


def _finite_differences(fn: Callable[[torch.Tensor], Any], x: torch.Tensor, t: torch.Tensor) -> _FiniteDifferences | None:
    """FD of ``fn`` at ``x`` along ``t``; None when ``fn`` fails or its output shapes change with the step."""
    estimates, scales = [], []
    try:
        for eps in FD_STEPS:
            plus, minus = _floating_outputs(fn(x + eps * t)), _floating_outputs(fn(x - eps * t))
            if len(plus) != len(minus) or any(p.shape != m.shape for p, m in zip(plus, minus)):
                return None
            estimates.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
            scales.append([torch.maximum(p.abs(), m.abs()) for p, m in zip(plus, minus)])
    except Exception:
        return None
    small, large = estimates
    if len(small) != len(large) or any(s.shape != b.shape for s, b in zip(small, large)):
        return None
    scale = [1 + size for size in scales[0]]
    reliable = [
        torch.isfinite(s) & torch.isfinite(b) & ((s - b).abs() <= FD_LOOSE_ATOL * c + FD_LOOSE_RTOL * s.abs())
        for s, b, c in zip(small, large, scale)
    ]
    return _FiniteDifferences(small, scale, reliable)


@contextlib.contextmanager
def _caught_warnings() -> Iterator[list[warnings.WarningMessage]]:
    """Record every warning in the block but torch's known noise (none reaches the terminal)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        silence_known_warnings()
        yield caught


def _labkit_warnings(
    labkit_caught: list[warnings.WarningMessage], torch_caught: list[warnings.WarningMessage]
) -> tuple[str, ...]:
    """Messages labkit's jvp added: those that running the same function under torch.func.jvp did not give."""
    torch_messages = {str(w.message) for w in torch_caught}
    return tuple(dict.fromkeys(
        str(w.message).splitlines()[0][:300] for w in labkit_caught if str(w.message) not in torch_messages
    ))


def _classify_jvp(
    labkit_result: _Tangents, labkit_error: BaseException | None, reference: _Tangents,
    fd: _FiniteDifferences | None, warned: bool, differentiable: bool,
) -> tuple[str, str]:
    """The jvp class and a one-line reason."""
    if labkit_error is not None:
        return (LABKIT_ERROR if isinstance(labkit_error, LabkitError) else RAW_ERROR), _one_line(labkit_error)
    if not differentiable:
        return NOT_DIFFERENTIABLE, "no floating or complex output"
    tangents = labkit_result.values or []
    if all(t.numel() == 0 for t in tangents):
        return EMPTY, ""
    wrong = ""
    if reference.values is not None and not _exact_agree(tangents, reference.values):
        wrong = "differs from torch.func.jvp"
    elif fd is not None and all(not bool(t.ne(0).any()) for t in tangents) and fd.clearly_nonzero():
        wrong = f"zero tangent, but finite differences give up to {fd.max_reliable():.3g}"
    elif reference.values is None and fd is not None and fd.mismatch(tangents):
        wrong = f"differs from finite differences by {fd.mismatch(tangents):.3g} (torch.func.jvp failed)"
    if wrong:
        return (LABKIT_WARNING if warned else SILENT_WRONG), wrong
    if reference.values is None and (fd is None or not fd.has_reliable()):
        return UNVERIFIED, f"torch.func.jvp failed ({reference.error}) and finite differences are unreliable"
    return AGREE, ""


def _comparable(tangents: list[torch.Tensor]) -> bool:
    """Some position is finite (or there is no position at all: empty outputs agree trivially)."""
    return all(t.numel() == 0 for t in tangents) or any(bool(torch.isfinite(t).any()) for t in tangents)


def _methods_agree(labkit_result: _Tangents, reference: _Tangents, fd: _FiniteDifferences | None) -> bool | None:
    """Do the dual API, torch.func.jvp and (reliable) finite differences agree?

    None: fewer than two of them give a finite number anywhere (all NaN/inf), so there is nothing to compare.
    """
    exact = [m.values for m in (labkit_result, reference) if m.values is not None and _comparable(m.values)]
    if len(exact) + (fd is not None and fd.has_reliable()) < 2:
        return None
    if len(exact) == 2 and not _exact_agree(*exact):
        return False
    return fd is None or not exact or fd.mismatch(exact[0]) == 0.0


def _classify_verification(report: Any, error: BaseException | None, agree: bool | None) -> tuple[str, str]:
    """The verify_jvp class: its verdict against the sweep's own comparison."""
    if error is not None:
        return (LABKIT_ERROR if isinstance(error, LabkitError) else RAW_ERROR), _one_line(error)
    ok = bool(report.ok)
    if agree is None:
        return UNVERIFIED, f"verify_jvp says ok={ok}; fewer than two methods ran here"
    if agree and not ok:
        return FALSE_ALARM, " | ".join(report.to_text().splitlines())
    if not agree and ok:
        return MISS, " | ".join(report.to_text().splitlines())
    return AGREE, ""


def sweep_function(
    fn: Callable[[torch.Tensor], Any], x: torch.Tensor, *, op: str = "fn", sample: int = 0,
    supports_forward_ad: bool = True, seed: int = 0,
) -> SampleResult:
    """Run jvp, torch.func.jvp, finite differences and verify_jvp on ``fn`` at ``x``, and classify.

    ``fn`` takes one tensor; it is called on a fresh clone of ``x`` each time. The
    tangent is ``torch.randn`` from a generator seeded with ``seed``.
    """
    dtype = x.dtype if x.is_floating_point() else torch.float64
    t = torch.randn(x.shape, dtype=dtype, generator=torch.Generator().manual_seed(seed))
    if x.layout != torch.strided:
        return _sweep_sparse(fn, x, t, SampleResult(op, sample, supports_forward_ad, SKIPPED_INPUT, SKIPPED_INPUT))
    labkit_error: BaseException | None = None
    labkit_result, differentiable = _Tangents(None), True
    with _caught_warnings() as labkit_caught:
        try:
            out, tangent = forward_ad.jvp(fn, x.clone(), t.clone())
            labkit_result, differentiable = _Tangents(_paired_tangents(out, tangent)), bool(_floating_outputs(out))
        except Exception as exc:
            labkit_error = exc
    with _caught_warnings() as torch_caught:
        try:
            ref_out, ref_tangent = torch.func.jvp(fn, (x.clone(),), (t.clone(),))[:2]  # a third item only with has_aux
            reference = _Tangents(_paired_tangents(ref_out, ref_tangent))
        except Exception as exc:
            reference = _Tangents(None, _one_line(exc))
        fd = _finite_differences(fn, x.clone(), t) if x.is_floating_point() else None
    messages = _labkit_warnings(labkit_caught, torch_caught)
    jvp_class, jvp_detail = _classify_jvp(labkit_result, labkit_error, reference, fd, bool(messages), differentiable)
    with _caught_warnings():
        verification_class, verification_detail = _run_verification(fn, x, t, labkit_result, reference, fd)
        if RAW_ERROR in (jvp_class, verification_class) and _fails_alone(fn, x):  # e.g. a CUDA-only op: not labkit's error
            jvp_class, verification_class = (OP_FAILS if c == RAW_ERROR else c for c in (jvp_class, verification_class))
    detail = "; ".join(f"{method}: {text}" for method, text in (("jvp", jvp_detail), ("verify_jvp", verification_detail)) if text)
    return SampleResult(op, sample, supports_forward_ad, jvp_class, verification_class, detail, messages)


def _sweep_sparse(fn: Callable[[torch.Tensor], Any], x: torch.Tensor, t: torch.Tensor, skipped: SampleResult) -> SampleResult:
    """A sparse primal: no reference to compare with, but labkit must refuse it with a clear error."""
    classes, details = [], []
    with _caught_warnings():
        for method in (forward_ad.jvp, forward_ad.verify_jvp):
            try:
                method(fn, x.clone(), t.clone())
                classes.append(SKIPPED_INPUT)
            except Exception as exc:
                classes.append(LABKIT_ERROR if isinstance(exc, LabkitError) else OP_FAILS if _fails_alone(fn, x) else RAW_ERROR)
                details.append(f"{method.__name__}: {_one_line(exc)}")
    return replace(skipped, jvp=classes[0], verify_jvp=classes[1], detail="; ".join(details))


def _fails_alone(fn: Callable[[torch.Tensor], Any], x: torch.Tensor) -> bool:
    """Does ``fn`` raise on a plain call, without any AD? Then its error is the right one to pass on."""
    try:
        fn(x.clone())
    except Exception:
        return True
    return False


def _run_verification(
    fn: Callable[[torch.Tensor], Any], x: torch.Tensor, t: torch.Tensor,
    labkit_result: _Tangents, reference: _Tangents, fd: _FiniteDifferences | None,
) -> tuple[str, str]:
    """verify_jvp on the sample, unless its Jacobian (outputs x inputs) would not fit in memory."""
    outputs = labkit_result.values if labkit_result.values is not None else reference.values
    if outputs is not None and sum(o.numel() for o in outputs) * x.numel() > MAX_JACOBIAN_ELEMENTS:
        return SKIPPED_JACOBIAN, f"{x.numel()} inputs x {sum(o.numel() for o in outputs)} outputs"
    try:
        report, error = forward_ad.verify_jvp(fn, x.clone(), t.clone()), None
    except Exception as exc:
        report, error = None, exc
    return _classify_verification(report, error, _methods_agree(labkit_result, reference, fd))


# ---------------------------------------------------------------------------
# OpInfo samples
# ---------------------------------------------------------------------------
def _op_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def load_op_db() -> list[Any]:
    """PyTorch's OpInfo list, imported only now: slow, and it changes process-wide torch state."""
    from labkit.core.noise import filtered_native_stderr

    silence_known_warnings()
    with filtered_native_stderr():
        from torch.testing._internal.common_methods_invocations import op_db
    return list(op_db)


def select_ops(ops: Sequence[Any], names: Sequence[str] | None, limit: int | None) -> list[Any]:
    """The OpInfos named (by name, all variants, or by name.variant), then the first ``limit``."""
    if names:
        known = {_op_name(op) for op in ops} | {op.name for op in ops}
        unknown = [name for name in names if name not in known]
        if unknown:
            import difflib

            hints = {name: difflib.get_close_matches(name, sorted(known), n=3) for name in unknown}
            said = "; ".join(f"{name!r} (did you mean {', '.join(h) or 'nothing close'}?)" for name, h in hints.items())
            raise LabkitValueError(f"--ops: no OpInfo named {said}. Names are as in op_db, e.g. 'sin', 'special.bessel_j0'.")
        ops = [op for op in ops if op.name in names or _op_name(op) in names]
    return list(ops[:limit] if limit is not None else ops)


def _sample_function(op: Any, sample: Any) -> tuple[Callable[[torch.Tensor], Any], torch.Tensor] | str:
    """``(fn, x)``: the op as a function of its first floating tensor input; or why the sample is skipped."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    tensors = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]
    if not tensors:
        return NOT_DIFFERENTIABLE
    chosen = ([i for i in tensors if leaves[i].is_floating_point()] or tensors)[0]
    if any(leaves[i].is_complex() or (i != chosen and leaves[i].layout != torch.strided) for i in tensors):
        return SKIPPED_INPUT  # a sparse primal is tried (labkit must refuse it clearly), sparse fixed arguments are not

    def fn(primal: torch.Tensor) -> Any:
        new = [
            primal if i == chosen else leaf.clone() if isinstance(leaf, torch.Tensor) else leaf for i, leaf in enumerate(leaves)
        ]
        first, args, kwargs = tree_unflatten(new, spec)
        torch.manual_seed(0)  # random ops (dropout, bernoulli) draw the same numbers on every call
        return op.op(first, *args, **kwargs)

    return fn, leaves[chosen].detach()


class _TooSlow(BaseException):
    """Raised by the timer inside an op that ran past its time budget (BaseException: never swallowed)."""


@contextlib.contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_TooSlow` in the block after ``seconds`` (main thread, Unix); elsewhere no limit."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def sweep_op(op: Any, samples: int, op_timeout: float, seed: int = 0) -> list[SampleResult]:
    """Up to ``samples`` float64 CPU samples of one OpInfo, classified; stops the op after ``op_timeout`` s."""
    name, claims = _op_name(op), bool(op.supports_forward_ad)
    if torch.float64 not in op.supported_dtypes("cpu"):
        return [SampleResult(name, -1, claims, NO_SAMPLES, NO_SAMPLES, "float64 not supported on CPU")]
    results: list[SampleResult] = []
    try:
        with _time_limit(op_timeout), _caught_warnings():  # sample generation warns too (sparse CSR is beta)
            inputs = op.sample_inputs("cpu", torch.float64, requires_grad=False)
            for index, sample in enumerate(itertools.islice(inputs, samples)):
                made = _sample_function(op, sample)
                if isinstance(made, str):
                    results.append(SampleResult(name, index, claims, made, made))
                    continue
                fn, x = made
                results.append(sweep_function(fn, x, op=name, sample=index, supports_forward_ad=claims, seed=seed + index))
    except _TooSlow:
        results.append(SampleResult(name, len(results), claims, TOO_SLOW, TOO_SLOW, f"over {op_timeout:g} s"))
    except Exception as exc:  # the sample generator itself failed
        if not results:
            results.append(SampleResult(name, -1, claims, NO_SAMPLES, NO_SAMPLES, _one_line(exc)))
    if not results:
        results.append(SampleResult(name, -1, claims, NO_SAMPLES, NO_SAMPLES, "no samples"))
    return results


def run_sweep(
    ops: Sequence[Any], *, samples: int = 2, op_timeout: float = 10.0, seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> SweepReport:
    """Sweep ``ops`` (OpInfos); the global RNG and default dtype are left as they were."""
    report = SweepReport(samples_per_op=samples)
    started = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        for count, op in enumerate(ops, 1):
            report.results.extend(sweep_op(op, samples, op_timeout, seed))
            if log and (count % 50 == 0 or count == len(ops)):
                log(f"fwad-sweep: {count}/{len(ops)} ops, {time.perf_counter() - started:.0f} s")
    return report


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------
def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--samples", type=_positive_int, default=2, help="float64 samples per op (default: %(default)s)")
    parser.add_argument("--ops", nargs="+", metavar="NAME", help="only these OpInfos (e.g. sin special.bessel_j0)")
    parser.add_argument("--limit", type=_positive_int, help="only the first N ops")
    parser.add_argument("--op-timeout", type=_positive_float, default=10.0,
                        help="seconds per op before it counts as too slow (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random tangents (default: %(default)s)")
    parser.add_argument("--details", action="store_true", help="list the ops in every class that is not good")
    parser.add_argument("--json", type=Path, help="also write every sample's result as JSON")


def run(args: argparse.Namespace) -> int:
    if args.json is not None:
        writable_target(args.json)  # refuse a bad path before minutes of work
    ops = select_ops(load_op_db(), args.ops, args.limit)
    report = run_sweep(ops, samples=args.samples, op_timeout=args.op_timeout, seed=args.seed,
                       log=lambda message: print(message, file=sys.stderr))
    print(report.to_text())
    if args.details:
        print()
        print(report.details() or "every sample is in a good class")
    if args.json is not None:
        print(f"JSON written to {write_text(args.json, report.to_json())}")
    return 0
