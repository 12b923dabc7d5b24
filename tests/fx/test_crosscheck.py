"""labkit.fx.crosscheck: labkit's shares next to torch.profiler's, matched by op type, with a clean stderr."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labkit.core.copies import WATCHES_HIGHER_ORDER
from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.fx import hf_zoo
from labkit.fx.crosscheck import (
    ATEN_TO_OP_TYPE,
    ATEN_TO_OP_TYPES,
    MIN_COMPARED_PCT,
    RUN_MARKER,
    CrossCheck,
    TooLittleComparedError,
    charged_seconds,
    compare_with_torch_profiler,
    match_op_types,
    operators_per_run,
    seconds_by_op_type,
)
from labkit.fx.module_hooks import OUTSIDE
from labkit.fx.profile import TraceFailedError, TraceFallbackWarning
from tests.fx.support import needs_export


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)).eval()


class Mixed(nn.Module):
    """Types the first cross-check listed twice (Hardswish, SiLU, GELU, cat), nn.ReLU next to F.relu, types
    only labkit names: getattr/getitem (no aten operator), and Softshrink (an operator labkit's table lacks)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.hardswish = nn.Hardswish(inplace=True)
        self.silu = nn.SiLU(inplace=True)
        self.gelu = nn.GELU()
        self.relu = nn.ReLU(inplace=True)
        self.shrink = nn.Softshrink()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch = x.shape[0]
        both = torch.cat([self.hardswish(self.conv(x)), self.silu(self.conv(x))], 1)
        out = F.relu(self.relu(self.gelu(both)))
        return self.shrink(out).view(batch, -1) * 2


def tiny_attention() -> nn.Module:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.attention = nn.MultiheadAttention(16, 2, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.norm(x)
            x = x + self.attention(y, y, y, need_weights=False)[0]
            scores = F.softmax(x @ x.transpose(1, 2), dim=-1)
            return self.mlp(scores @ x)

    torch.manual_seed(0)
    return Block().eval()


def test_shares_side_by_side_and_nothing_on_stderr(capfd):
    check = compare_with_torch_profiler(small_cnn(), torch.randn(2, 3, 32, 32), warmup=1, runs=2)
    assert set(check.labkit_pct) == {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"}
    assert sum(check.labkit_pct.values()) == pytest.approx(100)
    assert sum(check.profiler_pct.values()) == pytest.approx(100)
    assert check.max_difference == max(check.difference(t) for t in check.labkit_pct)
    assert check.calls == {t: (1, 1.0) for t in check.labkit_pct} and check.calls_differ == []
    assert check.only_labkit == {} and check.only_profiler == {} and check.basis == "wall"
    assert "torch.profiler %" in str(check) and "<table>" in check._repr_html_()
    assert capfd.readouterr().err == ""


def test_each_type_is_one_row_and_the_unmatched_are_listed_apart():
    check = compare_with_torch_profiler(Mixed().eval(), torch.randn(1, 3, 16, 16), warmup=1, runs=2)
    names = [name for name, _, _ in check.rows]
    members = [member for name in names for member in name.split(" + ")]
    assert len(members) == len(set(members)), names  # no type in two rows
    assert not any(name.startswith("aten::") for name in names)
    assert {"Conv2d", "Hardswish", "SiLU", "GELU", "cat", "mul", "view"} <= set(names)
    relu_row = next(name for name in names if "relu" in name.lower())
    assert set(relu_row.split(" + ")) == {"ReLU", "relu"}  # aten::relu_ cannot tell nn.ReLU from F.relu
    assert check.difference("relu") == check.difference("ReLU") == check.difference(relu_row)
    assert check.calls["Conv2d"] == (2, 2.0) and check.calls[relu_row] == (2, 2.0)
    assert set(check.only_labkit) == {"getattr", "getitem"} and check.only_profiler == {}
    assert "Softshrink" in names  # an operator the table lacks: the labelled run saw nn.Softshrink issue it
    assert sum(check.labkit_pct.values()) == pytest.approx(100) and check.compared_pct[1] == pytest.approx(100)
    text = str(check)
    assert "Only in torch.profiler: none" in text and "Only in labkit: " in text and "getattr" in text
    assert "Could not map to operators" not in text and check.unmapped == {}  # getattr, getitem issue no operator
    with pytest.raises(LabkitValueError, match="only in labkit's profile"):
        check.difference("getattr")


def test_a_transformer_block_matches_its_attention_norm_and_linear_layers():
    check = compare_with_torch_profiler(tiny_attention(), torch.randn(2, 5, 16), warmup=1, runs=2)
    assert {"MultiheadAttention", "LayerNorm", "Linear", "GELU", "softmax", "matmul", "transpose", "add"} <= set(
        check.labkit_pct
    )
    assert check.calls["Linear"] == (2, 2.0) and check.calls["matmul"] == (2, 2.0)
    assert not any(op in check.only_profiler for op in ("aten::linear", "aten::layer_norm", "aten::gelu"))


def test_the_aten_spellings_of_torchvision_models_are_mapped():
    expected = {
        "aten::hardswish_": "Hardswish", "aten::hardsigmoid": "Hardsigmoid", "aten::silu_": "SiLU",
        "aten::gelu": "GELU", "aten::sigmoid": "Sigmoid", "aten::mul": "mul", "aten::cat": "cat",
        "aten::dropout_": "Dropout", "aten::layer_norm": "LayerNorm", "aten::softmax": "Softmax",
        "aten::avg_pool2d": "AvgPool2d", "aten::adaptive_avg_pool2d": "AdaptiveAvgPool2d", "aten::linear": "Linear",
        "aten::matmul": "matmul", "aten::permute": "permute", "aten::transpose": "transpose", "aten::view": "view",
        "aten::reshape": "reshape", "aten::flatten": "flatten", "aten::relu_": "ReLU", "aten::add_": "add",
        "aten::scaled_dot_product_attention": "scaled_dot_product_attention",
        "aten::_native_multi_head_attention": "MultiheadAttention",
    }
    assert {op: ATEN_TO_OP_TYPE[op] for op in expected} == expected
    assert {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "batch_norm"} <= set(ATEN_TO_OP_TYPES["aten::batch_norm"])
    assert {"relu", "ReLU"} <= set(ATEN_TO_OP_TYPES["aten::relu_"]) and "add_" in ATEN_TO_OP_TYPES["aten::add_"]
    assert "ReLU6" in ATEN_TO_OP_TYPES["aten::hardtanh_"]  # nn.ReLU6 is an nn.Hardtanh (mobilenet_v2)


def test_matched_shares_are_renormalised_and_the_rest_kept_as_shares_of_the_whole():
    labkit = {"Conv2d": (2, 6.0), "ReLU": (1, 2.0), "getattr": (1, 2.0)}
    profiler = {"aten::conv2d": (2.0, 3.0), "aten::relu_": (1.0, 1.0), "aten::unknown_op": (1.0, 4.0)}
    check = match_op_types(labkit, profiler)
    assert check.rows == [("Conv2d", 75.0, 75.0), ("ReLU", 25.0, 25.0)]
    assert check.difference("Conv2d") == 0.0  # the unmatched 20% and 50% shift no row
    assert check.only_labkit == {"getattr": 20.0} and check.only_profiler == {"aten::unknown_op": 50.0}
    assert check.compared_pct == (80.0, 50.0)
    # getattr issues no operator: all of labkit's operator time is compared, but only half of torch.profiler's
    assert check.no_operator_pct == 20.0 and check.operator_compared_pct == 100.0 and not check.comparable
    with pytest.raises(TooLittleComparedError, match=r"Compared only 80.0% of labkit's time \(100.0% of its time in "
                                                     r"nodes that issue operators\) and 50.0% of torch.profiler's"):
        check.max_difference  # no difference of 0 points over half the time passes for agreement
    assert check.note().startswith("No verdict. Compared only 80.0% of labkit's time")


def test_types_the_profiler_cannot_tell_apart_share_a_row_and_unequal_calls_are_named():
    labkit = {"BatchNorm1d": (1, 1.0), "BatchNorm2d": (3, 3.0), "Linear": (1, 6.0), "helper": (1, 2.0)}
    profiler = {"aten::batch_norm": (4.0, 4.0), "aten::linear": (3.0, 6.0)}  # helper issues two linears
    check = match_op_types(labkit, profiler)
    assert [name for name, _, _ in check.rows] == ["Linear", "BatchNorm2d + BatchNorm1d"]
    assert check.calls == {"BatchNorm2d + BatchNorm1d": (4, 4.0), "Linear": (1, 3.0)}
    assert check.calls_differ == ["Linear"]
    assert check.rows[1][1:] == pytest.approx((40.0, 40.0)) and check.difference("BatchNorm1d") == pytest.approx(0.0)
    assert "not like for like: Linear" in str(check) and "Could not map to operators: helper 16.7%" in str(check)
    assert check.unmapped == {"helper": pytest.approx(100 / 6)} and "Only in labkit: none" in str(check)


def event(name, start, end, children=(), device_us=0.0):
    """A stand-in for torch.profiler's FunctionEvent: what the cross-check reads of one."""
    node = SimpleNamespace(name=name, time_range=SimpleNamespace(start=start, end=end), cpu_time_total=end - start,
                           device_time_total=device_us, cpu_children=list(children), cpu_parent=None)
    for child in children:
        child.cpu_parent = node
    return node


def test_wall_time_charges_each_operator_from_the_previous_operators_end():
    conv, relu, add = event("aten::conv2d", 10, 40), event("aten::relu_", 55, 60), event("aten::add", 70, 71)
    assert charged_seconds([conv, relu, add], "wall") == pytest.approx([30e-6, 20e-6, 11e-6])
    assert charged_seconds([conv, relu, add], "operator") == pytest.approx([30e-6, 5e-6, 1e-6])
    assert charged_seconds([], "wall") == []


def test_operators_per_run_reads_inside_the_run_markers_and_through_non_operator_labels():
    first = event(RUN_MARKER, 0, 100, [event("aten::conv2d", 1, 20), event("cudaDeviceSynchronize", 21, 22),
                                       event("my block", 25, 60, [event("aten::relu", 30, 50)])])
    second = event(RUN_MARKER, 200, 300, [event("aten::conv2d", 201, 230), event("aten::relu", 240, 250)])
    outside = event("aten::empty", 150, 151)
    per_run = operators_per_run([first, *first.cpu_children, second, outside], "wall")
    assert per_run.keys() == {"aten::conv2d", "aten::relu"}
    assert per_run["aten::conv2d"] == pytest.approx((1.0, 24e-6))  # own 19 µs, then 29 µs
    assert per_run["aten::relu"] == pytest.approx((1.0, 25e-6))  # from conv's end: 30 µs, then 20 µs


def test_each_side_is_the_median_of_its_runs_so_a_disturbed_run_moves_neither():
    runs = [event(RUN_MARKER, 100 * i, 100 * i + 90, [event("aten::conv2d", 100 * i, 100 * i + 10)]) for i in range(3)]
    runs[1].cpu_children[0].time_range.end += 80  # a stall in the second run
    runs.append(event(RUN_MARKER, 400, 490, []))  # a run without the operator counts 0 there
    per_run = operators_per_run(runs, "wall")
    assert per_run["aten::conv2d"] == pytest.approx((1.0, 10e-6))


def test_top_level_events_are_mapped_and_children_skipped():
    conv = SimpleNamespace(name="aten::conv2d", cpu_parent=None, cpu_time_total=30.0, device_time_total=0.0)
    child = SimpleNamespace(name="aten::convolution", cpu_parent=conv, cpu_time_total=29.0, device_time_total=0.0)
    relu = SimpleNamespace(name="aten::relu_", cpu_parent=None, cpu_time_total=10.0, device_time_total=0.0)
    gelu = SimpleNamespace(name="aten::gelu", cpu_parent=None, cpu_time_total=5.0, device_time_total=0.0)
    other = SimpleNamespace(name="aten::softshrink", cpu_parent=None, cpu_time_total=2.0, device_time_total=0.0)
    seconds = seconds_by_op_type([conv, child, relu, gelu, other])
    assert seconds == pytest.approx({"Conv2d": 30e-6, "ReLU": 10e-6, "GELU": 5e-6, "aten::softshrink": 2e-6})


def test_difference_and_errors():
    check = CrossCheck([("Conv2d", 70.0, 72.5), ("ReLU", 30.0, 27.5)], only_profiler={"aten::foo": 1.0})
    assert check.difference("Conv2d") == 2.5 and check.max_difference == 2.5 and check.agrees()
    assert check.verdict() == ("Compared 100.0% of labkit's time and 99.0% of torch.profiler's: the shares agree "
                               "within 5 points (largest difference 2.5, Conv2d).")
    assert not check.agrees(2.0)
    with pytest.raises(LabkitValueError, match="No op type 'Linear'.*Conv2d"):
        check.difference("Linear")
    with pytest.raises(LabkitValueError, match="only in torch.profiler's profile"):
        check.difference("aten::foo")
    with pytest.raises(LabkitValueError, match="runs"):
        compare_with_torch_profiler(small_cnn(), torch.randn(1, 3, 8, 8), runs=0)


def test_an_empty_cross_check_says_so():
    with pytest.raises(LabkitValueError, match="no op types.*labkit only: getattr 100.0%"):
        CrossCheck([], only_labkit={"getattr": 100.0}).max_difference
    with pytest.raises(LabkitTypeError, match="runs must be a whole number"):
        compare_with_torch_profiler(small_cnn(), torch.randn(1, 3, 8, 8), runs=2.5)


def test_a_train_mode_model_leaves_the_global_rng_as_it_was_and_warns():
    from labkit.fx.profile import TrainModeWarning

    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.ReLU())  # train mode: Dropout draws numbers
    x = torch.randn(4, 8)
    before = torch.random.get_rng_state()
    with pytest.warns(TrainModeWarning, match="model.eval"):
        check = compare_with_torch_profiler(model, x, warmup=1, runs=2)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert {"Linear", "Dropout", "ReLU"} <= set(check.labkit_pct)


def test_a_verdict_needs_most_of_both_sides_compared():
    at_threshold = CrossCheck([("Linear", 60.0, 53.0), ("ReLU", 40.0, 47.0)], only_labkit={"LSTM": 100 - MIN_COMPARED_PCT})
    assert at_threshold.comparable and at_threshold.max_difference == 7.0 and not at_threshold.agrees()
    assert "the shares do not agree within 5 points (largest difference 7.0, Linear)" in at_threshold.verdict()
    below = CrossCheck([("Linear", 100.0, 100.0)], only_labkit={"LSTM": 95.0}, only_profiler={"aten::lstm": 95.0})
    assert below.unmapped == {"LSTM": 95.0} and not below.comparable
    with pytest.raises(TooLittleComparedError, match=r"Compared only 5.0% of labkit's time and 5.0% of torch.profiler's; "
                                                     r"a verdict needs 90% of each.*capture='export'.*LSTM 95.0%"):
        below.agrees()
    assert below.difference("Linear") == 0.0  # the compared part stays readable
    assert isinstance(TooLittleComparedError("x"), LabkitValueError)


def test_an_exported_graphs_operators_match_by_name_and_its_parameter_reads_are_not_compared():
    labkit = {"aten.linear": (2, 6.0), "aten.select": (1, 1.0), "get_attr": (4, 2.0), "getitem": (1, 1.0)}
    profiler = {"aten::linear": (2.0, 6.5), "aten::select": (1.0, 1.0)}
    check = match_op_types(labkit, profiler, capture="export")
    assert [name for name, *_ in check.rows] == ["aten.linear", "aten.select"]  # no getitem + select: no table here
    assert check.only_labkit == {"get_attr": 20.0, "getitem": 10.0} and check.unmapped == {}
    assert check.compared_pct == (70.0, 100.0) and check.operator_compared_pct == pytest.approx(100.0)
    assert check.comparable and check.capture == "export"
    assert "labkit: export" in str(check) and "(100.0% of its time in nodes that issue operators)" in check.verdict()
    assert match_op_types(labkit, profiler).rows == [("getitem", 100.0, 100.0)]  # a traced graph's getitem: the table


def test_every_mode_cross_checks_and_a_hooked_profile_lists_its_outside_row():
    x = torch.randn(2, 3, 16, 16)
    interpreted = compare_with_torch_profiler(small_cnn(), x, warmup=0, runs=2, mode="interpreter")
    assert (interpreted.capture, interpreted.mode) == ("symbolic_trace", "interpreter")
    assert set(interpreted.labkit_pct) == {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"}
    hooked = compare_with_torch_profiler(small_cnn(), x, warmup=0, runs=2, mode="modules")
    assert (hooked.capture, hooked.mode) == ("hooks", "modules")
    assert set(hooked.labkit_pct) == {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d"}
    assert hooked.calls["Conv2d"] == (1, 1.0) and OUTSIDE in hooked.only_labkit and hooked.unmapped == {}


class MyAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, -1)
        return torch.softmax(q @ k.transpose(-1, -2), -1) @ v


class HooksOnly(nn.Module):
    """A loop over a list and an if on a value: neither symbolic_trace nor torch.export captures it."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.attn = MyAttention()
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 4)

    def forward(self, xs):
        y = torch.cat([self.norm(x + self.attn(x)).mean(1) for x in xs])
        return self.head(y * 2 if y.sum() > 0 else y)


def _row_with(check, op_type: str) -> str:
    """The compared row ``op_type`` is in (types the profiler cannot tell apart share one: "GRU + LSTM")."""
    return next(name for name, *_ in check.rows if op_type in name.split(" + "))


def test_a_hooks_only_model_maps_its_attention_block_and_outside_code_and_gets_a_verdict():
    xs = [torch.randn(1, 8, 16), torch.randn(1, 8, 16)]
    with pytest.warns(TraceFallbackWarning):
        check = compare_with_torch_profiler(HooksOnly().eval(), xs, warmup=1, runs=3)
    assert (check.capture, check.mode) == ("hooks", "modules")
    # the attention's matmul and softmax are its own; the residual add and mean between modules are the outside row's
    assert _row_with(check, "MyAttention") and _row_with(check, OUTSIDE)
    assert check.unmapped == {} and check.only_labkit == {} and check.only_profiler == {}
    assert check.compared_pct == (100.0, 100.0) and check.comparable and check.max_difference >= 0
    with pytest.raises(TraceFailedError):
        compare_with_torch_profiler(HooksOnly().eval(), xs, fallback=False)


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Linear(8, 16)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        out, _ = self.lstm(self.embed(x))
        return self.head(out[:, -1])


class PeopleUse(nn.Module):
    """The layers a name table missed: EmbeddingBag, LSTM, GRU and a parametrized Linear."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.bag = nn.EmbeddingBag(50, 16)
        self.lstm = nn.LSTM(16, 16, batch_first=True)
        self.gru = nn.GRU(16, 16, batch_first=True)
        self.head = nn.utils.parametrizations.weight_norm(nn.Linear(16, 2))

    def forward(self, x):
        out, _ = self.lstm(self.bag(x).unsqueeze(1).expand(-1, 6, -1))
        out, _ = self.gru(out)
        return self.head(out[:, -1])


@pytest.mark.parametrize("mode", ["fast", "modules"])
def test_recurrent_bag_and_parametrized_layers_map_to_their_operators_and_get_a_verdict(mode):
    x = torch.randint(0, 50, (2, 5))
    check = compare_with_torch_profiler(PeopleUse().eval(), x, warmup=1, runs=2, mode=mode)
    for op_type in ("LSTM", "GRU", "EmbeddingBag"):
        assert _row_with(check, op_type)
    assert check.unmapped == {} and check.only_profiler == {}
    assert min(check.operator_compared_pct, check.compared_pct[1]) >= 90 and check.comparable


def test_a_dynamically_quantized_model_maps_its_quantized_operators():
    model = torch.ao.quantization.quantize_dynamic(Recurrent().eval(), {nn.Linear, nn.LSTM}, dtype=torch.qint8)
    check = compare_with_torch_profiler(model, torch.randn(2, 6, 8), warmup=1, runs=2)
    assert check.unmapped == {} and check.only_profiler == {} and check.comparable


@needs_export
def test_parameter_reads_of_an_exported_graph_are_bookkeeping_not_an_op_type():
    check = compare_with_torch_profiler(Recurrent().eval(), torch.randn(2, 6, 8), warmup=1, runs=2, capture="export")
    assert "get_attr" not in check.only_labkit and "get_attr" not in check.labkit_pct
    assert {"aten.lstm", "aten.linear"} <= set(check.labkit_pct) and check.comparable


class Gated(nn.Module):
    """A data-dependent branch written with torch.cond (``clamp=True``: a branch clamps a weight in place)."""

    def __init__(self, clamp: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.clamp = clamp
        self.lin = nn.Linear(16, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return self.head(torch.cond(x.sum() > 0, self.positive, lambda x: self.lin(x).tanh(), (x,)))

    def positive(self, x):
        if self.clamp:
            self.lin.weight.data.clamp_(-0.01, 0.01)
        return self.lin(x).relu()


@pytest.mark.skipif(not WATCHES_HIGHER_ORDER, reason="torch < 2.5 runs no dispatch mode through torch.cond")
def test_a_torch_cond_model_profiles_and_gets_a_verdict_over_90_percent():
    check = compare_with_torch_profiler(Gated().eval(), torch.randn(4, 16), warmup=1, runs=3)
    assert check.capture == "export" and _row_with(check, "cond")
    assert check.unmapped == {} and check.only_profiler == {}
    assert min(check.compared_pct) >= 90 and check.comparable


def test_a_parameter_written_inside_a_torch_cond_branch_is_caught_before_the_write():
    from labkit.core.copies import UNWATCHED, parameters_written

    model = Gated(clamp=True).eval()
    before = model.lin.weight.detach().clone()
    # torch < 2.5 cannot watch through torch.cond: labkit says it does not know, and the caller uses its own parameters
    expected = ("lin.weight",) if WATCHES_HIGHER_ORDER else (UNWATCHED,)
    assert parameters_written(model, lambda: model(torch.ones(2, 16))) == expected
    assert torch.equal(model.lin.weight, before)  # stopped before clamp_ wrote it
    reads_only = Gated().eval()
    assert parameters_written(reads_only, lambda: reads_only(torch.ones(2, 16))) == (() if WATCHES_HIGHER_ORDER else expected)


def test_the_cross_check_leaves_every_random_state_as_it_was():
    import random

    import numpy as np

    model, x = DrawsRandomNumbers().eval(), torch.randn(2, 4)
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(3), np.random.seed(3), torch.manual_seed(3)
    compare_with_torch_profiler(model, x, warmup=1, runs=2)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


class DrawsRandomNumbers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x):
        import random

        import numpy as np

        return self.linear(x) * (1 + 0 * random.random() + 0 * float(np.random.rand()))


def test_resnet18_by_symbolic_trace_compares_every_type_as_before():
    torchvision = pytest.importorskip("torchvision")
    model = torchvision.models.resnet18(weights=None).eval()
    check = compare_with_torch_profiler(model, torch.randn(1, 3, 32, 32), warmup=1, runs=2, capture="symbolic_trace")
    assert check.capture == "symbolic_trace"
    assert set(check.labkit_pct) == {"Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "add", "AdaptiveAvgPool2d",
                                     "flatten", "Linear"}
    assert check.compared_pct == (100.0, 100.0) and check.only_labkit == {} and check.only_profiler == {}
    assert check.calls["Conv2d"] == (20, 20.0) and check.calls_differ == []
    assert check.comparable and check.max_difference >= 0 and check.verdict().startswith("Compared 100.0% of labkit's")


@needs_export
def test_a_bert_model_by_export_with_keyword_inputs_compares_all_its_operators(transformers):
    model = hf_zoo.build_model("bert")
    check = compare_with_torch_profiler(model, kwargs=hf_zoo.example_inputs("bert", model), warmup=1, runs=2)
    assert (check.capture, check.mode) == ("export", "fast")
    assert {"aten.linear", "aten.layer_norm", "aten.softmax", "aten.matmul", "aten.embedding"} <= set(check.labkit_pct)
    assert all(name.startswith("aten.") for name, *_ in check.rows)
    assert set(check.only_labkit) <= {"get_attr", "getitem"} and check.only_profiler == {} and check.unmapped == {}
    assert check.operator_compared_pct == pytest.approx(100.0) and check.comparable
