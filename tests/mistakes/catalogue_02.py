"""Lab 02's mistake catalogue: wrong answers to exercises 2.1, 2.2 and 2.3, written as learners write them.

The cheats are here too, each refused: strides read off ``torch.empty(shape, memory_format=...)`` (2.1); an
answer guessed from the model's layers without running it, one that runs the model outside its mode, and
labkit's FormatTracker used instead of a mode of one's own (2.2); a Parameter subclass that claims to be
channels_last (2.3).
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from labkit.core.checks import Status
from labkit.memory_format import FormatTracker
from labkit.memory_format.checks import check_convert_conv3d, check_find_format_dropper, check_predict_strides
from tests.mistakes import Mistake

CL = torch.channels_last
CL3D = torch.channels_last_3d

# ------------------------------------------------------------------ 2.1: predict strides


def dense_strides(shape, innermost_first):
    strides = [0] * len(shape)
    step = 1
    for dim in innermost_first:
        strides[dim] = step
        step *= shape[dim]
    return tuple(strides)


def channels_inner(rank):
    return [1, *range(rank - 1, 1, -1), 0]


def contiguous_always(shape, memory_format):
    return dense_strides(shape, range(len(shape) - 1, -1, -1))


def compares_with_the_object(shape, memory_format):
    if memory_format == torch.channels_last or memory_format == torch.channels_last_3d:
        return dense_strides(shape, channels_inner(len(shape)))
    return dense_strides(shape, range(len(shape) - 1, -1, -1))


def nhwc_order(shape, memory_format):
    if memory_format == "contiguous_format":
        return contiguous_always(shape, memory_format)
    n, c, *spatial = shape
    return contiguous_always((n, *spatial, c), memory_format)  # the strides of x.permute(0, 2, 3, 1).contiguous()


def only_4d(shape, memory_format):
    n, c, h, w = shape
    if memory_format == "channels_last":
        return (h * w * c, 1, w * c, c)
    return (c * h * w, h * w, w, 1)


def forgets_channels_last_3d(shape, memory_format):
    if memory_format == "channels_last":
        return dense_strides(shape, channels_inner(len(shape)))
    return contiguous_always(shape, memory_format)


def w_before_h(shape, memory_format):
    if memory_format == "contiguous_format":
        return contiguous_always(shape, memory_format)
    return dense_strides(shape, [1, *range(2, len(shape)), 0])  # C innermost, then H, then W


def returns_the_sizes(shape, memory_format):
    return tuple(shape)


def in_bytes(shape, memory_format):
    innermost_first = range(len(shape) - 1, -1, -1) if memory_format == "contiguous_format" else channels_inner(len(shape))
    return tuple(4 * stride for stride in dense_strides(shape, innermost_first))  # float32: 4 bytes an element


def innermost_first_order(shape, memory_format):
    innermost_first = range(len(shape) - 1, -1, -1) if memory_format == "contiguous_format" else channels_inner(len(shape))
    strides = dense_strides(shape, innermost_first)
    return strides[::-1]


def returns_a_list(shape, memory_format):
    innermost_first = range(len(shape) - 1, -1, -1) if memory_format == "contiguous_format" else channels_inner(len(shape))
    return list(dense_strides(shape, innermost_first))


def reads_them_off_a_tensor(shape, memory_format):
    return torch.empty(shape, memory_format=getattr(torch, memory_format)).stride()


def torchs_stride_helpers(shape, memory_format):
    from torch._prims_common import (
        make_channels_last_3d_strides_for,
        make_channels_last_strides_for,
        make_contiguous_strides_for,
    )

    helpers = {"channels_last": make_channels_last_strides_for, "channels_last_3d": make_channels_last_3d_strides_for}
    return helpers.get(memory_format, make_contiguous_strides_for)(shape)


def includes_its_own_size(shape, memory_format):
    return tuple(math.prod(shape[dim:]) for dim in range(len(shape)))  # contiguous only, one dimension too far


def skips_the_next_size(shape, memory_format):
    return tuple(math.prod(shape[dim + 2:]) for dim in range(len(shape)))  # one dimension too short


def product_of_the_sizes_before(shape, memory_format):
    return tuple(math.prod(shape[:dim]) for dim in range(len(shape)))


# ------------------------------------------------------------------ 2.2: find the first format dropper


def is_channels_last(t):
    return isinstance(t, torch.Tensor) and t.dim() == 4 and t.is_contiguous(memory_format=CL) and not t.is_contiguous()


def lost_it(result):
    return isinstance(result, torch.Tensor) and result.dim() == 4 and not result.is_contiguous(memory_format=CL)


class FunctionLogger(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.dropped = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if any(is_channels_last(a) for a in args) and lost_it(result):
            self.dropped.append(func)  # the function, not its name
        return result


class ReprLogger(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if any(is_channels_last(a) for a in args) and lost_it(result):
            self.dropped.append(str(func))
        return result


class NameLogger(FunctionLogger):
    """A right DropLogger: the mistakes below are in how find_format_dropper uses it."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if any(is_channels_last(a) for a in args) and lost_it(result):
            self.dropped.append(func.__name__)
        return result


class NeverCallsFunc(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if any(is_channels_last(a) for a in args):
            self.dropped.append(func.__name__)


class ForgetsKwargs(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args)
        if any(is_channels_last(a) for a in args) and lost_it(result):
            self.dropped.append(func.__name__)
        return result


class KwargsAlwaysADict(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **kwargs)
        if any(is_channels_last(a) for a in args) and lost_it(result):
            self.dropped.append(func.__name__)
        return result


class OutputsOnly(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if lost_it(result):
            self.dropped.append(func.__name__)
        return result


class OutputsOfTensorCalls(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if any(isinstance(a, torch.Tensor) for a in args) and lost_it(result):
            self.dropped.append(func.__name__)
        return result


class FirstArgumentOnly(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if args and is_channels_last(args[0]) and lost_it(result):
            self.dropped.append(func.__name__)
        return result


class ContiguousMeansLost(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if any(is_channels_last(a) for a in args) and isinstance(result, torch.Tensor) and result.is_contiguous():
            self.dropped.append(func.__name__)
        return result


class ComparesStrides(FunctionLogger):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        first = args[0] if args else None
        if is_channels_last(first) and isinstance(result, torch.Tensor) and result.dim() == 4:
            if result.stride() != first.stride():
                self.dropped.append(func.__name__)
        return result


def run_in(logger_class, model, x, convert=True):
    if convert:
        model = model.to(memory_format=CL)
        x = x.to(memory_format=CL)
    with logger_class() as logger, torch.inference_mode():
        model(x)
    return logger.dropped[0] if logger.dropped else None


def records_the_function(model, x):
    return run_in(FunctionLogger, model, x)


def records_the_repr(model, x):
    return run_in(ReprLogger, model, x)


def forgets_to_convert(model, x):
    return run_in(NameLogger, model, x, convert=False)


def never_calls_func(model, x):
    return run_in(NeverCallsFunc, model, x)


def forgets_kwargs(model, x):
    return run_in(ForgetsKwargs, model, x)


def kwargs_always_a_dict(model, x):
    return run_in(KwargsAlwaysADict, model, x)


def outputs_only(model, x):
    return run_in(OutputsOnly, model, x)


def outputs_of_tensor_calls(model, x):
    return run_in(OutputsOfTensorCalls, model, x)


def first_argument_only(model, x):
    return run_in(FirstArgumentOnly, model, x)


def contiguous_means_lost(model, x):
    return run_in(ContiguousMeansLost, model, x)


def compares_strides(model, x):
    return run_in(ComparesStrides, model, x)


def the_last_dropper(model, x):
    model = model.to(memory_format=CL)
    with NameLogger() as logger, torch.inference_mode():
        model(x.to(memory_format=CL))
    return logger.dropped[-1] if logger.dropped else None


def every_dropper(model, x):
    model = model.to(memory_format=CL)
    with NameLogger() as logger, torch.inference_mode():
        model(x.to(memory_format=CL))
    return logger.dropped


def leaves_the_mode_on(model, x):
    model = model.to(memory_format=CL)
    logger = NameLogger()
    logger.__enter__()
    model(x.to(memory_format=CL))
    return logger.dropped[0] if logger.dropped else None


def runs_the_model_after_the_block(model, x):
    model = model.to(memory_format=CL)
    with NameLogger() as logger:
        pass
    model(x.to(memory_format=CL))
    return logger.dropped[0] if logger.dropped else None


def guesses_from_the_layers(model, x):
    for layer in model.modules():
        if isinstance(layer, nn.LayerNorm):
            return "layer_norm"
        if "Softmax" in type(layer).__name__:
            return "softmax"
    return None


def uses_format_tracker(model, x):
    model = model.to(memory_format=CL)
    with FormatTracker() as tracker:
        model(x.to(memory_format=CL))
    dropped = [record.short_name for record in tracker.records if not record.kept]
    return dropped[0] if dropped else None


# ------------------------------------------------------------------ 2.3: convert a model with a Conv3d


def model_to_channels_last(model):
    return model.to(memory_format=torch.channels_last)


def conv3d_converter_with_channels_last(model):
    torch.nn.utils.convert_conv3d_weight_memory_format(model, torch.channels_last)
    torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)
    return model


def swaps_the_formats(model):
    torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last_3d)
    torch.nn.utils.convert_conv3d_weight_memory_format(model, torch.channels_last)
    return model


def only_conv2d(model):
    return torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)


def only_conv3d(model):
    return torch.nn.utils.convert_conv3d_weight_memory_format(model, torch.channels_last_3d)


def assigns_a_plain_tensor(model):
    for layer in model.modules():
        if isinstance(layer, nn.Conv3d):
            layer.weight = layer.weight.to(memory_format=torch.channels_last_3d)
        elif isinstance(layer, nn.Conv2d):
            layer.weight = layer.weight.to(memory_format=torch.channels_last)
    return model


def returns_nothing(model):
    torch.nn.utils.convert_conv3d_weight_memory_format(model, torch.channels_last_3d)
    torch.nn.utils.convert_conv2d_weight_memory_format(model, torch.channels_last)


def converts_a_copy_returns_the_original(model):
    converted = copy.deepcopy(model)
    torch.nn.utils.convert_conv3d_weight_memory_format(converted, torch.channels_last_3d)
    torch.nn.utils.convert_conv2d_weight_memory_format(converted, torch.channels_last)
    return model


def returns_a_converted_copy(model):
    converted = copy.deepcopy(model)
    torch.nn.utils.convert_conv3d_weight_memory_format(converted, torch.channels_last_3d)
    return torch.nn.utils.convert_conv2d_weight_memory_format(converted, torch.channels_last)


def converts_by_rank(model):
    for param in model.parameters():
        if param.dim() == 4:
            param.data = param.data.contiguous(memory_format=torch.channels_last)
        elif param.dim() == 5:
            param.data = param.data.contiguous(memory_format=torch.channels_last_3d)
    return model


class SaysChannelsLast(nn.Parameter):
    def is_contiguous(self, memory_format=torch.contiguous_format):
        return memory_format != torch.contiguous_format


def claims_the_format(model):
    for layer in model.modules():
        if isinstance(layer, (nn.Conv2d, nn.Conv3d)):
            layer.weight = SaysChannelsLast(layer.weight.detach())
    return model


MISTAKES: list[Mistake] = [
    # 2.1
    Mistake("2.1", "contiguous strides for every format", lambda: check_predict_strides(contiguous_always),
            ("in channels_last you predicted", "contiguous strides", "whatever memory_format says", "N, H, W, C"),
            mistake="ignores-the-format"),
    Mistake("2.1", "compares `memory_format` with `torch.channels_last` (it is a string)",
            lambda: check_predict_strides(compares_with_the_object),
            ("passed the object torch.channels_last", "as a string, 'channels_last'"), mistake="compares-with-the-object"),
    Mistake("2.1", "the strides of the permuted NHWC tensor, in NHWC order", lambda: check_predict_strides(nhwc_order),
            ("listed in memory order", "logical dimensions, N, C, H, W", "C's stride comes second"),
            mistake="listed-in-memory-order"),
    Mistake("2.1", "handles only 4-D shapes (`n, c, h, w = shape`)", lambda: check_predict_strides(only_4d),
            ("On the 5-D shape (", "(N, C, D, H, W) in channels_last_3d", "ValueError"), mistake="raised-valueerror"),
    Mistake("2.1", "forgets `channels_last_3d` (contiguous strides for 5-D)",
            lambda: check_predict_strides(forgets_channels_last_3d),
            ("in channels_last_3d you predicted", "contiguous strides", "N, D, H, W, C"), mistake="forgets-channels-last-3d"),
    Mistake("2.1", "C innermost, but W before H", lambda: check_predict_strides(w_before_h),
            ("memory order N, W, H, C", "channels_last is N, H, W, C"), mistake="wrong-memory-order"),
    Mistake("2.1", "calls torch's own stride helpers (`torch._prims_common`)",
            lambda: check_predict_strides(torchs_stride_helpers),
            ("torch._prims_common.make_contiguous_strides_for", "torch's answer, not yours"),
            mistake="calls-torchs-strides"),
    Mistake("2.1", "returns the sizes, not the strides", lambda: check_predict_strides(returns_the_sizes),
            ("the sizes (the shape), not the strides",), mistake="returns-the-sizes"),
    Mistake("2.1", "strides in bytes (times 4 for float32)", lambda: check_predict_strides(in_bytes),
            ("4 times torch's", "elements, not bytes"), mistake="strides-in-bytes"),
    Mistake("2.1", "strides listed innermost first", lambda: check_predict_strides(innermost_first_order),
            ("in reverse", "in the order of the dimensions"), mistake="reversed-order"),
    Mistake("2.1", "each stride the product of the sizes before it, not after it",
            lambda: check_predict_strides(product_of_the_sizes_before),
            ("in contiguous_format you predicted (1, ", "memory order W, H, C, N"), mistake="wrong-memory-order"),
    Mistake("2.1", "off by one: each stride includes its own size", lambda: check_predict_strides(includes_its_own_size),
            ("in contiguous_format you predicted", "off by one dimension"), mistake="off-by-one"),
    Mistake("2.1", "off by one: each stride skips the next dimension's size", lambda: check_predict_strides(skips_the_next_size),
            ("in contiguous_format you predicted", "off by one dimension"), mistake="off-by-one"),
    Mistake("2.1", "returns a list (accepted, with a note)", lambda: check_predict_strides(returns_a_list),
            ("You returned lists", "accepts"), status=Status.SOLVED),
    Mistake("2.1", "cheat: reads the strides off `torch.empty(shape, memory_format=...)`",
            lambda: check_predict_strides(reads_them_off_a_tensor),
            ("read them off a tensor", "called empty", "without creating a tensor"), mistake="reads-strides-off-a-tensor"),
    # 2.2
    Mistake("2.2", "records the function, not its name", lambda: check_find_format_dropper(records_the_function),
            ("returned the function layer_norm itself", "its name as a string"), mistake="returns-the-function"),
    Mistake("2.2", "records `str(func)`", lambda: check_find_format_dropper(records_the_repr),
            ("the function's printed form", "__name__"), mistake="returns-str-of-func"),
    Mistake("2.2", "forgets to convert the model and the input", lambda: check_find_format_dropper(forgets_to_convert),
            ("NCHW input with NCHW weights", "convert the model and the input to channels_last"), mistake="not-converted"),
    Mistake("2.2", "`__torch_function__` never calls `func` (so it returns `None`)",
            lambda: check_find_format_dropper(never_calls_func),
            ("NeverCallsFunc.__torch_function__ returned None", "call func and return func's result"),
            mistake="loses-func-result"),
    Mistake("2.2", "calls `func(*args)`, dropping `kwargs`", lambda: check_find_format_dropper(forgets_kwargs),
            ("On the softmax and layer norm model", "drops the keyword arguments", "alpha=2"), mistake="drops-kwargs"),
    Mistake("2.2", "`func(*args, **kwargs)` when `kwargs` is `None`", lambda: check_find_format_dropper(kwargs_always_a_dict),
            ("kwargs=None", "treat None as no keyword arguments"), mistake="kwargs-none"),
    Mistake("2.2", "looks only at outputs", lambda: check_find_format_dropper(outputs_only),
            ("model with an NCHW bias", "'full'", "no channels_last input", "makes a new tensor"),
            mistake="no-channels-last-input"),
    Mistake("2.2", "looks only at outputs of calls with a tensor input",
            lambda: check_find_format_dropper(outputs_of_tensor_calls),
            ("model with an NCHW gate", "'sigmoid'", "inputs were NCHW all along"), mistake="no-channels-last-input"),
    Mistake("2.2", "checks only the first argument (`args[0]`)", lambda: check_find_format_dropper(first_argument_only),
            ("model with an NCHW bias", "add drops channels_last", "not its first argument"), mistake="first-argument-only"),
    Mistake("2.2", "returns the last dropper instead of the first", lambda: check_find_format_dropper(the_last_dropper),
            ("'layer_norm'", "drops channels_last too, but after 'softmax'", "the first"), mistake="not-the-first-dropper"),
    Mistake("2.2", "tests `result.is_contiguous()` for a lost format", lambda: check_find_format_dropper(contiguous_means_lost),
            ("clean model", "'adaptive_avg_pool2d'", "contiguous and channels_last at once"), mistake="tests-contiguous"),
    Mistake("2.2", "compares the stride tuples of input and result", lambda: check_find_format_dropper(compares_strides),
            ("'conv2d'", "took channels_last and returned channels_last", "kept the format"), mistake="compares-strides"),
    Mistake("2.2", "returns every dropper (a list)", lambda: check_find_format_dropper(every_dropper),
            ("returned a list", "only the first name"), mistake="returns-a-list"),
    Mistake("2.2", "leaves the mode on (`__enter__` without `__exit__`)", lambda: check_find_format_dropper(leaves_the_mode_on),
            ("left its NameLogger on torch's mode stack", "the checker took it off", "`with` block"),
            mistake="leaves-the-mode-on"),
    Mistake("2.2", "runs the model after the `with` block", lambda: check_find_format_dropper(runs_the_model_after_the_block),
            ("ran the model outside any TorchFunctionMode of yours",), mistake="runs-outside-the-mode"),
    Mistake("2.2", "cheat: names the operator from the model's layers, without running it",
            lambda: check_find_format_dropper(guesses_from_the_layers), ("without running the model",),
            mistake="does-not-run-the-model"),
    Mistake("2.2", "cheat: labkit's `FormatTracker` instead of a mode of one's own",
            lambda: check_find_format_dropper(uses_format_tracker), ("labkit's FormatTracker", "of your own"),
            mistake="uses-format-tracker"),
    # 2.3
    Mistake("2.3", "`model.to(memory_format=torch.channels_last)`", lambda: check_convert_conv3d(model_to_channels_last),
            ("required rank 4 tensor", "5-D weight cannot take it", "(frames) were converted", "half converted",
             "channels_last_3d"), mistake="model-to-channels-last"),
    Mistake("2.3", "the Conv3d converter with `torch.channels_last`",
            lambda: check_convert_conv3d(conv3d_converter_with_channels_last),
            ("torch.channels_last on a 5-D tensor", "5-D ones take torch.channels_last_3d"), mistake="channels-last-on-5d"),
    Mistake("2.3", "swaps the two formats", lambda: check_convert_conv3d(swaps_the_formats),
            ("torch.channels_last_3d on a 4-D tensor", "4-D ones take torch.channels_last"), mistake="channels-last-3d-on-4d"),
    Mistake("2.3", "converts only the Conv2d weights", lambda: check_convert_conv3d(only_conv2d),
            ("Conv3d weight (temporal) is not channels_last_3d",), mistake="conv3d-not-converted"),
    Mistake("2.3", "converts only the Conv3d weights", lambda: check_convert_conv3d(only_conv3d),
            ("Conv2d weight of frames and spatial is not channels_last",), mistake="conv2d-not-converted"),
    Mistake("2.3", "`layer.weight = layer.weight.to(memory_format=...)`", lambda: check_convert_conv3d(assigns_a_plain_tensor),
            ("cannot assign", "must stay an nn.Parameter"), mistake="assigns-a-plain-tensor"),
    Mistake("2.3", "converts in place but returns nothing", lambda: check_convert_conv3d(returns_nothing),
            ("returned None", "return it"), mistake="returns-none"),
    Mistake("2.3", "converts a copy, returns the original", lambda: check_convert_conv3d(converts_a_copy_returns_the_original),
            ("no weight converted", "converted a copy", "returned the original"), mistake="converts-a-copy"),
    Mistake("2.3", "returns a converted copy", lambda: check_convert_conv3d(returns_a_converted_copy),
            ("returned a different model", "in place"), mistake="returns-another-object"),
    Mistake("2.3", "converts every 4-D and 5-D parameter", lambda: check_convert_conv3d(converts_by_rank),
            ("position is not a convolution's weight", "not every 4-D or 5-D tensor"), mistake="converts-by-rank"),
    Mistake("2.3", "cheat: a Parameter subclass that says it is channels_last", lambda: check_convert_conv3d(claims_the_format),
            ("SaysChannelsLast", "torch's own nn.Parameter"), mistake="parameter-subclass"),
]
