"""One definition of the capture options and one run loop, used by profile_model, make_profiler and the cross-check."""
import inspect

import pytest
import torch
from torch import nn

from labkit.fx import crosscheck, profile, runs
from labkit.fx.profile import capture_model, make_profiler


def test_make_profiler_passes_capture_models_options_through_as_they_are():
    keyword_only = [name for name, parameter in inspect.signature(capture_model).parameters.items()
                    if parameter.kind is parameter.KEYWORD_ONLY and name != "stacklevel"]
    assert list(profile._CAPTURE_OPTIONS) == keyword_only
    assert [name for name in inspect.signature(make_profiler).parameters] == ["model", "inputs", "stacklevel", "options"]


def test_profile_model_and_the_cross_check_time_their_runs_with_the_same_loop(monkeypatch: pytest.MonkeyPatch):
    loops: list[tuple[str, int, int]] = []
    real = runs.run_series

    def counted(profiler, warmup, timed, *args, **kwargs):
        loops.append((type(profiler).__name__, warmup, timed))
        return real(profiler, warmup, timed, *args, **kwargs)

    monkeypatch.setattr(profile, "run_series", counted)
    monkeypatch.setattr(crosscheck, "run_series", counted)
    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval(), torch.randn(2, 4)
    profile.profile_model(model, x, warmup=1, runs=2)
    crosscheck.compare_with_torch_profiler(model, x, warmup=1, runs=3)
    assert loops == [("NodeProfiler", 1, 2), ("NodeProfiler", 1, 3)]
