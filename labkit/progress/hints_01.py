"""Lab 01's tiered hints (see :mod:`labkit.progress.hints`)."""
from __future__ import annotations

from labkit.i18n.messages import N_

HINTS: dict[str, tuple[str, str, str]] = {
    "1.1": (
        N_("What does `labkit.profile_model` give back, and is that exactly what your function returns? "
        "Is your model in eval mode, with at least three layers and a convolution among them?"),
        N_("The section {statistics} shows the call and its `runs=` argument; `nn.Module.eval()` switches BatchNorm and "
        "Dropout from training to inference."),
        N_("The answer is three choices and one call: a model that meets the rules (layers, a convolution, the mode for "
        "inference), a batch it accepts (compare its channels with what the first layer expects), and how many timed "
        "runs to ask for. Your function's only other job is to hand back what labkit measured, exactly as it came."),
    ),
    "1.2": (
        N_("Does every node with a tensor output get its shape, under the node's name? "
        "For a convolution, how many multiply-adds does one output value take, and how many output values are there?"),
        N_("Override `torch.fx.Interpreter.run_node` and let the base class's version compute each result; "
        "`self.fetch_attr(n.target)` is the module a `call_module` node calls, and `torch.utils.flop_counter.FlopCounterMode` "
        "counts one layer for you to compare with."),
        N_("In `__init__`, call the base class's constructor first, then make the two dicts. "
        "In `run_node`, get the result from the base class, record its shape as a tuple of ints, and for a Conv2d or Linear "
        "count 2 FLOPs per multiply-add: per output value, a Conv2d sums over the input channels of its group times the "
        "kernel's height and width, a Linear over its input features. Keep the counts ints and return the result."),
    ),
    "1.3": (
        N_("Which axis of `linear.weight` is an output feature, and what does an eval-mode BatchNorm do to each output feature? "
        "What if `linear.bias` is None?"),
        N_("The section {conv_bn_fusion} does the same arithmetic for a convolution; "
        "`torch.nn.utils.fusion.fuse_linear_bn_eval` is torch's own fold, to compare your layer with."),
        N_("Per output feature, BatchNorm scales by gamma over the square root of the running variance plus `bn.eps`, then "
        "shifts. Build a new `nn.Linear` with a bias, in the given layer's dtype: its weight is the old one with each row "
        "multiplied by that feature's scale, its bias is the old bias (zeros when there is none) minus the running mean, "
        "times the scale, plus beta. Copy both in under `torch.no_grad()` and leave `linear` and `bn` untouched."),
    ),
}
