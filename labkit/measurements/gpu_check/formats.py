"""The channels_last table the labs promise, measured: ResNet50 inference and one training step, per precision.

Why: published figures disagree on what channels_last gives on a given GPU (nothing, or tens of percent,
or a slowdown in fp32), so the labs quote none: this measures it on the machine at hand. Each row times
channels_first (``contiguous_format``, the baseline) and channels_last side by side with
``torch.utils.benchmark`` (:func:`~labkit.core.timing.compare_autorange`: interleaved rounds of
``blocked_autorange`` blocks, CUDA synchronised), as a :class:`~labkit.core.timing.SideBySide`, and its
verdict comes from the speedup and its spread (:func:`layout_verdict`). cuDNN's kernel search
(``cudnn.benchmark``) is on, as in a tuned run; TF32 is set per row; every setting is put back afterwards.
The last rows convert only the convolution weights
(``torch.nn.utils.memory_format.convert_conv2d_weight_memory_format``) of a Conv-heavy model (VGG11's
convolutions) and feed it a channels_last input.

Every channels_last run is also compared with its channels_first twin: a layout changes the memory order,
never the result, so outputs that differ beyond the precision's rounding are a failed check.
"""
from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from labkit.core.timing import SideBySide, compare_autorange, format_seconds
from labkit.measurements.gpu_check.plan import DISAGREES, OK, Budget, Row, StepResult
from labkit.measurements.gpu_check.settings import kept_backend_settings, set_tf32

CHANNELS_FIRST, CHANNELS_LAST = "channels_first", "channels_last"


@dataclass(frozen=True)
class Precision:
    """One row's arithmetic: TF32 on or off, and the autocast dtype (None: plain fp32); ``tolerance``: how far the
    two layouts' outputs may differ, relative to the output's largest value."""

    name: str
    tf32: bool
    autocast: torch.dtype | None
    tolerance: float


PRECISIONS = (
    Precision("fp32, TF32 off", False, None, 1e-4),
    Precision("fp32, TF32 on", True, None, 2e-2),
    Precision("fp16 autocast", False, torch.float16, 2e-2),
    Precision("bf16 autocast", False, torch.bfloat16, 1e-1),
)


#: Fewer timed blocks than this per layout tell no spread, so no verdict.
MIN_SAMPLES = 3


def layout_verdict(timings: SideBySide, name: str) -> str:
    """"faster" or "slower" than the baseline when the speedup's spread keeps it on one side of 1; else too close."""
    if min(timings.stats[name].count, timings.stats[timings.baseline].count) < MIN_SAMPLES:
        return "too few samples to call"
    speedup, spread = timings.speedup(name), timings.spread(name)
    if speedup - spread > 1:
        return "faster"
    if speedup + spread < 1:
        return "slower"
    return "too close to call"


def tiny_convnet() -> nn.Module:
    """The CPU tests' stand-in for ResNet50 (same code path, a fraction of the cost): Conv-BN-ReLU twice, a head."""
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                         nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))


def _seeded(build: Callable[[], nn.Module]) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build()


def resnet50(budget: Budget) -> tuple[str, nn.Module]:
    """ResNet50 (random weights), or at the tiny size a stand-in, with its name."""
    import torchvision

    if budget.size == "tiny":
        return "tiny ConvNet (CPU stand-in for ResNet50)", _seeded(tiny_convnet)
    return "ResNet50", _seeded(lambda: torchvision.models.resnet50(weights=None))


def conv_heavy(budget: Budget) -> tuple[str, nn.Module]:
    """VGG11's convolution stack (eight Conv2d and ReLU, five MaxPool2d): nearly all of its time is convolution."""
    import torchvision

    if budget.size == "tiny":
        return "two Conv2d (CPU stand-in for VGG11)", _seeded(
            lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1)))
    return "VGG11 convolutions", _seeded(lambda: torchvision.models.vgg11(weights=None).features)


def _autocast(device: torch.device, precision: Precision) -> contextlib.AbstractContextManager[object]:
    if precision.autocast is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=precision.autocast)


def _inference(model: nn.Module, x: torch.Tensor, device: torch.device, precision: Precision) -> Callable[[], object]:
    model.eval()

    def run() -> object:
        with torch.inference_mode(), _autocast(device, precision):
            return model(x)
    return run


def _training_step(model: nn.Module, x: torch.Tensor, device: torch.device, precision: Precision) -> Callable[[], object]:
    """Forward, loss, backward and an SGD step (no GradScaler: the time of the arithmetic, not of loss scaling)."""
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    target = torch.zeros(x.shape[0], dtype=torch.long, device=device)

    def run() -> object:
        optimizer.zero_grad(set_to_none=True)
        with _autocast(device, precision):
            loss = nn.functional.cross_entropy(model(x), target)
        loss.backward()
        optimizer.step()
        return loss.detach()
    return run


def _layouts(model: nn.Module, x: torch.Tensor, device: torch.device, convert: Callable[[nn.Module], nn.Module]
             ) -> dict[str, tuple[nn.Module, torch.Tensor]]:
    """Each layout's own copy of the model and input (a training step changes its weights)."""
    first = copy.deepcopy(model).to(device)
    last = convert(copy.deepcopy(model).to(device))
    x = x.to(device)
    return {CHANNELS_FIRST: (first, x.contiguous()), CHANNELS_LAST: (last, x.contiguous(memory_format=torch.channels_last))}


def _whole_model(model: nn.Module) -> nn.Module:
    return model.to(memory_format=torch.channels_last)


def _conv_weights(model: nn.Module) -> nn.Module:
    from torch.nn.utils.memory_format import convert_conv2d_weight_memory_format

    return convert_conv2d_weight_memory_format(model, torch.channels_last)


def _same_output(runners: dict[str, Callable[[], object]], precision: Precision) -> tuple[bool, float]:
    """Whether both layouts compute the same (first call of each: same weights), and the relative difference."""
    first, last = (torch.as_tensor(runners[name]()).float() for name in (CHANNELS_FIRST, CHANNELS_LAST))
    scale = first.abs().max().item() or 1.0
    difference = (first - last).abs().max().item() / scale
    return difference <= precision.tolerance, difference


def _is_out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()


def measure_row(what: str, model: nn.Module, shape: tuple[int, ...], device: torch.device, precision: Precision,
                workload: Callable[..., Callable[[], object]], convert: Callable[[nn.Module], nn.Module],
                budget: Budget) -> Row:
    """One row: both layouts of ``workload`` at the largest batch (from ``shape[0]``, halving) that fits in memory."""
    batch = shape[0]
    while True:
        try:
            return _measure(what, model, (batch, *shape[1:]), device, precision, workload, convert, budget)
        except Exception as exc:
            if not _is_out_of_memory(exc) or batch <= 1:
                raise
            batch //= 2
            torch.cuda.empty_cache()


def _measure(what: str, model: nn.Module, shape: tuple[int, ...], device: torch.device, precision: Precision,
             workload: Callable[..., Callable[[], object]], convert: Callable[[nn.Module], nn.Module],
             budget: Budget) -> Row:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        x = torch.randn(shape)
    runners = {name: workload(m, inp, device, precision) for name, (m, inp) in _layouts(model, x, device, convert).items()}
    same, difference = _same_output(runners, precision)
    stats = compare_autorange(runners, rounds=budget.pick(3, 2, 1), min_run_time=budget.pick(0.6, 0.3, 0.01),
                              device=device)
    timings = SideBySide(stats, CHANNELS_FIRST, row_label="layout")
    verdict = layout_verdict(timings, CHANNELS_LAST) if same else f"OUTPUTS DIFFER ({difference:.2g} of the scale)"
    batch = "x".join(map(str, shape))
    return Row(f"{what}, {precision.name}, input {batch}",
               f"{timings.speedup(CHANNELS_LAST):.2f}x ({format_seconds(stats[CHANNELS_FIRST].median)} -> "
               f"{format_seconds(stats[CHANNELS_LAST].median)})",
               f"± {timings.spread(CHANNELS_LAST):.2f}", verdict,
               {"speedup": timings.speedup(CHANNELS_LAST), "spread": timings.spread(CHANNELS_LAST),
                "channels_first": stats[CHANNELS_FIRST].as_dict(), "channels_last": stats[CHANNELS_LAST].as_dict(),
                "shape": list(shape), "output_difference": difference, "same_output": same,
                "noisy": timings.noisy(CHANNELS_FIRST) or timings.noisy(CHANNELS_LAST)})


def check_channels_last(device: torch.device, budget: Budget) -> StepResult:
    """The table: ResNet50 inference and training step per precision, then the Conv-heavy model's weights only."""
    side = budget.pick(224, 224, 16)
    infer_batch, train_batch = budget.pick((128, 64), (64, 32), (2, 2))
    precisions = PRECISIONS if budget.size != "small" else PRECISIONS[:1] + PRECISIONS[2:3]
    rows = []
    with kept_backend_settings():
        torch.backends.cudnn.benchmark = True
        for precision in precisions:
            set_tf32(precision.tf32)
            name, model = resnet50(budget)
            rows.append(measure_row(f"{name} inference", model, (infer_batch, 3, side, side), device, precision,
                                    _inference, _whole_model, budget))
            rows.append(measure_row(f"{name} training step", model, (train_batch, 3, side, side), device, precision,
                                    _training_step, _whole_model, budget))
        for precision in (PRECISIONS[1], PRECISIONS[2]):
            set_tf32(precision.tf32)
            name, model = conv_heavy(budget)
            rows.append(measure_row(f"{name}, convert_conv2d_weight_memory_format", model, (infer_batch, 3, side, side),
                                    device, precision, _inference, _conv_weights, budget))
    if device.type == "cpu":
        rows = [Row(r.what, r.value, r.spread, f"{r.verdict} (CPU rehearsal: not a GPU figure)" if r.data["same_output"]
                    else r.verdict, r.data) for r in rows]
    bad = [row for row in rows if not row.data["same_output"]]
    notes = ("speedup = channels_first median / channels_last median (> 1: channels_last is faster); spread: "
             "first-order, from both IQRs; cudnn.benchmark on, every setting restored afterwards",)
    return StepResult(DISAGREES if bad else OK, tuple(rows), notes)
