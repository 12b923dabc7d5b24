"""Lab 04's mistakes: the capstone challenge (4.1, make a model faster, same outputs).

Most entries fail before any timing (a wrong output, a changed model, a changed thread count), so they
take a fraction of a second. Three entries reach the timed rounds; their timing is made deterministic
and quick (:func:`_timed_as`: for that entry only, the checker's ``compare`` is replaced by one that runs
each version as the real one does and reports fixed times, on a small challenge input), so that their verdict
and message cannot depend on the machine's load, and twenty real rounds on a busy CI machine do not slow
the suite down. "fusion only" gets the times it measures on a 2-core CPU (about 1.03x the original's speed:
no round reaches 1.3x); the two entries that patch torch get a version twice as fast, which the guard in
run_check refuses anyway. The checker's rule itself, under real noise, is measured by the test of the
solution (tests/capstone/test_checks.py) and by repeated runs of the solution and of the unchanged model.
"""
from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.fx.experimental.optimization import fuse

from labkit.capstone import checks as capstone_checks
from labkit.capstone.checks import check_make_faster
from labkit.core.checks import CheckResult
from labkit.core.timing import RunStats
from tests.mistakes import Mistake

CHANNELS_LAST = torch.channels_last
_THREADS = (r"(?<=set_num_threads: )\d+", r"(?<=on the same )\d+")  # the machine's own thread count
_ROUNDS = (r"(?<=only )\d+(?= of 20)", r"(?<=median speedup )\d+\.\d+x")
_DIFFERENCE = (r"(?<=by )[\d.e-]+(?= \()", r"[\d.]+%(?= of the largest)")


@contextmanager
def _timed_as(seconds: dict[str, float]) -> Iterator[None]:
    """The checker's timing replaced by fixed times (see the module docstring), on a small challenge input (1 x 3 x 8 x 8;
    the model takes any size) so the entry stays quick: each version still runs, and every output is checked."""
    def fixed(candidates: dict[str, Callable[[], object]], *, rounds: int, **_: object) -> dict[str, RunStats]:
        for _ in range(rounds):
            for run in candidates.values():
                run()
        return {name: RunStats.from_samples([seconds[name]] * rounds) for name in candidates}

    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    real = capstone_checks.compare, capstone_checks.challenge_input
    capstone_checks.compare, capstone_checks.challenge_input = fixed, lambda: x.clone()
    try:
        yield
    finally:
        capstone_checks.compare, capstone_checks.challenge_input = real


def _checked_with_times(make_faster: Callable[[nn.Module], object], original: float, yours: float) -> CheckResult:
    with _timed_as({"original": original, "yours": yours}):
        return check_make_faster(make_faster)


def returns_a_pair(model):
    faster_model = copy.deepcopy(model).to(memory_format=CHANNELS_LAST)
    return faster_model, lambda x: x.contiguous(memory_format=CHANNELS_LAST)


def converts_in_place(model):
    model.to(memory_format=CHANNELS_LAST)
    return lambda x: model(x.contiguous(memory_format=CHANNELS_LAST))


def fusion_only(model):
    return fuse(model, inplace=False)


def output_computed_once(model):
    cache = {}

    def faster(x):
        if "y" not in cache:
            cache["y"] = model(x)
        return cache["y"]

    return faster


def in_bfloat16(model):
    faster_model = fuse(model, inplace=False).to(torch.bfloat16)
    return lambda x: faster_model(x.to(torch.bfloat16))


def in_bfloat16_cast_back(model):
    faster_model = fuse(model, inplace=False).to(torch.bfloat16)
    return lambda x: faster_model(x.to(torch.bfloat16)).float()


def in_training_mode(model):
    faster_model = copy.deepcopy(model).to(memory_format=CHANNELS_LAST)
    faster_model.train()
    return lambda x: faster_model(x.contiguous(memory_format=CHANNELS_LAST))


def the_model_itself(model):
    return model


def an_unchanged_copy(model):
    return copy.deepcopy(model)


def fold_without_shift(model):
    """A hand-written Conv-BN fold that scales the weights but forgets the shift (running_mean * scale)."""
    layers = list(copy.deepcopy(model))
    folded = []
    with torch.no_grad():
        while layers:
            layer = layers.pop(0)
            if isinstance(layer, nn.Conv2d) and layers and isinstance(layers[0], nn.BatchNorm2d):
                bn = layers.pop(0)
                scale = bn.weight / torch.sqrt(bn.running_var + bn.eps)
                conv = nn.Conv2d(layer.in_channels, layer.out_channels, layer.kernel_size, padding=layer.padding)
                conv.weight.copy_(layer.weight * scale[:, None, None, None])
                conv.bias.copy_(bn.bias)
                layer = conv
            folded.append(layer)
    return nn.Sequential(*folded).eval()


def more_threads_for_mine(model):
    torch.set_num_threads(64)
    return fuse(model, inplace=False)


def own_threads_in_the_call(model):
    faster_model = fuse(model, inplace=False)

    def faster(x):
        torch.set_num_threads(64)
        y = faster_model(x)
        torch.set_num_threads(1)  # the original gets one thread
        return y

    return faster


def slows_the_checkers_max_pool(model):
    faster_model = copy.deepcopy(model)
    mine = {id(module) for module in faster_model.modules()}
    max_pool = nn.MaxPool2d.forward

    def forward(self, x):
        if id(self) not in mine:
            time.sleep(0.002)
        return max_pool(self, x)

    nn.MaxPool2d.forward = forward
    return lambda x: faster_model(x)


def patches_functional_max_pool(model):
    faster_model = copy.deepcopy(model)
    max_pool = torch.nn.functional.max_pool2d

    def channels_last_max_pool(x, *args, **kwargs):
        return max_pool(x.contiguous(memory_format=CHANNELS_LAST), *args, **kwargs)

    torch.nn.functional.max_pool2d = channels_last_max_pool
    return lambda x: faster_model(x)


MISTAKES = [
    Mistake("4.1", "returns `(model, convert_input)`", lambda: check_make_faster(returns_a_pair),
            ("not a pair", "converting the input is part of the work that is timed"), mistake="returned-a-pair"),
    Mistake("4.1", "converts the given model in place (`model.to(memory_format=...)`)",
            lambda: check_make_faster(converts_in_place),
            ("the model you were given changed", "channels_last now", "work on a copy"), mistake="changed-the-given-model"),
    Mistake("4.1", "fusion only, still NCHW", lambda: _checked_with_times(fusion_only, 0.0300, 0.0291),
            ("faster than the original in only 0 of 20 interleaved rounds", "noise alone cannot pass", "time per op type",
             "nothing became channels_last"),
            measured=_ROUNDS, mistake="still-nchw"),
    Mistake("4.1", "returns an output computed once", lambda: check_make_faster(output_computed_once),
            ("on fresh input batch 1", "output of an earlier batch", "a stored result does not count"), mistake="stored-output"),
    Mistake("4.1", "runs in bfloat16", lambda: check_make_faster(in_bfloat16),
            ("your output is torch.bfloat16", "must match the original's float32", "lower precision does not count"),
            mistake="lower-precision"),
    Mistake("4.1", "runs in bfloat16, casts the output back (`.float()`)", lambda: check_make_faster(in_bfloat16_cast_back),
            ("where float32 rounding stays within 0.01%", "bfloat16 or float16", "lower precision does not count"),
            measured=_DIFFERENCE, mistake="lower-precision"),
    Mistake("4.1", "a copy left in training mode (`.train()`)", lambda: check_make_faster(in_training_mode),
            ("training mode", "the batch's own statistics", "eval mode"), mistake="training-mode"),
    Mistake("4.1", "returns the model itself", lambda: check_make_faster(the_model_itself),
            ("returned the model you were given, unchanged", "cannot be faster"), mistake="returned-it-unchanged"),
    Mistake("4.1", "returns an unchanged copy (`copy.deepcopy(model)`)", lambda: check_make_faster(an_unchanged_copy),
            ("returned a copy of the model, unchanged", "cannot be faster"), mistake="returned-it-unchanged"),
    Mistake("4.1", "a hand-written Conv-BN fold without BatchNorm's shift", lambda: check_make_faster(fold_without_shift),
            ("on the challenge input the outputs differ", "compute the same function"),
            measured=(r"(?<=difference )[\d.e-]+", r"\d+%(?= of the largest)"), mistake="wrong-output"),
    Mistake("4.1", "cheat: `torch.set_num_threads(64)` in `make_faster`", lambda: check_make_faster(more_threads_for_mine),
            ("make_faster changed torch's thread count", "torch.set_num_threads", "put the count back"),
            measured=_THREADS, mistake="changed-threads"),
    Mistake("4.1", "cheat: the callable raises the thread count, then lowers it for the original",
            lambda: check_make_faster(own_threads_in_the_call),
            ("your callable changed torch's thread count", "torch.set_num_threads", "put the count back"),
            measured=_THREADS, mistake="changed-threads"),
    Mistake("4.1", "cheat: patches `nn.MaxPool2d.forward` to slow the checker's model down",
            lambda: _checked_with_times(slows_the_checkers_max_pool, 0.02, 0.01),
            ("replaced torch's", "MaxPool2d.forward (restored)", "cannot count"), mistake="replaced-torch"),
    Mistake("4.1", "cheat: patches `torch.nn.functional.max_pool2d`",
            lambda: _checked_with_times(patches_functional_max_pool, 0.02, 0.01),
            ("replaced torch's", "torch.nn.functional.max_pool2d (restored)", "cannot count"), mistake="replaced-torch"),
]
