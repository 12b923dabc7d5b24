"""labkit.forward_ad.verification: verify_jvp's four methods, its verdicts and its errors."""
from __future__ import annotations

import threading
import warnings

import pytest
import torch
from torch import nn

from labkit.core.copies import HookSideEffectWarning, UncopyableModelError
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.forward_ad.derivatives import verify_jvp
from tests.forward_ad.support import FUNCTIONS, pair, small_model


# --- verify_jvp -----------------------------------------------------------------
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_check_jvp_agrees_on_functions(name):
    fn, arity = FUNCTIONS[name]
    pairs = [pair(4, seed=i) for i in range(arity)]
    report = verify_jvp(fn, tuple(p for p, _ in pairs), tuple(t for _, t in pairs))
    assert report.ok, report.to_text()
    assert report.errors["torch.func.jvp"] < 1e-12
    assert 0 < report.errors["central finite differences"] < 1e-6
    assert "reverse mode" in str(report)


def test_check_jvp_on_a_float32_module():
    model = small_model()
    x, t = pair(2, 3, dtype=torch.float32)
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

    report = verify_jvp(WrongExp.apply, *pair(3))
    assert not report.ok
    assert "NO" in report.to_text()


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
        verify_jvp(torch.sin, *pair(3), eps=eps)


def test_check_jvp_explains_a_train_mode_dropout_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    rng = torch.get_rng_state()
    with pytest.raises(LabkitValueError, match=r"different outputs.*training mode.*model.eval\(\)"):
        verify_jvp(model, *pair(4, dtype=torch.float32))
    assert torch.equal(torch.get_rng_state(), rng)
    assert verify_jvp(model.eval(), *pair(4, dtype=torch.float32)).ok


def test_check_jvp_explains_a_random_function():
    with pytest.raises(LabkitValueError, match=r"different outputs for the same input"):
        verify_jvp(lambda v: v + torch.rand_like(v), *pair(3))


def test_check_jvp_explains_a_train_mode_batchnorm_model():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3))
    with pytest.raises(LabkitValueError, match=r"training mode.*BatchNorm.*model.eval\(\)"):
        verify_jvp(model, *pair(4, 3, dtype=torch.float32))
    assert verify_jvp(model.eval(), *pair(4, 3, dtype=torch.float32)).ok


def test_verify_jvp_leaves_the_callers_float64_tensors_unchanged():
    x, v = torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    report = verify_jvp(lambda a: a.mul_(2), x, v)
    assert report.ok, report.to_text()  # every method saw its own fresh copy: d(2a) = 2
    assert torch.equal(x, torch.ones(3, dtype=torch.float64)) and torch.equal(v, torch.ones(3, dtype=torch.float64))


class Counting(nn.Module):
    """Counts its calls in a buffer and an attribute, and holds a lock (which copy.deepcopy cannot copy)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))
        self.n_calls = 0
        self.lock = threading.Lock()

    def forward(self, x):
        with self.lock:
            self.calls += 1
            self.n_calls += 1
            return torch.tanh(self.linear(x))


def test_verify_jvp_runs_a_private_copy_of_a_module_with_its_hooks():
    model = Counting().eval()
    calls = []
    model.linear.register_forward_hook(lambda *_: calls.append("hook"))
    weight = model.linear.weight.detach().clone()
    with pytest.warns(HookSideEffectWarning, match=r"model\.linear's forward hook .*closes over calls, a list"):
        assert verify_jvp(model, *pair(2, 3)).ok
    assert calls and int(model.calls) == 0 and model.n_calls == 0 and not model.lock.locked()  # hooks are the model's
    assert model.linear.weight.dtype == torch.float32 and torch.equal(model.linear.weight, weight)
    model.linear.source = (i for i in range(3))  # a generator: deepcopy cannot copy it
    with pytest.warns(HookSideEffectWarning), pytest.raises(UncopyableModelError, match=r"model\.linear\.source"):
        verify_jvp(model, *pair(2, 3))


def test_verify_jvp_warns_of_no_hook_that_keeps_its_state_on_the_module():
    model = nn.Sequential(nn.Linear(3, 3)).eval()
    model[0].register_forward_hook(lambda module, _args, out: out * 2)  # part of the model, holds nothing of the caller's
    with warnings.catch_warnings():
        warnings.simplefilter("error", HookSideEffectWarning)
        assert verify_jvp(model, *pair(2, 3)).ok


def test_verify_jvp_leaves_the_callers_tensors_unchanged_when_fn_fails():
    x, v = torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)

    def mutate_then_fail(a):
        a.mul_(2)
        raise ValueError("broken")

    with pytest.raises(ValueError, match="broken"):
        verify_jvp(mutate_then_fail, x, v)
    assert torch.equal(x, torch.ones(3, dtype=torch.float64)) and torch.equal(v, torch.ones(3, dtype=torch.float64))


@pytest.mark.parametrize("fn, primal", [
    (torch.sin, torch.ones(0, dtype=torch.float64)),
    (lambda z: z[:0], torch.ones(3, dtype=torch.float64)),
], ids=["empty input", "empty output"])
def test_verify_jvp_refuses_to_call_an_empty_jvp_verified(fn, primal):
    with pytest.raises(LabkitValueError, match="cannot verify"):
        verify_jvp(fn, primal, torch.ones_like(primal))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_verify_jvp_judges_float32_rounding_against_the_scale_of_the_jvp(seed):
    """A float32 matmul: a near-zero entry carries rounding relative to the terms summed, not to itself.

    With each entry judged by its own size alone (labkit before issue 25), seeds 1 and 2 reported reverse mode
    (float64 sums) disagreeing with the dual API (float32 sums): "methods disagree" on a correct jvp.
    """
    generator = torch.Generator().manual_seed(seed)
    x, t = torch.randn(256, generator=generator, dtype=torch.float64), torch.randn(256, generator=generator, dtype=torch.float64)
    w = torch.randn(256, 8, generator=generator, dtype=torch.float64)
    w[:, 0] = 10 * t  # a large entry
    w[:, 1] -= (t @ w[:, 1]) / (t @ t) * t  # an entry that is almost zero
    w32 = w.float()
    report = verify_jvp(lambda z: (z.float() @ w32).double(), x, t)
    assert report.ok, report.to_text()
    assert any("largest |jvp|" in note for note in report.notes)


def test_verify_jvp_still_catches_a_wrong_float32_jvp():
    class WrongCube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x**3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(inputs[0])
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 3 * x**2 * grad

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return 2 * x**2 * t  # should be 3 x^2 t

    x, t = pair(8)
    report = verify_jvp(lambda z: WrongCube.apply(z.float()).double(), x, t)
    assert not report.ok and "torch.func.jvp" in report.counted and "reverse mode (jacrev @ tangent)" in report.disagreeing


@pytest.mark.parametrize("fails_after", [4, 5, 6, 7])
def test_verify_jvp_never_reports_ok_when_fn_fails_on_a_later_call(fails_after):
    calls = []

    def runs_out(x):
        calls.append(1)
        if len(calls) > fails_after:
            raise ValueError("the data ran out")
        return x.sin()

    with pytest.raises(LabkitValueError, match="fails on a later one.*the data ran out"):
        verify_jvp(runs_out, *pair(3))
