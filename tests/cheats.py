"""What a cheating answer hands a checker, shared by the labs' checker tests."""
from __future__ import annotations

from typing import Any

import torch


class LyingTensor(torch.Tensor):
    """A tensor that answers every comparison with True, whatever its values."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
