"""Tests for labkit.memory_format.benchmark.benchmark_formats (structure, not speed)."""
from __future__ import annotations

import json
import threading

import pytest
import torch
from torch import nn

from labkit.core.copies import HookSideEffectWarning
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.memory_format.benchmark import benchmark_formats


@pytest.fixture(scope="module")
def result():
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    return benchmark_formats(model, torch.randn(1, 3, 8, 8), device="cpu", min_run_time=0.02, rounds=2, warmup=1)


def test_cpu_measures_fp32_and_bf16(result):
    precisions = [t.precision for t in result.timings] + list(result.skipped)
    assert precisions[:1] == ["fp32"] and "bf16" in precisions
    timing = result.timing("fp32")
    for stats in (timing.contiguous, timing.channels_last):
        assert stats.count >= 2 and stats.median > 0 and stats.iqr >= 0
    assert timing.speedup == pytest.approx(timing.contiguous.median / timing.channels_last.median)
    assert result.speedup("fp32") == timing.speedup
    assert timing.side_by_side.baseline == "contiguous" and timing.spread == timing.side_by_side.spread("channels_last")


def test_renders_text_html_and_json(result):
    text = str(result)
    assert "speedup" in text and "fp32" in text
    table = result.table()
    assert table.headers == ["precision", "layout", "median", "IQR", "speedup", "note"]
    measured = [t.precision for t in result.timings]
    assert table.column("precision") == [p for p in measured for _ in range(2)]
    assert table.column("layout") == ["contiguous", "channels_last"] * len(measured)  # fixed order, not by time
    assert table.column("speedup")[0] == "1.00x" and table.column("note")[0].startswith("baseline")
    assert "<table>" in result._repr_html_()
    data = json.loads(json.dumps(result.as_dict()))
    assert data["input_shape"] == [1, 3, 8, 8]
    assert set(data["timings"]["fp32"]) == {"contiguous", "channels_last", "speedup"}
    with pytest.raises(LabkitValueError, match="No timing"):
        result.timing("fp8")


def test_lower_precisions_are_compared_with_fp32_in_words_not_by_the_layout_speedup(result):
    # A bf16 row's speedup is bf16 channels_last against bf16 contiguous; the footer compares bf16 with fp32.
    fp32, bf16 = result.timing("fp32"), result.timing("bf16")
    (line,) = result.across_precisions()
    expected = f"{fp32.channels_last.median / bf16.channels_last.median:.2f}x (channels_last)"
    assert line.startswith("bf16 against fp32 in the same layout:") and expected in line
    assert "Each speedup compares the two layouts of one precision." in str(result)
    assert line in result._repr_html_()


def test_model_and_input_left_untouched():
    model = nn.Conv2d(3, 4, 3)
    x = torch.randn(1, 3, 6, 6)
    benchmark_formats(model, x, precisions=["fp32"], device="cpu", min_run_time=0.01, rounds=1, warmup=1)
    assert model.weight.is_contiguous() and model.weight.dtype == torch.float32 and model.training
    assert x.is_contiguous()


class Busy(nn.Module):
    """Counts its calls in a buffer and an attribute, changes its input in place, holds a lock, has a train-mode BN."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.n_calls = 0
        self.lock = threading.Lock()

    def forward(self, x):
        with self.lock:
            self.calls += 1
            self.n_calls += 1
            x.add_(1)
            return self.bn(self.conv(x))


def test_the_models_buffers_attributes_hooks_and_the_callers_input_are_left_alone():
    model = Busy().eval()
    model.bn.train()
    calls = []
    model.conv.register_forward_hook(lambda *_: calls.append("hook"))
    running_mean, x = model.bn.running_mean.clone(), torch.zeros(1, 3, 6, 6)
    with pytest.warns(HookSideEffectWarning, match=r"model\.conv's forward hook .*closes over calls, a list"):
        benchmark_formats(model, x, precisions=["fp32"], device="cpu", min_run_time=0.01, rounds=1, warmup=1)
    assert int(model.calls) == 0 and model.n_calls == 0 and calls  # the hook is part of the model: it runs on the copy
    assert torch.equal(model.bn.running_mean, running_mean) and int(model.bn.num_batches_tracked) == 0
    assert model.bn.training and not model.training and not model.lock.locked()
    assert torch.equal(x, torch.zeros(1, 3, 6, 6))


UNSUPPORTED = "\"fussy_kernel_cpu\" not implemented for 'BFloat16'"  # how torch words a missing dtype kernel


class Fussy(nn.Module):
    """Fails in any dtype but fp32, with ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__()
        self.message = message

    def forward(self, x):
        if x.dtype != torch.float32:
            raise RuntimeError(self.message)
        return x


def test_unsupported_precision_is_skipped():
    res = benchmark_formats(
        Fussy(UNSUPPORTED), torch.randn(1, 3, 4, 4), precisions=["fp32", "bf16"], device="cpu", min_run_time=0.01, rounds=1
    )
    assert [t.precision for t in res.timings] == ["fp32"]
    assert res.skipped == {"bf16": UNSUPPORTED}
    assert f"bf16 skipped: {UNSUPPORTED}" in str(res)


def test_other_errors_in_a_lower_precision_are_raised_not_skipped():
    with pytest.raises(LabkitValueError, match=r"bf16.*only fp32 here.*precisions="):
        benchmark_formats(
            Fussy("only fp32 here"), torch.randn(1, 3, 4, 4), precisions=["fp32", "bf16"], device="cpu",
            min_run_time=0.01, rounds=1,
        )


@pytest.mark.parametrize("precisions", [None, ["bf16"]])
def test_wrong_channel_count_is_an_input_error_not_a_skip(precisions):
    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    with pytest.raises(LabkitValueError, match=r"example_input.*\(1, 5, 8, 8\).*expects 3 input channels") as info:
        benchmark_formats(model, torch.randn(1, 5, 8, 8), precisions=precisions, device="cpu", min_run_time=0.01, rounds=1)
    assert "5 channels" in str(info.value)  # torch's own sentence is kept


def test_model_failing_only_in_channels_last_is_raised():
    class Flattens(nn.Module):
        def forward(self, x):
            return x.view(x.shape[0], -1)  # a view cannot flatten a channels_last tensor

    with pytest.raises(LabkitValueError, match=r"channels_last.*fp32.*reshape"):
        benchmark_formats(Flattens(), torch.randn(1, 3, 4, 4), precisions=["fp32"], device="cpu", min_run_time=0.01, rounds=1)


def test_bad_arguments():
    model = nn.Conv2d(3, 4, 3)
    with pytest.raises(LabkitTypeError):
        benchmark_formats(lambda x: x, torch.randn(1, 3, 4, 4))
    with pytest.raises(LabkitValueError, match="4-D"):
        benchmark_formats(model, torch.randn(3, 4, 4))
    with pytest.raises(LabkitValueError, match="Unknown precision"):
        benchmark_formats(model, torch.randn(1, 3, 4, 4), precisions=["fp8"], device="cpu")
    with pytest.raises(LabkitValueError, match="rounds"):
        benchmark_formats(model, torch.randn(1, 3, 4, 4), rounds=0, device="cpu")
    with pytest.raises(LabkitValueError, match="warmup >= 1"):
        benchmark_formats(model, torch.randn(1, 3, 4, 4), warmup=0, device="cpu")


def test_other_input_errors_are_raised_with_torchs_reason():
    model = nn.Conv2d(3, 4, 5)
    with pytest.raises(LabkitValueError, match=r"\(1, 3, 2, 2\).*Kernel size can't be greater.*runs on its own"):
        benchmark_formats(model, torch.randn(1, 3, 2, 2), device="cpu", min_run_time=0.01, rounds=1)
    assert model.weight.is_contiguous() and model.training


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"min_run_time": float("nan")}, LabkitValueError, "min_run_time must be a finite number"),  # used to hang
        ({"rounds": 1.5}, LabkitTypeError, "rounds must be a whole number"),
        ({"warmup": "2"}, LabkitTypeError, "warmup must be a whole number"),
        ({"num_threads": -1}, LabkitValueError, "num_threads must be at least 1"),
        ({"precisions": "fp32"}, LabkitTypeError, r"precisions must be a list of names such as \['fp32'\]"),
    ],
)
def test_bad_settings_are_labkit_errors(kwargs, error, message):
    with pytest.raises(error, match=message):
        benchmark_formats(
            nn.Conv2d(3, 4, 3), torch.randn(1, 3, 4, 4), device="cpu", **{"min_run_time": 0.01, "rounds": 1, **kwargs}
        )


def test_the_timings_are_told_the_device_so_an_apple_gpu_is_waited_for(monkeypatch):
    """torch.utils.benchmark synchronizes CUDA only: labkit's compare_autorange waits for MPS when told the device."""
    import labkit.memory_format.benchmark as module

    told = []
    real = module.compare_autorange
    monkeypatch.setattr(module, "compare_autorange", lambda *a, **k: told.append(str(k.get("device"))) or real(*a, **k))
    model = nn.Sequential(nn.Conv2d(3, 4, 3)).eval()
    benchmark_formats(model, torch.randn(1, 3, 8, 8), precisions=["fp32"], device="cpu", min_run_time=0.01, rounds=1,
                      warmup=1)
    assert told == ["cpu"]
