"""labkit.fx.tracing: fx's options on profile_model, the eager first run, and errors that name the right place."""
import pytest
import torch
import torch.fx
from torch import nn

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.fx.capture import CaptureMismatchError
from labkit.fx.profile import ModelRunError, profile_model
from labkit.fx.tracing import call_arguments, trace, traceable_children

X = torch.randn(2, 4)


class Flips(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x, flip=False):
        if flip:
            x = x.flip(-1)
        return self.linear(x)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.ReLU()

    def forward(self, x):
        return self.b(self.a(x))


class TwoBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = Block()
        self.second = Block()

    def forward(self, x):
        return self.second(self.first(x))


class TracesDifferently(nn.Module):
    """Takes another path while fx traces it, as libraries that branch on "am I being traced?" do."""

    def forward(self, x):
        if torch.fx._symbolic_trace.is_fx_tracing():
            return x.view(4, -1) + 1
        return x + 1


def test_concrete_args_fix_a_branch_and_the_inputs_fill_the_other_parameters():
    report = profile_model(Flips().eval(), X, concrete_args={"flip": True}, warmup=0, runs=1)
    assert [r.name for r in report.rows][-2:] == ["flip", "linear"]
    assert call_arguments(Flips(), [X], {"flip": True}) == (X, True)


def test_a_graph_module_traced_with_concrete_args_gets_advice_instead_of_fx_assert():
    graph_module = torch.fx.symbolic_trace(Flips(), concrete_args={"flip": True})
    with pytest.raises(ModelRunError, match="has been specialized.*concrete_args=") as info:
        profile_model(graph_module, X)
    assert "a 2x4 float32 tensor" in str(info.value)


@pytest.mark.parametrize(
    ("concrete_args", "inputs", "match"),
    [
        ({"flop": True}, (X,), "names flop, which forward does not take; its parameters are x, flip"),
        ({"flip": True}, (X, X), "1 input\\(s\\) too many"),
        ({"flip": True}, (), "No input for forward's parameter 'x'"),
    ],
)
def test_concrete_args_that_do_not_fit_forward_are_refused(concrete_args, inputs, match):
    with pytest.raises(LabkitValueError, match=match):
        profile_model(Flips(), *inputs, concrete_args=concrete_args)


class TakesKeywords(nn.Module):
    def forward(self, x, scale=1.0, **options):
        return x * scale


def test_trace_refuses_a_concrete_args_name_forward_does_not_take():
    with pytest.raises(LabkitValueError, match=r"concrete_args names 'bogus', which is not a parameter of forward; "
                                               r"its parameters are x, flip\."):
        trace(Flips(), concrete_args={"bogus": 1})
    with pytest.raises(LabkitValueError, match=r"'bogus'.*parameters are x, y"):
        trace(lambda x, y: x + y, concrete_args={"bogus": 1})


def test_trace_refuses_a_name_meant_for_kwargs_which_fx_never_fills():
    with pytest.raises(LabkitValueError, match=r"'mode'.*parameters are x, scale, \*\*options\. "
                                               r"fx never passes a concrete_args entry into \*\*options"):
        trace(TakesKeywords(), concrete_args={"mode": "fast"})
    traced = trace(TakesKeywords(), concrete_args={"scale": 2.0})
    assert torch.equal(traced(X, 2.0), X * 2)


@pytest.mark.parametrize("leaf", ["first", "Block", Block])
def test_leaf_modules_by_name_class_name_or_class_keep_a_block_as_one_node(leaf):
    report = profile_model(TwoBlocks().eval(), X, leaf_modules=[leaf], warmup=0, runs=1)
    expected = ["first", "second_a", "second_b"] if leaf == "first" else ["first", "second"]
    assert [r.name for r in report.rows] == expected
    assert report.rows[0].op_type == "Block"


def test_a_leaf_module_typo_suggests_the_near_names():
    with pytest.raises(LabkitValueError, match="Did you mean 'first'"):
        profile_model(TwoBlocks(), X, leaf_modules=["frist"])
    with pytest.raises(LabkitTypeError, match="leaf_modules takes"):
        trace(TwoBlocks(), leaf_modules=[42])


def test_a_tracer_of_your_own_is_used_as_an_instance_or_a_class():
    class BlocksAreLeaves(torch.fx.Tracer):
        def is_leaf_module(self, m, qualified_name):
            return isinstance(m, Block) or super().is_leaf_module(m, qualified_name)

    for tracer in (BlocksAreLeaves, BlocksAreLeaves()):
        assert [n.op for n in trace(TwoBlocks(), tracer=tracer).graph.nodes] == [
            "placeholder", "call_module", "call_module", "output"
        ]
    with pytest.raises(LabkitValueError, match="either tracer= or leaf_modules="):
        trace(TwoBlocks(), tracer=BlocksAreLeaves, leaf_modules=["first"])
    with pytest.raises(LabkitTypeError, match="tracer must be a torch.fx.Tracer"):
        profile_model(TwoBlocks(), X, tracer=42)


def test_a_wrong_input_size_is_the_models_own_error_with_what_it_expects():
    torchvision = pytest.importorskip("torchvision")
    vit = torchvision.models.VisionTransformer(
        image_size=32, patch_size=16, num_layers=1, num_heads=2, hidden_dim=8, mlp_dim=8
    ).eval()
    with pytest.raises(ModelRunError) as info:
        profile_model(vit, torch.randn(1, 3, 64, 64))
    message = str(info.value)
    assert "VisionTransformer itself fails on a 1x3x64x64 float32 tensor, before any profiling" in message
    assert "Wrong image height! Expected 32 but got 64" in message and "vision_transformer.py, line" in message
    assert "The model expects 32 where the input has 64" in message
    assert "Proxy" not in message


@pytest.mark.parametrize(
    ("model", "x", "match"),
    [
        (nn.Conv2d(3, 4, 7), torch.randn(1, 3, 4, 4), "Kernel size can't be greater than actual input size"),
        (nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)), torch.randn(3, 8, 8), "expected 4D input \\(got 3D"),
    ],
)
def test_inputs_the_model_cannot_take_are_model_run_errors(model, x, match):
    with pytest.raises(ModelRunError, match=match) as info:
        profile_model(model.eval(), x)
    assert "fix the input" in str(info.value)


def test_a_traced_graph_failing_where_eager_ran_names_the_node():
    # the graph is run once against the model before it is timed: its failure is the capture's, at its node
    with pytest.raises(CaptureMismatchError) as info:
        profile_model(TracesDifferently().eval(), torch.randn(2, 3), capture="symbolic_trace", fallback=False)
    message = str(info.value)
    assert "fails at node 'view' (call_method view) where the model itself ran" in message
    assert "mode='modules'" in message


def test_traceable_children_are_the_largest_parts_that_trace():
    class ListModel(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.backbone = TwoBlocks()
            self.heads = nn.ModuleList([Block(), Block()])

        def forward(self, images):
            return [head(self.backbone(image)) for image, head in zip(images, self.heads)]

    assert traceable_children(ListModel()) == (("backbone", 4), ("heads.0", 2), ("heads.1", 2))
