"""What forward-mode AD costs: jacfwd vs jacrev, and a JVP vs a forward pass.

Why: the rule of thumb "forward mode for tall Jacobians (more outputs than
inputs), reverse mode for wide ones" is only worth teaching if the learner can
see it on their own machine. ``jacfwd`` pushes one tangent per *input*
dimension, ``jacrev`` pulls one cotangent per *output* dimension, so for a fixed
input size the time of ``jacrev`` grows with the output size and ``jacfwd``'s
barely does; the two curves cross near ``out == in``.

jacfwd and jacrev are timed with :func:`labkit.core.timing.compare_autorange`
(``torch.utils.benchmark`` blocks, alternating single-thread rounds, each block sized
once so that a point costs about its ``budget``: a workshop room runs the sweep in
every learner's kernel); the JVP against a forward pass goes through
:func:`labkit.core.timing.compare`, which interleaves its rounds. This module only
builds the problems and the result objects.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

import torch
import torch.autograd.forward_ad as fwAD
from torch import nn

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.tables import Row, ShowsAsTable, Table
from labkit.core.timing import RunStats, SideBySide, compare, compare_autorange, format_seconds
from labkit.forward_ad.derivatives import jvp
from labkit.i18n.messages import N_, _

DEFAULT_HIDDEN = 64


def _check_size(name: str, value: object, alternative: str = "") -> None:
    """A size is a positive integer; ``True`` and ``2.0`` are refused rather than read as 1 and 2."""
    wanted = f"{name} must be a positive integer{' ' + alternative if alternative else ''}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LabkitTypeError(f"{wanted}, got {value!r} ({type(value).__name__}); pass e.g. 16.")
    if value < 1:
        raise LabkitValueError(f"{wanted}, got {value!r}; pass e.g. 16.")


def _check_budget(budget: float) -> None:
    """A NaN or infinite budget would make ``blocked_autorange`` loop forever."""
    wanted = "budget must be a positive finite number of seconds"
    if isinstance(budget, bool) or not isinstance(budget, numbers.Real):
        raise LabkitTypeError(f"{wanted}, got {budget!r} ({type(budget).__name__}); pass e.g. 0.1.")
    if not (math.isfinite(budget) and budget > 0):
        raise LabkitValueError(f"{wanted}, got {budget!r}; pass e.g. 0.1.")


# ---------------------------------------------------------------------------
# jacfwd vs jacrev
# ---------------------------------------------------------------------------
def jacobian_problem(
    in_features: int,
    out_features: int,
    *,
    hidden: int = DEFAULT_HIDDEN,
    batch: int | None = None,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> tuple[Callable[[torch.Tensor], torch.Tensor], torch.Tensor]:
    """A two-layer tanh MLP ``R^in -> R^out`` (``tanh(x @ W1) @ W2``), as a plain function, and an input for it.

    With ``batch`` the input has shape ``(batch, in)`` and the Jacobians are per
    example (``torch.func.vmap`` over the batch).
    """
    for name, value in (("in_features", in_features), ("out_features", out_features), ("hidden", hidden)):
        _check_size(name, value)
    if batch is not None:
        _check_size("batch", batch, "or None")
    generator = torch.Generator().manual_seed(seed)
    w1 = (torch.randn(in_features, hidden, generator=generator) / math.sqrt(in_features)).to(device)
    w2 = (torch.randn(hidden, out_features, generator=generator) / math.sqrt(hidden)).to(device)
    shape = (in_features,) if batch is None else (batch, in_features)
    x = torch.randn(shape, generator=generator).to(device)

    def tanh_mlp(v: torch.Tensor) -> torch.Tensor:
        return torch.tanh(v @ w1) @ w2

    return tanh_mlp, x


@dataclass(frozen=True, repr=False)
class JacobianCost(ShowsAsTable):
    """jacfwd and jacrev timed on the same function ``R^in -> R^out``.

    :attr:`timings` reads them side by side against jacrev (reverse mode, what
    ``backward`` does): ``timings.speedup("jacfwd")`` above 1 means forward mode wins.
    """

    in_features: int
    out_features: int
    batch: int | None
    jacfwd: RunStats
    jacrev: RunStats

    @property
    def timings(self) -> SideBySide:
        return replace(self._untitled, title=self.summary())

    @property
    def _untitled(self) -> SideBySide:
        """The timings without the title: what the verdict itself reads (the title is the verdict)."""
        return SideBySide({"jacfwd": self.jacfwd, "jacrev": self.jacrev}, "jacrev", row_label="mode")

    @property
    def faster(self) -> str:
        return "jacfwd" if self.jacfwd.median < self.jacrev.median else "jacrev"

    @property
    def clear_winner(self) -> str | None:
        """The faster mode, or None for a tie: :attr:`faster_by` is less than its spread above 1.

        Why: one noisy point must not decide which mode wins; a gap inside the
        IQRs of the two timings could flip on the next run. Judged on ``faster_by``,
        the ratio :meth:`summary` prints with its spread, so that a printed
        "4x ±5" is never called a win, whichever mode is ahead.
        """
        # strict: two timings without spread that meet exactly are where the curves cross
        if self.faster_by - 1.0 < self.faster_by_spread:
            return None
        return self.faster

    @property
    def faster_by(self) -> float:
        """How many times faster the faster mode is (by median, >= 1); not a speedup, which has a fixed baseline."""
        return max(self.jacrev.median, self.jacfwd.median) / min(self.jacrev.median, self.jacfwd.median)

    @property
    def predicted(self) -> str:
        """The rule of thumb: forward mode when out > in, reverse mode when out < in."""
        return "jacfwd" if self.out_features > self.in_features else "jacrev"

    @property
    def faster_by_spread(self) -> float:
        """First-order spread of :attr:`faster_by` (``SideBySide.spread``, scaled: a ratio and its inverse share it)."""
        timings = self._untitled
        return self.faster_by * timings.spread("jacfwd") / timings.speedup("jacfwd")

    def summary(self) -> str:
        """The verdict with its spread; a gap inside the spread is no winner (:attr:`clear_winner`)."""
        batch = "" if self.batch is None else _(", batch {batch}").format(batch=self.batch)
        words = {"faster": self.faster, "by": f"{self.faster_by:.2f}x", "spread": f"±{self.faster_by_spread:.2f}"}
        verdict = (_("{faster} is {by} faster {spread}") if self.clear_winner is not None
                   else _("no clear winner ({faster} ahead by {by} {spread}, inside the spread)")).format(**words)
        return (
            f"R^{self.in_features} -> R^{self.out_features}{batch}: {verdict} "
            f"(jacfwd {format_seconds(self.jacfwd.median)}, jacrev {format_seconds(self.jacrev.median)})"
        )

    def table(self) -> Table:
        return self.timings.table()


def jacobian_cost(
    in_features: int,
    out_features: int,
    *,
    batch: int | None = None,
    hidden: int = DEFAULT_HIDDEN,
    rounds: int = 7,
    budget: float = 0.1,
    device: str | torch.device = "cpu",
) -> JacobianCost:
    """Time ``torch.func.jacfwd`` against ``torch.func.jacrev`` for an MLP ``R^in -> R^out``.

    Both Jacobians are computed once first and checked to agree, so a timing
    is never reported for a wrong answer. The two are timed with
    ``torch.utils.benchmark.Timer`` in alternating rounds, one block each per
    round (about ``budget`` seconds in all), so that background load hits both alike.
    """
    _check_size("rounds", rounds)
    _check_budget(budget)
    fn, x = jacobian_problem(in_features, out_features, hidden=hidden, batch=batch, device=device)
    forward_mode, reverse_mode = torch.func.jacfwd(fn), torch.func.jacrev(fn)
    if batch is not None:
        forward_mode, reverse_mode = torch.func.vmap(forward_mode), torch.func.vmap(reverse_mode)
    if not torch.allclose(forward_mode(x), reverse_mode(x), rtol=1e-4, atol=1e-5):
        raise AssertionError("jacfwd and jacrev disagree; this is a bug in labkit, please report it.")
    # One thread: the crossover is about how many passes each mode makes, and on a busy
    # machine (a workshop, a shared runner) intra-op threads waiting for each other blur
    # that count far more than they speed it up.
    stats = compare_autorange(
        {"jacfwd": lambda: forward_mode(x), "jacrev": lambda: reverse_mode(x)},
        rounds=rounds, min_run_time=budget / 2, num_threads=1, fixed_blocks=True, device=device,
    )
    return JacobianCost(in_features, out_features, batch, jacfwd=stats["jacfwd"], jacrev=stats["jacrev"])


def default_out_dims(in_features: int, span: int = 8) -> list[int]:
    """Output sizes from ``in/span`` to ``in*span`` in powers of two (at least 1).

    ``span`` must itself be a power of two, so that ``in*span`` is one of the sizes.
    """
    _check_size("in_features", in_features)
    wanted = "span must be a power of two (1, 2, 4, 8, ...)"
    if isinstance(span, bool) or not isinstance(span, numbers.Integral):
        raise LabkitTypeError(f"{wanted}, got {span!r} ({type(span).__name__}).")
    if span < 1 or span & (span - 1):
        raise LabkitValueError(f"{wanted}, got {span!r}.")
    steps = int(span).bit_length() - 1
    return sorted({max(1, round(in_features * 2.0**k)) for k in range(-steps, steps + 1)})


@dataclass(repr=False)
class JacobianSweep(ShowsAsTable):
    """jacfwd vs jacrev as the output size sweeps with the input size fixed."""

    in_features: int
    batch: int | None
    points: list[JacobianCost] = field(default_factory=list)

    @property
    def out_dims(self) -> list[int]:
        return [p.out_features for p in self.points]

    @property
    def _stable_from(self) -> int:
        """Index of the first point from which jacfwd is clearly faster at every later point (len if none)."""
        index = len(self.points)
        while index > 0 and self.points[index - 1].clear_winner == "jacfwd":
            index -= 1
        return index

    def _ties_from(self, end: int) -> int:
        """Index of the first point of the run of ties that ends just before ``end``."""
        start = end
        while start > 0 and self.points[start - 1].clear_winner is None:
            start -= 1
        return start

    @property
    def crossover(self) -> float | None:
        """Output size from which jacfwd stays faster than jacrev for every later point, or None.

        Why not the first sign change: one noisy point would decide it, and the
        summary could name a crossover that later rows of the table contradict.
        A point whose timings overlap within their spread is a tie
        (:attr:`JacobianCost.clear_winner`), never a win. When a clear jacrev win
        comes just before jacfwd's last run of wins, the crossover is
        log-interpolated between the two; after ties it is the first size of the
        run. None when the sweep ends without such a run, or jacfwd wins throughout.
        """
        stable = self._stable_from
        if stable in (0, len(self.points)):
            return None
        before, after = self.points[stable - 1], self.points[stable]
        if before.clear_winner is None:
            return float(after.out_features)
        la, lb = (math.log(p.timings.speedup("jacfwd")) for p in (before, after))
        a, b = before.out_features, after.out_features
        return math.exp(math.log(a) + -la / (lb - la) * (math.log(b) - math.log(a)))

    def summary(self) -> str:
        batch = "" if self.batch is None else _(", batch {batch}").format(batch=self.batch)
        return f"in = {self.in_features}{batch}: {self._where()}"

    def _where(self) -> str:
        """Where jacfwd overtakes jacrev, worded so that no row of :meth:`table` contradicts it."""
        if not self.points:
            return _("no points measured yet")
        stable = self._stable_from
        if stable == 0:
            return _("jacfwd overtakes jacrev not inside the sweep (jacfwd is faster at every output size)")
        ties = self._ties_from(stable)
        if stable == len(self.points):
            if ties < stable:
                return _("no stable crossover in the sweep (ties from out = {out})").format(
                    out=self.points[ties].out_features)
            if all(p.clear_winner == "jacrev" for p in self.points):
                return _("jacfwd overtakes jacrev not inside the sweep (jacrev is faster at every output size)")
            return _("no stable crossover in the sweep (jacrev is faster at out = {out})").format(
                out=self.points[-1].out_features)
        if ties < stable:
            return _("jacfwd stays faster from out = {stable} (ties from out = {ties})").format(
                stable=self.points[stable].out_features, ties=self.points[ties].out_features)
        return _("jacfwd overtakes jacrev at out ≈ {out} and stays faster").format(out=f"{self.crossover:.0f}")

    def table(self) -> Table:
        rows: list[Row] = [
            [p.out_features, format_seconds(p.jacfwd.median), format_seconds(p.jacrev.median), p.clear_winner or _("tie"),
             f"{p.faster_by:.2f}x"]
            for p in self.points
        ]
        return Table(["out", "jacfwd", "jacrev", _("faster"), _("by")], rows, title=self.summary())


def jacobian_sweep(
    in_features: int,
    out_dims: Sequence[int] | None = None,
    *,
    batch: int | None = None,
    hidden: int = DEFAULT_HIDDEN,
    rounds: int = 5,
    budget: float = 0.05,
    device: str | torch.device = "cpu",
    on_point: Callable[[JacobianSweep], None] | None = None,
) -> JacobianSweep:
    """Run :func:`jacobian_cost` for each output size; ``on_point(sweep)`` after each one.

    ``on_point`` lets a widget redraw while the sweep is still running.
    """
    _check_size("rounds", rounds)
    _check_budget(budget)
    dims = default_out_dims(in_features) if out_dims is None else sorted(set(out_dims))
    if not dims:
        raise LabkitValueError("out_dims is empty; pass output sizes such as [8, 16, 32, 64].")
    sweep = JacobianSweep(in_features=in_features, batch=batch)
    for out_features in dims:
        sweep.points.append(
            jacobian_cost(in_features, out_features, batch=batch, hidden=hidden, rounds=rounds, budget=budget, device=device)
        )
        if on_point is not None:
            on_point(sweep)
    return sweep


# ---------------------------------------------------------------------------
# JVP overhead relative to the forward pass
# ---------------------------------------------------------------------------
@dataclass(frozen=True, repr=False)
class JvpOverhead(SideBySide):
    """A forward pass and three JVP paths, timed side by side (interleaved rounds).

    A JVP costs more than the forward pass, so the natural reading is
    :meth:`slowdown`: ``slowdown(RAW)`` is how many times a forward pass the
    raw dual API takes; the table shows that column.
    """

    FORWARD = N_("forward pass")
    RAW = N_("raw dual API")
    LABKIT = "labkit.jvp"
    FUNC = "torch.func.jvp"

    baseline: str = FORWARD
    row_label: str = "path"
    ratio_column: str = "slowdown"

    @property
    def labkit_over_raw(self) -> float:
        """labkit.jvp's cost over the raw dual API (goal: at most 1.05): its slowdown against the raw dual API."""
        return self.rebased(self.RAW).slowdown(self.LABKIT)

    def table(self) -> Table:
        title = _("JVP cost (theory: about 2x a forward pass); labkit.jvp / raw dual = {ratio}").format(
            ratio=f"{self.labkit_over_raw:.3f}")
        return replace(super().table(), title=title)

    def shown_name(self, name: str) -> str:
        return _(name) if name in (self.FORWARD, self.RAW) else name


def jvp_overhead(
    model: nn.Module,
    x: torch.Tensor,
    *,
    rounds: int = 30,
    number: int = 5,
    num_threads: int | None = None,
    device: str | torch.device = "cpu",
) -> JvpOverhead:
    """Time ``model(x)`` against its JVP in a random input direction, three ways.

    ``num_threads`` sets torch's intra-op threads for the measurement only (the
    previous setting is restored); ``None`` keeps the current one.
    """
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(f"jvp_overhead needs an nn.Module, got {type(model).__name__}.")
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise LabkitTypeError("x must be a floating-point tensor, e.g. torch.randn(64, 256).")
    _check_size("rounds", rounds)
    _check_size("number", number)
    if num_threads is not None:
        _check_size("num_threads", num_threads, "or None")
    tangent = torch.randn_like(x)

    def raw_dual() -> torch.Tensor:
        with fwAD.dual_level():
            return fwAD.unpack_dual(model(fwAD.make_dual(x, tangent))).tangent

    candidates = {
        JvpOverhead.FORWARD: lambda: model(x),
        JvpOverhead.RAW: raw_dual,
        JvpOverhead.LABKIT: lambda: jvp(model, x, tangent),
        JvpOverhead.FUNC: lambda: torch.func.jvp(model, (x,), (tangent,)),
    }
    previous_threads = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        stats = compare(candidates, rounds=rounds, number=number, device=device)
    finally:
        torch.set_num_threads(previous_threads)
    return JvpOverhead(stats)


def relu_mlp(sizes: Sequence[int] = (256, 512, 512, 10)) -> nn.Sequential:
    """An ``nn.Sequential`` of Linear+ReLU layers of the given sizes (the last layer without ReLU): the JVP-cost model."""
    if len(sizes) < 2:
        raise LabkitValueError(f"sizes needs an input and an output size, got {list(sizes)}.")
    for index, size in enumerate(sizes):
        _check_size(f"sizes[{index}]", size)
    layers: list[nn.Module] = []
    for index, (a, b) in enumerate(pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if index < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)
