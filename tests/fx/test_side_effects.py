"""Profiling, the torch.profiler cross-check and fusion change nothing the learner created.

Buffers and Python attributes a forward updates, a child's running statistics, the
caller's input tensors, a cache filled while tracing, the learner's own hooks (kept, and
run, as part of the model): each is checked after profile_model (every mode), compare_with_torch_profiler and the fusion
helpers. labkit.core.copies.private_copy and fresh_inputs do the work.
"""
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from labkit.core.copies import UncopyableModelError, fresh_inputs, private_copy
from labkit.fx.crosscheck import compare_with_torch_profiler
from labkit.fx.fusion import fuse_conv_bn_library, fuse_conv_bn_teaching, fuse_safely, verify_fusion
from labkit.fx.profile import profile_model
from labkit.fx.runs import HookSideEffectWarning

X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


class Counting(nn.Module):
    """Counts its calls in a buffer and in a Python attribute, as a model with a call counter does."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.n_calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.n_calls += 1
        return torch.relu(self.bn(self.conv(x)))


class InPlace(nn.Module):
    """Changes its input in place, as ``x.add_(1)`` in a forward does."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.add_(1)
        return self.linear(x)


class Caching(nn.Module):
    """Fills a dict attribute on its first forward, keyed by the input's device, as timm's LeViT does.

    While tracing, ``str(x.device)`` is a Proxy's name and the cached value a Proxy:
    on the learner's model that broke every later trace with ``KeyError: getitem_...``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.cache: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = str(x.device)
        if key not in self.cache:
            self.cache[key] = self.linear.bias * 2
        return self.linear(x) + self.cache[key]


class Locked(nn.Module):
    """Holds a threading.Lock, which copy.deepcopy cannot copy."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.lock:
            return self.linear(x)


def state_of(model: Counting) -> tuple[int, int, torch.Tensor, torch.Tensor, int]:
    bn = model.bn
    return int(model.calls), model.n_calls, bn.running_mean.clone(), bn.running_var.clone(), int(bn.num_batches_tracked)


def assert_same_state(before: tuple[Any, ...], after: tuple[Any, ...]) -> None:
    assert before[:2] == after[:2]  # the buffer and the attribute counters
    assert torch.equal(before[2], after[2]) and torch.equal(before[3], after[3]) and before[4] == after[4]


def quietly(run: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TrainModeWarning for the train-mode child: expected here
        return run()


PROFILE_RUNS: dict[str, Callable[[nn.Module, torch.Tensor], Any]] = {
    "fast": lambda model, x: profile_model(model, x, warmup=1, runs=2, mode="fast"),
    "interpreter": lambda model, x: profile_model(model, x, warmup=1, runs=2, mode="interpreter"),
    "modules": lambda model, x: profile_model(model, x, warmup=1, runs=2, mode="modules"),
    "crosscheck": lambda model, x: compare_with_torch_profiler(model, x, warmup=1, runs=2),
}


@pytest.mark.parametrize("run", PROFILE_RUNS.values(), ids=PROFILE_RUNS.keys())
@pytest.mark.parametrize("child_in_train_mode", [False, True], ids=["eval", "bn-in-train-mode"])
def test_profiling_changes_no_buffer_or_attribute(run: Callable[..., Any], child_in_train_mode: bool) -> None:
    model = Counting().eval()
    model.bn.train(child_in_train_mode)
    before = state_of(model)
    quietly(lambda: run(model, X))
    assert_same_state(before, state_of(model))
    assert model.training is False and model.bn.training is child_in_train_mode


def test_fusion_changes_no_buffer_or_attribute() -> None:
    model = Counting().eval()
    before = state_of(model)
    fused_teaching = fuse_conv_bn_teaching(model)
    fused_library = fuse_conv_bn_library(model)
    fused, _ = fuse_safely(model)
    assert verify_fusion(model, fused, X).allclose
    assert verify_fusion(model, fused_teaching, X).allclose and verify_fusion(model, fused_library, X).allclose
    assert_same_state(before, state_of(model))


@pytest.mark.parametrize("run", PROFILE_RUNS.values(), ids=PROFILE_RUNS.keys())
def test_the_callers_input_is_left_unchanged(run: Callable[..., Any]) -> None:
    x = torch.zeros(2, 4)
    quietly(lambda: run(InPlace().eval(), x))
    assert torch.equal(x, torch.zeros(2, 4))


def test_verify_fusion_leaves_the_callers_input_unchanged() -> None:
    model = nn.Sequential(InPlace(), nn.BatchNorm1d(4)).eval()
    x = torch.zeros(2, 4)
    verify_fusion(model, model, x)
    assert torch.equal(x, torch.zeros(2, 4))


@pytest.mark.parametrize("run", PROFILE_RUNS.values(), ids=PROFILE_RUNS.keys())
def test_a_cache_filled_in_forward_is_left_alone_and_profiles_twice(run: Callable[..., Any]) -> None:
    model = Caching().eval()
    x = torch.randn(2, 4)
    run(model, x)
    run(model, x)
    assert model.cache == {}
    model(x)  # the learner's own call fills the cache with a tensor, never a Proxy
    cached = model.cache["cpu"]
    run(model, x)
    assert list(model.cache) == ["cpu"] and model.cache["cpu"] is cached


def test_a_cache_holding_a_tensor_with_grad_history_is_copied() -> None:
    model = Caching().eval()
    model(torch.randn(2, 4))  # outside no_grad: the cached tensor is not a leaf, which deepcopy refuses
    assert model.cache["cpu"].grad_fn is not None
    profile_model(model, torch.randn(2, 4), warmup=0, runs=1)
    assert private_copy(model).cache["cpu"] is not model.cache["cpu"]


@pytest.mark.parametrize("run", PROFILE_RUNS.values(), ids=PROFILE_RUNS.keys())
def test_the_learners_hooks_run_as_part_of_the_model_and_a_hook_holding_their_list_is_named(
    run: Callable[..., Any],
) -> None:
    model = Counting().eval()
    calls = []
    model.conv.register_forward_hook(lambda *_: calls.append("hook"))
    model.conv.register_forward_pre_hook(lambda *_: calls.append("pre-hook"))
    model.register_forward_hook(lambda *_: calls.append("root hook"), with_kwargs=True)
    with pytest.warns(HookSideEffectWarning, match=r"model\.conv's forward hook .*closes over calls, a list"):
        run(model, X)
    assert {"hook", "pre-hook", "root hook"} <= set(calls)  # they are part of what the model computes
    assert len(model.conv._forward_hooks) == 1 and len(model.conv._forward_pre_hooks) == 1  # still only the learner's


def test_the_private_copy_shares_parameters_keeps_hooks_and_owns_the_rest() -> None:
    model = Counting().eval()
    model.conv.register_forward_hook(lambda *_: None)
    own = private_copy(model)
    assert own.conv.weight is model.conv.weight
    assert own.bn.running_mean is not model.bn.running_mean and own.calls is not model.calls
    assert len(own.conv._forward_hooks) == 1 and own.conv._forward_hooks is not model.conv._forward_hooks
    assert private_copy(model, share_parameters=False).conv.weight is not model.conv.weight


def test_fresh_inputs_clones_tensors_and_keeps_other_values() -> None:
    x, flag = torch.ones(2), True
    cloned, same_flag, nested = fresh_inputs([x, flag, [x]])
    assert cloned is not x and torch.equal(cloned, x) and same_flag is flag
    assert nested[0] is not x and torch.equal(nested[0], x)


@pytest.mark.parametrize("run", PROFILE_RUNS.values(), ids=PROFILE_RUNS.keys())
def test_a_model_holding_a_lock_profiles_and_shares_the_lock(run: Callable[..., Any]) -> None:
    model = Locked().eval()
    run(model, torch.randn(2, 4))
    assert private_copy(model).lock is model.lock
    assert not model.lock.locked()


def test_an_attribute_deepcopy_cannot_copy_is_named() -> None:
    model = Locked().eval()
    model.linear.source = (i for i in range(3))  # a generator: deepcopy cannot copy it
    with pytest.raises(UncopyableModelError, match=r"model\.linear\.source \(a generator\).*__deepcopy__"):
        profile_model(model, torch.randn(2, 4))


def test_fusion_accepts_labkits_eval_mode_trace_of_resnet18() -> None:
    torchvision = pytest.importorskip("torchvision")
    from labkit.fx.tracing import trace

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    traced = trace(model)
    assert not any(module.training for module in traced.modules())
    fused, note = fuse_safely(traced)
    x = torch.randn(1, 3, 32, 32)
    assert verify_fusion(model, fused, x).allclose and verify_fusion(model, fused, x).batchnorms_left == 0
    assert note == ""


def test_fusion_refuses_only_a_batchnorm_in_training_mode() -> None:
    from labkit.core.errors import LabkitValueError

    model = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Dropout()).eval()
    model[2].train()  # not a BatchNorm: fusion folds the same either way
    fuse_conv_bn_teaching(model)
    model[1].train()
    with pytest.raises(LabkitValueError, match="'1'"):
        fuse_conv_bn_teaching(model)
