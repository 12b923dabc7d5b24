"""Time a model in contiguous_format against channels_last, on the current device.

Why: whether channels_last pays off depends on the device, the dtype and the
model, so the lab measures it rather than quoting a number. Timing is
``torch.utils.benchmark`` (warm-up, device sync, per-block statistics); the
two layouts are measured in alternating rounds so that background load on a
shared machine hits both alike, and the result carries median and IQR.

Precisions: on CPU fp32 and bf16 (weights and input cast; skipped where the
build cannot run it); on a GPU fp32 and fp16 under ``torch.autocast``.
"""
from __future__ import annotations

import contextlib
import copy
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from labkit.device import device_line, pick_device
from labkit.errors import LabkitTypeError, LabkitValueError
from labkit.format_conversion import convert_model_per_layer
from labkit.tables import ShowsAsTable, Table
from labkit.timing import RunStats, compare_autorange, format_seconds


@dataclass(frozen=True)
class Precision:
    """How to run the model: cast to ``dtype``, or keep fp32 weights and use autocast."""

    name: str
    dtype: torch.dtype
    autocast: bool = False


PRECISIONS = {
    "fp32": Precision("fp32", torch.float32),
    "bf16": Precision("bf16", torch.bfloat16),
    "fp16 autocast": Precision("fp16 autocast", torch.float16, autocast=True),
    "bf16 autocast": Precision("bf16 autocast", torch.bfloat16, autocast=True),
}
DEFAULT_PRECISIONS = {"cpu": ("fp32", "bf16"), "cuda": ("fp32", "fp16 autocast"), "mps": ("fp32",)}
LAYOUTS = ("contiguous", "channels_last")


@dataclass(frozen=True)
class FormatTiming:
    """Both layouts' timings for one precision."""

    precision: str
    contiguous: RunStats
    channels_last: RunStats

    @property
    def speedup(self) -> float:
        """How many times faster channels_last is than contiguous (by median)."""
        return self.channels_last.ratio_to(self.contiguous)


@dataclass(repr=False)
class FormatBenchmark(ShowsAsTable):
    """The result of :func:`benchmark_formats`."""

    device: str
    input_shape: tuple[int, ...]
    num_threads: int
    timings: list[FormatTiming]
    skipped: dict[str, str] = field(default_factory=dict)

    def speedup(self, precision: str = "fp32") -> float:
        return self.timing(precision).speedup

    def timing(self, precision: str) -> FormatTiming:
        for timing in self.timings:
            if timing.precision == precision:
                return timing
        raise LabkitValueError(f"No timing for {precision!r}; measured: {[t.precision for t in self.timings]}.")

    def table(self) -> Table:
        rows = [
            [
                t.precision,
                format_seconds(t.contiguous.median),
                format_seconds(t.contiguous.iqr),
                format_seconds(t.channels_last.median),
                format_seconds(t.channels_last.iqr),
                f"{t.speedup:.2f}x",
            ]
            for t in self.timings
        ]
        headers = ["precision", "contiguous median", "IQR", "channels_last median", "IQR", "speedup"]
        title = f"input {self.input_shape} on {self.device}, {self.num_threads} thread(s)"
        return Table(headers, rows, title=title)

    def _skip_lines(self) -> list[str]:
        return [f"{name} skipped: {reason}" for name, reason in self.skipped.items()]

    def to_text(self) -> str:
        return "\n".join([self.table().to_text(), *self._skip_lines()])

    def as_dict(self) -> dict:
        return {
            "device": self.device,
            "input_shape": list(self.input_shape),
            "num_threads": self.num_threads,
            "timings": {
                t.precision: {"contiguous": t.contiguous.as_dict(), "channels_last": t.channels_last.as_dict(), "speedup": t.speedup}
                for t in self.timings
            },
            "skipped": dict(self.skipped),
        }

    def _repr_html_(self) -> str:
        return self.table().to_html() + "".join(f"<p>{html.escape(line)}</p>" for line in self._skip_lines())


def _runner(model: nn.Module, example: torch.Tensor, precision: Precision, device: torch.device, layout: str) -> Callable[[], object]:
    model = copy.deepcopy(model).eval().to(device)
    example = example.to(device)
    if not precision.autocast:
        model = model.to(precision.dtype)
        example = example.to(precision.dtype)
    if layout == "channels_last":
        convert_model_per_layer(model)
        example = example.contiguous(memory_format=torch.channels_last if example.dim() == 4 else torch.channels_last_3d)

    def run() -> object:
        autocast = torch.autocast(device.type, dtype=precision.dtype) if precision.autocast else contextlib.nullcontext()
        with torch.inference_mode(), autocast:
            return model(example)

    return run


def benchmark_formats(
    model: nn.Module,
    example_input: torch.Tensor,
    *,
    precisions: Sequence[str] | None = None,
    device: str | torch.device | None = None,
    min_run_time: float = 0.3,
    rounds: int = 3,
    warmup: int = 2,
    num_threads: int | None = None,
) -> FormatBenchmark:
    """Time ``model(example_input)`` in both layouts for each precision, interleaved in ``rounds``.

    ``min_run_time`` seconds per layout and precision are split over the rounds.
    Each layout first gets ``warmup`` untimed calls (at least one: the first
    call also tells whether the device can run the precision at all). A
    precision the device cannot run is skipped and named in ``.skipped``.
    ``model`` and ``example_input`` are left untouched (copies are converted).
    """
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(f"Expected a torch.nn.Module, got {type(model).__name__}.")
    if not isinstance(example_input, torch.Tensor) or example_input.dim() not in (4, 5):
        raise LabkitValueError("example_input must be a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) tensor.")
    if rounds < 1 or warmup < 1 or min_run_time <= 0:
        raise LabkitValueError("Use rounds >= 1, warmup >= 1 (the first call checks the precision runs) and min_run_time > 0 (seconds).")
    device = pick_device(device)
    names = tuple(precisions) if precisions is not None else DEFAULT_PRECISIONS.get(device.type, ("fp32",))
    unknown = [name for name in names if name not in PRECISIONS]
    if unknown:
        raise LabkitValueError(f"Unknown precision(s) {unknown}; use some of {list(PRECISIONS)}.")
    threads = num_threads or torch.get_num_threads()
    timings, skipped = [], {}
    for name in names:
        runners = {layout: _runner(model, example_input, PRECISIONS[name], device, layout) for layout in LAYOUTS}
        try:
            for run in runners.values():
                for _ in range(warmup):
                    run()
        except RuntimeError as exc:
            skipped[name] = str(exc).splitlines()[0]
            continue
        stats = compare_autorange(runners, rounds=rounds, min_run_time=min_run_time, num_threads=threads)
        timings.append(FormatTiming(name, *(stats[layout] for layout in LAYOUTS)))
    label = device_line(device) if device.type != "cpu" else "cpu"
    return FormatBenchmark(label, tuple(example_input.shape), threads, timings, skipped)
