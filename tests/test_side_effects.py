"""Every helper that runs a user's model, on every hostile model: nothing of the user's changes, and no raw error.

One test, parametrised over (helper x model) (:data:`HELPERS` x ``tests.hostile_models.HOSTILE_MODELS``):
before and after the call it compares the model's parameters (identity and values), buffers,
Python attributes, train/eval flags and hooks, the input tensors and keyword inputs, Python's,
NumPy's and torch's random states, torch's grad mode and default dtype, ``warnings.filters`` and
the logging configuration (every logger's level, handlers, filters). A helper may succeed or refuse
the model, but a refusal is a :class:`~labkit.core.errors.LabkitError` (what labkit cannot do and
what to do instead), never a raw torch error. A new helper gets all of it by joining :data:`HELPERS`.
"""
from __future__ import annotations

import copy
import logging
import random
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
import torch.export
import torch.profiler
import torch.utils.benchmark  # noqa: F401 - imported before any snapshot: its import-time set-up is not a helper's
from torch import nn

from labkit.core.errors import LabkitError
from tests.hostile_models import HOSTILE_MODELS, HostileModel, example_input

Kwargs = Mapping[str, Any] | None
Helper = Callable[[nn.Module, torch.Tensor, Kwargs], Any]


def _first_tangent(model: nn.Module) -> dict[str, torch.Tensor]:
    """A tangent for the model's first parameter (ones: drawing one would move torch's random state)."""
    name, parameter = next(iter(model.named_parameters()))
    if isinstance(parameter, nn.parameter.UninitializedParameter):
        return {name: torch.ones(4, 4)}
    return {name: torch.ones_like(parameter.detach())}


def _profile(mode: str, capture: str = "auto") -> Helper:
    from labkit.fx.profile import profile_model

    return lambda model, x, kwargs: profile_model(model, x, kwargs=kwargs, warmup=1, runs=1, mode=mode, capture=capture)


def _crosscheck(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.crosscheck import compare_with_torch_profiler

    return compare_with_torch_profiler(model, x, kwargs=kwargs, warmup=1, runs=1)


def _memory_agreement(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.memory_agreement import compare_memory_with_allocator

    return compare_memory_with_allocator(model, x, kwargs=kwargs)


def _fuse_safely(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.fusion import fuse_safely

    return fuse_safely(model, x, kwargs=kwargs)


def _fuse_teaching(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.fusion import fuse_conv_bn_teaching

    return fuse_conv_bn_teaching(model)


def _fuse_library(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.fusion import fuse_conv_bn_library

    return fuse_conv_bn_library(model)


def _count_nodes(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.fusion import count_nodes

    return count_nodes(model)


def _verify_fusion(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    """verify_fusion of the model against its fused copy (against itself where fusion refuses the model)."""
    from labkit.fx.fusion import fuse_safely, verify_fusion

    try:
        fused = fuse_safely(model, x, kwargs=kwargs)[0]
    except LabkitError:
        fused = model
    return verify_fusion(model, fused, x, kwargs=kwargs)


def _fusion_timings(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.fusion import fusion_timings

    return fusion_timings(model, x, kwargs=kwargs, rounds=1, warmup=0)


def _fuse_exported(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.fx.aten_fusion import fuse_exported

    return fuse_exported(model, x, kwargs=kwargs)


def _module_jvp(method: str) -> Helper:
    from labkit.forward_ad.parameter_jvp import module_jvp

    return lambda model, x, kwargs: module_jvp(model, (x,), _first_tangent(model), method, kwargs=kwargs)  # type: ignore[arg-type]


def _jvp(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.forward_ad.dual import jvp

    return jvp(model, (x,), (torch.ones_like(x),))


def _verify_jvp(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.forward_ad.verification import verify_jvp

    return verify_jvp(model, (x,), (torch.ones_like(x),))


def _capstone(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.capstone.variants import build_variants, compare_variants

    return compare_variants(build_variants(model, x), rounds=1, warmup=0)


def _capstone_optimized(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.capstone.variants import build_variants, optimize_for_inference_variant, profile_variants

    variants = build_variants(model, x)
    return profile_variants([variants[0], optimize_for_inference_variant(variants[0])], warmup=0, runs=1)


def _conversion_report(model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Any:
    from labkit.memory_format.conversion import conversion_report

    return conversion_report(model)


#: Every public helper that runs a user's model (or copies it to run or convert it).
HELPERS: dict[str, Helper] = {
    "profile_model[fast]": _profile("fast"),
    "profile_model[interpreter]": _profile("interpreter"),
    "profile_model[modules]": _profile("modules"),
    "profile_model[export]": _profile("fast", "export"),
    "compare_with_torch_profiler": _crosscheck,
    "compare_memory_with_allocator": _memory_agreement,
    "fuse_safely": _fuse_safely,
    "fuse_conv_bn_teaching": _fuse_teaching,
    "fuse_conv_bn_library": _fuse_library,
    "count_nodes": _count_nodes,
    "verify_fusion": _verify_fusion,
    "fusion_timings": _fusion_timings,
    "fuse_exported": _fuse_exported,
    "module_jvp[swap]": _module_jvp("swap"),
    "module_jvp[functional_call]": _module_jvp("functional_call"),
    "jvp": _jvp,
    "verify_jvp": _verify_jvp,
    "build_variants+compare_variants": _capstone,
    "optimize_for_inference_variant+profile_variants": _capstone_optimized,
    "conversion_report": _conversion_report,
}


def _value(value: Any) -> Any:
    """A comparable picture of one value: a tensor by identity and contents, a plain value as itself."""
    if isinstance(value, (nn.parameter.UninitializedParameter, nn.parameter.UninitializedBuffer)):
        return "uninitialized", id(value), type(value).__name__
    if isinstance(value, torch.Tensor):
        return "tensor", id(value), value.dtype, tuple(value.shape), value.stride(), value.detach().cpu().tolist()
    if isinstance(value, (int, float, str, bool, type(None))):
        return value
    if isinstance(value, (list, tuple)):
        return type(value).__name__, id(value), [_value(item) for item in value]
    if isinstance(value, dict):
        return "dict", id(value), {repr(key): _value(item) for key, item in value.items()}
    return "object", id(value)


_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
               "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called")
_INTERNALS = frozenset(vars(nn.Module())) | {"_c", "_concrete_type", "_initializing", "_modules", "_parameters",
                                            "_buffers", "forward_magic_method"}


def model_picture(model: nn.Module) -> dict[str, Any]:
    """What a helper could change in ``model``: per module its parameters, buffers, attributes, mode and hooks."""
    picture = {}
    for name, module in model.named_modules(remove_duplicate=False):
        picture[name] = (
            id(module),
            module.training,
            {key: _value(p) for key, p in module.named_parameters(recurse=False)},
            {key: _value(b) for key, b in module.named_buffers(recurse=False)},
            {key: _value(v) for key, v in vars(module).items() if key not in _INTERNALS and not key.startswith("__")},
            {hooks: [(key, id(hook)) for key, hook in getattr(module, hooks, {}).items()] for hooks in _HOOK_DICTS},
        )
    return picture


def _loggers() -> dict[str, Any]:
    """Every logger's configuration; :func:`_differences` compares those that existed before the call (a logger
    torch makes on a module's first import is its own, not a setting of the user's)."""
    manager = logging.Logger.manager
    loggers = [logging.getLogger(), *(lg for lg in manager.loggerDict.values() if isinstance(lg, logging.Logger))]
    return {
        logger.name: (logger.level, list(logger.handlers), list(logger.filters), logger.propagate, logger.disabled)
        for logger in loggers
    }


def process_picture() -> dict[str, Any]:
    """What a helper could change in the process: random states, torch's modes, warning and logging filters."""
    numpy_state = np.random.get_state()
    return {
        "python random": random.getstate(),
        "numpy random": (numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]),
        "torch random": (torch.initial_seed(), torch.get_rng_state().tolist()),
        "grad mode": torch.is_grad_enabled(),
        "default dtype": torch.get_default_dtype(),
        "warnings.filters": list(warnings.filters),
        "logging": _loggers(),
    }


@dataclass
class Call:
    """One helper's call on one model: the error it raised (None: it returned), and the process after it."""

    error: BaseException | None
    process_after: dict[str, Any]


def call(helper: Helper, model: nn.Module, x: torch.Tensor, kwargs: Kwargs) -> Call:
    """Call the helper, its warnings recorded (not shown), and picture the process before those filters go."""
    with warnings.catch_warnings(record=True):
        error = None
        try:
            helper(model, x, kwargs)
        except Exception as exc:  # noqa: BLE001 - compared in the test: a refusal must be a labkit error
            error = exc
        return Call(error, process_picture())


@pytest.fixture(scope="module", autouse=True)
def _lazy_imports_done() -> None:
    """Run the helper families once on the plain model, then put back what that did to logging.

    Why: a first call imports torch's compiler stack and sympy, which create loggers and a warning filter
    of their own, once per process; that is torch's set-up, not a helper's change, and must not be
    counted against whichever test happens to run first. What the warm-up's helpers did to existing
    loggers is undone, so the tests still see every change a helper makes.
    """
    manager = logging.Logger.manager
    existing = [logging.getLogger(), *(lg for lg in manager.loggerDict.values() if isinstance(lg, logging.Logger))]
    saved = [(lg, lg.level, list(lg.handlers), list(lg.filters), lg.propagate, lg.disabled) for lg in existing]
    plain = HOSTILE_MODELS[0]
    with warnings.catch_warnings(record=True):
        for name in ("profile_model[export]", "compare_with_torch_profiler", "module_jvp[functional_call]",
                     "verify_jvp", "fuse_exported", "optimize_for_inference_variant+profile_variants"):
            call(HELPERS[name], plain.make(), example_input(), None)
    for logger, level, handlers, filters, propagate, disabled in saved:
        logger.setLevel(level)
        logger.handlers[:], logger.filters[:] = handlers, filters
        logger.propagate, logger.disabled = propagate, disabled


def _differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    changed = [key for key in before.keys() | after.keys() if key != "logging" and before.get(key) != after.get(key)]
    if "logging" in before and any(after["logging"].get(name) != config for name, config in before["logging"].items()):
        changed.append("logging")
    return changed


@pytest.mark.parametrize("hostile", HOSTILE_MODELS, ids=[m.name for m in HOSTILE_MODELS])
@pytest.mark.parametrize("helper", HELPERS.values(), ids=HELPERS.keys())
def test_a_helper_changes_nothing_of_the_users_and_refuses_only_with_a_labkit_error(
    helper: Helper, hostile: HostileModel
) -> None:
    model, x = hostile.make(), example_input()
    kwargs = copy.deepcopy(hostile.kwargs)
    model_before, x_before, kwargs_before = model_picture(model), x.clone(), copy.deepcopy(kwargs)
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    process_before = process_picture()
    outcome = call(helper, model, x, kwargs)
    changed = _differences(process_before, outcome.process_after)
    changed += [f"module {name!r}" for name in _differences(model_before, model_picture(model))]
    if not torch.equal(x, x_before) or kwargs != kwargs_before:
        changed.append("the inputs")
    assert not changed, f"changed: {', '.join(sorted(changed))} ({outcome.error!r})"
    if outcome.error is not None and not isinstance(outcome.error, LabkitError):
        raise AssertionError(f"a raw {type(outcome.error).__name__}, not a labkit error") from outcome.error
