"""labkit.forward_ad.derivatives on the operators PyTorch's OpInfo sweep found hard (issue 16)."""
from __future__ import annotations

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from labkit.core.errors import LabkitTypeError
from labkit.forward_ad.derivatives import FINITE_DIFFERENCES, ForwardADUnsupportedError, jvp, verify_jvp

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


# --- 4. verify_jvp reports a method that cannot run, and compares the others ---------
REVERSE = "reverse mode (jacrev @ tangent)"


class _NoSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2

    @staticmethod
    def jvp(ctx, tangent):
        return tangent * 2


@pytest.mark.parametrize(
    "fn, unavailable",
    [
        (lambda x: (x.sin(), x > 1), []),  # a bool output is skipped as not differentiable
        (torch.fft.fft, []),  # complex output: reverse mode runs on its real view
        (lambda x: torch.polar(x, x), []),
        (_NoSetupContext.apply, ["torch.func.jvp", REVERSE]),
    ],
)
def test_check_jvp_never_crashes_on_what_jvp_handles(fn, unavailable):
    report = verify_jvp(fn, X, T)
    assert report.ok, report.to_text()
    assert sorted(report.unavailable) == sorted(unavailable)
    for name in unavailable:
        assert f"{name}: unavailable, because" in report.to_text()


def test_check_jvp_with_only_integer_outputs_says_not_differentiable():
    with pytest.raises(LabkitTypeError, match="not differentiable"):
        verify_jvp(lambda x: x.argsort(), X, T)


# --- 5. NaN/inf and lowered precision -------------------------------------------------
@pytest.mark.parametrize(
    "fn, x",
    [
        (torch.sqrt, torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)),
        (torch.special.entr, torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64)),
        (lambda v: torch.log_softmax(v.masked_fill(torch.tensor([True, False, False]), float("-inf")), 0), X),
    ],
)
def test_check_jvp_compares_only_finite_positions(fn, x):
    report = verify_jvp(fn, x, T)
    assert report.ok, report.to_text()
    assert "not finite" in report.to_text()


def test_check_jvp_does_not_count_finite_differences_through_lowered_precision():
    report = verify_jvp(lambda v: v.to(torch.bfloat16).sin().double(), X, T)
    assert report.ok, report.to_text()
    assert FINITE_DIFFERENCES in report.uncounted
    assert "lowers the precision" in report.to_text() and "torch.bfloat16" in report.to_text()


# --- 6. elementwise tolerances, and who is the odd one out -----------------------------
class _CubeWrongAtHalf(torch.autograd.Function):
    """x**3 whose jvp is 1% wrong at x = 0.5 only."""

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def jvp(ctx, tangent):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * tangent * torch.where(x == 0.5, 1.01, 1.0)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad


def test_check_jvp_finds_a_one_percent_error_beside_a_large_entry():
    x = torch.tensor([0.5, 1e4], dtype=torch.float64)
    report = verify_jvp(_CubeWrongAtHalf.apply, x, torch.ones_like(x))
    assert not report.ok
    assert report.odd_one_out == ("dual API", "torch.func.jvp")
    assert "forward-mode rule" in report.to_text()


# --- 7. symmetric / Hermitian inputs -----------------------------------------------------
@pytest.mark.parametrize("fn", [
    torch.linalg.cholesky, lambda a: torch.linalg.eigh(a)[0], torch.linalg.eigvalsh,
    lambda a: torch.linalg.pinv(a, hermitian=True),
], ids=["cholesky", "eigh", "eigvalsh", "pinv-hermitian"])
def test_check_jvp_explains_a_non_symmetric_tangent_for_a_symmetric_input(fn):
    g = torch.Generator().manual_seed(0)
    b = torch.randn(3, 3, generator=g, dtype=torch.float64)
    a = b @ b.mT + 3 * torch.eye(3, dtype=torch.float64)
    t = torch.randn(3, 3, generator=g, dtype=torch.float64)
    report = verify_jvp(fn, a, t)
    assert not report.ok
    assert "symmetric" in report.to_text() and report.symmetric_tangent_agrees
    # the tangent is the cause: finite differences (the odd one out by numbers) are not blamed, nor any method
    assert report.odd_one_out is None and "odd one out" not in report.to_text()
    assert verify_jvp(fn, a, (t + t.mT) / 2).ok


# --- the raw errors the full fwad-sweep still found -------------------------------------
def test_complex_outputs_with_a_conj_bit_are_compared():
    """fft.ifft's OpInfo samples give lazily conjugated results (a view with the conj bit set),
    which view_as_real refuses unless resolved first."""
    from labkit.forward_ad.verification import _flat

    conjugated = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex128).conj()
    assert conjugated.is_conj()
    assert _flat([conjugated]).tolist() == [1.0, -2.0, 3.0, 1.0]
    assert verify_jvp(lambda x: torch.fft.ifft(x).conj(), X, T).ok


def test_check_jvp_refuses_a_sparse_output_with_what_to_do():
    with pytest.raises(LabkitTypeError, match="to_dense"):
        verify_jvp(lambda x: x.to_sparse(), X, T)


def test_resizing_a_dual_tensor_in_place_is_explained():
    for fn in (jvp, verify_jvp):
        with pytest.raises(ForwardADUnsupportedError, match="resize"):
            fn(lambda x: x.clone().resize_(2), X, T)
