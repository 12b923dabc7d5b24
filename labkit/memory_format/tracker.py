"""FormatTracker: which operators keep channels_last, which change the layout on purpose, which drop it.

Why: an operator without a channels_last kernel returns a contiguous (NCHW)
tensor, and every later layer then runs on the slow path. The classic tutorial
found such operators by monkeypatching ``torch``, ``torch.nn.functional`` and
``torch.Tensor``, which broke other code running in the same process. This
tracker uses torch's public extension point instead,
``torch.overrides.TorchFunctionMode``: torch pushes the mode on entry and pops
it on exit (also when the block raises), no attribute of torch is replaced, and
trackers nest because torch keeps a stack of modes.

A call is recorded when one of its tensor inputs is *unambiguously*
channels_last (4-D) or channels_last_3d (5-D), that is in the format but not
also contiguous, and its output has the same rank. The record says whether the
output kept the format and, when it did not, which of two kinds of change it was:

- a **layout op**: the caller asked for a new shape, dimension order, view or
  memory format (``permute``, ``reshape``, ``split``, ``.contiguous()``, slicing,
  ``.to(memory_format=...)``), so the new strides are the answer to the request,
  not a missing kernel. In a real model these are the bulk of the changes
  (ConvNeXt and Swin permute to NHWC around every LayerNorm) and hide the
  second kind;
- a **drop**: an operator that had every reason to keep the format returned
  another layout (``softmax`` over channels, ``roi_align``, ``cat`` or ``add``
  with a contiguous second input). These are the ones worth fixing.

Two kinds of call are not drops although their output is not channels_last:

- a **fresh tensor** (``x.new_zeros``, ``new_empty``, ``new_ones``, ``new_full``,
  ``new_tensor``, ``new_empty_strided``) takes only a dtype and a device from
  ``x``; it never had a format to keep, so it is not recorded at all;
- a **write into the caller's tensor** (an ``out=`` buffer, the destination of
  ``copy_`` or of an in-place op) keeps the destination's layout, which the
  caller chose. It is recorded as a layout op whose reason says so
  (:data:`WRITES_OUT`, :data:`WRITES_INTO`), next to the other changes the caller asked for.

If recording itself fails (a labkit bug, or a tensor it cannot describe), the
tracker stops recording at once and raises :class:`FormatTrackerError` from that
call: every later call runs untracked, and leaving the ``with`` block pops the
mode as usual, so torch is left as it was found.
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack, resolve_name

from labkit.core.errors import LabkitError
from labkit.core.tables import Table
from labkit.i18n.messages import N_, _, ngettext


class FormatTrackerError(LabkitError):
    """A FormatTracker was used outside its ``with`` block, entered twice, or exited out of order."""

#: The channels-last format for each rank the tracker follows.
_FORMAT_FOR_RANK = {4: torch.channels_last, 5: torch.channels_last_3d}

RecordKind = Literal["kept", "layout op", "dropped"]

_REORDERS = N_("reorders the dimensions")
_RESHAPES = N_("asks for a new shape")
_SPLITS = N_("splits into views")
_ASKS_FORMAT = N_("asks for a memory format")
_VIEW = N_("returns a view of its input")
MIXED_INPUTS = N_("mixed-format inputs")
#: The reason recorded for a write into a caller's ``out=`` tensor: it keeps the layout the caller gave it.
WRITES_OUT = N_("writes into the caller's out= tensor")
#: The reason recorded for ``copy_`` or an in-place op into the caller's tensor: it keeps that tensor's layout.
WRITES_INTO = N_("writes into the caller's tensor")

#: Why each torch operator (by the short name it has on ``torch`` and ``torch.Tensor``) is a deliberate layout op.
#: - permute, transpose, swapaxes, swapdims, movedim, moveaxis: the caller names a new dimension order; the result's
#:   strides are the input's, reordered, so a 4-D result is in no format or plain NHWC-contiguous (ConvNeXt's LayerNorm).
#: - view, view_as, reshape, reshape_as, flatten, unflatten, squeeze, unsqueeze: a new shape is defined on the logical
#:   row-major NCHW order, so torch must view or copy into that order; the caller asked for it. squeeze and unsqueeze
#:   belong to the family, though only a squeeze that removes nothing keeps the rank, and it keeps the format too.
#: - split, split_with_sizes, chunk, tensor_split, unbind, narrow: each piece is a window into the input with the
#:   input's strides, and a slice of the channels fits no format; nothing is copied, nothing "drops".
#: - contiguous: ``.contiguous()`` means ``memory_format=torch.contiguous_format``, an explicit request.
#: Any call with an explicit ``memory_format`` argument (``.to``, ``.clone``, ``*_like``) other than
#: ``torch.preserve_format``, and any call whose result is a view of the channels_last input (slicing with
#: ``x[:, :k]``, ``expand``, ``as_strided``), counts as a layout op too, for the same reason.
LAYOUT_OPERATOR_REASONS: Mapping[str, str] = MappingProxyType({
    **dict.fromkeys(("permute", "transpose", "swapaxes", "swapdims", "movedim", "moveaxis"), _REORDERS),
    **dict.fromkeys(("view", "view_as", "reshape", "reshape_as", "flatten", "unflatten", "squeeze", "unsqueeze"), _RESHAPES),
    **dict.fromkeys(("split", "split_with_sizes", "chunk", "tensor_split", "unbind", "narrow"), _SPLITS),
    "contiguous": _ASKS_FORMAT,
})


def _full_names(short_name: str) -> Iterator[str]:
    """The names ``resolve_name`` records for ``torch.<name>`` and ``torch.Tensor.<name>`` (``torch.functional.split``)."""
    for owner in (torch, torch.Tensor):
        function = getattr(owner, short_name, None)
        name = resolve_name(function) if function is not None else None
        if name:
            yield name


#: Operators that build a fresh tensor and take only a dtype and a device from their input: never recorded.
_FRESH_TENSOR_OPERATORS = frozenset(
    full for short in ("new_zeros", "new_empty", "new_ones", "new_full", "new_tensor", "new_empty_strided")
    for full in _full_names(short)
)

#: Full operator name (as recorded in ``FormatRecord.operator``) -> why it is a deliberate layout op.
LAYOUT_OPERATORS: Mapping[str, str] = MappingProxyType({
    full: reason for short, reason in LAYOUT_OPERATOR_REASONS.items() for full in _full_names(short)
})


@dataclass(frozen=True)
class FormatRecord:
    """One operator call that took a channels_last(_3d) input and returned a tensor of the same rank.

    ``layout_reason`` is empty unless the call was a deliberate layout op; ``mixed_inputs`` is True when another
    input of the same rank was plainly contiguous (neither ambiguous nor channels_last).
    """

    operator: str
    input_shape: tuple[int, ...]
    input_strides: tuple[int, ...]
    output_shape: tuple[int, ...]
    output_strides: tuple[int, ...]
    kept: bool
    layout_reason: str = ""
    mixed_inputs: bool = False

    @property
    def memory_format(self) -> str:
        """The format the input had: ``"channels_last"`` (4-D) or ``"channels_last_3d"`` (5-D)."""
        return "channels_last_3d" if len(self.input_shape) == 5 else "channels_last"

    @property
    def short_name(self) -> str:
        """The operator's last name component, e.g. ``"layer_norm"``."""
        return self.operator.rsplit(".", 1)[-1]

    @property
    def kind(self) -> RecordKind:
        """``"kept"``, ``"layout op"`` (the caller asked for the change) or ``"dropped"`` (a real drop)."""
        if self.kept:
            return "kept"
        return "layout op" if self.layout_reason else "dropped"

    @property
    def reason(self) -> str:
        """Why the format changed: the layout op's reason, ``"mixed-format inputs"`` for such a drop, else ``""``."""
        if self.kind == "layout op":
            return self.layout_reason
        if self.kind == "dropped" and self.mixed_inputs:
            return MIXED_INPUTS
        return ""


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


def _is_strictly_channels_last(tensor: torch.Tensor, rank: int) -> bool:
    """True for a rank-``rank`` tensor in channels_last (4-D) or channels_last_3d (5-D) but not contiguous."""
    return (
        tensor.dim() == rank
        and rank in _FORMAT_FOR_RANK
        and tensor.is_contiguous(memory_format=_FORMAT_FOR_RANK[rank])
        and not tensor.is_contiguous()
    )


def _is_strictly_contiguous(tensor: torch.Tensor, rank: int) -> bool:
    """True for a rank-``rank`` tensor that is contiguous and not also channels_last(_3d): unambiguously NCHW."""
    return (
        tensor.dim() == rank
        and tensor.is_contiguous()
        and not tensor.is_contiguous(memory_format=_FORMAT_FOR_RANK[rank])
    )


def _names_a_memory_format(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """True when the call asks for a format (``.to(memory_format=...)``, ``.contiguous(fmt)``) other than preserve_format."""
    return any(
        isinstance(value, torch.memory_format) and value != torch.preserve_format for value in (*args, *kwargs.values())
    )


def _shares_storage(output: torch.Tensor, source: torch.Tensor) -> bool:
    """True when ``output`` is a view of ``source``: its strides were set by the request, not chosen by a kernel."""
    if output.layout != torch.strided:
        return False
    pointer = source.untyped_storage().data_ptr()
    return pointer != 0 and output.untyped_storage().data_ptr() == pointer


def _layout_reason(operator: str, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: list[torch.Tensor],
                   output: torch.Tensor, source: torch.Tensor) -> str:
    """Why the call is a deliberate layout op, or ``""`` when it is not one."""
    if any(output is t for t in _tensors(kwargs.get("out"))):
        return WRITES_OUT
    if any(output is t and t is not source for t in inputs):  # copy_ or an in-place op: the result is the caller's
        return WRITES_INTO
    if _names_a_memory_format(args, kwargs):
        return _ASKS_FORMAT
    if operator in LAYOUT_OPERATORS:
        return LAYOUT_OPERATORS[operator]
    return _VIEW if _shares_storage(output, source) else ""


class _RecordingMode(TorchFunctionMode):
    """Sees every torch function call in the block and hands format changes to ``records``."""

    def __init__(self, records: list[FormatRecord]) -> None:
        super().__init__()
        self.records = records
        #: Set when recording failed: from then on every call runs untracked (torch keeps the mode until exit).
        self.stopped = False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if self.stopped:
            return result
        # Torch pops this mode while the handler runs, so the tests below are not recorded.
        try:
            self._inspect(func, args, kwargs, result)
        except Exception as error:
            self.stopped = True
            raise FormatTrackerError(_(
                "FormatTracker could not record the call to {operator} ({error}), so it stopped recording: later "
                "calls run untracked, and tracker.records keeps what came before. This is a labkit bug; please "
                "report it with the operator's name.").format(
                    operator=_operator_name(func), error=f"{type(error).__name__}: {error}")
            ) from error
        return result

    def _inspect(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any) -> None:
        """Append a record when the call took a channels_last(_3d) input and returned a tensor of the same rank."""
        output = next(_tensors(result), None)
        if output is None or output.dim() not in _FORMAT_FOR_RANK:
            return
        inputs = list(_tensors((args, kwargs)))
        source = next((t for t in inputs if _is_strictly_channels_last(t, output.dim())), None)
        if source is None:
            return
        operator = _operator_name(func)  # only now: resolving a name costs microseconds on every call
        if operator not in _FRESH_TENSOR_OPERATORS:
            self.records.append(_record(operator, args, kwargs, inputs, source, output))


def _operator_name(func: Any) -> str:
    """The name a record shows for ``func``: ``torch.nn.functional.softmax``, ``torch.Tensor.permute``..."""
    return resolve_name(func) or getattr(func, "__name__", repr(func))


def _record(operator: str, args: tuple[Any, ...], kwargs: dict[str, Any], inputs: list[torch.Tensor],
            source: torch.Tensor, output: torch.Tensor) -> FormatRecord:
    """Describe one call whose input ``source`` was channels_last(_3d) and whose ``output`` has the same rank."""
    rank = output.dim()
    kept = output.is_contiguous(memory_format=_FORMAT_FOR_RANK[rank])
    return FormatRecord(
        operator=operator,
        input_shape=tuple(source.shape),
        input_strides=tuple(source.stride()),
        output_shape=tuple(output.shape),
        output_strides=tuple(output.stride()),
        kept=kept,
        layout_reason="" if kept else _layout_reason(operator, args, kwargs, inputs, output, source),
        mixed_inputs=any(_is_strictly_contiguous(t, rank) for t in inputs),
    )


#: Report order: the real drops first, then the deliberate changes, then what kept the format.
_REPORT_ORDER: dict[RecordKind, int] = {"dropped": 0, "layout op": 1, "kept": 2}
_VERDICT: dict[RecordKind, str] = {"dropped": N_("DROPPED"), "layout op": N_("layout op"), "kept": N_("kept")}


class FormatTracker:
    """Record, per operator call, whether a channels_last input gave a channels_last output.

    Each record's ``kind`` tells a real drop (``dropped()``) from a change the
    caller asked for (``layout_ops()``: permute, reshape, split, ...). 5-D calls
    are followed the same way with channels_last_3d. Trackers nest; exit them in
    the reverse order of entering (``with`` blocks do that).

    >>> x = torch.randn(1, 4, 3, 3).to(memory_format=torch.channels_last)
    >>> with FormatTracker() as tracker:
    ...     _ = torch.nn.functional.layer_norm(x, (3,))
    ...     _ = x.permute(0, 2, 3, 1)
    >>> [r.short_name for r in tracker.dropped()], [r.short_name for r in tracker.layout_ops()]
    (['layer_norm'], ['permute'])
    """

    def __init__(self) -> None:
        self.records: list[FormatRecord] = []
        self._mode: _RecordingMode | None = None
        self._used = False

    def __enter__(self) -> FormatTracker:
        if self._mode is not None:
            raise FormatTrackerError(_("This FormatTracker is already active; create a new FormatTracker() to nest one."))
        self.records = []
        mode = _RecordingMode(self.records)
        mode.__enter__()
        self._mode = mode
        self._used = True
        return self

    def __exit__(self, *exc_info: object) -> None:
        mode = self._mode
        if mode is None:
            return
        stack = _get_current_function_mode_stack()
        if not any(m is mode for m in stack):  # torch already dropped it: nothing to pop
            self._mode = None
            return
        if stack[-1] is not mode:
            # torch pops whatever mode is on top, so exiting now would remove the inner one.
            raise FormatTrackerError(_(
                "This FormatTracker is being exited while an inner FormatTracker (or another torch "
                "function mode) entered after it is still active; exit the inner one first. "
                "Nested `with` blocks always do that."
            ))
        self._mode = None
        mode.__exit__(*exc_info)

    @property
    def active(self) -> bool:
        """True inside the ``with`` block until recording stops (on exit, or after recording itself failed)."""
        return self._mode is not None and not self._mode.stopped

    def _require_used(self, what: str) -> None:
        if not self._used:
            raise FormatTrackerError(_(
                "FormatTracker.{what}() has nothing to show: run your code inside "
                "`with FormatTracker() as tracker:` first, then call tracker.{what}()."
            ).format(what=what))

    def _of_kind(self, what: str, *kinds: RecordKind) -> list[FormatRecord]:
        self._require_used(what)
        return [r for r in self.records if r.kind in kinds]

    def lost(self) -> list[FormatRecord]:
        """Every call whose output was no longer channels_last, in call order: ``dropped()`` and ``layout_ops()`` together."""
        return self._of_kind("lost", "dropped", "layout op")

    def dropped(self) -> list[FormatRecord]:
        """The real drops: calls that had every reason to keep channels_last and returned another layout."""
        return self._of_kind("dropped", "dropped")

    def layout_ops(self) -> list[FormatRecord]:
        """The calls that changed the layout because the caller asked (permute, reshape, ``out=``, ``copy_``, ...)."""
        return self._of_kind("layout_ops", "layout op")

    def kept(self) -> list[FormatRecord]:
        """The calls whose output stayed channels_last."""
        return self._of_kind("kept", "kept")

    def report(self) -> Table:
        """One row per recorded call, real drops first, then layout ops, then kept; ``#`` is the call's position."""
        self._require_used("report")
        numbered = sorted(enumerate(self.records, start=1), key=lambda item: (_REPORT_ORDER[item[1].kind], item[0]))
        rows = [
            [number, r.operator, str(r.input_strides), str(r.output_strides), _(_VERDICT[r.kind]),
             _(r.reason) if r.reason else ""]
            for number, r in numbered
        ]
        dropped, layout = len(self.dropped()), len(self.layout_ops())
        title = ngettext(
            "{calls} call with a channels_last input: {dropped} dropped the format, "
            "{layout} changed the layout on purpose, {kept} kept it",
            "{calls} calls with a channels_last input: {dropped} dropped the format, "
            "{layout} changed the layout on purpose, {kept} kept it",
            len(self.records),
        ).format(calls=len(self.records), dropped=dropped, layout=layout, kept=len(self.records) - dropped - layout)
        headers = ["#", _("operator"), _("input strides"), _("output strides"), "channels_last", _("why")]
        return Table(headers, rows, title=title)
