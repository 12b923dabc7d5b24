"""A profile is the model: what labkit times is what ``model(*args)`` computes, and nothing of the learner's changes.

Each case is one the issue found silent: a hook that changes an output, ``spectral_norm`` before
any forward, a pruned weight changed since the last forward, a graph that computes something
else, a forward that writes its parameters or an input object, Python's and NumPy's random
states, ``forward(x, mask=None)``. Every capture tier is checked (symbolic_trace, torch.export,
module hooks).
"""

import itertools
import random
import warnings

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils import prune, spectral_norm

from labkit.core.errors import LabkitValueError
from labkit.fx.capture import CaptureMismatchError, ExportMismatchError
from labkit.fx.profile import TraceFallbackWarning, make_profiler, profile_model
from labkit.fx.runs import HookSideEffectWarning
from tests.fx.support import needs_export

X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))
GRAPH_CAPTURES = ["symbolic_trace", pytest.param("export", marks=needs_export)]


class TwoLayers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def graph_output(model: nn.Module, capture: str, *inputs: torch.Tensor) -> torch.Tensor:
    """What the graph labkit times computes (the profiler's own graph, run once on its inputs)."""
    profiler = make_profiler(model, *inputs, capture=capture, fallback=False)
    assert profiler.capture == capture
    with torch.no_grad():
        output = profiler.graph_module(*profiler.inputs)
    return output[0] if isinstance(output, tuple) else output


def scale_output(_module: nn.Module, _inputs: object, output: torch.Tensor) -> torch.Tensor:
    return output * 10


@pytest.mark.parametrize("capture", GRAPH_CAPTURES)
@pytest.mark.parametrize("where", ["root", "child"])
def test_a_forward_hook_that_changes_the_output_is_in_the_timed_graph(capture: str, where: str) -> None:
    model = TwoLayers().eval()
    (model if where == "root" else model.a).register_forward_hook(scale_output)
    with torch.no_grad():
        assert torch.allclose(graph_output(model, capture, X), model(X))


@pytest.mark.parametrize("capture", GRAPH_CAPTURES)
def test_spectral_norm_before_any_forward_is_profiled_as_the_model_computes_it(capture: str) -> None:
    model = TwoLayers().eval()
    spectral_norm(model.a)  # its weight is computed in a forward pre-hook; never run yet
    timed = graph_output(model, capture, X)  # before the learner's forward runs the pre-hook on the model itself
    with torch.no_grad():
        assert torch.allclose(timed, model(X), atol=1e-6)


@pytest.mark.parametrize("capture", GRAPH_CAPTURES)
def test_a_pruned_weight_changed_since_its_last_forward_is_profiled_as_it_is_now(capture: str) -> None:
    model = TwoLayers().eval()
    prune.l1_unstructured(model.a, "weight", amount=0.5)
    with torch.no_grad():
        model.a.weight_orig.add_(1.0)  # weight (weight_orig * mask) is recomputed by prune's pre-hook
    timed = graph_output(model, capture, X)
    with torch.no_grad():
        assert torch.allclose(timed, model(X), atol=1e-6)


def test_module_hooks_mode_runs_the_models_hooks_on_its_copy() -> None:
    model = TwoLayers().eval()
    seen: list[torch.Tensor] = []
    model.a.register_forward_hook(lambda _m, _i, output: seen.append(output))
    with pytest.warns(HookSideEffectWarning, match=r"model\.a's forward hook"):
        report = profile_model(model, X, mode="modules", warmup=0, runs=2)
    assert report.capture == "hooks" and {"a", "b"} <= {row.name for row in report.rows}
    assert len(seen) == 3  # the model's own run, then two timed runs
    assert len(model.a._forward_hooks) == 1  # the learner's hook, and no labkit hook left behind


class TracingAware(TwoLayers):
    """Computes something else while fx traces it: symbolic_trace's graph would silently differ."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if isinstance(x, torch.fx.Proxy):  # only symbolic_trace passes Proxies
            return self.a(x)
        return self.a(x) * 2


def test_a_traced_graph_that_computes_something_else_is_an_error_not_a_profile() -> None:
    with pytest.raises(CaptureMismatchError, match=r"computes something else than the model.*differs by up to"):
        make_profiler(TracingAware().eval(), X, capture="symbolic_trace", fallback=False)


@needs_export
def test_auto_moves_on_to_export_when_the_traced_graph_differs() -> None:
    report = profile_model(TracingAware().eval(), X, warmup=0, runs=1)
    assert report.capture == "export" and "computes something else" in report.fallback_reason


def test_a_mismatch_names_the_first_module_that_differs() -> None:
    model = TwoLayers().eval()
    counter = itertools.count()  # each call of the hook adds a different number: no two runs agree
    model.b.register_forward_hook(lambda _m, _i, output: output + next(counter))
    with pytest.warns(HookSideEffectWarning, match=r"model\.b's forward hook .*counter, a count"):
        with pytest.raises(CaptureMismatchError, match=r"first at node 'b', module 'b', a Linear"):
            make_profiler(model, X, capture="symbolic_trace", fallback=False)
    with pytest.warns(TraceFallbackWarning, match="does not compute what TwoLayers does"):
        report = profile_model(model, X, warmup=0, runs=1)
    assert report.capture == "hooks"


@needs_export
def test_an_exported_mismatch_names_the_first_node_and_its_module() -> None:
    model = TwoLayers().eval()
    counter = itertools.count()  # a number read while exporting: the graph adds a constant, the model a new one
    model.b.register_forward_hook(lambda _m, _i, output: output + next(counter))
    with pytest.warns(HookSideEffectWarning), pytest.raises(ExportMismatchError) as raised:
        make_profiler(model, X, capture="export", fallback=False)
    # the hook's aten.add runs inside b: the last operator of b is the first node that differs (a's output agrees)
    assert "(first at node 'add', module 'b', a Linear)" in str(raised.value)


@needs_export
def test_an_exported_mismatch_in_the_models_own_code_blames_no_module() -> None:
    model = TwoLayers().eval()
    counter = itertools.count()
    model.register_forward_hook(lambda _m, _i, output: output + next(counter))  # on the root: no module of its own
    with pytest.warns(HookSideEffectWarning), pytest.raises(ExportMismatchError, match="no module's output differs"):
        make_profiler(model, X, capture="export", fallback=False)


class RenormalizedEmbedding(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embedding = nn.Embedding(10, 4, max_norm=1.0)  # renormalises the rows it looks up, in place

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids)


class ClampedInForward(TwoLayers):
    """A WGAN critic's weight clipping, done in forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.clamp_(-0.05, 0.05)
        return super().forward(x)


@pytest.mark.parametrize("mode", ["fast", "interpreter", "modules"])
def test_a_forward_that_writes_its_parameters_leaves_the_learners_unchanged(mode: str) -> None:
    embedding, critic = RenormalizedEmbedding().eval(), ClampedInForward().eval()
    with torch.no_grad():
        embedding.embedding.weight.mul_(5)
    before = [p.detach().clone() for p in (*embedding.parameters(), *critic.parameters())]
    for model, inputs in ((embedding, torch.tensor([1, 2, 3])), (critic, X)):
        report = profile_model(model, inputs, mode=mode, warmup=1, runs=1)
        assert any("in place" in note for note in report.notes)
    after = [p.detach() for p in (*embedding.parameters(), *critic.parameters())]
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
    assert float(critic.a.weight.detach().abs().max()) > 0.05


class Cache:
    """A key/value cache object a model appends to, passed in by the caller."""

    def __init__(self) -> None:
        self.entries: list[torch.Tensor] = []


class UsesCache(TwoLayers):
    def forward(self, x: torch.Tensor, cache: Cache) -> torch.Tensor:
        cache.entries.append(x)
        return self.a(x) * len(cache.entries)


@pytest.mark.parametrize("mode", ["fast", "modules"])
def test_an_input_object_is_copied_for_every_run(mode: str) -> None:
    cache = Cache()
    model = UsesCache().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceFallbackWarning)
        profile_model(model, X, kwargs={"cache": cache}, mode=mode, warmup=1, runs=3)
    assert cache.entries == []


def test_an_input_object_that_cannot_be_copied_is_refused_with_what_to_do() -> None:
    class Uncopyable(Cache):
        def __deepcopy__(self, memo: dict) -> "Uncopyable":
            raise TypeError("no copies")

    with pytest.raises(LabkitValueError, match=r"An input is a Uncopyable.*Pass its tensors instead"):
        profile_model(UsesCache().eval(), X, kwargs={"cache": Uncopyable()}, mode="modules")


class DrawsRandomNumbers(TwoLayers):
    """Draws from Python's and NumPy's random streams in forward (an augmentation, a sampling decision)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        random.random()
        np.random.rand()
        return super().forward(torch.nn.functional.dropout(x, 0.5, self.training))


def seed(value: int) -> None:
    random.seed(value)
    np.random.seed(value)
    torch.manual_seed(value)


@pytest.mark.parametrize("mode", ["fast", "modules"])
def test_python_numpy_and_torch_random_streams_continue_as_if_nothing_was_profiled(mode: str) -> None:
    model = DrawsRandomNumbers().train()
    seed(5)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # train mode: expected here
        profile_model(model, X, mode=mode, warmup=1, runs=2)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


class OptionalMask(TwoLayers):
    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if mask is not None:
            x = x.masked_fill(mask, 0.0)
        return self.a(x)


@needs_export
def test_an_optional_argument_left_out_profiles_by_a_graph_and_prints_nothing(capfd: pytest.CaptureFixture) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", TraceFallbackWarning)
        report = profile_model(OptionalMask().eval(), X, warmup=0, runs=1)
    assert report.capture == "export"
    assert "fails at node 'masked_fill' (call_method masked_fill) where the model itself ran" in report.fallback_reason
    assert capfd.readouterr().err == ""
    with_mask = profile_model(OptionalMask().eval(), X, kwargs={"mask": X > 0}, warmup=0, runs=1)
    assert with_mask.capture == "symbolic_trace"
