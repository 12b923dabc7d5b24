"""labkit.forward_ad on the operators PyTorch's OpInfo sweep found hard (issue 16)."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from labkit.errors import LabkitTypeError
from labkit.forward_ad import ForwardADUnsupportedError, jvp

X = torch.tensor([0.3, 1.2, 2.5], dtype=torch.float64)
T = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)


def _scatter_prod(x):
    return x.scatter_reduce(0, torch.tensor([0, 1, 0]), x * 2, reduce="prod")


# --- 1. no silent zero tangents ---------------------------------------------------
@pytest.mark.parametrize(
    "fn, name",
    [
        (torch.special.bessel_j0, "torch.special.bessel_j0"),
        (torch.special.airy_ai, "torch.special.airy_ai"),
        (lambda x: torch.special.chebyshev_polynomial_t(x, 3), "torch.special.chebyshev_polynomial_t"),
        (_scatter_prod, "torch.Tensor.scatter_reduce"),
    ],
)
def test_a_dropped_tangent_is_an_error_naming_the_op(fn, name):
    with pytest.raises(ForwardADUnsupportedError, match=rf"{name}.*not zero"):
        jvp(fn, X, T)
    with fwAD.dual_level():  # every level was closed
        pass


def test_reverse_mode_is_suggested_only_where_it_works():
    with pytest.raises(ForwardADUnsupportedError, match=r"jacrev") as scatter:
        jvp(_scatter_prod, X, T)
    assert "reverse mode has no derivative" not in str(scatter.value)
    with pytest.raises(ForwardADUnsupportedError) as bessel:
        jvp(torch.special.bessel_j0, X, T)
    assert "torch.func.jacrev" not in str(bessel.value)
    assert "reverse mode has no derivative" in str(bessel.value).lower()


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.ones(2, dtype=x.dtype),  # does not depend on x
        lambda x: x.detach() * 2,  # stop-gradient on purpose
        lambda x: torch.ones_like(x),
        lambda x: torch.histc(x, 3, 0, 3),  # piecewise constant: the zero is right
    ],
)
def test_true_zero_tangents_stay_zero(fn):
    out, tangent = jvp(fn, X, T)
    assert torch.equal(tangent, torch.zeros_like(out))


# --- 2. naming and advice -----------------------------------------------------------
def test_unsupported_op_is_named_by_its_public_name():
    x = torch.randn(1, 3, dtype=torch.float64)
    with pytest.raises(ForwardADUnsupportedError, match=r"torch\.cdist") as info:
        jvp(lambda a: torch.cdist(a, a + 1), x, torch.ones_like(x))
    assert "_cdist_forward" not in str(info.value) and "aten::" not in str(info.value)


def test_no_jacrev_advice_when_reverse_mode_fails_too():
    with pytest.raises(ForwardADUnsupportedError) as info:
        jvp(lambda a: torch.special.zeta(a, a + 2), X, T)
    assert "torch.func.jacrev" not in str(info.value) and "reverse mode" in str(info.value).lower()


# --- 3. sparse inputs ---------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("to_sparse", [torch.Tensor.to_sparse, torch.Tensor.to_sparse_csr])
def test_sparse_primals_are_rejected_before_make_dual(to_sparse):
    a = to_sparse(torch.eye(3, dtype=torch.float64))
    with pytest.raises(LabkitTypeError, match=r"Primal 0.*sparse.*to_dense\(\)"):
        jvp(lambda m: m @ X, a, a)
    with pytest.raises(LabkitTypeError, match=r"Tangent 0.*sparse.*to_dense\(\)"):
        jvp(lambda m: m @ X, torch.eye(3, dtype=torch.float64), a)
    with fwAD.dual_level():
        pass
