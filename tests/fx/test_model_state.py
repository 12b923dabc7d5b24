"""state_token: what a forward can change in a private copy, seen; a forward that changes nothing, not."""
import torch
from torch import nn

from labkit.fx.model_state import state_token


class Stateful(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.register_buffer("count", torch.zeros(()))
        self.calls = 0
        self.cache: dict[str, list[int]] = {"seen": []}


def test_a_plain_forward_changes_nothing_the_token_sees():
    model = Stateful().eval()
    before = state_token(model)
    with torch.no_grad():
        model.lin(torch.ones(1, 2))
    assert state_token(model) == before


def test_every_kind_of_change_a_forward_makes_is_seen():
    changes = [
        lambda m: m.count.add_(1),  # a buffer written in place
        lambda m: setattr(m, "count", torch.ones(())),  # a buffer replaced
        lambda m: setattr(m, "calls", m.calls + 1),  # a Python counter
        lambda m: m.cache["seen"].append(1),  # a cache two levels down
        lambda m: m.lin.weight.mul_(2),  # a parameter written in place
        lambda m: m.count.data.add_(1),  # a buffer written through .data (no version bump)
        lambda m: setattr(m.lin, "last", torch.ones(1)),  # an attribute a submodule gains
        lambda m: m.lin.register_forward_hook(lambda *_: None),  # a hook
    ]
    for change in changes:
        model = Stateful()
        before = state_token(model)
        with torch.no_grad():
            change(model)
        assert state_token(model) != before


def test_a_model_made_under_inference_mode_is_tokened_and_profiled():
    """Notebook 04 builds its model under torch.inference_mode: its tensors have no version counter to read."""
    from labkit.fx import profile_model

    with torch.inference_mode():
        model = Stateful().eval()
        model.cache["tensors"] = [torch.zeros(2)]
    assert state_token(model) == state_token(model)
    report = profile_model(model.lin, torch.ones(3, 2), warmup=1, runs=2)
    assert report.table().rows
