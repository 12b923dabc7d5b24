"""The raw torch errors of issue 42, each now a labkit error that names what labkit cannot do and what to do instead.

Each case is a helper on a model of ``tests.hostile_models`` that raised torch's own error (or a
Python one) from deep inside labkit; the message must name the way that works. That nothing of the
user's changes meanwhile is ``tests/test_side_effects.py``'s job.
"""
from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from labkit.core.copies import WATCHES_HIGHER_ORDER, LazyModuleNotRunError
from labkit.core.errors import LabkitError
from labkit.forward_ad.dual import jvp
from labkit.forward_ad.model_kinds import HigherOrderForwardADError, ScriptedModelError, WrappedModelError
from labkit.forward_ad.parameter_jvp import module_jvp
from labkit.forward_ad.verification import verify_jvp
from labkit.fx.crosscheck import compare_with_torch_profiler
from labkit.fx.module_hooks import ScriptedSubmoduleError
from labkit.fx.profile import profile_model
from labkit.memory_format.conversion import conversion_report
from tests.hostile_models import Branching, ScriptedChild, VarKeywords, _data_parallel, _lazy, _scripted_model

X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
needs_cond = pytest.mark.skipif(not WATCHES_HIGHER_ORDER, reason="torch < 2.5 runs torch.cond differently")


def _tangent(model: nn.Module) -> dict[str, torch.Tensor]:
    name, parameter = next(iter(model.named_parameters()))
    return {name: torch.ones(4, 4) if isinstance(parameter, nn.parameter.UninitializedParameter) else
            torch.ones_like(parameter.detach())}


def _module_jvp(method: str) -> Callable[[nn.Module], Any]:
    return lambda model: module_jvp(model, (X,), _tangent(model), method)


CASES: list[Any] = [
    pytest.param(_module_jvp("swap"), Branching, HigherOrderForwardADError, r"torch\.cond.*reverse mode",
                 id="module_jvp[swap]-torch.cond", marks=needs_cond),
    pytest.param(_module_jvp("functional_call"), Branching, HigherOrderForwardADError, r"torch\.cond.*torch\.where",
                 id="module_jvp[functional_call]-torch.cond", marks=needs_cond),
    pytest.param(lambda model: jvp(model, (X,), (torch.ones_like(X),)), Branching, HigherOrderForwardADError,
                 r"torch\.cond", id="jvp-torch.cond", marks=needs_cond),
    pytest.param(lambda model: verify_jvp(model, (X,), (torch.ones_like(X),)), Branching, HigherOrderForwardADError,
                 r"torch\.cond", id="verify_jvp-torch.cond", marks=needs_cond),
    pytest.param(_module_jvp("swap"), _scripted_model, ScriptedModelError, r"TorchScript.*Python module you scripted",
                 id="module_jvp[swap]-torchscript"),
    pytest.param(_module_jvp("functional_call"), _scripted_model, ScriptedModelError, r"TorchScript",
                 id="module_jvp[functional_call]-torchscript"),
    pytest.param(_module_jvp("swap"), ScriptedChild, ScriptedModelError, r"model\.fc1 .*method='functional_call'",
                 id="module_jvp[swap]-scripted-child"),
    pytest.param(_module_jvp("functional_call"), _data_parallel, WrappedModelError, r"DataParallel.*model\.module",
                 id="module_jvp[functional_call]-data-parallel"),
    pytest.param(lambda model: profile_model(model, X, mode="modules", warmup=0, runs=1), ScriptedChild,
                 ScriptedSubmoduleError, r"model\.fc1 is TorchScript.*mode='fast'", id="modules-scripted-child"),
    pytest.param(lambda model: profile_model(model, X, warmup=0, runs=1), _lazy, LazyModuleNotRunError,
                 r"model\.0 \(LazyLinear\).*Run it once first", id="profile-lazy"),
    pytest.param(lambda model: profile_model(model, X, mode="modules", warmup=0, runs=1), _lazy, LazyModuleNotRunError,
                 r"Run it once first", id="modules-lazy"),
    pytest.param(lambda model: compare_with_torch_profiler(model, X, warmup=0, runs=1), _lazy, LazyModuleNotRunError,
                 r"Run it once first", id="crosscheck-lazy"),
    pytest.param(_module_jvp("swap"), _lazy, LazyModuleNotRunError, r"Run it once first", id="module_jvp-lazy"),
    pytest.param(conversion_report, _lazy, LazyModuleNotRunError, r"Run it once first", id="conversion_report-lazy"),
]


@pytest.mark.parametrize(("helper", "build", "error", "message"), CASES)
def test_a_model_labkit_cannot_run_gets_a_labkit_error_saying_what_to_do(
    helper: Callable[[nn.Module], Any], build: Callable[[], nn.Module], error: type[LabkitError], message: str
) -> None:
    torch.manual_seed(0)
    model = build()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a train-mode warning or torch's notes are not what is checked here
        with pytest.raises(error, match=re.compile(message, re.S)):
            helper(model)


def test_the_scripted_submodule_the_swap_refuses_gets_the_same_jvp_by_functional_call() -> None:
    torch.manual_seed(0)
    scripted = ScriptedChild()
    eager = ScriptedChild()
    eager.fc1 = nn.Linear(4, 4)
    eager.load_state_dict(scripted.state_dict())
    tangent = _tangent(eager)
    expected = module_jvp(eager, (X,), tangent, "functional_call")[1]
    assert torch.allclose(module_jvp(scripted, (X,), tangent, "functional_call")[1], expected)


@pytest.mark.parametrize("fn", [torch.ones(3), 3.0], ids=["tensor", "number"])
@pytest.mark.parametrize("helper", [jvp, verify_jvp], ids=["jvp", "verify_jvp"])
def test_jvp_given_something_that_is_not_a_function_says_it_wants_one(helper: Callable[..., Any], fn: Any) -> None:
    with pytest.raises(TypeError, match=r"wants a function \(or a module\) as fn") as raised:
        helper(fn, (torch.ones(3),), (torch.ones(3),))
    assert isinstance(raised.value, LabkitError)


def test_the_crosscheck_runs_a_forward_with_var_keywords_as_profile_model_does() -> None:
    model = VarKeywords().eval()
    assert profile_model(model, X, warmup=0, runs=1).capture == "symbolic_trace"
    check = compare_with_torch_profiler(model, X, warmup=0, runs=1)  # fx's Interpreter filled **kwargs with a list
    assert check.rows


def test_the_messages_are_translated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LABKIT_LANG", "zh")
    with pytest.raises(LazyModuleNotRunError, match="惰性模块"):
        profile_model(_lazy(), X, warmup=0, runs=1)
    monkeypatch.setenv("LABKIT_LANG", "ru")
    with pytest.raises(ScriptedModelError, match="скриптовали"):
        module_jvp(_scripted_model(), (X,), {"fc1.weight": torch.ones(4, 4)})
