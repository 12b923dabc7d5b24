"""labkit.forward_ad.dual (and inputs, diagnosis): jvp and the errors it raises for a learner's mistakes."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.forward_ad.derivatives import ForwardADUnsupportedError, NestedForwardADError, hvp, jvp, verify_jvp
from tests.forward_ad.support import FUNCTIONS, assert_same, pair


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_jvp_agrees_with_torch_func(name):
    fn, arity = FUNCTIONS[name]
    pairs = [pair(4, seed=i) for i in range(arity)]
    primals = tuple(p for p, _ in pairs)
    tangents = tuple(t for _, t in pairs)
    args = (primals[0], tangents[0]) if arity == 1 else (primals, tangents)
    out, tangent_out = jvp(fn, *args)
    expected_out, expected_tangent = torch.func.jvp(fn, primals, tangents)
    assert_same(out, expected_out)
    assert_same(tangent_out, expected_tangent)


def test_jvp_of_constant_output_is_zero_and_level_is_closed():
    x, t = pair(3)
    out, tangent = jvp(lambda x: torch.ones(2, dtype=x.dtype), x, t)
    assert torch.equal(tangent, torch.zeros(2, dtype=torch.float64))
    with fwAD.dual_level():  # would raise if jvp had left its level open
        pass


def test_jvp_outputs_are_plain_tensors():
    x, t = pair(3)
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
    x, t = pair(1, 3)
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
        jvp(NoJvp.apply, *pair(2))


def test_nested_levels_are_explained():
    x, t = pair(2)
    with fwAD.dual_level():
        with pytest.raises(NestedForwardADError, match="nested forward-mode AD"):
            jvp(torch.sin, x, t)
    assert isinstance(NestedForwardADError("x"), LabkitError)


def test_other_errors_pass_through_unchanged():
    def broken(x):
        raise NotImplementedError("my own stub")

    with pytest.raises(NotImplementedError, match="my own stub"):
        jvp(broken, *pair(2))


def test_python_numbers_are_rejected_with_the_argument_named():
    with pytest.raises(LabkitTypeError, match=r"primals is a float.*torch.tensor\(1.0\)"):
        jvp(torch.sin, 1.0, 1.0)
    with pytest.raises(LabkitTypeError, match=r"tangents is an int"):
        jvp(torch.sin, torch.zeros(1), 1)
    with pytest.raises(LabkitTypeError, match=r"primals is a float"):
        verify_jvp(torch.sin, 1.0, 1.0)
    with pytest.raises(LabkitTypeError, match=r"x is a float"):
        hvp(lambda x: x.sum(), 1.0, 1.0)
