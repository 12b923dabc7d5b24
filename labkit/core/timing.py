"""Sync-aware timers and run statistics.

Why: a time is only honest if the device has finished the work before the clock
is read, and a single number hides the spread. Everything here synchronizes the
device (see :mod:`labkit.core.device`) and reports mean, median, min, max, IQR and
count. :class:`SideBySide` is the one result type for "A against B": one
baseline, one meaning of speedup, one table. For whole-function timings we build on ``torch.utils.benchmark``, which
handles warm-up, CUDA sync and thread settings; the hand-written pieces are the
small per-run timer that the FX profiler needs and :func:`compare`, which
interleaves candidates so that machine noise hits all of them alike.
"""
from __future__ import annotations

import math
import numbers
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

import torch

from labkit.core.device import pick_device, synchronize
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.noise import import_benchmark
from labkit.core.tables import ShowsAsTable, Table
from labkit.i18n.messages import N_, _

#: A timing is flagged noisy when its IQR is at least this fraction of its median: the
#: threshold at which ``torch.utils.benchmark`` warns about a Measurement and
#: ``Compare.highlight_warnings()`` marks its cell with ``(! XX%)``.
NOISY_IQR_FRACTION = 0.1


#: The words a timing table's headers are made of (row labels, columns, ratios), marked for translation: the
#: headers stay English in code (``Table.column`` looks them up) and are shown translated by :func:`shown_headers`.
HEADER_WORDS = (N_("variant"), N_("mode"), N_("layout"), N_("path"), N_("precision"), N_("median"), N_("IQR"),
                N_("speedup"), N_("slowdown"), N_("note"), N_("allclose"), N_("setup"))


def shown_headers(headers: Sequence[str]) -> list[str]:
    """``headers`` in the learner's language, for display only."""
    return [_(header) for header in headers]


@dataclass(frozen=True)
class RunStats:
    """Summary statistics of repeated timings, in seconds."""

    mean: float
    median: float
    min: float
    max: float
    iqr: float
    count: int

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> RunStats:
        """Summarise ``samples`` (seconds).

        Non-finite samples are rejected: ``sorted`` leaves a NaN wherever it happens to
        sit, so the median and min would depend on the order of the runs.
        """
        try:
            values = [float(s) for s in samples]
        except (TypeError, ValueError) as exc:
            raise LabkitTypeError(f"samples must be a sequence of numbers (seconds), got {samples!r}.") from exc
        if not values:
            raise LabkitValueError("RunStats needs at least one sample; run the measurement first.")
        bad = [(i, v) for i, v in enumerate(values) if not (math.isfinite(v) and v >= 0)]
        if bad:
            where = ", ".join(f"{v} at index {i}" for i, v in bad)
            raise LabkitValueError(
                f"samples must be finite, non-negative seconds, got {where} (of {len(values)} samples). "
                "Drop failed runs before summarising, or re-run the measurement."
            )
        ordered = sorted(values)
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(
            mean=statistics.fmean(ordered),
            median=statistics.median(ordered),
            min=ordered[0],
            max=ordered[-1],
            iqr=q3 - q1,
            count=len(ordered),
        )

    def as_dict(self) -> dict[str, float]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"median {format_seconds(self.median)} "
            f"(IQR {format_seconds(self.iqr)}, min {format_seconds(self.min)}, n={self.count})"
        )


def format_seconds(seconds: float) -> str:
    """Readable duration: ``1.23 ms``, ``45.6 µs``; every time labkit prints goes through here."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


@dataclass(frozen=True, repr=False)
class SideBySide(ShowsAsTable):
    """Timings of several variants measured side by side, each read against one ``baseline``.

    Why one type: "speedup" must mean the same thing in every lab. Here
    ``speedup(name) = baseline median / name's median``, so more than 1 means
    ``name`` is faster; :meth:`slowdown` is its inverse, for "how many times
    slower". Rows keep the order the variants were given in (never sorted by
    time), so a stored notebook table compares row by row.
    """

    stats: Mapping[str, RunStats]
    baseline: str
    title: str = ""
    row_label: str = "variant"  # header of the name column: "variant", "path", "layout", ...
    ratio_column: str = "speedup"  # which ratio the table shows: "speedup" or "slowdown"

    def __post_init__(self) -> None:
        if not isinstance(self.stats, Mapping) or not self.stats:
            raise LabkitValueError("SideBySide needs at least one timing: a dict of name -> RunStats, e.g. compare({...}).")
        object.__setattr__(self, "stats", dict(self.stats))
        if self.baseline not in self.stats:
            raise LabkitValueError(
                f"baseline {self.baseline!r} is not one of the timings {list(self.stats)}; pass one of those names."
            )
        if self.ratio_column not in ("speedup", "slowdown"):
            raise LabkitValueError(f"ratio_column must be 'speedup' or 'slowdown', got {self.ratio_column!r}.")
        zero = [name for name, s in self.stats.items() if not s.median > 0]
        if zero:
            raise LabkitValueError(
                f"{zero} have a median time of 0 s, so no ratio can be taken: time more calls per sample (e.g. number=10)."
            )

    def _stats(self, name: str) -> RunStats:
        try:
            return self.stats[name]
        except KeyError:
            raise LabkitValueError(f"No timing named {name!r}; measured: {list(self.stats)}.") from None

    def speedup(self, name: str) -> float:
        """Baseline median over ``name``'s median: more than 1 means ``name`` is faster."""
        return self._stats(self.baseline).median / self._stats(name).median

    def slowdown(self, name: str) -> float:
        """``name``'s median over the baseline's: how many times slower ``name`` is (1 / speedup)."""
        return 1.0 / self.speedup(name)

    def _relative_spread(self, name: str) -> float:
        base, other = self._stats(self.baseline), self._stats(name)
        return base.iqr / base.median + other.iqr / other.median

    def spread(self, name: str) -> float:
        """First-order spread of :meth:`speedup`: ``speedup * (IQR_b / median_b + IQR_v / median_v)``.

        Relative errors of a ratio add to first order, so both variants' noise counts.
        """
        return self.speedup(name) * self._relative_spread(name)

    def slowdown_spread(self, name: str) -> float:
        """The same first-order spread, for :meth:`slowdown` (the relative spread of a ratio and its inverse agree)."""
        return self.slowdown(name) * self._relative_spread(name)

    def noisy(self, name: str) -> bool:
        """True when ``name``'s IQR is at least :data:`NOISY_IQR_FRACTION` of its median.

        torch.utils.benchmark's ``Compare.highlight_warnings()`` marks such measurements
        with ``(! XX%)``; a ratio built on one deserves the same caution.
        """
        stats = self._stats(name)
        return stats.iqr >= NOISY_IQR_FRACTION * stats.median

    def rebased(self, baseline: str) -> SideBySide:
        """The same timings read against another baseline (e.g. labkit.jvp against the raw dual API)."""
        return SideBySide(self.stats, baseline, title=self.title, row_label=self.row_label, ratio_column=self.ratio_column)

    @property
    def names(self) -> list[str]:
        return list(self.stats)

    @staticmethod
    def headers_for(row_label: str = "variant", ratio_column: str = "speedup") -> list[str]:
        """The table's headers: :meth:`row`'s cells, then ``note`` (for tables that combine several results)."""
        return [row_label, "median", "IQR", ratio_column, "note"]

    @property
    def headers(self) -> list[str]:
        return self.headers_for(self.row_label, self.ratio_column)

    def row(self, name: str) -> list[str]:
        """Name, median, IQR and the ratio column, formatted; :meth:`note` goes last in a table."""
        stats = self._stats(name)
        ratio = self.speedup(name) if self.ratio_column == "speedup" else self.slowdown(name)
        return [name, format_seconds(stats.median), format_seconds(stats.iqr), f"{ratio:.2f}x"]

    def note(self, name: str) -> str:
        """``baseline`` and/or ``noisy (IQR xx% of median)`` in the learner's language; empty otherwise."""
        notes = [_("baseline")] if name == self.baseline else []
        if self.noisy(name):
            stats = self._stats(name)
            notes.append(_("noisy (IQR {share} of median)").format(share=f"{stats.iqr / stats.median:.0%}"))
        return ", ".join(notes)

    def table(self) -> Table:
        """The headers are shown in the learner's language; :attr:`headers` stays English (code looks columns up)."""
        rows = [[self.shown_name(name), *self.row(name)[1:], self.note(name)] for name in self.stats]
        return Table(shown_headers(self.headers), rows, title=self.title)

    def shown_name(self, name: str) -> str:
        """A row's name as the table shows it: the name itself; a subclass whose names are labkit's words translates them."""
        return name


class SyncTimer:
    """Context manager that times a block, synchronizing ``device`` at both ends.

    ``device=None`` means the device labkit picks (:func:`labkit.core.device.pick_device`),
    so a GPU is synchronized even when the caller forgets to say so.

    >>> with SyncTimer("cpu") as t:
    ...     _ = sum(range(10))
    >>> t.elapsed >= 0
    True
    """

    def __init__(self, device: str | torch.device | None = None) -> None:
        self.device = torch.device(device) if device is not None else pick_device()
        self.elapsed: float = float("nan")
        self._start = 0.0

    def __enter__(self) -> SyncTimer:
        synchronize(self.device)
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        synchronize(self.device)
        self.elapsed = time.perf_counter() - self._start


def _require_whole(name: str, value: object) -> int:
    """Reject floats, strings and bools where a count is needed (``range(2.5)`` fails deep inside); return the count."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LabkitTypeError(f"{name} must be a whole number, got {value!r} ({type(value).__name__}); e.g. {name}=5.")
    return int(value)


def _check_min_run_time(min_run_time: object) -> None:
    """A NaN or infinite run time would make ``blocked_autorange`` loop forever."""
    message = f"min_run_time must be a finite number of seconds > 0, got {min_run_time!r}; e.g. min_run_time=0.3."
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, numbers.Real):
        raise LabkitTypeError(message)
    seconds = float(min_run_time)
    if not (math.isfinite(seconds) and seconds > 0):
        raise LabkitValueError(message)


def _check_num_threads(num_threads: object) -> None:
    if num_threads is None:
        return
    if _require_whole("num_threads", num_threads) < 1:
        raise LabkitValueError(f"num_threads must be at least 1 (got {num_threads}); leave it None to keep torch's setting.")


def _check_counts(warmup: int, runs: int, runs_name: str = "runs") -> None:
    _require_whole(runs_name, runs)
    _require_whole("warmup", warmup)
    if runs < 1:
        raise LabkitValueError(
            f"{runs_name} must be at least 1 (got {runs}); use {runs_name}=5 or more for stable statistics."
        )
    if warmup < 0:
        raise LabkitValueError(f"warmup cannot be negative (got {warmup}); use warmup=0 to skip it.")


def measure(
    fn: Callable[[], object],
    *,
    warmup: int = 2,
    runs: int = 10,
    device: str | torch.device | None = None,
) -> RunStats:
    """Call ``fn`` ``warmup`` times untimed, then ``runs`` times timed one by one."""
    _check_counts(warmup, runs)
    for _round in range(warmup):
        fn()
    samples = []
    for _round in range(runs):
        with SyncTimer(device) as timer:
            fn()
        samples.append(timer.elapsed)
    return RunStats.from_samples(samples)


def benchmark(
    fn: Callable[[], object],
    *,
    label: str = "",
    min_run_time: float = 0.2,
    num_threads: int | None = None,
    device: str | torch.device | None = None,
) -> RunStats:
    """Time ``fn`` with ``torch.utils.benchmark.Timer.blocked_autorange``.

    The benchmark Timer warms up, synchronizes CUDA and picks how many calls to
    put in each block; we return per-call statistics over the blocks. On an
    Apple GPU (``device`` of type ``mps``) each call also waits for the GPU,
    which the Timer does not do.
    """
    _check_min_run_time(min_run_time)
    _check_num_threads(num_threads)
    bench = import_benchmark()
    timer = bench.Timer(
        stmt="fn()",
        globals={"fn": waits_for_mps(fn, device)},
        label=label,
        num_threads=num_threads or torch.get_num_threads(),
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time)
    return RunStats.from_samples(measurement.times)


def waits_for_mps(fn: Callable[[], object], device: str | torch.device | None) -> Callable[[], object]:
    """``fn``, followed by a wait for the Apple GPU when ``device`` is one.

    Why: ``torch.utils.benchmark`` synchronizes CUDA only, so on MPS its clock
    would time the launches, not the work. CPU and CUDA keep ``fn`` itself.
    """
    if device is None or torch.device(device).type != "mps":
        return fn

    def call_and_wait() -> object:
        result = fn()
        synchronize(device)
        return result

    return call_and_wait


def compare_autorange(
    candidates: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 3,
    min_run_time: float = 0.3,
    num_threads: int | None = None,
    fixed_blocks: bool = False,
    device: str | torch.device | None = None,
) -> dict[str, RunStats]:
    """Like :func:`compare`, but each sample is a ``torch.utils.benchmark`` block.

    Rounds alternate between candidates; in each round every candidate runs
    ``Timer.blocked_autorange`` for ``min_run_time / rounds`` seconds, so each
    candidate gets about ``min_run_time`` in all. The benchmark Timer picks the
    block size, synchronizes CUDA and pins ``num_threads`` (default: torch's
    current setting) for the measurement only; on an Apple GPU (``device`` of
    type ``mps``) each call also waits for the GPU.

    ``blocked_autorange`` sizes its block anew every round, in powers of ten: for calls
    of a fraction of a millisecond and a short round it runs up to twenty times over
    ``min_run_time / rounds``. With ``fixed_blocks`` each candidate's block is sized
    once, from one call timed after two warm ones, to fill ``min_run_time / rounds``
    with ``Timer.timeit`` (which warms up with two calls itself), and every round
    times one such block: one sample per round, and the budget is kept.
    """
    _require_whole("rounds", rounds)
    if rounds < 1:
        raise LabkitValueError(f"Use rounds >= 1 (got rounds={rounds}).")
    _check_min_run_time(min_run_time)
    _check_num_threads(num_threads)
    if not candidates:
        raise LabkitValueError("compare_autorange() needs at least one candidate, e.g. {'eager': fn}.")
    bench = import_benchmark()
    threads = num_threads or torch.get_num_threads()
    timers = {name: bench.Timer(stmt="fn()", globals={"fn": waits_for_mps(fn, device)}, num_threads=threads)
              for name, fn in candidates.items()}
    samples: dict[str, list[float]] = {name: [] for name in timers}
    per_round = min_run_time / rounds
    blocks = {name: max(1, round(per_round / max(timer.timeit(1).median, 1e-9)) - 2)
              for name, timer in timers.items() if fixed_blocks}
    for _round in range(rounds):
        for name, timer in timers.items():
            measurement = timer.timeit(blocks[name]) if fixed_blocks else timer.blocked_autorange(min_run_time=per_round)
            samples[name].extend(measurement.times)
    return {name: RunStats.from_samples(values) for name, values in samples.items()}


def compare(
    candidates: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 10,
    warmup: int = 2,
    number: int = 1,
    device: str | torch.device | None = None,
) -> dict[str, RunStats]:
    """Time several candidates side by side, interleaved round by round.

    Why interleave: on a noisy shared machine a burst of background load would
    otherwise land on one candidate only and fake a speedup. Each sample is the
    mean of ``number`` back-to-back calls.
    """
    if not isinstance(candidates, Mapping):
        raise LabkitTypeError(
            f"candidates must be a dict of name -> function, e.g. {{'eager': fn}}; got {type(candidates).__name__}."
        )
    _check_counts(warmup, rounds, runs_name="rounds")
    _require_whole("number", number)
    if number < 1:
        raise LabkitValueError(f"number must be at least 1 (got {number}).")
    if not candidates:
        raise LabkitValueError("compare() needs at least one candidate, e.g. {'eager': fn}.")
    for fn in candidates.values():
        for _round in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    for _round in range(rounds):
        for name, fn in candidates.items():
            with SyncTimer(device) as timer:
                for _round in range(number):
                    fn()
            samples[name].append(timer.elapsed / number)
    return {name: RunStats.from_samples(values) for name, values in samples.items()}
