"""labkit.forward_ad.hessian: hvp against the full Hessian, and its errors."""
from __future__ import annotations

import pytest
import torch

from labkit.core.errors import LabkitValueError
from labkit.forward_ad.derivatives import hvp
from tests.forward_ad.support import pair


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
    x, v = pair(5)
    torch.testing.assert_close(hvp(f, x, v), torch.func.hessian(f)(x) @ v)


def test_hvp_takes_one_tensor_in_a_list_or_tuple():
    x, v = pair(4)

    def f(x):
        return (x.sin() ** 2).sum()

    expected = hvp(f, x, v)
    torch.testing.assert_close(hvp(f, [x], [v]), expected)
    torch.testing.assert_close(hvp(f, (x,), (v,)), expected)


def test_hvp_needs_a_scalar_function():
    x, v = pair(3)
    with pytest.raises(LabkitValueError, match="scalar"):
        hvp(torch.sin, x, v)
    with pytest.raises(LabkitValueError, match="shape"):
        hvp(lambda x: x.sum(), x, v[:2])


def test_hvp_rejects_a_non_tensor_result():
    x, v = pair(3)
    with pytest.raises(LabkitValueError, match="scalar tensor"):
        hvp(lambda x: 3.0, x, v)
