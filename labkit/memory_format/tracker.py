"""FormatTracker: which operators keep channels_last, and which silently drop it.

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
output kept the format.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack, resolve_name

from labkit.core.errors import LabkitError
from labkit.core.tables import Table


class FormatTrackerError(LabkitError):
    """A FormatTracker was used outside its ``with`` block, entered twice, or exited out of order."""

#: The channels-last format for each rank the tracker follows.
_FORMAT_FOR_RANK = {4: torch.channels_last, 5: torch.channels_last_3d}


@dataclass(frozen=True)
class FormatRecord:
    """One operator call that took a channels_last(_3d) input and returned a tensor of the same rank."""

    operator: str
    input_shape: tuple[int, ...]
    input_strides: tuple[int, ...]
    output_shape: tuple[int, ...]
    output_strides: tuple[int, ...]
    kept: bool

    @property
    def memory_format(self) -> str:
        """The format the input had: ``"channels_last"`` (4-D) or ``"channels_last_3d"`` (5-D)."""
        return "channels_last_3d" if len(self.input_shape) == 5 else "channels_last"

    @property
    def short_name(self) -> str:
        """The operator's last name component, e.g. ``"layer_norm"``."""
        return self.operator.rsplit(".", 1)[-1]


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


class _RecordingMode(TorchFunctionMode):
    """Sees every torch function call in the block and hands format changes to ``records``."""

    def __init__(self, records: list[FormatRecord]) -> None:
        super().__init__()
        self.records = records

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        # Torch pops this mode while the handler runs, so the tests below are not recorded.
        output = next(_tensors(result), None)
        rank = output.dim() if output is not None else 0
        source = next((t for t in _tensors((args, kwargs)) if _is_strictly_channels_last(t, rank)), None)
        if source is not None:
            self.records.append(
                FormatRecord(
                    operator=resolve_name(func) or getattr(func, "__name__", repr(func)),
                    input_shape=tuple(source.shape),
                    input_strides=tuple(source.stride()),
                    output_shape=tuple(output.shape),
                    output_strides=tuple(output.stride()),
                    kept=output.is_contiguous(memory_format=_FORMAT_FOR_RANK[rank]),
                )
            )
        return result


class FormatTracker:
    """Record, per operator call, whether a channels_last input gave a channels_last output.

    5-D calls are followed the same way with channels_last_3d. Trackers nest;
    exit them in the reverse order of entering (``with`` blocks do that).

    >>> x = torch.randn(1, 4, 3, 3).to(memory_format=torch.channels_last)
    >>> with FormatTracker() as tracker:
    ...     _ = torch.nn.functional.layer_norm(x, (3,))
    >>> [r.short_name for r in tracker.lost()]
    ['layer_norm']
    """

    def __init__(self) -> None:
        self.records: list[FormatRecord] = []
        self._mode: _RecordingMode | None = None
        self._used = False

    def __enter__(self) -> FormatTracker:
        if self._mode is not None:
            raise FormatTrackerError("This FormatTracker is already active; create a new FormatTracker() to nest one.")
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
            raise FormatTrackerError(
                "This FormatTracker is being exited while an inner FormatTracker (or another torch "
                "function mode) entered after it is still active; exit the inner one first. "
                "Nested `with` blocks always do that."
            )
        self._mode = None
        mode.__exit__(*exc_info)

    @property
    def active(self) -> bool:
        return self._mode is not None

    def _require_used(self, what: str) -> None:
        if not self._used:
            raise FormatTrackerError(
                f"FormatTracker.{what}() has nothing to show: run your code inside "
                f"`with FormatTracker() as tracker:` first, then call tracker.{what}()."
            )

    def lost(self) -> list[FormatRecord]:
        """The calls whose output was no longer channels_last."""
        self._require_used("lost")
        return [r for r in self.records if not r.kept]

    def kept(self) -> list[FormatRecord]:
        """The calls whose output stayed channels_last."""
        self._require_used("kept")
        return [r for r in self.records if r.kept]

    def report(self) -> Table:
        """A table with one row per recorded call: operator, input and output strides, verdict."""
        self._require_used("report")
        rows = [
            [r.operator, str(r.input_strides), str(r.output_strides), "kept" if r.kept else "LOST"]
            for r in self.records
        ]
        title = f"{len(self.records)} calls with a channels_last input, {len(self.lost())} lost the format"
        return Table(["operator", "input strides", "output strides", "channels_last"], rows, title=title)
