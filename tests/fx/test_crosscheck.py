"""labkit.fx.crosscheck: labkit's shares next to torch.profiler's, matched by op type, with a clean stderr."""
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labkit.core.errors import LabkitTypeError, LabkitValueError
from labkit.fx.crosscheck import (
    ATEN_TO_OP_TYPE,
    ATEN_TO_OP_TYPES,
    RUN_MARKER,
    CrossCheck,
    charged_seconds,
    compare_with_torch_profiler,
    match_op_types,
    operators_per_run,
    seconds_by_op_type,
)


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2)).eval()


class Mixed(nn.Module):
    """Types the first cross-check listed twice (Hardswish, SiLU, GELU, cat), nn.ReLU next to F.relu, and types
    only one side names: getattr/getitem (no aten operator) and Softshrink (an operator labkit's table lacks)."""

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
    assert {"getattr", "getitem", "Softshrink"} <= set(check.only_labkit)
    assert set(check.only_profiler) == {"aten::softshrink"}
    assert sum(check.labkit_pct.values()) == pytest.approx(100)
    assert check.compared_pct[1] == pytest.approx(100 - check.only_profiler["aten::softshrink"])
    text = str(check)
    assert "Only in torch.profiler: aten::softshrink" in text and "Only in labkit: " in text and "getattr" in text
    assert "aten::softshrink" in check._repr_html_()
    with pytest.raises(LabkitValueError, match="only in labkit's profile"):
        check.difference("Softshrink")


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
    assert check.max_difference == 0.0  # the unmatched 20% and 50% shift no row
    assert check.only_labkit == {"getattr": 20.0} and check.only_profiler == {"aten::unknown_op": 50.0}
    assert check.compared_pct == (80.0, 50.0)


def test_types_the_profiler_cannot_tell_apart_share_a_row_and_unequal_calls_are_named():
    labkit = {"BatchNorm1d": (1, 1.0), "BatchNorm2d": (3, 3.0), "Linear": (1, 6.0), "helper": (1, 2.0)}
    profiler = {"aten::batch_norm": (4.0, 4.0), "aten::linear": (3.0, 6.0)}  # helper issues two linears
    check = match_op_types(labkit, profiler)
    assert [name for name, _, _ in check.rows] == ["Linear", "BatchNorm2d + BatchNorm1d"]
    assert check.calls == {"BatchNorm2d + BatchNorm1d": (4, 4.0), "Linear": (1, 3.0)}
    assert check.calls_differ == ["Linear"]
    assert check.rows[1][1:] == pytest.approx((40.0, 40.0)) and check.difference("BatchNorm1d") == pytest.approx(0.0)
    assert "not like for like: Linear" in str(check) and "Only in labkit: helper 16.7%" in str(check)


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
    assert check.difference("Conv2d") == 2.5 and check.max_difference == 2.5
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
