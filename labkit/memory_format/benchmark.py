"""Time a model in contiguous_format against channels_last, on the current device.

Why: whether channels_last pays off depends on the device, the dtype and the
model, so the lab measures it rather than quoting a number. Timing is
``torch.utils.benchmark`` (warm-up, device sync, per-block statistics); the
two layouts are measured in alternating rounds so that background load on a
shared machine hits both alike, and the result carries median and IQR.

Precisions: on CPU fp32 and bf16 (weights and input cast; skipped where the
build cannot run it); on a GPU fp32 and fp16 under ``torch.autocast``.

Only a dtype the device or build does not support is skipped. Any other
failure (a wrong channel count, a ``.view()`` that cannot follow channels_last)
is the learner's to fix, so it is raised, never reported as "skipped".
"""
from __future__ import annotations

import contextlib
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import nn

from labkit.core.copies import private_copy, warn_hooks_reaching_out
from labkit.core.device import device_line, pick_device
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.core.tables import Row, ShowsAsTable, Table
from labkit.core.timing import (
    RunStats,
    SideBySide,
    _check_min_run_time,
    _check_num_threads,
    _require_whole,
    compare_autorange,
    shown_headers,
)
from labkit.i18n.messages import _, ngettext
from labkit.memory_format.conversion import convert_model_per_layer


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
    """Both layouts' timings for one precision, read as a side by side against contiguous."""

    precision: str
    contiguous: RunStats
    channels_last: RunStats

    @property
    def side_by_side(self) -> SideBySide:
        return SideBySide({"contiguous": self.contiguous, "channels_last": self.channels_last}, "contiguous", row_label="layout")

    @property
    def speedup(self) -> float:
        """Contiguous median over channels_last median: more than 1 means channels_last is faster."""
        return self.side_by_side.speedup("channels_last")

    @property
    def spread(self) -> float:
        """First-order spread of :attr:`speedup`, from both layouts' IQRs."""
        return self.side_by_side.spread("channels_last")


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
        """One row per precision and layout, in the order measured; speedup against that precision's contiguous."""
        rows: list[Row] = [
            [t.precision, *t.side_by_side.row(layout), t.side_by_side.note(layout)]
            for t in self.timings
            for layout in LAYOUTS
        ]
        headers = ["precision", *SideBySide.headers_for("layout")]
        title = ngettext("input {shape} on {device}, {threads} thread", "input {shape} on {device}, {threads} threads",
                         self.num_threads).format(shape=self.input_shape, device=self.device, threads=self.num_threads)
        return Table(shown_headers(headers), rows, title=title)

    def across_precisions(self) -> list[str]:
        """How each lower precision compares with fp32 in the same layout, one line each.

        Why: the table's speedups compare the two layouts within one precision, so a large speedup on a
        bf16 row says nothing about bf16 against fp32 (on a CPU without bf16 arithmetic, bf16 can be the
        slowest of all). These lines make that comparison explicit, from the same medians.
        """
        if self.timings[0].precision != "fp32":
            return []
        fp32 = self.timings[0]
        lines = []
        for timing in self.timings[1:]:
            ratios = ", ".join(
                f"{getattr(fp32, layout).median / getattr(timing, layout).median:.2f}x ({layout})" for layout in LAYOUTS
            )
            lines.append(_("{precision} against fp32 in the same layout: {ratios}; above 1 means {precision} is faster.")
                         .format(precision=timing.precision, ratios=ratios))
        return lines

    def _footer_lines(self) -> list[str]:
        notes = [_("Each speedup compares the two layouts of one precision.")] if len(self.timings) > 1 else []
        skipped = (_("{name} skipped: {reason}").format(name=name, reason=reason) for name, reason in self.skipped.items())
        return [*notes, *self.across_precisions(), *skipped]

    def to_text(self) -> str:
        return "\n".join([self.table().to_text(), *self._footer_lines()])

    def as_dict(self) -> dict:
        return {
            "device": self.device,
            "input_shape": list(self.input_shape),
            "num_threads": self.num_threads,
            "timings": {
                t.precision: {
                    "contiguous": t.contiguous.as_dict(), "channels_last": t.channels_last.as_dict(), "speedup": t.speedup
                }
                for t in self.timings
            },
            "skipped": dict(self.skipped),
        }

    def _repr_html_(self) -> str:
        return self.table().to_html() + "".join(f"<p>{html.escape(line)}</p>" for line in self._footer_lines())


def _runner(
    model: nn.Module, example: torch.Tensor, precision: Precision, device: torch.device, layout: str
) -> Callable[[], object]:
    # a private copy (parameters too: the copy is converted), none of the caller's hooks; the input a copy too, so a
    # forward that changes it in place changes neither the caller's tensor nor the other runners' inputs
    model = private_copy(model, share_parameters=False).eval().to(device)
    example = example.to(device, copy=True)
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


#: Words torch uses for each reduced dtype, and for a kernel that does not exist for it.
_DTYPE_WORDS = {torch.bfloat16: ("bfloat16", "bf16"), torch.float16: ("half", "float16", "fp16")}
_UNSUPPORTED_WORDS = ("not implemented for", "not supported", "unsupported", "does not support")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _sentence(exc: BaseException) -> str:
    """The first line of ``exc``, ending in a full stop so that a hint can follow it."""
    line = _first_line(exc)
    return line if line.endswith((".", "!", "?")) else f"{line}."


def _unsupported_dtype(exc: Exception, precision: Precision) -> bool:
    """True when ``exc`` says the precision's dtype itself cannot run (a missing kernel)."""
    text = str(exc).lower()
    return any(word in text for word in _DTYPE_WORDS.get(precision.dtype, ())) and any(
        word in text for word in _UNSUPPORTED_WORDS
    )


def _input_hint(model: nn.Module, example_input: torch.Tensor) -> str:
    """Name the channel count the model's first convolution expects, when the input has another."""
    first = next(((n, m) for n, m in model.named_modules() if isinstance(getattr(m, "in_channels", None), int)), None)
    if first is not None and first[1].in_channels != example_input.shape[1]:
        name, module = first
        channels = module.in_channels
        layer = f"first layer {name!r} ({type(module).__name__})" if name else f"first layer ({type(module).__name__})"
        dims = ", ".join(["N", str(channels), *"DHW"[-(example_input.dim() - 2):]])
        return (
            f"The model's {layer} expects {channels} input channels, example_input has "
            f"{example_input.shape[1]}: pass example_input of shape ({dims})."
        )
    return "Check that model(example_input) runs on its own before benchmarking it."


def _check_fp32_contiguous(model: nn.Module, example_input: torch.Tensor, device: torch.device) -> None:
    """Run the plain case once, so that an input error is raised before any precision is tried."""
    try:
        _runner(model, example_input, PRECISIONS["fp32"], device, "contiguous")()
    except Exception as exc:
        raise LabkitValueError(
            f"model(example_input) fails for example_input of shape {tuple(example_input.shape)} "
            f"(fp32, contiguous_format): {_sentence(exc)} {_input_hint(model, example_input)}"
        ) from exc


def _warm_up(runners: dict[str, Callable[[], object]], name: str, warmup: int) -> str | None:
    """Call each layout ``warmup`` times; return why ``name`` must be skipped, or None.

    Only an unsupported dtype is a reason to skip; any other failure is raised.
    """
    for layout, run in runners.items():
        try:
            for _warmup in range(warmup):
                run()
        except Exception as exc:
            if _unsupported_dtype(exc, PRECISIONS[name]):
                return _first_line(exc)
            reason = _sentence(exc)
            if layout == "channels_last":
                raise LabkitValueError(
                    f"model(example_input) runs in fp32 contiguous_format but fails with channels_last in {name}: "
                    f"{reason} Some code in the model assumes contiguous strides (e.g. .view(): use .reshape())."
                ) from exc
            raise LabkitValueError(
                f"model(example_input) runs in fp32 but fails in {name}: {reason} This is not an unsupported "
                f"dtype, so it is not skipped: make the model work in {name} (e.g. keep tensors in registered "
                f"buffers so they are cast too), or leave {name!r} out of precisions=."
            ) from exc
    return None


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
    ``model(example_input)`` first runs once in fp32 contiguous_format: if that
    fails, the input or model is wrong and a :class:`LabkitValueError` says so.
    Each layout then gets ``warmup`` untimed calls (at least one: the first
    call also tells whether the device can run the precision at all). A
    precision whose dtype the device cannot run is skipped and named in
    ``.skipped``; any other failure is raised.
    ``model`` and ``example_input`` are left untouched: each layout and precision
    runs a private copy of both (:func:`labkit.core.copies.private_copy`: its own
    buffers and attributes, and the model's hooks, which are part of what it computes), which is what is
    converted. A hook that holds one of the caller's objects gets a
    :class:`~labkit.core.copies.HookSideEffectWarning` naming it: each of the copies' calls reaches that object.
    """
    if not isinstance(model, nn.Module):
        raise LabkitTypeError(f"Expected a torch.nn.Module, got {type(model).__name__}.")
    if not isinstance(example_input, torch.Tensor) or example_input.dim() not in (4, 5):
        raise LabkitValueError("example_input must be a 4-D (N, C, H, W) or 5-D (N, C, D, H, W) tensor.")
    _require_whole("rounds", rounds)
    _require_whole("warmup", warmup)
    if rounds < 1 or warmup < 1:
        raise LabkitValueError("Use rounds >= 1 and warmup >= 1 (the first call checks the precision runs).")
    _check_min_run_time(min_run_time)
    _check_num_threads(num_threads)
    if isinstance(precisions, str) or not (precisions is None or isinstance(precisions, Sequence)):
        raise LabkitTypeError(f"precisions must be a list of names such as ['fp32'], got {precisions!r}.")
    device = pick_device(device)
    names = tuple(precisions) if precisions is not None else DEFAULT_PRECISIONS.get(device.type, ("fp32",))
    unknown = [name for name in names if name not in PRECISIONS]
    if unknown:
        raise LabkitValueError(f"Unknown precision(s) {unknown}; use some of {list(PRECISIONS)}.")
    threads = num_threads or torch.get_num_threads()
    warn_hooks_reaching_out(model)
    _check_fp32_contiguous(model, example_input, device)
    timings, skipped = [], {}
    for name in names:
        runners = {layout: _runner(model, example_input, PRECISIONS[name], device, layout) for layout in LAYOUTS}
        reason = _warm_up(runners, name, warmup)
        if reason is not None:
            skipped[name] = reason
            continue
        stats = compare_autorange(runners, rounds=rounds, min_run_time=min_run_time, num_threads=threads,
                                  device=device)
        timings.append(FormatTiming(name, *(stats[layout] for layout in LAYOUTS)))
    label = device_line(device) if device.type != "cpu" else "cpu"
    return FormatBenchmark(label, tuple(example_input.shape), threads, timings, skipped)
