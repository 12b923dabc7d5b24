"""kept_random_state: every random stream a learner can see goes on as if the block had not run."""

import random

import numpy as np
import pytest
import torch

from labkit.core.random_state import kept_random_state


def _seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _draws() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(()))


def _consume() -> None:
    random.random()
    np.random.rand(3)
    torch.rand(3)
    torch.nn.Dropout(0.5).train()(torch.ones(8))


def test_python_numpy_and_torch_streams_continue_after_the_block() -> None:
    _seed(1)
    expected = _draws()
    _seed(1)
    with kept_random_state():
        _consume()
    assert _draws() == expected


def test_states_are_restored_when_the_block_raises() -> None:
    _seed(2)
    expected = _draws()
    _seed(2)
    with pytest.raises(ValueError), kept_random_state():
        _consume()
        raise ValueError("boom")
    assert _draws() == expected


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_stream_continues_after_the_block() -> None:
    torch.cuda.manual_seed_all(3)
    expected = torch.rand(4, device="cuda")
    torch.cuda.manual_seed_all(3)
    with kept_random_state():
        torch.rand(4, device="cuda")
    assert torch.equal(torch.rand(4, device="cuda"), expected)
