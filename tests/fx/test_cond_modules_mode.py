"""torch.cond under mode="modules": a clear labkit error naming the mode to use, and nothing of the user's changed."""
import random
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from labkit.core.copies import WATCHES_HIGHER_ORDER
from labkit.fx.module_hooks import HooksInsideCondError
from labkit.fx.profile import profile_model


class Branching(nn.Module):
    """A torch.cond whose branches call submodules, with a buffer the forward counts in."""

    def __init__(self) -> None:
        super().__init__()
        self.positive = nn.Linear(4, 4)
        self.negative = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda t: self.positive(t).relu(), lambda t: self.negative(t), (x,))


def _random_states() -> tuple:
    return random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state()


@pytest.mark.skipif(not WATCHES_HIGHER_ORDER, reason="torch < 2.5 runs torch.cond differently")
def test_mode_modules_on_torch_cond_says_which_mode_to_use_and_leaves_everything_as_it_was():
    torch.manual_seed(0)
    model, x = Branching().eval(), torch.ones(2, 4)
    model.register_forward_hook(lambda module, args, output: output)
    state = {name: value.clone() for name, value in model.state_dict().items()}
    hooks = (dict(model._forward_hooks), dict(model._forward_pre_hooks),
             {name: dict(m._forward_hooks) for name, m in model.named_modules()})
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    before = _random_states()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # dynamo's warning about labkit's clock is not the learner's to read
        with pytest.raises(HooksInsideCondError, match=r"mode='modules'.*mode='fast', capture='export'"):
            profile_model(model, x, mode="modules", warmup=1, runs=2)
    after = _random_states()
    assert after[0] == before[0] and after[1] == before[1] and torch.equal(after[2], before[2])
    assert all(torch.equal(value, state[name]) for name, value in model.state_dict().items())
    assert (dict(model._forward_hooks), dict(model._forward_pre_hooks),
            {name: dict(m._forward_hooks) for name, m in model.named_modules()}) == hooks
    assert torch.equal(x, torch.ones(2, 4))


@pytest.mark.skipif(not WATCHES_HIGHER_ORDER, reason="torch < 2.5 runs torch.cond differently")
def test_the_mode_the_error_names_profiles_the_model():
    report = profile_model(Branching().eval(), torch.ones(2, 4), mode="fast", capture="export", warmup=1, runs=2)
    assert report.capture == "export" and any(row.op_type == "cond" for row in report.rows)
