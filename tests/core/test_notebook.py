import random
import warnings

import torch

from labkit.core.notebook import seed_everything, setup_notebook


def test_seed_everything_repeats_random_numbers():
    seed_everything(3)
    first = (random.random(), torch.rand(3))
    seed_everything(3)
    second = (random.random(), torch.rand(3))
    assert first[0] == second[0] and torch.equal(first[1], second[1])


def test_setup_notebook_prints_one_line_and_silences_only_known_warnings(capsys):
    device = setup_notebook()
    assert capsys.readouterr().out == f"labkit ready: seed 0, device type {device.type}\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        setup_notebook(quiet=True)  # reinstall the filters after simplefilter reset them
        warnings.warn("`torch.jit.script` is deprecated. Please switch to torch.compile", FutureWarning)
        warnings.warn("something real", FutureWarning)
    assert [str(w.message) for w in caught] == ["something real"]


def test_seeded_block_leaves_the_callers_random_stream_alone():
    from labkit.core.notebook import seeded

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    with seeded(0):
        inside = torch.rand(3)
    assert torch.equal(torch.rand(3), expected)
    torch.manual_seed(0)
    assert torch.equal(inside, torch.rand(3))
