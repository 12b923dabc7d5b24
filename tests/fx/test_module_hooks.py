"""labkit.fx.module_hooks: profiling without a trace, blocks timed as units, and the fallback of profile_model to it."""
import json
import warnings

import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitTypeError
from labkit.fx import hf_zoo
from labkit.fx.module_hooks import OUTSIDE, OWN_CODE, WHOLE_MODEL, ModuleProfiler, hook_plan, hooked_leaves
from labkit.fx.profile import TraceFailedError, TraceFallbackWarning, TrainModeWarning, profile_model, require_profilable

X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


class Detector(nn.Module):
    """A detection-style model: a list of images in, so fx cannot trace it; a backbone that traces."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 1))
        self.head = nn.Linear(4, 2)

    def forward(self, images):
        features = [self.backbone(image.unsqueeze(0)).mean((2, 3)) for image in images]
        return self.head(torch.cat(features))


class SharedRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 1)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(self.relu(x))) * 2


def images() -> list[torch.Tensor]:
    return [torch.randn(3, 8, 8), torch.randn(3, 8, 8)]


def test_a_list_input_model_falls_back_to_modules_and_says_why():
    # capture="symbolic_trace": torch.export would capture this list input (tests/fx/test_export_capture.py)
    with pytest.warns(TraceFallbackWarning, match="Detector.forward.*for image in images.*model.backbone") as caught:
        report = profile_model(Detector().eval(), images(), warmup=1, runs=2, capture="symbolic_trace")
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert report.mode == "modules" and report.runs == 2
    assert "cannot be iterated" in report.fallback_reason and "generalized" not in report.fallback_reason
    assert report.traceable_children == (("backbone", 4),)
    # Each image runs the backbone once: four leaves twice, the head once, and the time between them.
    names = [row.name for row in report.rows]
    assert names == ["backbone.0", "backbone.1", "backbone.2", "backbone.3",
                     "backbone.0#2", "backbone.1#2", "backbone.2#2", "backbone.3#2", "head", OUTSIDE]
    assert report.by_op_type().rows[0][0] in {"Conv2d", "BatchNorm2d", "ReLU", "Linear", OUTSIDE}
    assert {r.op_type for r in report.rows} == {"Conv2d", "BatchNorm2d", "ReLU", "Linear", OUTSIDE}
    assert sum(r.stats.mean for r in report.rows) == pytest.approx(report.total.mean, rel=1e-6)
    assert "mode=modules (fx could not trace the model" in report.to_text()


def test_fallback_false_raises_the_trace_error_and_require_profilable_agrees():
    with pytest.raises(TraceFailedError, match="cannot be iterated"):
        profile_model(Detector().eval(), images(), fallback=False, capture="symbolic_trace")
    with pytest.raises(TraceFailedError):
        require_profilable(Detector().eval(), images(), fallback=False, capture="symbolic_trace")
    require_profilable(Detector().eval(), images())


def test_explicit_modules_mode_on_a_traceable_model_gives_one_row_per_call():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: nothing was traced
        report = profile_model(SharedRelu().eval(), X, warmup=0, runs=2, mode="modules")
    assert [r.name for r in report.rows] == ["relu", "conv", "relu#2", OUTSIDE]
    assert [r.target for r in report.rows][:3] == ["relu", "conv", "relu"]
    assert report.fallback_reason == "" and report.traceable_children == ()
    assert report.table().title.startswith("4 module calls, mode=modules, 2 runs")


def test_the_learners_model_keeps_no_hooks_and_its_buffers_even_in_train_mode():
    model = Detector()  # train mode: BatchNorm would update its running statistics
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.warns(TrainModeWarning):
        profile_model(model, images(), warmup=1, runs=2, mode="modules")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def test_rng_is_restored_after_a_profile_of_a_model_with_dropout():
    model = nn.Sequential(nn.Conv2d(3, 3, 1), nn.Dropout(0.5))  # train mode: Dropout draws random numbers
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    with pytest.warns(TrainModeWarning):
        profile_model(model, X, warmup=1, runs=2, mode="modules")
    assert torch.equal(torch.rand(3), expected)


def test_hooked_leaves_stop_at_layers_and_at_named_leaves():
    class Conv(nn.Conv2d):  # a torch.nn layer subclass keeping its forward is a leaf
        pass

    model = nn.Sequential(nn.Sequential(Conv(3, 3, 1), nn.ReLU()), nn.Sequential(nn.Linear(2, 2)))
    assert [name for name, _ in hooked_leaves(model)] == ["0.0", "0.1", "1.0"]
    assert [name for name, _ in hooked_leaves(model, ["0"])] == ["0", "1.0"]
    assert [name for name, _ in hooked_leaves(model, [nn.Sequential])] == ["0", "1"]
    assert [name for name, _ in hooked_leaves(nn.Linear(2, 2))] == [WHOLE_MODEL]


def test_module_mode_needs_a_module():
    with pytest.raises(LabkitTypeError, match="wrap the function in a module"):
        ModuleProfiler(lambda x: x + 1, X)


class MyAttention(nn.Module):
    """Attention written out: its matmuls, softmax and reshapes run between its two Linears."""

    def __init__(self, width: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)

    def forward(self, x):
        batch, tokens, width = x.shape
        q, k, v = (t.view(batch, tokens, self.heads, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, -1))
        weights = torch.softmax(q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5, -1)
        return self.out((weights @ v).transpose(1, 2).reshape(batch, tokens, width))


class MyBlock(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.attn = MyAttention(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x):
        x = x + self.attn(self.norm(x))
        return x + self.mlp(x)


class Looped(nn.Module):
    """Neither capture takes it: a loop over a list of inputs (symbolic_trace) and an if on a value (export too)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList([MyBlock(), MyBlock()])
        self.head = nn.Linear(16, 4)

    def forward(self, xs):
        pooled = []
        for x in xs:
            for block in self.blocks:
                x = block(x)
            pooled.append(x.mean(1))
        y = torch.cat(pooled)
        if y.abs().sum() > 0:
            y = y * 2
        return self.head(y)


def sequences() -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(1, 8, 16, generator=generator), torch.randn(1, 8, 16, generator=generator)]


def test_attention_is_one_unit_and_the_block_around_it_keeps_its_own_code():
    plan = {hooked.name: (hooked.kind, hooked.child) for hooked in hook_plan(Looped())}
    assert plan["blocks.0.attn"] == ("unit", False) and "blocks.0.attn.qkv" not in plan  # its Linears: not hooked
    assert plan["blocks.0"] == ("split", True)  # MyBlock holds MyAttention: its own code is a row
    assert plan["blocks.0.norm"] == ("leaf", False) and plan["blocks.0.mlp.1"] == ("leaf", False)
    assert plan["head"] == ("leaf", True) and "blocks" not in plan  # a ModuleList is never called: its items count
    assert [name for name, _ in hooked_leaves(Looped(), units=False)][:3] == ["blocks.0.norm", "blocks.0.attn.qkv",
                                                                              "blocks.0.attn.out"]


def test_a_model_neither_capture_takes_is_hooked_by_units_and_lists_its_largest_children(tmp_path):
    with pytest.warns(TraceFallbackWarning):
        report = profile_model(Looped().eval(), sequences(), warmup=1, runs=3)
    assert report.capture == "hooks" and report.mode == "modules"
    names = [row.name for row in report.rows]
    # each block runs once per sequence: one row per call of the attention, none for its Linears
    assert [name for name in names if "attn" in name] == ["blocks.0.attn", "blocks.1.attn", "blocks.0.attn#2",
                                                          "blocks.1.attn#2"]
    assert "blocks.0" + OWN_CODE in names and "blocks.0#2" + OWN_CODE in names and names[-1] == OUTSIDE
    attention = next(row for row in report.rows if row.name == "blocks.0.attn")
    assert (attention.op, attention.target, attention.op_type) == ("call_module", "blocks.0.attn", "MyAttention")
    own = next(row for row in report.rows if row.name == "blocks.0" + OWN_CODE)
    assert (own.target, own.op_type) == ("blocks.0", "MyBlock")
    assert sum(row.stats.mean for row in report.rows) == pytest.approx(report.total.mean, rel=1e-6)
    assert {"blocks.0", "blocks.1", "head"} <= set(report.by_module(2).seconds)
    # the model's children by their whole time: the ModuleList's items and the head
    assert {name for name, *_ in report.largest_children} == {"blocks.0", "blocks.1", "head"}
    assert [cls for name, cls, *_ in report.largest_children if name == "head"] == ["Linear"]
    seconds = [seconds for _, _, seconds, _ in report.largest_children]
    assert seconds == sorted(seconds, reverse=True) and all(0 < pct <= 100 for *_, pct in report.largest_children)
    assert "Largest children of the model (whole time, median per run): " in report.to_text()
    assert "Largest children" in report._repr_html_()
    payload = json.loads(report.to_json(tmp_path / "p.json").read_text())
    assert {child["name"] for child in payload["largest_children"]} == {"blocks.0", "blocks.1", "head"}
    # leaves only: the attention's Linears are rows, its math is outside
    leaves = ModuleProfiler(Looped().eval(), sequences(), units=False)
    leaves.run_once()
    leaf_names = [row.name for row in leaves.report().rows]
    assert "blocks.0.attn.qkv" in leaf_names and "blocks.0.attn" not in leaf_names
    assert not any(name.endswith(OWN_CODE) for name in leaf_names)


def test_a_users_leaf_module_stays_whole_and_the_model_itself_is_never_a_unit():
    plan = {hooked.name: hooked.kind for hooked in hook_plan(Looped(), ["blocks.0"])}
    assert plan["blocks.0"] == "leaf" and "blocks.0.attn" not in plan and plan["blocks.1"] == "split"
    block = {hooked.name: hooked.kind for hooked in hook_plan(MyBlock())}  # profiling a block: its parts are rows
    assert block == {"norm": "leaf", "attn": "unit", "mlp": None, "mlp.0": "leaf", "mlp.1": "leaf", "mlp.2": "leaf"}
    profiler = ModuleProfiler(MyBlock().eval(), torch.randn(1, 4, 16))  # units: what a fallback to hooks uses
    for _ in range(2):
        profiler.run_once()
    report = profiler.report()
    assert [row.name for row in report.rows] == ["norm", "attn", "mlp.0", "mlp.1", "mlp.2", OUTSIDE]
    assert {name for name, *_ in report.largest_children} == {"norm", "attn", "mlp"}


def test_mode_modules_asked_for_times_every_leaf_and_a_fallback_times_units():
    asked = profile_model(MyBlock().eval(), torch.randn(1, 4, 16), warmup=0, runs=1, mode="modules")
    assert "attn.qkv" in [row.name for row in asked.rows] and "attn" not in [row.name for row in asked.rows]


def test_a_module_shared_by_two_parents_is_hooked_once():
    shared = nn.Linear(4, 4)
    model = nn.Sequential(nn.Sequential(shared, nn.ReLU()), nn.Sequential(shared))
    assert [name for name, _ in hooked_leaves(model)] == ["0.0", "0.1"]
    report = profile_model(model.eval(), torch.randn(2, 4), warmup=0, runs=2, mode="modules")
    assert [row.name for row in report.rows] == ["0.0", "0.1", "0.0#2", OUTSIDE]


def test_a_graph_profile_has_no_children_list():
    report = profile_model(SharedRelu().eval(), X, warmup=0, runs=2)
    assert report.largest_children == () and "Largest children" not in report.to_text()


def test_a_hugging_face_model_forced_to_hooks_times_its_attention_as_units(transformers):
    model = hf_zoo.build_model("bert")
    inputs = hf_zoo.example_inputs("bert", model)
    with pytest.warns(TraceFallbackWarning):
        report = profile_model(model, kwargs=inputs, warmup=1, runs=3, capture="symbolic_trace")
    assert report.capture == "hooks"
    rows = {row.name: row for row in report.rows}
    assert rows["encoder.layer.0.attention.self"].op_type == "BertSelfAttention"
    assert not any(name.startswith("encoder.layer.0.attention.self.") for name in rows)  # query, key, value: inside
    assert rows["encoder.layer.0" + OWN_CODE].op_type == "BertLayer"  # BertLayer holds BertAttention
    assert rows["encoder.layer.0.intermediate.dense"].op_type == "Linear"
    assert {name for name, *_ in report.largest_children} == {"embeddings", "encoder", "pooler"}
    leaves = ModuleProfiler(model, kwargs=inputs, units=False)
    leaves.run_once()
    leaf_rows = {row.name for row in leaves.report().rows}
    assert "encoder.layer.0.attention.self.query" in leaf_rows and "encoder.layer.0.attention.self" not in leaf_rows
