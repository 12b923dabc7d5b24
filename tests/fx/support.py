"""What more than one test of tests/fx/ needs."""
import pytest
import torch

from labkit.fx.capture import EXPORT_MIN_TORCH

needs_export = pytest.mark.skipif(
    torch.__version__ < EXPORT_MIN_TORCH, reason=f"labkit's torch.export capture needs torch {EXPORT_MIN_TORCH}"
)
