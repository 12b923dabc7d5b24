"""labkit.forward_ad.derivatives: jvp, module_jvp, verify_jvp, hvp and their errors."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch import nn

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.forward_ad.derivatives import (
    ForwardADUnsupportedError,
    NestedForwardADError,
    hvp,
    jvp,
    module_jvp,
    verify_jvp,
)


def _pair(*shape, dtype=torch.float64, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=generator, dtype=dtype), torch.randn(shape, generator=generator, dtype=dtype)


def _assert_same(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    else:
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            torch.testing.assert_close(x, y)


FUNCTIONS = {
    "tensor -> tensor": (lambda x: torch.sin(x) * x**2, 1),
    "tuple -> tensor": (lambda x, y: x**2 + y**2, 2),
    "tuple -> tuple": (lambda x, y: (x * y, (x - y).exp().sum()), 2),
    "softmax": (lambda x: torch.softmax(x, dim=-1), 1),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_jvp_agrees_with_torch_func(name):
    fn, arity = FUNCTIONS[name]
    pairs = [_pair(4, seed=i) for i in range(arity)]
    primals = tuple(p for p, _ in pairs)
    tangents = tuple(t for _, t in pairs)
    args = (primals[0], tangents[0]) if arity == 1 else (primals, tangents)
    out, tangent_out = jvp(fn, *args)
    expected_out, expected_tangent = torch.func.jvp(fn, primals, tangents)
    _assert_same(out, expected_out)
    _assert_same(tangent_out, expected_tangent)


def test_jvp_of_constant_output_is_zero_and_level_is_closed():
    x, t = _pair(3)
    out, tangent = jvp(lambda x: torch.ones(2, dtype=x.dtype), x, t)
    assert torch.equal(tangent, torch.zeros(2, dtype=torch.float64))
    with fwAD.dual_level():  # would raise if jvp had left its level open
        pass


def test_jvp_outputs_are_plain_tensors():
    x, t = _pair(3)
    out, tangent = jvp(torch.sin, x, t)
    assert fwAD.unpack_dual(out).tangent is None and fwAD.unpack_dual(tangent).tangent is None


def test_integer_primal_is_rejected():
    with pytest.raises(LabkitTypeError, match="floating-point"):
        jvp(torch.sin, torch.arange(3), torch.arange(3))


def test_tangent_shape_mismatch_names_both_shapes():
    with pytest.raises(LabkitValueError, match=r"shape \(4,\) but its primal has shape \(3,\)"):
        jvp(torch.sin, torch.zeros(3), torch.zeros(4))


def test_tangent_dtype_mismatch_is_rejected():
    with pytest.raises(LabkitValueError, match=r"torch.float64 \(shape \(3,\)\).*torch.float32 \(shape \(3,\)\)"):
        jvp(torch.sin, torch.zeros(3), torch.zeros(3, dtype=torch.float64))


def test_tangent_count_and_type_are_checked():
    with pytest.raises(LabkitValueError, match="one tangent per primal"):
        jvp(torch.add, (torch.zeros(2), torch.zeros(2)), (torch.zeros(2),))
    with pytest.raises(LabkitTypeError, match="not a torch.Tensor"):
        jvp(torch.sin, torch.zeros(2), [1.0, 2.0])
    with pytest.raises(LabkitTypeError, match="returned a float"):
        jvp(lambda x: 1.0, torch.zeros(2), torch.zeros(2))


def test_unsupported_operator_suggests_reverse_mode():
    x, t = _pair(1, 3)
    with pytest.raises(ForwardADUnsupportedError, match=r"torch\.cdist.*jacrev"):
        jvp(lambda a: torch.cdist(a, a + 1), x, t)
    with fwAD.dual_level():  # the level was closed despite the error
        pass


def test_custom_function_without_jvp_is_explained():
    class NoJvp(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

    with pytest.raises(ForwardADUnsupportedError, match="no jvp staticmethod"):
        jvp(NoJvp.apply, *_pair(2))


def test_nested_levels_are_explained():
    x, t = _pair(2)
    with fwAD.dual_level():
        with pytest.raises(NestedForwardADError, match="nested forward-mode AD"):
            jvp(torch.sin, x, t)
    assert isinstance(NestedForwardADError("x"), LabkitError)


def test_other_errors_pass_through_unchanged():
    def broken(x):
        raise NotImplementedError("my own stub")

    with pytest.raises(NotImplementedError, match="my own stub"):
        jvp(broken, *_pair(2))


# --- modules -----------------------------------------------------------------
def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def test_module_jvp_methods_agree_and_match_torch_func():
    model = _model()
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
    model = _model()
    before = [(name, id(p)) for name, p in model.named_parameters()]
    tangents = {"0.weight": torch.zeros(4, 3)}
    module_jvp(model, torch.randn(1, 3), tangents)
    assert [(name, id(p)) for name, p in model.named_parameters()] == before
    with pytest.raises(RuntimeError):
        module_jvp(model, torch.randn(1, 7), tangents)  # wrong input width fails inside forward
    assert [(name, id(p)) for name, p in model.named_parameters()] == before
    assert isinstance(model[0].weight, nn.Parameter)


def test_module_jvp_rejects_bad_input():
    model = _model()
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


# --- verify_jvp -----------------------------------------------------------------
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_check_jvp_agrees_on_functions(name):
    fn, arity = FUNCTIONS[name]
    pairs = [_pair(4, seed=i) for i in range(arity)]
    report = verify_jvp(fn, tuple(p for p, _ in pairs), tuple(t for _, t in pairs))
    assert report.ok, report.to_text()
    assert report.errors["torch.func.jvp"] < 1e-12
    assert 0 < report.errors["central finite differences"] < 1e-6
    assert "reverse mode" in str(report)


def test_check_jvp_on_a_float32_module():
    model = _model()
    x, t = _pair(2, 3, dtype=torch.float32)
    report = verify_jvp(model, x, t)
    assert report.ok
    assert report.errors["reverse mode (jacrev @ tangent)"] < 1e-12  # float64 copy, not float32 rounding
    assert model[0].weight.dtype == torch.float32  # the learner's model is untouched


def test_check_jvp_detects_a_wrong_forward_rule():
    class WrongExp(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return torch.exp(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)

        @staticmethod
        def jvp(ctx, tangent):
            return tangent  # forgot the factor exp(x)

        @staticmethod
        def backward(ctx, grad):
            (out,) = ctx.saved_tensors
            return grad * out

    report = verify_jvp(WrongExp.apply, *_pair(3))
    assert not report.ok
    assert "NO" in report.to_text()


# --- hvp -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "f",
    [
        lambda x: (x.sin() ** 2).sum(),
        lambda x: (x[:-1] * x[1:]).exp().sum(),
        lambda x: torch.logsumexp(x, 0),
    ],
)
def test_hvp_matches_full_hessian(f):
    x, v = _pair(5)
    torch.testing.assert_close(hvp(f, x, v), torch.func.hessian(f)(x) @ v)


def test_hvp_takes_one_tensor_in_a_list_or_tuple():
    x, v = _pair(4)

    def f(x):
        return (x.sin() ** 2).sum()

    expected = hvp(f, x, v)
    torch.testing.assert_close(hvp(f, [x], [v]), expected)
    torch.testing.assert_close(hvp(f, (x,), (v,)), expected)


def test_hvp_needs_a_scalar_function():
    x, v = _pair(3)
    with pytest.raises(LabkitValueError, match="scalar"):
        hvp(torch.sin, x, v)
    with pytest.raises(LabkitValueError, match="shape"):
        hvp(lambda x: x.sum(), x, v[:2])


def test_hvp_rejects_a_non_tensor_result():
    x, v = _pair(3)
    with pytest.raises(LabkitValueError, match="scalar tensor"):
        hvp(lambda x: 3.0, x, v)


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


def test_python_numbers_are_rejected_with_the_argument_named():
    with pytest.raises(LabkitTypeError, match=r"primals is a float.*torch.tensor\(1.0\)"):
        jvp(torch.sin, 1.0, 1.0)
    with pytest.raises(LabkitTypeError, match=r"tangents is an int"):
        jvp(torch.sin, torch.zeros(1), 1)
    with pytest.raises(LabkitTypeError, match=r"primals is a float"):
        verify_jvp(torch.sin, 1.0, 1.0)
    with pytest.raises(LabkitTypeError, match=r"x is a float"):
        hvp(lambda x: x.sum(), 1.0, 1.0)


@pytest.mark.parametrize("tangents", [[torch.zeros(2)], [torch.zeros(4, 3), torch.zeros(4)], torch.zeros(2)])
def test_module_jvp_needs_a_dict_of_tangents(tangents):
    model = _model()
    with pytest.raises(LabkitTypeError, match=r"tangents must be a dict.*\{'0.weight': "):
        module_jvp(model, torch.randn(1, 3), tangents)


def test_check_jvp_explains_a_float32_closure():
    w = torch.randn(3, 3)  # float32, captured by the closure: verify_jvp cannot convert it
    with pytest.raises(LabkitTypeError, match=r"float64.*float32.*closure"):
        verify_jvp(lambda v: w @ v, torch.randn(3), torch.randn(3))
    with pytest.raises(LabkitTypeError, match=r"returned torch.float32.*float64"):
        verify_jvp(lambda v: v.float().sin(), torch.randn(3), torch.randn(3))


@pytest.mark.parametrize("eps", [0, 0.0, -1e-6, float("nan"), float("inf"), True, "1e-6"])
def test_check_jvp_rejects_a_bad_eps(eps):
    error = LabkitTypeError if isinstance(eps, (bool, str)) else LabkitValueError
    with pytest.raises(error, match=r"eps must be a positive finite number"):
        verify_jvp(torch.sin, *_pair(3), eps=eps)


def test_check_jvp_explains_a_train_mode_dropout_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    rng = torch.get_rng_state()
    with pytest.raises(LabkitValueError, match=r"different outputs.*training mode.*model.eval\(\)"):
        verify_jvp(model, *_pair(4, dtype=torch.float32))
    assert torch.equal(torch.get_rng_state(), rng)
    assert verify_jvp(model.eval(), *_pair(4, dtype=torch.float32)).ok


def test_check_jvp_explains_a_random_function():
    with pytest.raises(LabkitValueError, match=r"different outputs for the same input"):
        verify_jvp(lambda v: v + torch.rand_like(v), *_pair(3))


def test_check_jvp_explains_a_train_mode_batchnorm_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with pytest.raises(LabkitValueError, match=r"training mode.*BatchNorm.*model.eval\(\)"):
        verify_jvp(model, *_pair(4, 3, dtype=torch.float32))
    assert verify_jvp(model.eval(), *_pair(4, 3, dtype=torch.float32)).ok


def test_module_jvp_names_unknown_parameters_as_given():
    with pytest.raises(LabkitValueError, match=r"0 is not a parameter of this model"):
        module_jvp(_model(), torch.randn(1, 3), {0: torch.zeros(4)})
