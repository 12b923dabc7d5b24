"""labkit.forward_ad.host_sync: a tangent lost through .item(), .tolist() or float(t) is caught, not reported."""
from __future__ import annotations

import re

import pytest
import torch

import labkit.forward_ad as lfad
from labkit.core.errors import LabkitError
from labkit.forward_ad.derivatives import hvp, jvp, verify_jvp
from labkit.forward_ad.host_sync import TangentLostError


def _pair(n=4):
    generator = torch.Generator().manual_seed(0)
    return torch.randn(n, generator=generator, dtype=torch.float64), torch.randn(n, generator=generator, dtype=torch.float64)


LOSSES = {
    ".item()": lambda z: z * z.sum().item(),
    "float(t)": lambda z: z * float(z.sum()),
    ".tolist()": lambda z: z * sum(z.tolist()),
}


@pytest.mark.parametrize("call", LOSSES)
def test_jvp_through_a_host_sync_is_an_error_naming_the_call(call):
    x, v = _pair()
    with pytest.raises(TangentLostError, match=f"calls {re.escape(call)}.*Keep it a tensor"):
        jvp(LOSSES[call], (x,), (v,))


def test_verify_jvp_does_not_blame_finite_differences_for_a_lost_tangent():
    x, v = _pair()
    with pytest.raises(TangentLostError, match=r"\.item\(\)"):
        verify_jvp(LOSSES[".item()"], x, v)


def test_hvp_through_item_is_an_error():
    x, v = _pair()
    with pytest.raises(TangentLostError, match=r"\.item\(\).*Hessian-vector product"):
        hvp(lambda z: (z * z).sum() * z.sum().item(), x, v)


def test_an_item_used_only_to_branch_keeps_its_right_answer():
    x, v = _pair()

    def branch(z):
        return z.sin() if z.sum().item() > -100 else z.cos()

    _, tangent = jvp(branch, (x,), (v,))
    torch.testing.assert_close(tangent, x.cos() * v)
    torch.testing.assert_close(hvp(lambda z: branch(z).sum(), x, v), -x.sin() * v)


def test_item_on_a_constant_is_fine():
    x, v = _pair()
    scale = torch.tensor(3.0, dtype=torch.float64)
    _, tangent = jvp(lambda z: z * scale.item(), (x,), (v,))
    torch.testing.assert_close(tangent, 3 * v)


def test_the_error_is_exported_and_is_a_labkit_error():
    assert lfad.TangentLostError is TangentLostError and issubclass(TangentLostError, LabkitError)
