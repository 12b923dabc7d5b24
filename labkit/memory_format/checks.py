"""Checkers for the exercises of notebook 02 (memory formats).

Each checker runs the learner's function on inputs it builds itself, keeps its own references out of the
learner's reach, and compares with torch itself: strides with ``torch.empty(..., memory_format=...)``, the
dropped operator with the checker's own trace of a private copy of the model, the Conv3d conversion with
``Tensor.is_contiguous(memory_format=...)`` on the model's parameters and the output of a model the learner
never saw. A wrong answer is diagnosed from what the checker observed (which strides the numbers describe,
what the learner's TorchFunctionMode returns when called on small tensors, which layers got converted), so
the hint names the mistake. They never raise, and their messages hold no timings, so the notebook's stored
checker output is reproducible.
"""
from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch._prims_common
from torch import nn
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack, _pop_mode
from torch.utils._python_dispatch import TorchDispatchMode

from labkit.core.checks import (
    CheckFailed,
    CheckResult,
    LearnerError,
    call_learner,
    case_draws,
    expect,
    in_module,
    int_tuple,
    learner_case,
    run_check,
    watching_calls,
)
from labkit.core.notebook import seeded
from labkit.i18n.messages import N_, _
from labkit.memory_format.tracker import _tensors

_CL = torch.channels_last
_CL3D = torch.channels_last_3d


class _Hint(NamedTuple):
    """A hint, and the slug that names its mistake on the room's board (``expect(..., mistake=)``)."""

    text: str
    mistake: str


def _first_line(error: BaseException) -> str:
    """The exception's type and the first line of its message: torch's overload lists would bury the hint after it."""
    first, _newline, rest = str(error).strip().partition("\n")
    return f"{type(error).__name__}: {first.rstrip(':')}{' (…)' if rest.strip() else ''}"


# ---------------------------------------------------------------------------------------------- 2.1 predict strides

#: The kinds of 2.1's cases, in the order asked: (number of dimensions, format, which dimensions have size 1).
STRIDE_CASE_KINDS: tuple[tuple[int, str, tuple[int, ...]], ...] = (
    (4, "contiguous_format", ()),
    (4, "channels_last", ()),
    (4, "channels_last", ()),
    (4, "channels_last", (1,)),  # one channel
    (4, "channels_last", (2, 3)),  # 1x1
    (5, "channels_last_3d", ()),
    (5, "contiguous_format", ()),
)


def stride_cases(draws: random.Random) -> list[tuple[tuple[int, ...], str]]:
    """One attempt's (shape, format) cases: the kinds of :data:`STRIDE_CASE_KINDS`, sizes drawn from ``draws`` (2 to
    12, the batch up to 16), so a table of remembered answers is no answer; the first two share their shape. The sizes
    of a shape other than its 1s differ from each other, so an answer that mixes two dimensions up (W before H, the
    channels for the height) is wrong on every draw, not right whenever the two sizes happen to be equal."""
    cases: list[tuple[tuple[int, ...], str]] = []
    for dims, name, ones in STRIDE_CASE_KINDS:
        shape = _distinct_sizes(draws, dims, ones)
        cases.append((cases[0][0] if len(cases) == 1 else shape, name))
    return cases


def _distinct_sizes(draws: random.Random, dims: int, ones: tuple[int, ...]) -> tuple[int, ...]:
    """A shape of ``dims`` sizes, 1 at ``ones`` and all the others different (drawn again until they are)."""
    while True:  # ends: 5 different sizes out of the 11 to 15 possible come up in a few draws
        shape = tuple(1 if dim in ones else draws.randint(2, 16 if dim == 0 else 12) for dim in range(dims))
        drawn = [size for dim, size in enumerate(shape) if dim not in ones]
        if len(set(drawn)) == len(drawn):
            return shape


#: The dimension letters of a 4-D and a 5-D tensor, in the order torch lists sizes and strides.
_LETTERS = {4: "NCHW", 5: "NCDHW"}
#: Each format's memory order, outermost to innermost.
_MEMORY_ORDER = {
    ("contiguous_format", 4): "N, C, H, W",
    ("contiguous_format", 5): "N, C, D, H, W",
    ("channels_last", 4): "N, H, W, C",
    ("channels_last_3d", 5): "N, D, H, W, C",
}


def _memory_order(shape: tuple[int, ...], strides: tuple[int, ...]) -> str | None:
    """The memory order, outermost first, that ``strides`` give ``shape`` when they describe a dense layout of it
    (each stride the product of the sizes inside it); None when they describe none, or several (equal strides)."""
    if len(shape) not in _LETTERS or len(strides) != len(shape) or len(set(strides)) != len(strides):
        return None
    innermost_first = sorted(range(len(shape)), key=lambda dim: strides[dim])
    step = 1
    for dim in innermost_first:
        if strides[dim] != step:
            return None
        step *= shape[dim]
    return ", ".join(_LETTERS[len(shape)][dim] for dim in reversed(innermost_first))


def _stride_hint(shape: tuple[int, ...], name: str, got: tuple[int, ...], expected: tuple[int, ...],
                 right_for_the_object: bool) -> _Hint:
    """What the wrong strides ``got`` are, when they are something recognisable: the message for 2.1."""
    said = _("For shape {shape} in {name} you predicted {got}, torch gives {expected}.").format(
               shape=shape, name=name, got=got, expected=expected)
    letters = ", ".join(_LETTERS.get(len(shape), "?"))
    order = _MEMORY_ORDER.get((name, len(shape)), "?")
    if right_for_the_object:
        return _Hint(_("{said} Your code gives torch's strides when it is passed the object torch.{name}, "
                       "but the checker passes memory_format as a string, {name!r}, as the docstring says: "
                       "a string never equals torch.{name}. Compare memory_format with the format's name.").format(
                         said=said, name=name), mistake="compares-with-the-object")
    if got == shape:
        return _Hint(_("{said} Those are the sizes (the shape), not the strides: a dimension's stride is "
                       "how many elements apart in memory two neighbours along it are.").format(said=said),
                       mistake="returns-the-sizes")
    if got in _off_by_one(shape, expected):
        return _Hint(_("{said} Each of those is off by one dimension: a stride is the product of the sizes "
                       "*inside* its dimension (1 for the innermost), not including its own size, nor "
                       "skipping the next one.").format(said=said),
                     mistake="off-by-one")
    for size in (2, 4, 8):
        if got == tuple(size * stride for stride in expected):
            return _Hint(_("{said} Those are {size} times torch's: strides count elements, not bytes "
                           "(NumPy's .strides are in bytes; torch's are not).").format(said=said, size=size),
                           mistake="strides-in-bytes")
    if got == expected[::-1]:
        return _Hint(_("{said} Those are torch's strides in reverse: list them in the order of the "
                       "dimensions, {letters}, as torch does.").format(said=said, letters=letters), mistake="reversed-order")
    if name != "contiguous_format":
        if got == torch.empty(shape).stride():
            if name == "channels_last_3d":
                return _Hint(_("{said} Those are the contiguous strides: channels_last_3d, the 5-D format, "
                               "puts the channels innermost as channels_last does, memory order {order}.").format(
                                 said=said, order=order),
                             mistake="forgets-channels-last-3d")
            return _Hint(_("{said} Those are the contiguous strides (memory order {contiguous_order}): your "
                           "code gives the same strides whatever memory_format says. In {name} the "
                           "channels are innermost: memory order {order}.").format(
                             said=said, contiguous_order=_MEMORY_ORDER[('contiguous_format', 4)], name=name, order=order),
                         mistake="ignores-the-format")
        in_memory_order = (0, *range(2, len(shape)), 1)
        if got == tuple(expected[dim] for dim in in_memory_order):
            return _Hint(_("{said} Those are torch's strides listed in memory order ({order}); torch lists "
                           "strides in the order of the logical dimensions, {letters}, whatever the "
                           "layout, so C's stride comes second.").format(said=said, order=order, letters=letters),
                         mistake="listed-in-memory-order")
    implied = _memory_order(shape, got)
    if implied is not None:
        return _Hint(_("{said} Your strides describe the memory order {implied} (outermost to innermost); "
                       "{name} is {order}.").format(said=said, implied=implied, name=name, order=order),
                       mistake="wrong-memory-order")
    return _Hint(_("{said} Hint: list the dimensions from innermost to outermost; each stride is the "
                   "product of the sizes inside it.").format(said=said), mistake="wrong-strides")


def _off_by_one(shape: tuple[int, ...], expected: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """The strides of the off-by-one slips: each stride times its own size (the product taken one dimension too
    far), or each the next-inner dimension's stride (one too short: the innermost 1, the next also 1)."""
    inner_first = sorted(range(len(shape)), key=lambda dim: (expected[dim], -dim))
    too_short = dict(zip(inner_first, [1, *(expected[dim] for dim in inner_first[:-1])]))
    return (tuple(stride * size for stride, size in zip(expected, shape)),
            tuple(too_short[dim] for dim in range(len(shape))))


class _TensorWatch(TorchFunctionMode):
    """Notes a torch call that made or read a tensor of the shape the learner was asked about: predicting strides
    means working them out, not reading them off ``torch.empty(shape, memory_format=...)``."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = sorted(shape)
        self.used: str | None = None

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if self.used is None and any(sorted(tensor.shape) == self.shape for tensor in _tensors((args, kwargs, result))):
            self.used = getattr(func, "__name__", "a torch function")
        return result


class _KernelWatch(TorchDispatchMode):
    """:class:`_TensorWatch` one level down, at the kernels: it sees a tensor made under
    ``torch._C.DisableTorchFunction()``, which hides the call from every TorchFunctionMode."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        super().__init__()
        self.shape = sorted(shape)
        self.used: str | None = None

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if self.used is None and any(sorted(tensor.shape) == self.shape for tensor in _tensors((args, kwargs, result))):
            self.used = str(getattr(func, "__name__", "a torch kernel")).split(".")[0]
        return result


def _right_for_the_object(predict_strides: Callable[..., object], shape: tuple[int, ...], name: str,
                          expected: tuple[int, ...]) -> bool:
    """True when the learner's code gives torch's strides if passed ``torch.<name>`` instead of the string it gets."""
    try:
        return int_tuple(call_learner(predict_strides, shape, getattr(torch, name))) == expected
    except LearnerError:
        return False


def check_predict_strides(predict_strides: Callable[[tuple[int, ...], str], tuple[int, ...]]) -> CheckResult:
    """Exercise 2.1: ``predict_strides(shape, format_name)`` gives torch's strides for a new tensor."""

    def check() -> str:
        used: str | None = None
        lists = False
        cases = stride_cases(case_draws())
        for shape, name in cases:
            expected = torch.empty(shape, memory_format=getattr(torch, name)).stride()
            case = _("the {shape_count}-D shape {shape} ({letters}) in {name}").format(
                       shape_count=len(shape), shape=shape, letters=', '.join(_LETTERS[len(shape)]), name=name)
            with learner_case(case), _KernelWatch(shape) as kernels, _TensorWatch(shape) as watch, \
                    watching_calls(in_module(torch._prims_common)) as helpers:
                got = call_learner(predict_strides, shape, name)
            expect(not helpers, _("For shape {shape} in {name} your code called torch._prims_common.{helper}, "
                                  "torch's own stride computation: that is torch's answer, not yours. Work the "
                                  "strides out from the shape yourself, innermost dimension first.").format(
                                    shape=shape, name=name, helper=helpers[0] if helpers else ""),
                   mistake="calls-torchs-strides")
            used = used or watch.used or kernels.used
            strides = int_tuple(got)
            if strides is None:
                raise CheckFailed(_("For shape {shape} in {name} you predicted {got!r}; return a tuple of "
                                    "ints, one stride per dimension.").format(shape=shape, name=name, got=got),
                                    mistake="not-a-tuple-of-ints")
            if strides != expected:
                raise CheckFailed(*_stride_hint(shape, name, strides, expected,
                                                _right_for_the_object(predict_strides, shape, name, expected)))
            lists = lists or isinstance(got, list)
        expect(used is None, (
            _("Your strides match torch's, but your code read them off a tensor (it called {used} on a "
              "tensor of the shape it was asked about). Work them out from the shape alone, without "
              "creating a tensor.").format(used=used)
        ), mistake="reads-strides-off-a-tensor")
        note = (_(" You returned lists, which this checker accepts since the numbers are right; note that "
                  "Tensor.stride() gives a tuple, and in Python a list never equals a tuple ([3, 1] == (3, "
                  "1) is False).")) \
            if lists else ""
        return _("All {cases_count} stride tuples match torch, including size-1 and 5-D shapes.{note}").format(
                   cases_count=len(cases), note=note)

    return run_check("2.1", check, predict_strides)


# ---------------------------------------------------------------------------------------------- 2.2 format dropper


def _strictly_channels_last(value: object) -> bool:
    """A 4-D tensor in channels_last and not also contiguous: one whose format an operator can keep or drop."""
    return (isinstance(value, torch.Tensor) and value.dim() == 4
            and value.is_contiguous(memory_format=_CL) and not value.is_contiguous())


@dataclass(frozen=True)
class _Call:
    """One call of the checker's own trace of a model that returned a 4-D tensor."""

    name: str
    has_tensor_input: bool
    took_channels_last: bool  # one of its tensor inputs was channels_last
    first_took: bool  # its first tensor input was
    shape: tuple[int, ...]
    kept: bool  # its result is channels_last (perhaps contiguous too)
    ambiguous: bool  # its result is contiguous and channels_last at once (a 1x1 image fits both)

    @property
    def dropped(self) -> bool:
        return self.took_channels_last and not self.kept


class _Trace(TorchFunctionMode):
    """The checker's reference tracker: every call that returned a 4-D tensor, with the formats of its inputs and result."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[_Call] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor) and result.dim() == 4:
            inputs = list(_tensors((args, kwargs or {})))
            kept = result.is_contiguous(memory_format=_CL)
            self.calls.append(_Call(
                name=getattr(func, "__name__", str(func)),
                has_tensor_input=bool(inputs),
                took_channels_last=any(_strictly_channels_last(tensor) for tensor in inputs),
                first_took=bool(inputs) and _strictly_channels_last(inputs[0]),
                shape=tuple(result.shape),
                kept=kept,
                ambiguous=kept and result.is_contiguous(),
            ))
        return result


@dataclass(frozen=True)
class _Seen:
    """What the checker's first convolution saw each time the learner's code ran the model."""

    input_channels_last: bool
    weight_channels_last: bool
    modes: tuple[TorchFunctionMode, ...]  # torch's stack of TorchFunctionModes at that moment


class _WatchedConv(nn.Conv2d):
    """A Conv2d that tells the checker what it ran with: the input's and its weight's formats, and which modes were on.

    It reports through a function, not an object: ``copy.deepcopy`` copies a model's objects but keeps its
    functions, so a copy the learner's code makes still reports to the checker.
    """

    def __init__(self, in_channels: int, out_channels: int, note: Callable[[_Seen], None]) -> None:
        super().__init__(in_channels, out_channels, 3, padding=1)
        self._note = note

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        with torch._C.DisableTorchFunction():  # the checker's own look, not a call for the learner's mode to see
            self._note(_Seen(_strictly_channels_last(input), _strictly_channels_last(self.weight),
                             tuple(_get_current_function_mode_stack())))
        return super().forward(input)


class _ChannelSoftmax(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


class _BiasFirst(nn.Module):
    """Adds a bias map made inside the model: a new NCHW tensor as add's first input, the channels_last one second."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.add(torch.full(x.shape, 0.1), x)


class _FreshGate(nn.Module):
    """Gates with a mask computed inside the model from a new NCHW tensor: calls on NCHW tensors that drop nothing."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(torch.full(x.shape, 2.0))


def _conv() -> nn.Conv2d:
    return nn.Conv2d(8, 8, 3, padding=1)


#: The checker's models, each by label and builder: the builder takes the function the first convolution reports to.
#: Their first drops (by the checker's trace): layer_norm; softmax, then layer_norm; add (channels_last second);
#: none (a 1x1 result is channels_last too); none (the NCHW calls had no channels_last input).
_DROPPER_MODELS: tuple[tuple[str, Callable[[Callable[[_Seen], None]], nn.Module]], ...] = (
    (N_("layer norm model"), lambda note: nn.Sequential(_WatchedConv(3, 8, note), nn.ReLU(), nn.LayerNorm(8), _conv())),
    (N_("softmax and layer norm model"), lambda note: nn.Sequential(
        _WatchedConv(3, 8, note), nn.BatchNorm2d(8), _ChannelSoftmax(), _conv(), nn.LayerNorm(8), _conv())),
    (N_("model with an NCHW bias"), lambda note: nn.Sequential(_WatchedConv(3, 8, note), _BiasFirst(), _conv())),
    (N_("clean model"), lambda note: nn.Sequential(
        _WatchedConv(3, 8, note), nn.ReLU(), nn.MaxPool2d(2), _conv(), nn.AdaptiveAvgPool2d(1))),
    (N_("model with an NCHW gate"), lambda note: nn.Sequential(_WatchedConv(3, 8, note), _FreshGate(), _conv())),
)


def _dropper_model(index: int, note: Callable[[_Seen], None]) -> nn.Module:
    with seeded(0):
        return _DROPPER_MODELS[index][1](note).eval()


def _dropper_input() -> torch.Tensor:
    return torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def _reference_trace(index: int) -> list[_Call]:
    """The checker's trace of its own copy of model ``index``, in channels_last: what the right answer rests on."""
    model = _dropper_model(index, lambda seen: None).to(memory_format=_CL)
    x = _dropper_input().contiguous(memory_format=_CL)
    with torch.no_grad(), _Trace() as trace:
        model(x)
    return trace.calls


def _pop_modes_above(depth: int) -> list[TorchFunctionMode]:
    """Take off torch's mode stack the modes the learner's code entered and never exited; return them."""
    left = []
    while len(_get_current_function_mode_stack()) > depth:
        left.append(_pop_mode())
    return left


def _is_library_mode(mode: TorchFunctionMode) -> bool:
    """True for a mode of torch's (``with torch.device(...)``) or labkit's (FormatTracker's), not one the learner wrote."""
    return type(mode).__module__.startswith(("torch.", "labkit."))


def _own_modes(modes: list[TorchFunctionMode], before: list[TorchFunctionMode]) -> list[TorchFunctionMode]:
    """The learner's modes among ``modes``: not on the stack before the call, not torch's or labkit's."""
    own: list[TorchFunctionMode] = []
    for mode in modes:
        if not _is_library_mode(mode) and all(mode is not other for other in [*before, *own]):
            own.append(mode)
    return own


def _modes_in_traceback(error: BaseException) -> list[TorchFunctionMode]:
    """The modes whose ``__torch_function__`` the exception passed through."""
    modes = []
    for frame, _line in traceback.walk_tb(error.__traceback__):
        mode = frame.f_locals.get("self") if frame.f_code.co_name == "__torch_function__" else None
        if isinstance(mode, TorchFunctionMode):
            modes.append(mode)
    return modes


def _mode_hint(mode: TorchFunctionMode) -> _Hint | None:
    """What is wrong inside the learner's ``__torch_function__``, found by calling it on small tensors; None if nothing."""
    name = f"{type(mode).__name__}.__torch_function__"
    a, b = torch.ones(3), torch.full((3,), 2.0)
    try:
        result = call_learner(mode.__torch_function__, torch.neg, (torch.Tensor,), (a,), None)
    except LearnerError as exc:
        if isinstance(exc.original, TypeError) and "mapping" in str(exc.original):
            return _Hint(_("torch calls {name} with kwargs=None when a call has no keyword arguments, and "
                           "** of None raises this TypeError: treat None as no keyword arguments.").format(name=name),
                           mistake="kwargs-none")
        return None
    if not (isinstance(result, torch.Tensor) and result.shape == a.shape and torch.equal(result, -a)):
        got = "None" if result is None else f"a {type(result).__name__}"
        return _Hint(_("{name} returned {got} for torch.neg(x), not what torch.neg gives: it must call "
                       "func and return func's result, or every call inside your mode loses its value.").format(
                         name=name, got=got), mistake="loses-func-result")
    try:
        result = call_learner(mode.__torch_function__, torch.add, (torch.Tensor,), (a, b), {"alpha": 2})
    except LearnerError:
        return None
    if isinstance(result, torch.Tensor) and result.shape == a.shape and torch.equal(result, a + b):
        return _Hint(_("{name} drops the keyword arguments: torch.add(a, b, alpha=2) gave a + b inside "
                       "your mode (and softmax(x, dim=1) loses its dim). Pass kwargs on to func.").format(name=name),
                       mistake="drops-kwargs")
    return None


def _first_mode_hint(modes: list[TorchFunctionMode]) -> _Hint | None:
    """The hint for the first of the learner's modes whose ``__torch_function__`` is wrong; None if none is."""
    return next(filter(None, map(_mode_hint, modes)), None)


def _conversion_hint(label: str, got: object, seen: list[_Seen]) -> _Hint | None:
    """Why nothing could drop: the model ran on an NCHW input, or with NCHW weights; None when it ran in channels_last."""
    if any(each.input_channels_last or each.weight_channels_last for each in seen):
        return None
    return _Hint(_("For the {label} you answered {got!r}: your code ran the model on an NCHW input with "
                   "NCHW weights, so no tensor was channels_last and nothing could drop it: convert the "
                   "model and the input to channels_last before running it.").format(label=label, got=got),
                   mistake="not-converted")


def _type_hint(label: str, got: object) -> _Hint:
    """The hint for an answer that is neither a string nor None."""
    if callable(got):
        return _Hint(_("For the {label} you returned the function {function} itself; return its name as a "
                       "string, or None.").format(label=label, function=getattr(got, '__name__', '?')),
                       mistake="returns-the-function")
    if isinstance(got, (list, tuple)):
        return _Hint(_("For the {label} you returned a {type}; return only the first name, as a string, or "
                       "None.").format(label=label, type=type(got).__name__), mistake="returns-a-list")
    return _Hint(_("For the {label} you returned a {type}; return the operator's name as a string, or None.").format(
                     label=label, type=type(got).__name__),
                 mistake="returns-not-a-name")


def _answer_hint(label: str, got: str | None, calls: list[_Call]) -> _Hint:
    """Why ``got`` is not the first operator that drops channels_last in this model, from the checker's trace."""
    droppers = [call for call in calls if call.dropped]
    expected = droppers[0].name if droppers else None
    short = got.rsplit(".", 1)[-1] if got else got
    said = _("For the {label} you answered {got!r}").format(label=label, got=got)
    named = [call for call in calls if call.name == short]
    if got is not None and got.startswith("<"):
        printed = got.split(" at 0x")[0] + (" ...>" if " at 0x" in got else "")
        return _Hint(_("For the {label} you answered {printed!r}, the function's printed form (str(func)); "
                       "return its name (its __name__), a string.").format(label=label, printed=printed),
                       mistake="returns-str-of-func")
    if got == "" and expected is None:
        return _Hint(_("{said}: nothing drops channels_last there, so return None, not an empty string.").format(said=said),
                     mistake="empty-string-for-none")
    if got is None and droppers and not droppers[0].first_took:
        return _Hint(_("{said}, but {expected} drops channels_last there: its channels_last input is not "
                       "its first argument. Look at every tensor argument, not only the first.").format(
                         said=said, expected=expected), mistake="first-argument-only")
    if named and named[0].dropped:
        return _Hint(_("{said}; it drops channels_last too, but after {expected!r}. Return the first call "
                       "that drops it.").format(said=said, expected=expected),
                     mistake="not-the-first-dropper")
    if named and named[0].took_channels_last and named[0].ambiguous:
        return _Hint(_("{said}, but its result, shape {shape}, is contiguous and channels_last at once (a "
                       "1x1 image fits both layouts), so it kept the format. Ask whether the result is "
                       "channels_last, not whether it is contiguous.").format(said=said, shape=named[0].shape),
                       mistake="tests-contiguous")
    if named and named[0].took_channels_last:
        return _Hint(_("{said}, but {short} took channels_last and returned channels_last: it kept the "
                       "format (its strides differ from its input's where its sizes do). Record a call "
                       "only when a channels_last input gave a 4-D result that is not channels_last.").format(
                         said=said, short=short), mistake="compares-strides")
    if named:
        why = _("its inputs were NCHW all along") if named[0].has_tensor_input else _("it makes a new tensor from no input")
        return _Hint(_("{said}, but {short} had no channels_last input ({why}), so it had no format to "
                       "drop. Record a call only when one of its tensor inputs was channels_last.").format(
                         said=said, short=short, why=why), mistake="no-channels-last-input")
    if expected is None:
        return _Hint(_("{said}, but no operator drops channels_last there: return None.").format(said=said),
        mistake="names-a-keeper")
    return _Hint(_("{said}, but the first operator that drops channels_last is {expected!r}. Hint: in "
                   "__torch_function__, call func first, then compare the formats of its 4-D tensor inputs "
                   "and of its result (is_contiguous(memory_format=...)).").format(said=said, expected=expected),
                   mistake="wrong-operator")


@dataclass(frozen=True)
class _LearnerRun:
    """One call of the learner's find_format_dropper on a fresh model, and what the checker saw of it."""

    answer: object
    error: LearnerError | None
    seen: list[_Seen]
    modes: list[TorchFunctionMode]  # the learner's own modes that were on while the model ran
    tracked_by_labkit: bool  # a FormatTracker of labkit's was on while the model ran
    leaked: list[TorchFunctionMode]  # modes it left on the stack


def _run_learner(find_format_dropper: Callable[..., object], index: int) -> _LearnerRun:
    seen: list[_Seen] = []
    model = _dropper_model(index, seen.append)
    before = list(_get_current_function_mode_stack())
    answer: object = None
    error = None
    try:
        with learner_case(_("the {model}").format(model=_(_DROPPER_MODELS[index][0]))):
            answer = call_learner(find_format_dropper, model, _dropper_input())
    except LearnerError as exc:
        error = exc
    finally:
        leaked = _pop_modes_above(len(before))
    on = [mode for each in seen for mode in each.modes]
    if error is not None:
        on += _modes_in_traceback(error.original)
    labkit = any(type(mode).__module__.startswith("labkit.") and all(mode is not old for old in before) for mode in on)
    return _LearnerRun(answer, error, seen, _own_modes(on, before), labkit, leaked)


def _check_structure(label: str, run: _LearnerRun) -> None:
    """The answer must come from running the model inside a TorchFunctionMode of the learner's, which exits."""
    if run.leaked:
        raise CheckFailed(
            _("Your code left its {type} on torch's mode stack (entered, never exited), so every torch "
              "call after it, in the checker and in your notebook, would still go through it; the checker "
              "took it off. Enter the mode with a `with` block, which exits it even when the model raises.").format(
                type=type(run.leaked[-1]).__name__),
            mistake="leaves-the-mode-on",
        )
    if run.error is not None:
        hint = _first_mode_hint(run.modes)
        if hint:
            raise CheckFailed(_("On the {label}, your code raised {first_line}. {text}").format(
                                  label=label, first_line=_first_line(run.error.original), text=hint.text),
                              mistake=hint.mistake)
        raise run.error
    expect(run.seen, (
        _("For the {label} your code answered {answer!r} without running the model: the answer must come "
          "from running it inside your TorchFunctionMode and reading what the mode recorded.").format(
            label=label, answer=run.answer)
    ), mistake="does-not-run-the-model")
    besides = _(" as well as in a TorchFunctionMode of your own") if run.modes else (
        _(", not a TorchFunctionMode of your own"))
    expect(not run.tracked_by_labkit, (
        _("For the {label} your code ran the model inside labkit's FormatTracker{besides}: the exercise is "
          "to write that mode (DropLogger) yourself.").format(label=label, besides=besides)
    ), mistake="uses-format-tracker")
    expect(run.modes, (
        _("For the {label} your code ran the model outside any TorchFunctionMode of yours: run it inside "
          "the `with` block of your mode (a subclass of torch.overrides.TorchFunctionMode; module hooks "
          "and a TorchDispatchMode do not count), where torch hands every call to its __torch_function__.").format(label=label)
    ), mistake="runs-outside-the-mode")


def _check_answer(label: str, run: _LearnerRun, calls: list[_Call]) -> None:
    """The learner's answer against the checker's trace, which is made only now: while the learner's code ran, no
    reference existed for it to find (``gc.get_objects()``)."""
    droppers = [call.name for call in calls if call.dropped]
    got = run.answer
    if not (got is None or isinstance(got, str)):
        raise CheckFailed(*_type_hint(label, got))
    short = got.rsplit(".", 1)[-1] if got else got
    if short != (droppers[0] if droppers else None):
        raise CheckFailed(*(_first_mode_hint(run.modes) or _conversion_hint(label, got, run.seen)
                            or _answer_hint(label, got, calls)))


def check_find_format_dropper(find_format_dropper: Callable[[nn.Module, torch.Tensor], str | None]) -> CheckResult:
    """Exercise 2.2: ``find_format_dropper(model, x)`` names the first operator that loses channels_last."""

    def check() -> str:
        for index, (english, _model) in enumerate(_DROPPER_MODELS):
            label = _(english)  # the case's name in the learner's language, inside every message below
            run = _run_learner(find_format_dropper, index)
            _check_structure(label, run)
            _check_answer(label, run, _reference_trace(index))
        return (_("You found layer_norm, softmax (the first of two drops) and add (channels_last as its "
                  "second input), saw that the clean model keeps channels_last throughout (a 1x1 result is "
                  "channels_last too), and did not count calls on NCHW tensors made inside a model as "
                  "drops."))

    return run_check("2.2", check, find_format_dropper)


# ---------------------------------------------------------------------------------------------- 2.3 Conv3d conversion

#: Each convolution of the checker's model and the format its weight must get.
_CONV_FORMATS = {"frames": _CL, "temporal": _CL3D, "spatial": _CL}
_LAYER_TYPES = {"frames": nn.Conv2d, "temporal": nn.Conv3d, "spatial": nn.Conv2d, "norm": nn.BatchNorm2d, "head": nn.Linear}


class _ClipNet(nn.Module):
    """A small video model: a Conv2d on each frame, a Conv3d across frames, a Conv2d plus a learned 4-D position
    bias, BatchNorm and a Linear head.

    The per-frame Conv2d is registered before the Conv3d, so ``model.to(memory_format=torch.channels_last)`` converts
    it before raising at the Conv3d's 5-D weight; ``position`` is 4-D but no convolution's weight, so a conversion that
    goes by rank instead of by layer changes it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.frames = nn.Conv2d(2, 4, 3, padding=1)
        self.temporal = nn.Conv3d(4, 4, 3, padding=1)
        self.spatial = nn.Conv2d(4, 4, 3, padding=1)
        self.position = nn.Parameter(0.1 * torch.randn(1, 4, 6, 6))
        self.norm = nn.BatchNorm2d(4)
        self.head = nn.Linear(4, 3)

    def forward(self, clip: torch.Tensor) -> torch.Tensor:
        n, c, t, h, w = clip.shape
        frames = self.frames(clip.transpose(1, 2).reshape(n * t, c, h, w))
        y = self.temporal(frames.reshape(n, t, -1, h, w).transpose(1, 2)).mean(dim=2)
        y = self.norm(self.spatial(y) + self.position)
        return self.head(y.mean(dim=(2, 3)))


def _clip_net() -> _ClipNet:
    with seeded(0):
        return _ClipNet().eval()


def _in_format(tensor: torch.Tensor, memory_format: torch.memory_format) -> bool:
    return tensor.is_contiguous(memory_format=memory_format) and not tensor.is_contiguous()


def _raised_in_module_to(error: BaseException) -> bool:
    """True when the error came out of ``nn.Module.to`` (``model.to(memory_format=...)``)."""
    return any(frame.name == "_apply" and Path(frame.filename).parts[-3:] == ("nn", "modules", "module.py")
               for frame in traceback.extract_tb(error.__traceback__))


def _conversion_error_hint(error: BaseException, model: nn.Module) -> _Hint | None:
    """The hint for an exception from the learner's convert that is a known slip; None for any other."""
    first_line = str(error).strip().split("\n")[0]
    said = _("Your code raised {first_line}.").format(first_line=_first_line(error))
    if isinstance(error, RuntimeError) and "rank 4 tensor to use channels_last format" in first_line:
        if _raised_in_module_to(error):
            done = [name for name, fmt in _CONV_FORMATS.items()
                    if _in_format(getattr(getattr(model, name, None), "weight", torch.empty(0)), fmt)]
            left = (_("The layers before the Conv3d ({value}) were converted before torch raised, so the "
                      "model is left half converted.").format(value=', '.join(done)) if done else "")
            return _Hint(_("{said} .to(memory_format=torch.channels_last) on a module gives every 4-D and "
                           "5-D parameter in it that format, and the Conv3d's 5-D weight cannot take it. "
                           "{left} 5-D weights take torch.channels_last_3d: convert the Conv2d and the "
                           "Conv3d weights each with its own format.").format(said=said, left=left),
                         mistake="model-to-channels-last")
        return _Hint(_("{said} That is torch.channels_last on a 5-D tensor, the Conv3d's weight: "
                       "channels_last is for 4-D tensors; 5-D ones take torch.channels_last_3d.").format(said=said),
                       mistake="channels-last-on-5d")
    if isinstance(error, RuntimeError) and "rank 5 tensor to use channels_last_3d format" in first_line:
        return _Hint(_("{said} That is torch.channels_last_3d on a 4-D tensor, a Conv2d's weight: "
                       "channels_last_3d is for 5-D tensors; 4-D ones take torch.channels_last.").format(said=said),
                       mistake="channels-last-3d-on-4d")
    if isinstance(error, TypeError) and "cannot assign" in first_line and "parameter" in first_line:
        return _Hint(_("{said} A layer's .weight must stay an nn.Parameter, so assigning a plain tensor to "
                       "it fails; change the Parameter's data in place instead (torch.nn.utils has "
                       "converters that do).").format(said=said),
                     mistake="assigns-a-plain-tensor")
    return None


def _expect_same_parameters(model: nn.Module, reference: nn.Module) -> None:
    """Every parameter and buffer still there, a Parameter where it was one, with its values and requires_grad."""
    mine = dict(reference.named_parameters())
    theirs = dict(model.named_parameters())
    for name, original in mine.items():
        param = theirs.get(name)
        if not isinstance(param, nn.Parameter):
            raise CheckFailed(_("{name} is no longer an nn.Parameter of the model: keep it one (optimizers "
                                "and state_dict() see only parameters) and change only its layout.").format(name=name),
                                mistake="no-longer-a-parameter")
        expect(type(param) is nn.Parameter, (
            _("{name} is a {type}, a subclass of nn.Parameter: keep torch's own nn.Parameter, whose "
              "is_contiguous reports the layout its strides really have.").format(name=name, type=type(param).__name__)
        ), mistake="parameter-subclass")
        expect(param.shape == original.shape and torch.equal(param.detach(), original.detach()),
               _("{name} changed its values or shape: convert layouts, not values.").format(name=name), mistake="changes-values")
        expect(param.requires_grad == original.requires_grad,
               _("{name}.requires_grad changed: convert layouts and leave the parameters trainable as they "
                 "were.").format(name=name),
               mistake="changes-requires-grad")
    for name, buffer in reference.named_buffers():
        theirs_buffer = dict(model.named_buffers()).get(name)
        expect(isinstance(theirs_buffer, torch.Tensor) and theirs_buffer.shape == buffer.shape
               and torch.equal(theirs_buffer, buffer), _("The buffer {name} changed: convert layouts, not "
                                                         "values.").format(name=name),
               mistake="changes-values")


def _expect_formats(model: nn.Module, reference: nn.Module) -> None:
    """Conv3d weight channels_last_3d, Conv2d weights channels_last, every other tensor in its old layout."""
    weights = {name: getattr(model, name).weight for name in _CONV_FORMATS}
    converted = [name for name, fmt in _CONV_FORMATS.items() if _in_format(weights[name], fmt)]
    expect(converted, (
        _("The model you got back has no weight converted: frames, temporal and spatial are all still "
          "contiguous. If your code converted a copy of the model, it returned the original: convert the "
          "model you were given, in place, and return it.")
    ), mistake="converts-a-copy")
    expect("temporal" in converted, (
        _("The Conv3d weight (temporal) is not channels_last_3d. Hint: 5-D tensors take "
          "torch.channels_last_3d, and the Conv2d converter of torch.nn.utils touches only Conv2d layers; "
          "torch.nn.utils has one for Conv3d layers too.")
    ), mistake="conv3d-not-converted")
    missing = [name for name in ("frames", "spatial") if name not in converted]
    expect(not missing, (
        _("The Conv2d weight of {value} is not channels_last: 4-D weights take torch.channels_last, and "
          "the Conv3d converter touches only Conv3d layers.").format(value=' and '.join(missing))
    ), mistake="conv2d-not-converted")
    old = {**dict(reference.named_parameters()), **dict(reference.named_buffers())}
    for name, tensor in [*model.named_parameters(), *model.named_buffers()]:
        if name not in {f"{conv}.weight" for conv in _CONV_FORMATS}:
            expect(tensor.stride() == old[name].stride(), (
                _("{name} is not a convolution's weight, but your code changed its layout (strides {value} "
                  "became {value2}): convert the Conv2d and Conv3d weights only, layer by layer, not every "
                  "4-D or 5-D tensor.").format(name=name, value=old[name].stride(), value2=tensor.stride())
            ), mistake="converts-by-rank")


def check_convert_conv3d(convert: Callable[[nn.Module], nn.Module]) -> CheckResult:
    """Exercise 2.3: ``convert(model)`` converts a model with a Conv3d: 4-D weights to channels_last, 5-D to channels_last_3d."""

    def check() -> str:
        reference, given = _clip_net(), _clip_net()
        clip = torch.randn(2, 2, 3, 6, 6, generator=torch.Generator().manual_seed(0))
        with torch.inference_mode():
            expected = reference(clip)
        try:
            returned = call_learner(convert, given)
        except LearnerError as exc:
            hint = _conversion_error_hint(exc.original, given)
            if hint:
                raise CheckFailed(*hint) from None
            raise
        expect(returned is not None, _("Your code returned None: convert the model in place and return it."),
               mistake="returns-none")
        what = _("a different model") if isinstance(returned, nn.Module) else _("an object of type {type}").format(
                                                                               type=type(returned).__name__)
        expect(returned is given, (
            _("Your code returned {what}, not the model it was given: convert that model in place and "
              "return it, as torch.nn.utils' converters do.").format(what=what)
        ), mistake="returns-another-object")
        for name, kind in _LAYER_TYPES.items():
            expect(type(given._modules.get(name)) is kind, _("Keep the model's layers: {name} must still be the "
                                                             "{type} it was.").format(name=name, type=kind.__name__),
                                                             mistake="replaces-layers")
        _expect_same_parameters(given, reference)
        _expect_formats(given, reference)
        try:
            with torch.inference_mode():
                got = call_learner(_ClipNet.forward, given, clip.contiguous(memory_format=_CL3D))
        except LearnerError as exc:
            raise CheckFailed(_("Running your converted model raised {exc}. Convert layouts, not shapes or "
                                "values.").format(exc=exc),
                              mistake="breaks-the-model") from None
        expect(isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.allclose(got, expected, atol=1e-5),
               _("The converted model gives different outputs; convert layouts, not values."), mistake="changes-outputs")
        return (_("Conv3d weight in channels_last_3d, both Conv2d weights in channels_last, the 4-D "
                  "position bias left as it was, same outputs as before."))

    return run_check("2.3", check, convert)

