"""The capstone's variants of one model, measured side by side and checked.

Why: "faster" only counts when it is measured against the same baseline in the
same process, and when the faster model still computes the same thing. This
module builds the variants the labs taught (channels_last, Conv-BN fusion,
both, and optionally ``torch.compile``) from *copies* of the model, times them
interleaved with :func:`labkit.core.timing.compare`, and checks every output
against eager with ``torch.allclose``. Fusion is the library's
``torch.fx.experimental.optimization.fuse``, guarded by
:func:`labkit.fx.fusion.fuse_safely` against the models it would get wrong;
the hand-written teaching pass lives in lab 01.
"""
from __future__ import annotations

import atexit
import contextlib
import copy
import numbers
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch
from torch import nn
from torch.utils._pytree import tree_leaves

from labkit.core.copies import private_copy
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.noise import filtered_native_stderr, silence_known_warnings
from labkit.core.notebook import seeded
from labkit.core.tables import Row, ShowsAsTable, Table
from labkit.core.timing import RunStats, SideBySide, compare, format_seconds, shown_headers
from labkit.core.untouched import left_as_found
from labkit.fx.fusion import compare_outputs, fuse_safely, validate_tolerance
from labkit.fx.profile import TraceFailedError
from labkit.i18n.messages import _

if TYPE_CHECKING:
    from labkit.fx.profile import ProfileReport

EAGER = "eager"
CHANNELS_LAST = "channels_last"
FUSED = "fused"
FUSED_CHANNELS_LAST = "fused + channels_last"
COMPILED = "compiled (fused + channels_last)"
OPTIMIZED_FOR_INFERENCE = "optimize_for_inference"
#: The speedup of fused + channels_last over eager the lab aims for, by batch of 224x224 images, set on a 2-core
#: CPU. Batch 2 is the core track's (notebook 04, sections 1 to 7: every step takes seconds, so a room of learners
#: can run it at once); batch 8 is the full size (its extra section 8, and ``make bench``). The goals differ because
#: the gains do: at batch 2 the convolutions gain little from channels_last on a CPU, at batch 8 they gain too.
FUSED_CHANNELS_LAST_GOALS = {2: 1.15, 8: 1.5}
FUSED_CHANNELS_LAST_GOAL = FUSED_CHANNELS_LAST_GOALS[8]
#: The side of the challenge's square input: the challenge model's speedups are the same at 32 px as at 64 px
#: (its layers are small; what decides is the layout), and each of the checker's timed calls costs a quarter.
CHALLENGE_SIZE = 32


@dataclass
class Variant:
    """One way of running the model: the module, its inputs, and how it was made."""

    name: str
    model: nn.Module
    inputs: tuple[torch.Tensor, ...]
    description: str
    setup_seconds: float = 0.0

    def __call__(self) -> torch.Tensor:
        return self.model(*self.inputs)


def _to_channels_last(model: nn.Module, inputs: Sequence[torch.Tensor]) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    model = model.to(memory_format=torch.channels_last)
    converted = tuple(x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in inputs)
    return model, converted


def compiler_available() -> bool:
    """``torch.compile`` on CPU needs a C++ compiler (inductor generates C++)."""
    return any(shutil.which(name) for name in ("c++", "g++", "clang++"))


def build_variants(model: nn.Module, *inputs: torch.Tensor, include_compiled: bool = False) -> list[Variant]:
    """Eager, channels_last, fused, fused + channels_last (and compiled) copies of ``model``.

    ``model`` itself is never changed, nor ``inputs``: every variant, eager included, runs a private copy
    (its own parameters, buffers and attributes) on its own copies of the inputs. It must be in eval mode:
    fusion folds BatchNorm's running statistics into the convolution weights.
    """
    with left_as_found():
        if not isinstance(model, nn.Module):
            raise LabkitTypeError(f"build_variants needs an nn.Module, got {type(model).__name__}.")
        if model.training:
            raise LabkitValueError(
                "Call model.eval() first: Conv-BN fusion folds BatchNorm's running statistics, which is only valid in eval mode."
            )
        if not inputs:
            raise LabkitValueError("Pass at least one example input, e.g. build_variants(model, torch.randn(8, 3, 224, 224)).")
        for i, x in enumerate(inputs):
            if not isinstance(x, torch.Tensor):
                raise LabkitTypeError(f"build_variants: inputs[{i}] must be a tensor, got {type(x).__name__}.")
            if x.numel() == 0:
                raise LabkitValueError(
                    f"build_variants: inputs[{i}] is empty (shape {tuple(x.shape)}): nothing to time or compare. "
                    "Pass a batch of at least one example, e.g. torch.randn(8, 3, 224, 224)."
                )
        try:
            fused_model, unfused = fuse_safely(model)
        except TraceFailedError as exc:
            raise TraceFailedError(f"build_variants needs torch.fx to trace the model for the fused variants. {exc}") from exc
        note = f"; {unfused}" if unfused else ""
        inputs = tuple(x.detach().clone() for x in inputs)  # a forward that writes its input writes these
        eager = Variant(EAGER, private_copy(model, share_parameters=False), inputs,
                        _("the model as written, contiguous (NCHW) tensors"))
        cl_model, cl_inputs = _to_channels_last(private_copy(model, share_parameters=False), inputs)
        fused_cl_model, _cl_inputs = _to_channels_last(copy.deepcopy(fused_model), inputs)
        variants = [
            eager,
            Variant(CHANNELS_LAST, cl_model, cl_inputs, _("model and input converted to channels_last (NHWC in memory)")),
            Variant(FUSED, fused_model, tuple(inputs), _("Conv2d+BatchNorm2d folded into one Conv2d with torch.fx") + note),
            Variant(FUSED_CHANNELS_LAST, fused_cl_model, cl_inputs, _("both") + note),
        ]
        if include_compiled:
            variants.append(compile_variant(variants[-1]))
        return variants


def optimize_for_inference_variant(base: Variant) -> Variant:
    """The library's one-call CPU recipe: ``torch.fx.experimental.optimization.optimize_for_inference``.

    It fuses Conv+BN, removes dropout and moves convolutions to MKLDNN layouts;
    the capstone compares it with the hand-made variants.
    """
    with left_as_found():
        from torch.fx.experimental.optimization import optimize_for_inference

        silence_known_warnings()
        optimized = optimize_for_inference(private_copy(base.model, share_parameters=False))
        try:  # checked on the base's inputs now, not at the first timed call
            with torch.inference_mode():
                optimized(*(x.clone() for x in base.inputs))
        except Exception as exc:  # noqa: BLE001 - MKLDNN refuses operators with many error types
            raise LabkitValueError(
                _("torch's optimize_for_inference made a model that fails on these inputs ({error}): it moves layers "
                  "to MKLDNN layouts, which not every operator of this model accepts. Compare the other variants of "
                  "build_variants instead.").format(error=f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
            ) from exc
        return Variant(
            OPTIMIZED_FOR_INFERENCE, optimized, base.inputs, "torch.fx.experimental.optimization.optimize_for_inference"
        )


INDUCTOR_CACHE_PREFIX = "labkit-inductor-"  # then the owning process's id: labkit-inductor-<pid>-<random>


def _process_is_running(pid: int) -> bool:
    """Whether ``pid`` is a live process (POSIX: signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        pass
    return True


def remove_orphaned_inductor_caches(parent: Path) -> None:
    """Remove the cold-compile cache folders whose process is gone.

    Why: the atexit hook of :func:`_empty_inductor_cache` never runs when a kernel is
    killed (a restart, a hub culling idle servers), and each left folder holds the
    compiled kernels of one model. The next cold compile cleans up after them. On
    Windows, where ``os.kill(pid, 0)`` would end the process, nothing is removed.
    """
    if os.name == "nt":
        return
    for folder in parent.glob(f"{INDUCTOR_CACHE_PREFIX}*-*"):
        pid = folder.name.removeprefix(INDUCTOR_CACHE_PREFIX).split("-", 1)[0]
        if folder.is_dir() and pid.isdigit() and int(pid) != os.getpid() and not _process_is_running(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)  # another user's folder (sticky /tmp) stays: not ours to remove


@contextlib.contextmanager
def _empty_inductor_cache() -> Iterator[None]:
    """Point inductor at a new, empty cache folder for the block, as on a learner's first compile.

    Why: inductor keeps compiled kernels on disk, so a second compile of the same
    model takes a fraction of the first. A break-even computed from that warm time
    would flatter ``torch.compile``. The folder stays until the process exits (the
    compiled module loads its kernels from it), then it is removed; a process that
    was killed leaves it to the next cold compile (:func:`remove_orphaned_inductor_caches`).
    """
    remove_orphaned_inductor_caches(Path(tempfile.gettempdir()))
    folder = tempfile.mkdtemp(prefix=f"{INDUCTOR_CACHE_PREFIX}{os.getpid()}-")
    atexit.register(shutil.rmtree, folder, True)
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TORCHINDUCTOR_CACHE_DIR"]
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


def compile_variant(base: Variant, empty_cache: bool = False) -> Variant:
    """``torch.compile`` the given variant; the first call (the compile) is timed separately.

    ``empty_cache=True`` compiles with an empty inductor cache, so ``setup_seconds``
    is the cold compile time a learner meets the first time.
    """
    with left_as_found():
        if not compiler_available():
            raise LabkitValueError(
                "torch.compile on CPU needs a C++ compiler (g++ or clang++); install one or skip this variant."
            )
        silence_known_warnings()
        compiled = cast(nn.Module, torch.compile(base.model))  # an OptimizedModule, typed as a plain callable
        cache = _empty_inductor_cache() if empty_cache else contextlib.nullcontext()
        with cache, torch.inference_mode(), filtered_native_stderr():
            start = time.perf_counter()
            compiled(*base.inputs)
            setup_seconds = time.perf_counter() - start
        return Variant(COMPILED, compiled, base.inputs, _("torch.compile (inductor) of fused + channels_last"),
                       setup_seconds=setup_seconds)


@dataclass(frozen=True)
class VariantResult:
    """One variant's timing and correctness; ``speedup`` is eager's median over this variant's (> 1: faster)."""

    name: str
    stats: RunStats
    speedup: float
    max_abs_diff: float
    allclose: bool
    setup_seconds: float


@dataclass(repr=False)
class VariantComparison(ShowsAsTable):
    """Timings and correctness of every variant, relative to the first (eager)."""

    results: list[VariantResult] = field(default_factory=list)
    rtol: float = 1e-3

    def __getitem__(self, name: str) -> VariantResult:
        for result in self.results:
            if result.name == name:
                return result
        raise KeyError(f"no variant named {name!r}; have {[r.name for r in self.results]}")

    @property
    def all_close(self) -> bool:
        return all(r.allclose for r in self.results)

    @property
    def timings(self) -> SideBySide:
        """Every variant's timing side by side, against the first: speedups, spreads, noisy flags."""
        if not self.results:
            raise LabkitValueError("This comparison holds no variants; use compare_variants(build_variants(model, x)).")
        return SideBySide({r.name: r.stats for r in self.results}, self.results[0].name)

    def correctness_table(self) -> Table:
        """Only the facts that repeat run after run (for stored, compared notebook output)."""
        rows: list[Row] = [(r.name, _("yes") if r.allclose else _("NO")) for r in self.results]
        return Table([_("variant"), _("allclose to eager (rtol={rtol})").format(rtol=f"{self.rtol:g}")], rows,
                     title=_("Same outputs?"))

    def table(self) -> Table:
        timings = self.timings
        rows: list[Row] = [
            [*timings.row(r.name), "yes" if r.allclose else "NO", f"{r.setup_seconds:.1f} s" if r.setup_seconds else "",
             timings.note(r.name)]
            for r in self.results
        ]
        headers = [*timings.headers[:-1], "allclose", "setup", "note"]
        return Table(shown_headers(headers), rows, title=_("Variants side by side"))


def _require_unique_names(variants: Sequence[Variant]) -> None:
    """Refuse two variants of one name: results are keyed by name, so the second would replace the first.

    Why: with a duplicate of the baseline's name, the baseline would be timed and checked against itself.
    """
    seen: set[str] = set()
    for variant in variants:
        if variant.name in seen:
            names = [v.name for v in variants]
            raise LabkitValueError(
                f"compare_variants got more than one variant named {variant.name!r} (names: {names}); results are "
                f"kept by name, so give each variant its own, e.g. variant.name = {variant.name + ' (2)'!r}."
            )
        seen.add(variant.name)


def compare_variants(
    variants: Sequence[Variant],
    *,
    rounds: int = 10,
    warmup: int = 2,
    rtol: float = 1e-3,
    device: str | torch.device = "cpu",
) -> VariantComparison:
    """Time all variants interleaved (same process, same noise) and check outputs vs the first."""
    with left_as_found():
        if not variants:
            raise LabkitValueError("compare_variants needs at least one variant; use build_variants(model, x).")
        _require_unique_names(variants)
        rtol = validate_tolerance("rtol", rtol)
        with torch.inference_mode():
            reference = variants[0]()
            outputs = {v.name: v() for v in variants}
            if not any(leaf.numel() for leaf in tree_leaves(reference) if isinstance(leaf, torch.Tensor)):
                raise LabkitValueError(
                    f"Variant {variants[0].name!r} returned an empty output, so there is nothing to compare: "
                    "build the variants from a batch of at least one example, "
                    "e.g. build_variants(model, torch.randn(8, 3, 224, 224))."
                )
            candidates: dict[str, Callable[[], object]] = {v.name: v for v in variants}
            stats = compare(candidates, rounds=rounds, warmup=warmup, device=device)
        timings = SideBySide(stats, variants[0].name)
        results = []
        for variant in variants:
            diff, close = compare_outputs(
                reference, outputs[variant.name], rtol=rtol, atol=0.0, actual_name=f"variant {variant.name!r}"
            )
            results.append(
                VariantResult(
                    variant.name, stats[variant.name], timings.speedup(variant.name), diff, close, variant.setup_seconds
                )
            )
        return VariantComparison(results, rtol=rtol)


def challenge_model() -> nn.Module:
    """The capstone challenge's model: three Conv-BN-ReLU-MaxPool blocks and a classifier, eval mode."""
    with seeded(0):
        def block(c_in: int, c_out: int) -> list[nn.Module]:
            return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(3, 1, 1)]

        model = nn.Sequential(
            *block(3, 32), *block(32, 32), *block(32, 32), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10)
        )
        for module in model.modules():  # non-trivial running statistics, so fusion has something to fold
            if isinstance(module, nn.BatchNorm2d) and module.running_mean is not None and module.running_var is not None:
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
        return model.eval()


def challenge_input(batch: int = 8) -> torch.Tensor:
    """A fixed, seeded input for :func:`challenge_model` (batch x 3 x :data:`CHALLENGE_SIZE` x :data:`CHALLENGE_SIZE`)."""
    if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
        raise LabkitValueError(f"batch must be a whole number >= 1, such as 8; got {batch!r}.")
    generator = torch.Generator().manual_seed(1)
    return torch.randn(batch, 3, CHALLENGE_SIZE, CHALLENGE_SIZE, generator=generator)


def profile_variants(
    variants: Sequence[Variant], *, warmup: int = 2, runs: int = 3, rounds: int = 1,
) -> dict[str, ProfileReport]:
    """Profile each variant node by node with labkit (fast mode), warm runs only.

    With ``rounds`` > 1 every variant is profiled in turn, round after round, and each keeps
    its round with the smallest mean total: a burst of background load then spoils one
    round of every variant alike instead of all the runs of whichever variant it hit.
    """
    with left_as_found():
        from labkit.core.errors import require_count
        from labkit.fx.profile import profile_model

        rounds = require_count("rounds", rounds, 1, "e.g. rounds=3 to keep each variant's least disturbed of three rounds")
        best: dict[str, ProfileReport] = {}
        with torch.inference_mode():
            for _round in range(rounds):
                for v in variants:
                    report = profile_model(v.model, *v.inputs, warmup=warmup, runs=runs)
                    if v.name not in best or report.total.mean < best[v.name].total.mean:
                        best[v.name] = report
        return best


def op_type_table(reports: dict[str, ProfileReport], op_types: Sequence[str] | None = None) -> Table:
    """Time per op type (rows) for each profiled variant (columns), side by side."""
    if not reports:
        raise LabkitValueError("reports is empty: op_type_table needs at least one report; pass profile_variants(variants).")
    breakdowns = {name: report.by_op_type().seconds for name, report in reports.items()}
    if op_types is None:
        first = next(iter(breakdowns.values()))
        op_types = list(first)
    rows: list[Row] = [[t, *(format_seconds(b[t]) if t in b else "-" for b in breakdowns.values())] for t in op_types]
    return Table([_("op type"), *breakdowns], rows, title=_("Time per op type, per variant (sums of node medians, warm runs)"))


@dataclass(frozen=True)
class OpTypeSaving:
    """One op type's time per forward pass in the baseline and the variant (0 where the variant has none of it)."""

    op_type: str
    baseline_seconds: float
    variant_seconds: float

    @property
    def saved_seconds(self) -> float:
        """Time saved per forward pass (negative: the variant spends more on this op type)."""
        return self.baseline_seconds - self.variant_seconds


@dataclass(repr=False)
class TimeSaved(ShowsAsTable):
    """Where a variant's time saving comes from, by op type, computed from two profiles.

    ``rows`` are ranked by time saved, largest first: the ranking is a measurement and
    changes with the machine and its load, so show it only in a cell whose output is not compared.
    """

    baseline: str
    variant: str
    rows: list[OpTypeSaving] = field(default_factory=list)

    @property
    def total_saved_seconds(self) -> float:
        """Net time saved per forward pass, summed over every op type (the profiles' totals)."""
        return sum(r.saved_seconds for r in self.rows)

    def share(self, op_type: str) -> float:
        """``op_type``'s part of the net time saved (a fraction; nan when nothing was saved)."""
        total = self.total_saved_seconds
        row = next((r for r in self.rows if r.op_type == op_type), None)
        if row is None:
            raise KeyError(f"no op type {op_type!r} in either profile; have {[r.op_type for r in self.rows]}")
        return row.saved_seconds / total if total > 0 else float("nan")

    @property
    def ranking(self) -> list[str]:
        """Op types that saved time, largest saving first."""
        return [r.op_type for r in self.rows if r.saved_seconds > 0]

    def summary(self) -> str:
        """One line: the share of the time saved per op type, largest first, as measured in these profiles."""
        total = self.total_saved_seconds
        if total <= 0:
            return _("{variant} saved no time over {baseline} in these profiles ({more} more per forward pass).").format(
                variant=self.variant, baseline=self.baseline, more=format_seconds(-total))
        shown = [r for r in self.rows if r.saved_seconds / total >= 0.005]  # what rounds to 1% or more
        rest = [r for r in self.rows if r.saved_seconds > 0 and r not in shown]
        gained = ", ".join(f"{r.op_type} {r.saved_seconds / total:.0%}" for r in shown)
        if rest:
            gained += ", " + _("{count} more under {share} each").format(count=len(rest), share="1%")
        lost = [r for r in self.rows if r.saved_seconds < 0]
        line = _("{baseline} -> {variant}: {saved} saved per forward pass; "
                 "share of the time saved, by op type, largest first: {gained}").format(
            baseline=self.baseline, variant=self.variant, saved=format_seconds(total), gained=gained)
        if lost:
            line += "; " + _("slower: {names}").format(names=", ".join(
                _("{op_type} (by {time})").format(op_type=r.op_type, time=format_seconds(-r.saved_seconds)) for r in lost))
        return line + ". " + _("Largest share: {op_type}.").format(op_type=self.ranking[0])

    def table(self) -> Table:
        total = self.total_saved_seconds
        rows: list[Row] = [
            [r.op_type, format_seconds(r.baseline_seconds), format_seconds(r.variant_seconds),
             ("-" if r.saved_seconds < 0 else "") + format_seconds(abs(r.saved_seconds)),
             f"{r.saved_seconds / total:.0%}" if total > 0 else "-"]
            for r in self.rows
        ]
        return Table([_("op type"), self.baseline, self.variant, _("saved"), _("share of saved")], rows,
                     title=_("Time saved per forward pass by op type, {baseline} -> {variant} (largest first)").format(
                         baseline=self.baseline, variant=self.variant))


def time_saved_by_op_type(reports: dict[str, ProfileReport], variant: str, baseline: str = EAGER) -> TimeSaved:
    """How much of ``variant``'s saving over ``baseline`` each op type accounts for, from their profiles.

    An op type the variant no longer has (BatchNorm2d after fusion) saved all of its time.
    """
    for name in (baseline, variant):
        if name not in reports:
            raise LabkitValueError(f"No profile named {name!r}; have {list(reports)}: pass profile_variants(variants).")
    before = reports[baseline].by_op_type().seconds
    after = reports[variant].by_op_type().seconds
    op_types = list(before) + [t for t in after if t not in before]
    rows = [OpTypeSaving(t, before.get(t, 0.0), after.get(t, 0.0)) for t in op_types]
    rows.sort(key=lambda r: r.saved_seconds, reverse=True)
    return TimeSaved(baseline, variant, rows)


@dataclass(frozen=True)
class GoalVerdict:
    """Whether one variant met a speedup goal in one comparison, judged with the spread of its speedup.

    Why the spread decides too: a speedup is a ratio of two medians, each with its own noise
    (:meth:`labkit.core.timing.SideBySide.spread`). "Met" needs the speedup less its spread to reach the goal,
    "not met" the speedup plus its spread to stay below it; a goal inside the spread is too close to call from
    this run, which is what the line then says.
    """

    variant: str
    baseline: str
    speedup: float
    spread: float
    goal: float

    @property
    def outcome(self) -> str:
        if self.speedup - self.spread >= self.goal:
            return "met"
        if self.speedup + self.spread < self.goal:
            return "not met on this machine"
        return "too close to call in this run (the goal is within the spread): run the comparison again"

    @property
    def met(self) -> bool:
        return self.outcome == "met"

    def __str__(self) -> str:
        outcome = {"met": _("met"), "not met on this machine": _("not met on this machine")}.get(
            self.outcome, _("too close to call in this run (the goal is within the spread): run the comparison again"))
        return _("{variant}: {speedup}x over {baseline}, spread ±{spread} (from both timings' IQRs); the lab's goal, "
                 "set on a 2-core CPU, is {goal}x: {outcome}").format(
            variant=self.variant, speedup=f"{self.speedup:.2f}", baseline=self.baseline, spread=f"{self.spread:.2f}",
            goal=f"{self.goal:g}", outcome=outcome)

    def __repr__(self) -> str:
        return str(self)


def goal_verdict(comparison: VariantComparison, goal: float, variant: str = FUSED_CHANNELS_LAST) -> GoalVerdict:
    """``variant``'s speedup over the comparison's baseline (eager) against ``goal``, with its spread."""
    if isinstance(goal, bool) or not isinstance(goal, numbers.Real) or not goal > 0:
        raise LabkitValueError(f"goal must be a speedup above 0, such as {FUSED_CHANNELS_LAST_GOAL}; got {goal!r}.")
    timings = comparison.timings  # speedup() names the variants there are when ``variant`` is not one
    return GoalVerdict(variant, timings.baseline, timings.speedup(variant), timings.spread(variant), float(goal))


def break_even_runs(comparison: VariantComparison, variant: str, baseline: str = FUSED_CHANNELS_LAST) -> float | None:
    """How many forward passes ``variant`` needs before its setup time (a compile) pays off.

    None when it is not faster per pass than ``baseline``: then it never pays off.
    """
    saved_per_run = comparison[baseline].stats.median - comparison[variant].stats.median
    if saved_per_run <= 0:
        return None
    return comparison[variant].setup_seconds / saved_per_run
