"""labkit.forward_ad.custom_function: the modern-style Function works everywhere, the old one does not."""
from __future__ import annotations

import pytest
import torch
from torch.autograd.gradcheck import GradcheckError

from labkit.forward_ad.custom_function import Exp, OldStyleExp, gradcheck_forward
from labkit.forward_ad.derivatives import jvp


def _pair():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(4, generator=generator, dtype=torch.float64), torch.randn(4, generator=generator, dtype=torch.float64)


def test_exp_passes_gradcheck_forward_and_backward():
    x, _ = _pair()
    assert gradcheck_forward(Exp, x)


def test_exp_under_dual_api_torch_func_and_jacfwd():
    x, t = _pair()
    expected = x.exp() * t
    torch.testing.assert_close(jvp(Exp.apply, x, t)[1], expected)
    torch.testing.assert_close(torch.func.jvp(Exp.apply, (x,), (t,))[1], expected)
    torch.testing.assert_close(torch.func.jacfwd(Exp.apply)(x), torch.diag(x.exp()))


def test_old_style_works_with_dual_api_only():
    x, t = _pair()
    torch.testing.assert_close(jvp(OldStyleExp.apply, x, t)[1], x.exp() * t)
    assert gradcheck_forward(OldStyleExp, x, include_backward=False)
    with pytest.raises(RuntimeError, match="setup_context"):
        torch.func.jvp(OldStyleExp.apply, (x,), (t,))


def test_gradcheck_catches_a_wrong_jvp():
    class Wrong(Exp):
        @staticmethod
        def jvp(ctx, x_tangent):
            return x_tangent

    with pytest.raises(GradcheckError, match="forward mode"):
        gradcheck_forward(Wrong, _pair()[0])
