"""Checker for the capstone challenge: make a small model at least 1.3x faster, same outputs.

Why the checker times the whole path itself: a speedup claimed by the learner
is not evidence, and work done outside the timed region (converting the input
to channels_last once, or computing the output once and returning it again) is
not a speedup. ``make_faster(model)`` returns one callable that takes the
plain NCHW input; the checker times it against its own untouched copy of the
original in paired, interleaved rounds (labkit.core.timing.compare, one round
at a time), feeds every call a fresh random batch, and checks every output
against the original's on the same batch, to float32 rounding. It also checks
the learner did not change the model it was given.

Why the verdict is a count of rounds and not one ratio of medians: on a loaded
machine one burst of background work can slow a single call of the original,
and a ratio of two medians over a few calls then passed an unchanged model now
and then (1 run in 12, on a busy 2-core machine). :func:`wins_needed` states
the rule and why neither noise alone nor a busy machine decides it.

Why a busy machine gets "too busy to judge" and not a verdict: in a room where every learner's
kernel runs at once, load can slow enough rounds of a correct answer that too few reach the goal.
A fail would then be wrong, and a pass on fewer rounds would let noise pass, so the checker says
which it is: :func:`_too_busy` states the rule (the original, the checker's own model, is the witness).

Why the thread count is pinned: ``torch.set_num_threads`` is global, so an
answer that lowers it for the original, or raises it for its own calls, would
time the two versions on different hardware. The checker sets the count it
started with before every call of either version, refuses an answer that
changes it, and puts it back. Replaced torch functions (a patched
``nn.MaxPool2d.forward``) are the guard's part: ``run_check`` refuses and
restores them (:mod:`labkit.core.guard`).

Why the original runs bare and alone: an answer can slow the original instead of speeding up its own
copy. So every timed call of the original runs with no global module hook, TorchFunctionMode,
TorchDispatchMode or profile function on (:func:`_as_torch_runs_it`), a thread of the learner's still
running beside the timed calls is refused (:func:`_learners_threads`), the checker makes its own
original only after ``make_faster`` returns, and compares it at the end with a fresh one, so a change
reached through ``gc`` is named.
"""
from __future__ import annotations

import copy
import math
import statistics
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as _module_globals
from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

from labkit.capstone.variants import challenge_input, challenge_model
from labkit.core.checks import (
    CheckFailed,
    CheckNotJudged,
    CheckResult,
    LearnerError,
    call_learner,
    case_draws,
    expect,
    is_learners_file,
    run_check,
)
from labkit.core.errors import LabkitValueError
from labkit.core.timing import RunStats, compare
from labkit.i18n.messages import _

REQUIRED_SPEEDUP = 1.3
#: Paired rounds the checker times by default (each: CALLS_PER_ROUND calls of each version, interleaved).
ROUNDS = 20
#: The most an answer that is no faster than the original may pass with, whatever the noise (see :func:`wins_needed`).
FALSE_PASS_BOUND = 0.01
#: Outputs must agree within RTOL times the largest output: float32 rounding through a reordered or fused
#: computation is about 1e-7 of it here, float16 about 5e-4, bfloat16 about 5e-3.
RTOL = 1e-4
#: Within this (but not within RTOL) the difference is that of a lower precision, and the hint says so.
LOWER_PRECISION_RTOL = 3e-2
#: Calls of each version per round, on as many fresh batches; the round compares each version's fastest call.
CALLS_PER_ROUND = 3
#: Rounds run first, with every output checked, and not counted (caches, lazy set-up, a compile).
WARMUP_ROUNDS = 1
#: A round in which the original's slowest call took more than this many times its fastest call of the whole check
#: was slowed by other work on the machine (see :func:`_too_busy`).
BUSY_FACTOR = 1.5
#: The start of the message when the machine was too busy to judge (the load test looks for it, labkit.workshop.load).
TOO_BUSY = "The machine is too busy to judge the speed-up; run the check again"

_set_num_threads = torch.set_num_threads  # torch's own, as labkit found it on import
_get_num_threads = torch.get_num_threads


def wins_needed(rounds: int) -> int:
    """How many of ``rounds`` paired rounds must each show the goal for a pass (``rounds + 1``: too few rounds to tell).

    The rule: a round calls the original and yours alternately, :data:`CALLS_PER_ROUND` times each, every call on
    a fresh batch (both versions get the same batches), and which version goes first alternates from round to
    round. The round's speedup is the original's fastest call over yours. The answer passes when at least
    ``wins_needed(rounds)`` rounds each reach :data:`REQUIRED_SPEEDUP` (so their median does too).

    Why noise alone cannot pass, whatever the load: for a version that is no faster than the original, a round
    compares equal calls, and swapping which goes first turns a speedup r into 1/r; so over a pair of rounds,
    one of each order, reaching 1.3 is at most as likely as a coin's heads. Load that lasts longer than a round
    slows both versions alike; a burst shorter than a call lands on one call of one round. The number of
    rounds that reach the goal is then a sum of independent coin flips whose mean chance is at most 1/2, and
    so far above its mean such a sum is no likelier than with fair coins (Hoeffding, 1956): requiring the
    smallest count whose fair-coin tail is at most :data:`FALSE_PASS_BOUND` passes such a version in at most
    1% of runs (16 of 20 rounds: 0.6%). Measured on a busy 2-core machine, an unchanged model reaches 1.3x in
    about one round in ten, which makes a pass about a one-in-a-billion event.

    Why a correct answer still passes on a busy machine: load only ever adds time, so each version's fastest
    call of a round is little disturbed, and an answer that is s times faster misses a round only when all of
    its calls were slowed s / 1.3 times more than the original's fastest; it may miss
    ``rounds - wins_needed(rounds)`` rounds (4 of 20).
    """
    def tail(wins: int) -> float:  # P(Binomial(rounds, 1/2) >= wins)
        return sum(math.comb(rounds, k) for k in range(wins, rounds + 1)) / 2**rounds

    return next(wins for wins in range(rounds + 2) if tail(wins) <= FALSE_PASS_BOUND)


MIN_ROUNDS = next(rounds for rounds in range(1, 64) if wins_needed(rounds) <= rounds)


@dataclass
class _Threads:
    """The thread count the check started with, pinned before every timed call, and every count an answer asked for."""

    count: int
    requested: list[int] = field(default_factory=list)

    def pin(self) -> None:
        _set_num_threads(self.count)

    def expect_kept(self, who: str, *, calls_count: bool = True) -> None:
        """Refuse the answer if ``who`` left the thread count changed, or (``calls_count``) changed it at all, even
        if it set it back: a callable that runs on more threads than the original's is not faster. make_faster runs
        before any timing, so there only the count it leaves matters."""
        requested = self.requested if calls_count else []
        changed = [n for n in [*requested, _get_num_threads()] if n != self.count]
        self.requested.clear()
        expect(
            not changed,
            _("{who} changed torch's thread count (torch.set_num_threads: {count} -> {value}). The checker "
              "times both versions on the same {count} thread(s), the count it started with, so a version "
              "that runs on other threads, or slows the original's, cannot count; it put the count back. "
              "Leave the thread count alone.").format(who=who, count=self.count, value=changed[0] if changed else ''),
            mistake="changed-threads",
        )


@contextmanager
def _pinned_threads() -> Iterator[_Threads]:
    """Record every ``torch.set_num_threads`` call during the check; afterwards restore the count and the function.

    ``torch.set_num_threads`` and ``torch._C.set_num_threads`` are one function; both names are watched,
    so an answer that raises the count for its own call and lowers it again before returning is seen too.
    """
    threads = _Threads(_get_num_threads())
    found = {owner: owner.set_num_threads for owner in (torch, torch._C)}

    def recording(count: int) -> None:
        threads.requested.append(count)
        _set_num_threads(count)

    for owner in found:
        owner.set_num_threads = recording  # type: ignore[attr-defined]
    try:
        yield threads
    finally:
        for owner, function in found.items():
            if owner.set_num_threads is recording:  # a learner's own replacement is left to the guard to report
                owner.set_num_threads = function  # type: ignore[attr-defined]
        _set_num_threads(threads.count)


#: torch's dictionaries of global module hooks (nn.modules.module.register_module_forward_pre_hook and the others).
_GLOBAL_HOOKS = ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_forward_hooks_always_called",
                 "_global_backward_hooks", "_global_backward_pre_hooks")


@contextmanager
def _as_torch_runs_it() -> Iterator[None]:
    """Run the original as plain torch runs it: with no global module hook, TorchFunctionMode, TorchDispatchMode,
    profile or trace function on, so nothing an answer installs can slow the original's calls (a global forward
    pre-hook that sleeps for every module but the answer's own). Each is put back afterwards, the same objects."""
    saved = {name: dict(hooks) for name in _GLOBAL_HOOKS if (hooks := getattr(_module_globals, name, None))}
    for name in saved:
        getattr(_module_globals, name).clear()
    profile, trace = sys.getprofile(), sys.gettrace()
    sys.setprofile(None)
    sys.settrace(None)
    try:
        with torch._C.DisableTorchFunction(), _disable_current_modes():
            yield
    finally:
        sys.settrace(trace)
        sys.setprofile(profile)
        for name, hooks in saved.items():
            getattr(_module_globals, name).update(hooks)


def _learners_threads(before: set[int]) -> list[str]:
    """Threads started during the check (not in ``before``, by ident) that are running the learner's code now: a thread
    that burns CPU whenever the answer's callable is not running slows only the original's calls."""
    frames = sys._current_frames()
    found = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident) if thread.ident is not None and thread.ident not in before else None
        while frame is not None:
            if is_learners_file(frame.f_code.co_filename):  # a thread of ipykernel, tornado... runs none
                found.append(thread.name)
                break
            frame = frame.f_back
    return found


def _expect_no_threads_of_the_learner(before: set[int], who: str) -> None:
    threads = _learners_threads(before)
    expect(not threads, (
        _("{who} started a thread that is still running your code while the checker times ({value}): work "
          "running beside the timed calls takes CPU from the original's calls, so the comparison cannot "
          "count. Do all the work inside the callable you return, and let any thread you start finish "
          "before it returns.").format(who=who, value=', '.join(threads))
    ), mistake="started-a-thread")


def _has_extras(module: nn.Module) -> bool:
    """Hooks, or a forward set on the instance: ways to change how a module runs without changing its weights."""
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")
    return any(getattr(module, name, None) for name in hooks) or "forward" in vars(module) or "__call__" in vars(module)


def _difference(model: nn.Module, reference: nn.Module) -> str:
    """How ``model`` differs from ``reference`` as a phrase ("its weights are channels_last now"), or ``""``."""
    if [type(m) for m in model.modules()] != [type(m) for m in reference.modules()]:
        return _("its layers were replaced")
    if any(_has_extras(m) for m in model.modules()):
        return _("a hook or a forward was added to it")
    if any(m.training != r.training for m, r in zip(model.modules(), reference.modules())):
        return _("it was switched to training mode")
    state, expected = model.state_dict(), reference.state_dict()
    if list(state) != list(expected):
        return _("its parameters or buffers were replaced")
    for name, tensor in state.items():
        if tensor.dtype != expected[name].dtype:
            return _("its {name} is {dtype} now").format(name=name, dtype=tensor.dtype)
        if tensor.stride() != expected[name].stride():
            channels_last = tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last)
            layout = "channels_last" if channels_last else _("laid out otherwise")
            return _("its {name} is {layout} now: Module.to converts a module in place").format(name=name, layout=layout)
        if not torch.equal(tensor, expected[name]):
            return _("its {name} has other values").format(name=name)
    return ""


def _expect_original_unchanged(model: nn.Module, reference: nn.Module, x: torch.Tensor) -> None:
    """Fail unless the model given to the learner is still the checker's model, in structure and in its output.

    Both run now, on the same torch: a replaced torch function (the guard's to report) changes both alike.
    """
    what = _difference(model, reference)
    if not what:
        try:
            with torch.inference_mode():
                expected = reference(x)
                got = call_learner(model, x)
        except LearnerError:
            what = _("it raises when called")
        else:
            what = "" if isinstance(got, torch.Tensor) and torch.equal(got, expected) else _("its output differs")
    expect(
        not what,
        _("The model you were given changed ({what}). Work on a copy (copy.deepcopy, or inplace=False "
          "where a function offers it): the checker compares against the model it gave you.").format(what=what),
        mistake="changed-the-given-model",
    )


def _expect_not_unchanged(faster: object, given: nn.Module, reference: nn.Module) -> None:
    """Refuse the model itself, or an unchanged copy: it runs exactly as the original does, so cannot be faster."""
    if not isinstance(faster, nn.Module) or _difference(faster, reference):
        return
    what = _("the model you were given") if faster is given else _("a copy of the model")
    raise CheckFailed(
        _("You returned {what}, unchanged: it runs exactly as the original does, so it cannot be faster, "
          "and a measured speedup could only be noise. Change how your copy computes, then measure it "
          "against the original.").format(what=what),
        mistake="returned-it-unchanged",
    )


@dataclass
class _Reference:
    """The checker's private original and the outputs it has given so far, to recognise a stored one."""

    model: nn.Module
    threads: set[int]  # the threads that ran before the learner's code, by ident
    earlier: list[torch.Tensor] = field(default_factory=list)

    def expect_match(self, got: object, batch: torch.Tensor, expected: torch.Tensor, where: str) -> None:
        """Fail with a hint naming the likely mistake unless ``got`` is ``expected`` up to float32 rounding."""
        if not isinstance(got, torch.Tensor):  # an if, not expect(): it tells the type checker ``got`` is a tensor below
            raise CheckFailed(_("{where} your callable returned a {type}; return the model's output tensor.").format(
                                  where=where, type=type(got).__name__),
                              mistake="not-a-tensor")
        expect(
            got.shape == expected.shape,
            _("{where} the output shape {shape} differs from the original's {shape2}.").format(
                where=where, shape=tuple(got.shape), shape2=tuple(expected.shape)),
            mistake="wrong-shape",
        )
        expect(
            got.dtype not in (torch.bfloat16, torch.float16),
            _("{where} your output is {dtype}: the outputs must match the original's float32 up to "
              "rounding, so a lower precision does not count here.").format(where=where, dtype=got.dtype),
            mistake="lower-precision",
        )
        expect(
            type(got) is torch.Tensor and got.layout == torch.strided and got.device == expected.device
            and got.is_floating_point(),
            _("{where} the output is not an ordinary floating-point {type} tensor like the original's.").format(
                where=where, type=expected.device.type),
            mistake="not-a-tensor",
        )
        got = got.detach().float()
        if not self._close(got, expected, RTOL):
            raise self._mismatch(got, batch, expected, where)
        self.earlier.append(expected)

    @staticmethod
    def _close(got: torch.Tensor, expected: torch.Tensor, rtol: float) -> bool:
        return float((got - expected).abs().max()) <= rtol * float(expected.abs().max())

    def _mismatch(self, got: torch.Tensor, batch: torch.Tensor, expected: torch.Tensor, where: str) -> CheckFailed:
        """The failure for outputs that differ, by what they match instead: an earlier batch, training mode, a lower precision."""
        diff = float((got - expected).abs().max())
        share = diff / float(expected.abs().max())
        if any(self._close(got, earlier, RTOL) for earlier in self.earlier):
            return CheckFailed(_("{where} your callable returned the output of an earlier batch. Compute "
                                 "from the input every time: a stored result does not count.").format(where=where),
                                 mistake="stored-output")
        training = copy.deepcopy(self.model).train()
        if self._close(got, training(batch), RTOL):
            return CheckFailed(_("{where} the outputs are what the model gives in training mode: BatchNorm "
                                 "then normalizes with the batch's own statistics instead of the running "
                                 "ones. Keep your version in eval mode.").format(where=where), mistake="training-mode")
        if share <= LOWER_PRECISION_RTOL:
            return CheckFailed(_("{where} the outputs differ from the original's by {diff:.2g} "
                                 "({share:.2%} of the largest output, where float32 rounding stays within "
                                 "{RTOL:.2%}): about what bfloat16 or float16 gives. The outputs must "
                                 "match float32 up to rounding, so a lower precision does not count here.").format(
                                   where=where, diff=diff, share=share, RTOL=RTOL), mistake="lower-precision")
        return CheckFailed(_("{where} the outputs differ from the original's (max abs difference "
                             "{diff:.3g}, {share:.0%} of the largest output): your version must compute "
                             "the same function as the model, from the input it is given.").format(
                               where=where, diff=diff, share=share), mistake="wrong-output")


@dataclass(frozen=True)
class _Round:
    """One paired round's timings: the original's calls and yours."""

    original: RunStats
    yours: RunStats

    @property
    def speedup(self) -> float:
        """The original's fastest call over yours.

        Why the fastest call: background load only ever adds time, so the least disturbed of a version's calls is the
        best measure of its own cost; for two equal versions it is as likely to favour one as the other.
        """
        return self.original.min / self.yours.min

    @property
    def reached(self) -> bool:
        return self.speedup >= REQUIRED_SPEEDUP


def _one_round(
    model: nn.Module, faster: Callable[[torch.Tensor], object], batches: list[torch.Tensor], threads: _Threads,
    yours_first: bool,
) -> tuple[_Round, list[tuple[torch.Tensor, torch.Tensor, object]]]:
    """One round: each version called once per batch (each on its own copy), interleaved, each call after pinning the
    threads. Returns the round's timings and (batch, expected, yours) per batch."""
    mine, theirs = iter([batch.clone() for batch in batches]), iter([batch.clone() for batch in batches])
    expected: list[torch.Tensor] = []
    got: list[object] = []

    def run_original() -> None:
        threads.pin()
        with _as_torch_runs_it():
            expected.append(model(next(mine)))

    def run_yours() -> None:
        threads.pin()
        got.append(call_learner(faster, next(theirs)))

    order = {"yours": run_yours, "original": run_original} if yours_first else {"original": run_original, "yours": run_yours}
    stats = compare(order, rounds=len(batches), warmup=0, device="cpu")
    return _Round(stats["original"], stats["yours"]), list(zip(batches, expected, got))


def _timed_rounds(
    reference: _Reference, faster: Callable[[torch.Tensor], object], rounds: int, threads: _Threads,
    generator: torch.Generator, shape: torch.Size, *, first: int, total: int,
) -> list[_Round]:
    """``rounds`` rounds on fresh batches from ``generator``, the order alternating; after each, the thread count and
    every output are checked. Returns each round's timings. ``first`` and ``total`` number the batches in the hint."""
    timed = []
    number = first
    for index in range(rounds):
        batches = [torch.randn(shape, generator=generator) for _ in range(CALLS_PER_ROUND)]
        round_, outputs = _one_round(reference.model, faster, batches, threads, yours_first=index % 2 == 1)
        threads.expect_kept("Your callable")
        _expect_no_threads_of_the_learner(reference.threads, "Your code")
        for batch, expected, got in outputs:
            reference.expect_match(got, batch, expected, _("On fresh input batch {number} of {total},").format(
                                                             number=number, total=total))
            number += 1
        timed.append(round_)
    return timed


def _too_busy(rounds: list[_Round]) -> list[_Round]:
    """The rounds that missed the goal while the machine was busy, when they alone keep the answer from passing; else [].

    The rule: a round was *busy* when the original's slowest call in it took more than :data:`BUSY_FACTOR` times
    the original's fastest call of the whole check. The original is the checker's own model, run the same way
    every time, so its slowdown is the machine's (another learner's kernel, a build), not the answer's. The
    machine is too busy to judge when (1) at their best the two versions do reach the goal (the original's
    fastest call over yours: so an answer that is not fast enough even then fails, busy or not), and (2) the
    rounds that reached the goal, counted with the busy rounds that missed it, would be enough to pass.

    Why this never passes noise: it never passes at all; it only withholds a fail that load may have caused, and
    says so. Why an unsteady answer on a quiet machine still fails: there the original runs at its usual speed in
    every round, so no round counts as busy.
    """
    best_original = min(r.original.min for r in rounds)
    best_yours = min(r.yours.min for r in rounds)
    if best_original / best_yours < REQUIRED_SPEEDUP:
        return []
    busy_misses = [r for r in rounds if not r.reached and r.original.max > BUSY_FACTOR * best_original]
    wins = sum(r.reached for r in rounds)
    return busy_misses if busy_misses and wins + len(busy_misses) >= wins_needed(len(rounds)) else []


def _verdict(rounds: list[_Round]) -> str:
    """Solved when enough rounds each reached the goal (:func:`wins_needed`); the hint says how many did."""
    speedups = [r.speedup for r in rounds]
    wins = sum(r.reached for r in rounds)
    needed = wins_needed(len(speedups))
    median = statistics.median(speedups)
    counted = _("{wins} of {speedups_count} interleaved rounds (median speedup {median:.2f}x)").format(
                  wins=wins, speedups_count=len(speedups), median=median)
    if wins < needed and (busy := _too_busy(rounds)):
        raise CheckNotJudged(
            _("{too_busy}. Outputs match, and your version was at least {required}x faster than "
              "the original in {counted}; {needed} are needed, and in {busy_count} of the rounds that "
              "missed, the original itself ran more than {busy_factor}x slower than its best: other "
              "programs were using the CPU. That says nothing against your answer; run this cell again "
              "when the machine is quieter.").format(
                too_busy=TOO_BUSY, required=REQUIRED_SPEEDUP, counted=counted, needed=needed, busy_count=len(busy),
                busy_factor=BUSY_FACTOR)
        )
    if wins < needed:
        unsteady = median >= REQUIRED_SPEEDUP
        advice = (
            _("Your version is faster in most rounds but not steadily: close other programs and run the "
              "check again.")
            if unsteady else
            _("Profile your version and the original (labkit.profile_model) and compare the time per op "
              "type: the op types that take as long as before are where more speed must come from.")
        )
        raise CheckFailed(
            _("Outputs match, but your version was at least {REQUIRED_SPEEDUP}x faster than the original "
              "in only {counted}; at least {needed} are needed, so that noise alone cannot pass. {advice}").format(
                REQUIRED_SPEEDUP=REQUIRED_SPEEDUP, counted=counted, needed=needed, advice=advice),
            mistake="not-steadily-faster" if unsteady else "not-fast-enough",
        )
    return (
        _("Outputs match on fresh inputs, and your version was at least {REQUIRED_SPEEDUP}x faster than "
          "the original in {counted}, timed as called: whatever your function does to each input is "
          "counted.").format(REQUIRED_SPEEDUP=REQUIRED_SPEEDUP, counted=counted)
    )


class _ConvolutionLayouts(TorchDispatchMode):
    """Counts the convolutions torch runs inside the block, and how many got a channels_last input or weight."""

    def __init__(self) -> None:
        super().__init__()
        self.convolutions = 0
        self.channels_last = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        if func.overloadpacket in _CONVOLUTIONS:
            self.convolutions += 1
            tensors = [arg for arg in args[:2] if isinstance(arg, torch.Tensor) and arg.dim() == 4]
            self.channels_last += any(t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
                                      for t in tensors)
        return func(*args, **(kwargs or {}))


_CONVOLUTIONS = (torch.ops.aten.convolution, torch.ops.aten._convolution, torch.ops.aten.conv2d,
                 torch.ops.aten.mkldnn_convolution)


def _channels_last_convolutions(faster: Callable[[torch.Tensor], object], x: torch.Tensor) -> int | None:
    """How many of the convolutions one untimed call of ``faster`` runs got a channels_last tensor; None when it ran
    none that torch's dispatcher saw (a compiled kernel, say) or raised: then nothing is said about the layout."""
    try:
        with torch.inference_mode(), _ConvolutionLayouts() as layouts:
            call_learner(faster, x.clone())
    except LearnerError:
        return None
    return layouts.channels_last if layouts.convolutions else None


def _require_rounds(rounds: object) -> int:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < MIN_ROUNDS:
        raise LabkitValueError(
            _("rounds must be a whole number of at least {MIN_ROUNDS} (fewer paired rounds cannot rule out "
              "noise), e.g. check_make_faster(make_faster, rounds={ROUNDS}); got {rounds!r}.").format(
                MIN_ROUNDS=MIN_ROUNDS, ROUNDS=ROUNDS, rounds=rounds)
        )
    return rounds


def check_make_faster(
    make_faster: Callable[[nn.Module], Callable[[torch.Tensor], torch.Tensor]], *, rounds: int = ROUNDS
) -> CheckResult:
    """Exercise 4.1: ``make_faster(model) -> faster``, where ``faster(x)`` equals ``model(x)`` for a plain NCHW ``x``.

    ``rounds`` (paired, timed rounds; see :func:`wins_needed` for the rule) is the caller's choice, not
    the learner's answer, so a bad value raises :class:`LabkitValueError`.
    """
    rounds = _require_rounds(rounds)

    def check() -> str:
        given, x = challenge_model(), challenge_input()
        before = {thread.ident for thread in threading.enumerate() if thread.ident is not None}
        with _pinned_threads() as threads:
            faster = call_learner(make_faster, given)
            # The checker's own original is made only now: while make_faster ran there was none to find and change.
            original = challenge_model()
            with torch.inference_mode():
                expected = original(x)
            threads.expect_kept("make_faster", calls_count=False)
            _expect_no_threads_of_the_learner(before, "make_faster")
            expect(
                not isinstance(faster, tuple),
                _("Return one callable that takes the plain NCHW input batch, not a pair: converting the "
                  "input is part of the work that is timed."),
                mistake="returned-a-pair",
            )
            expect(
                callable(faster),
                _("make_faster must return a callable (a model or a function) that takes the input batch, "
                  "not a {type}.").format(type=type(faster).__name__),
                mistake="not-callable",
            )
            _expect_original_unchanged(given, original, x)
            _expect_not_unchanged(faster, given, original)
            reference = _Reference(original, before)
            with torch.inference_mode():
                threads.pin()
                got = call_learner(faster, x.clone())
                threads.expect_kept("Your callable")
                reference.expect_match(got, x, expected, _("On the challenge input"))
                # Fresh batches, from a generator of the checker's own, seeded anew on every attempt (fixed only by
                # the tests' fixed_draws): nothing can be cached or prepared.
                generator = torch.Generator().manual_seed(case_draws().randrange(2**63))
                total = (WARMUP_ROUNDS + rounds) * CALLS_PER_ROUND
                _timed_rounds(reference, faster, WARMUP_ROUNDS, threads, generator, x.shape, first=1, total=total)  # not counted
                timed = _timed_rounds(reference, faster, rounds, threads, generator, x.shape,
                                      first=WARMUP_ROUNDS * CALLS_PER_ROUND + 1, total=total)
            _expect_original_unchanged(given, original, x)
            changed = _difference(original, challenge_model())
            expect(not changed, (
                _("The checker's own copy of the model changed while your code ran ({changed}): your code "
                  "reached a model it was not given. Change only your own copy.").format(changed=changed)
            ), mistake="changed-the-checkers-model")
            try:
                return _verdict(timed)
            except CheckFailed as exc:
                if exc.mistake != "not-fast-enough" or _channels_last_convolutions(faster, x) != 0:
                    raise
                raise CheckFailed(f"{exc} " + _(
                    "None of your version's convolutions ran on channels_last tensors: each got an NCHW input "
                    "and weight, so nothing became channels_last. The profile's convolutions are where a memory "
                    "order they prefer saves time (section 4)."), mistake="still-nchw") from None

    return run_check("4.1", check, make_faster)
