"""labkit.forward_ad.parameter_jvp: module_jvp, both methods, leaves the module as it was."""
from __future__ import annotations

import copy
import random

import numpy as np
import pytest
import torch
from torch import nn

from labkit.core.copies import HookSideEffectWarning
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.forward_ad.derivatives import module_jvp
from tests.forward_ad.support import small_model

# --- modules -----------------------------------------------------------------


def test_module_jvp_methods_agree_and_match_torch_func():
    model = small_model()
    x = torch.randn(5, 3)
    params = dict(model.named_parameters())
    tangents = {"0.weight": torch.randn(4, 3), "2.bias": torch.randn(2)}
    swap = module_jvp(model, x, tangents, method="swap")
    functional = module_jvp(model, x, tangents, method="functional_call")

    def by_params(w, b):
        return torch.func.functional_call(model, {**params, "0.weight": w, "2.bias": b}, (x,))

    expected = torch.func.jvp(by_params, (params["0.weight"].detach(), params["2.bias"].detach()), tuple(tangents.values()))
    for result in (swap, functional):
        torch.testing.assert_close(result[0], expected[0])
        torch.testing.assert_close(result[1], expected[1])


def test_swap_restores_parameters_in_order_even_on_error():
    model = small_model()
    before = [(name, id(p)) for name, p in model.named_parameters()]
    tangents = {"0.weight": torch.zeros(4, 3)}
    module_jvp(model, torch.randn(1, 3), tangents)
    assert [(name, id(p)) for name, p in model.named_parameters()] == before
    with pytest.raises(RuntimeError):
        module_jvp(model, torch.randn(1, 7), tangents)  # wrong input width fails inside forward
    assert [(name, id(p)) for name, p in model.named_parameters()] == before
    assert isinstance(model[0].weight, nn.Parameter)


def test_module_jvp_rejects_bad_input():
    model = small_model()
    x = torch.randn(1, 3)
    with pytest.raises(LabkitValueError, match="not a parameter"):
        module_jvp(model, x, {"nope": torch.zeros(1)})
    with pytest.raises(LabkitValueError, match="empty"):
        module_jvp(model, x, {})
    with pytest.raises(LabkitValueError, match="method"):
        module_jvp(model, x, {"2.bias": torch.zeros(2)}, method="magic")
    with pytest.raises(LabkitValueError, match=r"shape \(3,\) but its primal has shape \(2,\)"):
        module_jvp(model, x, {"2.bias": torch.zeros(3)})
    with pytest.raises(LabkitTypeError, match="nn.Module"):
        module_jvp(torch.sin, x, {"2.bias": torch.zeros(2)})


# --- trust: tied weights, train mode, bad input (issue 10) -----------------------
def _tied_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 4))
    model[2].weight = model[0].weight  # one Parameter used by both layers
    return model


def _torch_func_reference(model, x, tangents):
    params = {name: p.detach() for name, p in model.named_parameters()}
    names = list(tangents)

    def by_params(*values):
        return torch.func.functional_call(model, {**params, **dict(zip(names, values))}, (x,))

    return torch.func.jvp(by_params, tuple(params[n] for n in names), tuple(tangents.values()))


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_perturbs_every_use_of_a_tied_weight(method):
    model = _tied_model()
    x = torch.randn(3, 4)
    tangents = {"0.weight": torch.randn(4, 4), "2.bias": torch.randn(4)}
    out, tangent = module_jvp(model, x, tangents, method=method)
    expected_out, expected_tangent = _torch_func_reference(model, x, tangents)
    torch.testing.assert_close(out, expected_out)
    torch.testing.assert_close(tangent, expected_tangent)
    assert model[2].weight is model[0].weight and isinstance(model[0].weight, nn.Parameter)  # still tied


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_accepts_the_alias_name_of_a_tied_weight(method):
    model = _tied_model()
    x = torch.randn(3, 4)
    v = torch.randn(4, 4)
    _, by_alias = module_jvp(model, x, {"2.weight": v}, method=method)
    _, expected = _torch_func_reference(model, x, {"0.weight": v})
    torch.testing.assert_close(by_alias, expected)
    with pytest.raises(LabkitValueError, match=r"'0.weight' and '2.weight' are the same parameter"):
        module_jvp(model, x, {"0.weight": v, "2.weight": v}, method=method)


def _train_mode_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Dropout(0.5), nn.Linear(6, 2)).train()


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_leaves_a_train_mode_model_and_the_rng_untouched(method):
    model = _train_mode_model()
    x = torch.randn(5, 4)
    before = {name: b.clone() for name, b in model.named_buffers()}
    buffers = {name: b for name, b in model.named_buffers()}
    rng = torch.get_rng_state()
    first = module_jvp(model, x, {"0.weight": torch.ones(6, 4)}, method=method)
    assert torch.equal(torch.get_rng_state(), rng)
    for name, b in model.named_buffers():
        assert b is buffers[name] and torch.equal(b, before[name]), name
    second = module_jvp(model, x, {"0.weight": torch.ones(6, 4)}, method=method)
    torch.testing.assert_close(first[1], second[1])  # the same dropout mask: nothing was consumed
    assert model.training


class Counting(nn.Module):
    """Counts its calls in a Python attribute and writes into its input: two things module_jvp must not touch."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 2)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.linear(x.mul_(2))


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_changes_no_attribute_runs_the_models_hook_and_leaves_the_input(method):
    model, x = Counting(), torch.ones(3, 4)
    seen = []
    model.register_forward_hook(lambda *args: seen.append("hook"))
    with pytest.warns(HookSideEffectWarning, match="closes over seen, a list"):
        primal, tangent = module_jvp(model, x, {"linear.weight": torch.ones(2, 4)}, method=method)
    assert model.calls == 0 and seen == ["hook"] and torch.equal(x, torch.ones(3, 4))
    torch.testing.assert_close(tangent, torch.full((3, 2), 8.0))  # d/dW of W @ (2x): rows of 2s summed over 4
    assert "linear.weight" in dict(model.named_parameters())  # the swap happened on a copy, never on the model


def _reference_jvp(model, x, tangents):
    """torch.func.jvp of the model as it computes (functional_call runs its hooks and parametrizations), on a copy."""
    reference = copy.deepcopy(model)
    names = list(tangents)

    def run(*values):
        return torch.func.functional_call(reference, dict(zip(names, values, strict=True)), (x,))

    primals = tuple(dict(reference.named_parameters())[name].detach() for name in names)
    return torch.func.jvp(run, primals, tuple(tangents.values()))


def _two_layers():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2)).eval()


def _hooked():
    model = _two_layers()
    model[0].register_forward_hook(lambda _module, _inputs, output: output * 10)  # an adapter that scales
    return model, "0.weight"


def _spectral():
    model = _two_layers()
    nn.utils.spectral_norm(model[0])  # never run forward: its weight is computed in the pre-hook
    return model, "0.weight_orig"


def _parametrized():
    model = _two_layers()
    nn.utils.parametrize.register_parametrization(model[0], "weight", nn.Tanh())
    return model, "0.parametrizations.weight.original"


@pytest.mark.parametrize("method", ["swap", "functional_call"])
@pytest.mark.parametrize("build", [_hooked, _spectral, _parametrized], ids=["hook", "spectral_norm", "parametrize"])
def test_module_jvp_differentiates_the_model_as_it_computes(method, build):
    model, name = build()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    tangents = {name: torch.randn(4, 4, generator=torch.Generator().manual_seed(2))}
    expected_primal, expected_tangent = _reference_jvp(model, x, tangents)
    primal, tangent = module_jvp(model, x, tangents, method=method)
    torch.testing.assert_close(primal, expected_primal)
    torch.testing.assert_close(tangent, expected_tangent)


class ClampedInForward(nn.Module):
    """A WGAN critic's weight clipping, done in forward: it writes the parameters in place."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 2)

    def forward(self, x):
        with torch.no_grad():
            self.linear.weight.clamp_(-0.05, 0.05)
        return self.linear(x)


def test_module_jvp_leaves_parameters_a_forward_clamps_unchanged_and_its_methods_agree():
    model, x = ClampedInForward(), torch.ones(3, 4)
    before = model.linear.weight.detach().clone()
    swap = module_jvp(model, x, {"linear.bias": torch.ones(2)}, method="swap")
    functional = module_jvp(model, x, {"linear.bias": torch.ones(2)}, method="functional_call")
    assert torch.equal(model.linear.weight.detach(), before) and float(before.abs().max()) > 0.05
    torch.testing.assert_close(swap, functional)


def test_module_jvp_keeps_python_and_numpy_random_states():
    class Draws(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 2)

        def forward(self, x):
            random.random()
            np.random.rand()
            return self.linear(x)

    model = Draws()
    random.seed(3)
    np.random.seed(3)
    expected = (random.random(), float(np.random.rand()))
    random.seed(3)
    np.random.seed(3)
    module_jvp(model, torch.ones(1, 4), {"linear.bias": torch.ones(2)})
    assert (random.random(), float(np.random.rand())) == expected


def test_module_jvp_restores_buffers_and_rng_when_forward_raises():
    model = _train_mode_model()
    x = torch.randn(5, 4)
    before = {name: b.clone() for name, b in model.named_buffers()}
    rng = torch.get_rng_state()

    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    model.append(Boom())
    with pytest.raises(RuntimeError, match="boom"):
        module_jvp(model, x, {"0.bias": torch.ones(6)})
    assert torch.equal(torch.get_rng_state(), rng)
    for name, b in model.named_buffers():
        assert torch.equal(b, before[name]), name


@pytest.mark.parametrize("tangents", [[torch.zeros(2)], [torch.zeros(4, 3), torch.zeros(4)], torch.zeros(2)])
def test_module_jvp_needs_a_dict_of_tangents(tangents):
    model = small_model()
    with pytest.raises(LabkitTypeError, match=r"tangents must be a dict.*\{'0.weight': "):
        module_jvp(model, torch.randn(1, 3), tangents)


def test_module_jvp_names_unknown_parameters_as_given():
    with pytest.raises(LabkitValueError, match=r"0 is not a parameter of this model"):
        module_jvp(small_model(), torch.randn(1, 3), {0: torch.zeros(4)})


# --- keyword inputs ------------------------------------------------------------


class _Scaled(nn.Module):
    """A forward with a keyword-only input."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, x, *, scale=1.0):
        return self.linear(x) * scale


@pytest.mark.parametrize("method", ["swap", "functional_call"])
def test_module_jvp_passes_keyword_inputs_in_kwargs(method):
    from labkit.fx.model_inputs import StrayKeywordError, UnknownKeywordInputError

    model = _Scaled()
    x = torch.randn(4, 3)
    tangents = {"linear.weight": torch.randn(2, 3)}
    plain_out, plain_tangent = module_jvp(model, x, tangents, method=method)
    out, tangent = module_jvp(model, x, tangents, method=method, kwargs={"scale": 3.0})
    torch.testing.assert_close(out, 3.0 * plain_out)
    torch.testing.assert_close(tangent, 3.0 * plain_tangent)
    with pytest.raises(StrayKeywordError, match=r"kwargs=\{'scale': \.\.\.\}"):
        module_jvp(model, x, tangents, method=method, scale=3.0)
    with pytest.raises(UnknownKeywordInputError, match=r"x, \*, scale=1\.0"):
        module_jvp(model, x, tangents, method=method, kwargs={"scal": 3.0})
