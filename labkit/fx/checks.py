"""Checkers for the exercises of notebook 01 (FX profiling).

Each checker takes the learner's function or class, runs it on a small model
of its own, and compares with an independent reference from torch:
``torch.fx``'s ``ShapeProp`` for shapes, ``torch.utils.flop_counter`` for
FLOPs, ``torch.nn.utils.fusion.fuse_linear_bn_eval`` for the folded layer.
They never raise, time nothing, and their messages hold no timings, so a
notebook's stored checker output is reproducible.

Why the learner gets copies: an answer can change what it is given (prune the
graph, set ``bn.eps = 0``), so every reference is computed on the checker's own
private copy, which the answer never sees, and a changed copy is named in the
verdict. Why the cases differ in every way a mistake can hide (groups != stride**2,
a non-square kernel, in_features != out_features, a square Linear, an eps that is
not the default): two different mistakes then give two different numbers, and
each gets its own hint.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import numbers
import random
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import torch
from torch import nn
from torch.fx.passes.shape_prop import ShapeProp
from torch.nn.utils.fusion import fuse_linear_bn_eval
from torch.utils.flop_counter import FlopCounterMode

from labkit.core.checks import (
    CheckFailed,
    CheckResult,
    LearnerError,
    call_learner,
    case_draws,
    expect,
    in_module,
    int_tuple,
    is_plain_tensor,
    learner_case,
    run_check,
    tensor_subclass_hint,
    watching_calls,
)
from labkit.core.notebook import seeded
from labkit.fx.profile import OpTypeBreakdown, ProfileReport
from labkit.fx.runs import RunWatch, WatchedReport, watch_runs
from labkit.i18n.messages import N_, _


class _Hint(NamedTuple):
    """A hint, and the slug that names its mistake on the room's board (``expect(..., mistake=)``)."""

    text: str
    mistake: str


# ------------------------------------------------------------------ exercise 1.1


def _report_type_hint(value: object) -> _Hint:
    """What to say when ``profile_my_model()`` returned something other than a ProfileReport."""
    if value is None:
        return _Hint(_("profile_my_model() returned None: does it end with `return`? Printing or "
                       "displaying the report is not returning it; return the report "
                       "labkit.profile_model(...) gives you."), mistake="returns-none")
    if isinstance(value, str):
        return _Hint(_("profile_my_model() returned a str (a printed table?); return the report object "
                       "labkit.profile_model(...) gives you, not its text."), mistake="returns-text")
    if isinstance(value, nn.Module):
        return _Hint(_("profile_my_model() returned the model (a {type}), not its profile; return what "
                       "labkit.profile_model(model, x, ...) gives you.").format(type=type(value).__name__),
                       mistake="returns-model")
    if isinstance(value, OpTypeBreakdown):
        return _Hint(_("profile_my_model() returned report.by_op_type(), a summary by type; return the "
                       "whole report."),
                     mistake="returns-summary")
    return _Hint(_("profile_my_model() returned {type}; return what labkit.profile_model(...) gives you.").format(
                     type=type(value).__name__),
                 mistake="returns-not-a-report")


def _claimed_runs(report: ProfileReport) -> object:
    """The number of timed runs ``report`` says it has, without trusting it to be a real RunStats."""
    return getattr(getattr(report, "total", None), "count", "?")


def _watched(report: ProfileReport, watch: RunWatch) -> WatchedReport:
    """The record of the profile labkit really made during the call that ``report`` is, unchanged; else fail, saying
    what is off (no profile at all, more runs claimed than were timed, a part of the report, a changed report)."""
    expect(watch.reports, _("profile_my_model() returned a ProfileReport, but labkit timed no runs while "
                            "it ran: the checker watches labkit's profilers and saw none. Profile your "
                            "model inside profile_my_model() and return that report, not one made earlier "
                            "or built by hand."), mistake="report-not-profiled")
    own = sorted(cls.__name__ for cls in watch.profiler_classes if not cls.__module__.startswith("labkit."))
    expect(not own, _("Your code timed its runs with a profiler class of its own ({value}), not labkit's: "
                      "the checker counts only the runs labkit's profilers really time. Profile your model "
                      "with labkit.profile_model(...) and return its report.").format(value=', '.join(own)),
                      mistake="report-not-profiled")
    same_runs = [watched for watched in watch.reports
                 if watched.report.total == report.total and watched.timed_runs <= watch.timed_runs]
    claimed = _claimed_runs(report)
    if not same_runs:
        if isinstance(claimed, int) and claimed > watch.timed_runs:
            raise CheckFailed(_("The report says it has {claimed} timed runs, but labkit really timed only "
                                "{timed_runs} run(s) while profile_my_model() ran: the report was "
                                "relabelled or built by hand. Ask labkit.profile_model for the runs "
                                "(runs=3) and return its report as it is.").format(
                                  claimed=claimed, timed_runs=watch.timed_runs),
                              mistake="relabelled-runs")
        raise CheckFailed(_("The report's timings are not those of any profile labkit ran while "
                            "profile_my_model() ran; return the report labkit.profile_model(...) gave you, "
                            "as it is."), mistake="changed-report")
    for watched in reversed(same_runs):
        if watched.report == report:
            return watched
    original = same_runs[-1].report
    rows = getattr(report, "rows", None)
    if isinstance(rows, list) and len(rows) < len(original.rows) and all(row in original.rows for row in rows):
        raise CheckFailed(_("The report holds {rows_count} of the model's {count} nodes "
                            "(report.top(...)?); return the whole report.").format(
                              rows_count=len(rows), count=len(original.rows)), mistake="returns-top-rows")
    raise CheckFailed(_("The report was changed after labkit.profile_model made it; return it as it is."),
    mistake="changed-report")


def _call_profile(profile_my_model: Callable[[], Any]) -> Any:
    """The learner's report; an attempt to change a frozen report's field (``report.runs = 3``) gets a hint."""
    try:
        return call_learner(profile_my_model)
    except LearnerError as exc:
        if isinstance(exc.original, dataclasses.FrozenInstanceError):
            raise CheckFailed(_("Your code raised FrozenInstanceError: {original}. A ProfileReport cannot "
                                "be changed: its runs are the runs labkit timed. Ask labkit.profile_model "
                                "for them (runs=3) instead.").format(original=exc.original), mistake="assigns-to-report") from exc
        raise


def check_profile_own_model(profile_my_model: Callable[[], Any]) -> CheckResult:
    """Exercise 1.1: ``profile_my_model()`` returns a ProfileReport of a small CNN in eval mode, 3+ timed runs.

    The runs are observed (:func:`labkit.fx.runs.watch_runs`), not read from the
    report: a report relabelled with ``dataclasses.replace`` or built by hand
    does not match any profile labkit made during the call.
    """

    def check() -> str:
        with watch_runs() as watch:
            report = _call_profile(profile_my_model)
        expect(isinstance(report, ProfileReport), *_report_type_hint(report))
        watched = _watched(report, watch)
        runs = watched.timed_runs
        expect(runs == watched.report.runs, _("The report says it has {runs} timed runs, but its profiler "
                                              "really timed {runs2}; return the report "
                                              "labkit.profile_model(...) gave you.").format(
                                                runs=watched.report.runs, runs2=runs),
               mistake="relabelled-runs")
        expect(runs >= 3, _("The report has {runs} timed run(s); pass runs=3 or more.").format(runs=runs), mistake="too-few-runs")
        expect(not watched.training, _("Your model was profiled in train mode (every nn.Module starts in "
                                       "it; BatchNorm and Dropout then do training work); call "
                                       "model.eval() before profiling, as the exercise asks."), mistake="forgot-eval")
        modules = [row for row in watched.report.rows if row.op == "call_module"]
        expect(len(modules) >= 3, _("Your model has {modules_count} layer(s) in the graph; build one with "
                                    "at least 3.").format(modules_count=len(modules)),
               mistake="too-few-layers")
        types = watched.report.by_op_type().pct
        expect("Conv2d" in types, _("No Conv2d in your model (found {types}); add an nn.Conv2d.").format(types=sorted(types)),
        mistake="no-conv2d")
        return _("{count} nodes of {types_count} op types profiled over {runs} runs.").format(
                   count=len(watched.report.rows), types_count=len(types), runs=runs)

    return run_check("1.1", check, profile_my_model)


# ------------------------------------------------------------------ exercise 1.2

Nodes = dict[str, tuple[torch.fx.Node, "nn.Module | None"]]


#: The batch sizes of 1.2's inputs: one of 1 and one drawn above 2, checked in one verdict. A count that forgets the
#: batch is right at 1 and wrong above it; at 2 it would be half the count, which is also what one FLOP per
#: multiply-add gives, so the batch above 1 is at least 3 and the two slips get their own hints.
RECORDER_BATCHES = (1, (3, 5))


def _recorder_case(draws: random.Random) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Exercise 1.2's model and its inputs, sizes drawn for this attempt (channels, input size, batch, features), so
    remembered shapes and counts are no answer. Always: ``conv1`` has a 3x5 kernel (a formula that squares one side
    fails); ``conv2`` has groups=2 and stride=2, so ignoring groups (x2), forgetting the stride (x4) and using the
    input's size give different counts; ``mix`` is a Linear fed a 3-D input (batch, channels, positions), so a count
    right only for 2-D inputs fails; ``fc`` has in_features != out_features; ``bn`` must not be counted. The inputs
    are a batch of 1 and a larger one (:data:`RECORDER_BATCHES`), both judged, so a count that forgets the batch
    fails on every draw. A draw whose slips would give the same count twice is drawn again, so each slip keeps its
    own hint."""
    for _attempt in range(100):
        cin, c1, c2 = draws.randint(1, 4), 2 * draws.randint(2, 6), 2 * draws.randint(3, 8)
        side, pool, mix_out, classes = 2 * draws.randint(5, 10), draws.randint(2, 3), draws.randint(2, 6), draws.randint(2, 10)
        seed = draws.randrange(2**31)
        with seeded(seed):
            model = nn.Sequential(OrderedDict(
                conv1=nn.Conv2d(cin, c1, (3, 5), padding=(1, 2)),
                bn=nn.BatchNorm2d(c1),
                relu1=nn.ReLU(),
                conv2=nn.Conv2d(c1, c2, 3, stride=2, padding=1, groups=2),
                relu2=nn.ReLU(),
                pool=nn.AdaptiveAvgPool2d(pool),
                tokens=nn.Flatten(2),
                mix=nn.Linear(pool * pool, mix_out),
                flatten=nn.Flatten(),
                fc=nn.Linear(c2 * mix_out, classes),
            )).eval()
        one, (low, high) = RECORDER_BATCHES
        generator = torch.Generator().manual_seed(seed)
        inputs = tuple(torch.randn(batch, cin, side, side, generator=generator) for batch in (one, draws.randint(low, high)))
        if all(slips_apart(model, x) for x in inputs) and pool * pool != mix_out and c2 * mix_out != classes:
            return model, inputs
    raise RuntimeError(_("no draw of exercise 1.2's model kept its slips apart in 100 tries"))


def recorder_layers(model: nn.Module, x: torch.Tensor) -> list[tuple[nn.Module, torch.Size, torch.Size]]:
    """(layer, input shape, output shape) of every Conv2d and Linear of ``model`` run on ``x``: on the meta device, where
    only shapes are computed (a draw is judged in milliseconds)."""
    meta = torch.fx.symbolic_trace(copy.deepcopy(model).to("meta"))
    nodes = _recorded_nodes(meta, x.to("meta"))
    layers = dict(model.named_modules())
    return [(layers[str(node.target)], node.args[0].meta["tensor_meta"].shape,  # type: ignore[union-attr]
             node.meta["tensor_meta"].shape)
            for node, layer in nodes.values() if isinstance(layer, (nn.Conv2d, nn.Linear))]


def slips_apart(model: nn.Module, x: torch.Tensor) -> bool:
    """Whether, in every Conv2d and Linear, each slip gives a count of its own: not the right one, not another's."""
    for layer, inputs, outputs in recorder_layers(model, x):
        expected = _counted_flops(layer, torch.zeros(inputs))
        slips = _conv_slips(layer, inputs, outputs) if isinstance(layer, nn.Conv2d) else \
            _linear_slips(cast(nn.Linear, layer), outputs)
        mistakes: dict[int, set[str]] = {}
        for count, hint in slips:
            if count != expected:
                mistakes.setdefault(count, set()).add(hint.mistake)
        if any(len(names) > 1 for names in mistakes.values()):
            return False
    return True


def _counted_flops(layer: nn.Module, inputs: torch.Tensor) -> int:
    """What ``torch.utils.flop_counter`` counts for one call of ``layer``: the independent reference. Counted on the
    meta device (a copy of ``layer`` and an input of ``inputs``' shape): the counter needs shapes only."""
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        copy.deepcopy(layer).to("meta")(torch.empty(inputs.shape, device="meta"))
    return int(counter.get_total_flops())


_PER_MAC = _Hint(N_(" Count 2 FLOPs per multiply-add (a multiplication and an addition), as torch.utils.flop_counter "
                    "does."),
                 mistake="one-flop-per-mac")
_BIAS = _Hint(N_(" Leave the bias out: torch.utils.flop_counter counts the multiply-adds only."), mistake="counts-bias")


def _conv_slips(layer: nn.Conv2d, inputs: torch.Size, outputs: torch.Size) -> list[tuple[int, _Hint]]:
    """(the count a slip gives, the hint naming it) for the usual slips in a Conv2d's FLOPs."""
    (kh, kw), cin, cout, groups = layer.kernel_size, layer.in_channels, layer.out_channels, layer.groups
    out, per_output = math.prod(outputs), cin // groups * kh * kw
    input_positions = outputs[0] * cout * inputs[2] * inputs[3]
    square = _Hint(_(" This kernel is {kh}x{kw}, not square: multiply by kernel height * kernel width, "
                     "both entries of kernel_size.").format(kh=kh, kw=kw), mistake="square-kernel")
    return [
        (out * per_output, _PER_MAC),
        (2 * out * cin * kh * kw, _Hint(_(" This convolution has groups={groups}: each output value sums "
                                          "over in_channels / groups = {value} input channels, not all "
                                          "{cin} of them.").format(groups=groups, value=cin // groups, cin=cin),
                                        mistake="groups")),
        (2 * input_positions * per_output, _Hint(_(" This convolution has stride={stride}: its output is "
                                                   "{outputs}x{outputs2}, smaller than its "
                                                   "{inputs}x{inputs2} input; count the output values, not "
                                                   "the input's positions.").format(
                                                     stride=layer.stride[0], outputs=outputs[2], outputs2=outputs[3],
                                                     inputs=inputs[2], inputs2=inputs[3]),
                                                 mistake="forgets-stride")),
        (2 * math.prod(inputs) * per_output, _Hint(_(" You counted per value of the node's *input* "
                                                     "{inputs}; the multiply-adds are per value of its "
                                                     "output {outputs}.").format(inputs=tuple(inputs), outputs=tuple(outputs)),
                                                   mistake="per-input-value")),
        (2 * out * per_output + out, _BIAS),
        (2 * out * per_output + 2 * out, _BIAS),
        (2 * out * (cin // groups) * kh * kh, square),
        (2 * out * (cin // groups) * kw * kw, square),
        (2 * out * (cin // groups), _Hint(_(" Each output value also sums over the {kh}x{kw} kernel "
                                            "window: multiply by kernel height * kernel width.").format(kh=kh, kw=kw),
                                            mistake="forgets-kernel")),
        (2 * out * (cout // groups) * kh * kw, _Hint(_(" Each output value sums over the *input* channels "
                                                       "of its group: in_channels / groups, not "
                                                       "out_channels / groups."),
                                                     mistake="out-channels")),
        *_batch_slip(2 * out * per_output, outputs),
    ]


def _batch_slip(expected: int, outputs: torch.Size) -> list[tuple[int, _Hint]]:
    """The count of one sample only, and its hint, when the batch has more than one (at 1 it is the right count)."""
    batch = outputs[0]
    if batch == 1:
        return []
    return [(expected // batch, _Hint(_(" This input is a batch of {batch}: the output {outputs} holds {batch} "
                                        "samples, and each sample's output values are multiply-adds too; count "
                                        "every value of the output, the batch dimension included.").format(
                                          batch=batch, outputs=tuple(outputs)),
                                      mistake="forgets-batch"))]


def _linear_slips(layer: nn.Linear, outputs: torch.Size) -> list[tuple[int, _Hint]]:
    """(the count a slip gives, the hint naming it) for the usual slips in a Linear's FLOPs."""
    out, features = math.prod(outputs), layer.in_features
    rows = math.prod(outputs[:-1])
    only_2d = _Hint(_(" This Linear gets a {outputs_count}-D input: it applies to each of its {rows} rows "
                      "(every dimension but the last), so count per output value ({out} of them), not per "
                      "batch entry.").format(outputs_count=len(outputs), rows=rows, out=out),
                    mistake="linear-2d-only")
    return [
        (out * features, _PER_MAC),
        *([(2 * outputs[0] * features * layer.out_features, only_2d)] if len(outputs) > 2 else []),
        (2 * out * features + out, _BIAS),
        (2 * out * features + 2 * out, _BIAS),
        (2 * out * layer.out_features, _Hint(_(" Each output value of a Linear sums over its in_features "
                                               "({features}) inputs, not out_features ({out_features}).").format(
                                                 features=features, out_features=layer.out_features), mistake="out-features")),
        *_batch_slip(2 * out * features, outputs),
    ]


def _flop_hint(layer: nn.Module, got: int, expected: int, inputs: torch.Size, outputs: torch.Size) -> _Hint:
    """The slip that gives exactly ``got``; a pointer to the formula when none of them does."""
    if isinstance(layer, nn.Conv2d):
        slips = _conv_slips(layer, inputs, outputs)
        general = _Hint(_(" Per output value, a Conv2d does (in_channels / groups) * kernel height * "
                          "kernel width multiply-adds."), mistake="conv-formula")
    else:
        slips = _linear_slips(cast(nn.Linear, layer), outputs)
        general = _Hint(_(" Per output value, a Linear does in_features multiply-adds."), mistake="linear-formula")
    return next((hint for count, hint in slips if count == got and count != expected), general)


def _recorded_nodes(graph_module: torch.fx.GraphModule, x: torch.Tensor) -> Nodes:
    """Every node ShapeProp gives a tensor shape, with the module it calls (None when it calls none)."""
    ShapeProp(graph_module).propagate(x)
    return {
        n.name: (n, graph_module.get_submodule(str(n.target)) if n.op == "call_module" else None)
        for n in graph_module.graph.nodes
        if "tensor_meta" in n.meta
    }


def _graph_changes(given: torch.fx.GraphModule, reference: torch.fx.GraphModule) -> list[str]:
    """What differs between the graph module the learner was given and the checker's private copy of it."""
    ours = {n.name: n.format_node() for n in reference.graph.nodes}
    theirs = {n.name: n.format_node() for n in given.graph.nodes}
    changes = [f"{label} {names}" for label, names in (
        ("node(s) removed:", [name for name in ours if name not in theirs]),
        ("node(s) added:", [name for name in theirs if name not in ours]),
        ("node(s) rewired:", [name for name in ours if name in theirs and ours[name] != theirs[name]]),
    ) if names]
    if not changes and list(ours) != list(theirs):
        changes.append(_("the nodes reordered"))
    for name, module in reference.named_modules():
        try:
            now = given.get_submodule(name)
        except AttributeError:
            changes.append(f"module {name!r} removed")
            continue
        if name and (type(now) is not type(module) or str(now) != str(module)):
            changes.append(_("module {name!r} replaced: {module} is now {now}").format(name=name, module=module, now=now))
    return changes


def _expect_graph_unchanged(given: torch.fx.GraphModule, reference: torch.fx.GraphModule) -> None:
    changes = _graph_changes(given, reference)
    expect(not changes, _("Your code changed the graph module it was given ({value}). The checker compares "
                          "with its own copy, which your code never sees: record what the graph does, and "
                          "leave it as it is.").format(value='; '.join(changes)),
           mistake="changes-graph")


def _keyed_by_nodes(table: dict[Any, Any], what: str) -> None:
    expect(not any(isinstance(key, torch.fx.Node) for key in table),
           _("self.{what} is keyed by the Node objects; key it by each node's name, n.name (a str).").format(what=what),
           mistake="keyed-by-node")


def _check_shapes(shapes: object, nodes: Nodes) -> None:
    if not isinstance(shapes, dict):
        raise CheckFailed(_("After run(), self.shapes must be a dict {node name: shape tuple}."), mistake="no-shapes-dict")
    _keyed_by_nodes(shapes, "shapes")
    missing = sorted(set(nodes) - set(shapes))
    expect(not missing, _("No shape recorded for node(s) {missing}; record every node whose output is a "
                          "tensor.").format(missing=missing),
           mistake="missing-shapes")
    for name, (node, _value) in nodes.items():
        got, shape = shapes[name], tuple(node.meta["tensor_meta"].shape)
        said = _("Node {name!r}: you recorded {got!r}, the output shape is {shape}").format(name=name, got=got, shape=shape)
        expect(int_tuple(got) is not None, _("{said}; record a tuple of ints, e.g. tuple(result.shape).").format(said=said),
               mistake="shape-not-a-tuple")
        expect(int_tuple(got) == shape, f"{said}.", mistake="wrong-shape")


def _check_one_count(name: str, got: object, node: torch.fx.Node, layer: nn.Module) -> None:
    """Compare one Conv2d/Linear node's recorded FLOPs with torch's counter, naming the slip when they differ."""
    inputs = node.args[0].meta["tensor_meta"].shape  # type: ignore[union-attr]
    outputs = node.meta["tensor_meta"].shape
    expected = _counted_flops(layer, torch.zeros(inputs))
    if isinstance(got, float) and got == expected:
        raise CheckFailed(_("Node {name!r}: {got!r} is the right count, but a float; record the FLOPs as "
                            "an int (`/` makes a float, `//` keeps an int).").format(name=name, got=got), mistake="float-flops")
    expect(isinstance(got, numbers.Integral) and not isinstance(got, bool),
           _("Node {name!r}: record the FLOPs as an int, got {type} {got!r}.").format(
               name=name, type=type(got).__name__, got=got), mistake="flops-not-an-int")
    counted = int(cast(int, got))
    slip = _flop_hint(layer, counted, expected, inputs, outputs)
    expect(counted == expected, _("Node {name!r} ({layer}): you counted {counted} FLOPs, "
                                  "torch.utils.flop_counter counts {expected}.{text}").format(
                                    name=name, layer=layer, counted=counted, expected=expected, text=_(slip.text)),
                                    mistake=slip.mistake)


def _check_flops(flops: object, nodes: Nodes) -> int:
    """Compare each Conv2d/Linear node's FLOPs with torch's counter; return how many were compared."""
    if not isinstance(flops, dict):
        raise CheckFailed(_("After run(), self.flops must be a dict {node name: FLOPs} for the Conv2d and Linear nodes."),
                          mistake="no-flops-dict")
    _keyed_by_nodes(flops, "flops")
    compared = 0
    for name, (node, layer) in nodes.items():
        got = flops.get(name, 0)
        if not isinstance(layer, (nn.Conv2d, nn.Linear)):
            kind = type(layer).__name__ if layer else node.target
            expect(not got, _("Node {name!r} ({kind}) has {got!r} FLOPs in self.flops; count only "
                              "nn.Conv2d and nn.Linear nodes: torch.utils.flop_counter counts none for "
                              "{kind}.").format(name=name, kind=kind, got=got), mistake="counts-other-layers")
            continue
        expect(name in flops, _("No FLOPs recorded for node {name!r}, a {type}; record every nn.Conv2d and "
                                "nn.Linear node: self.fetch_attr(n.target) is the module a call_module "
                                "node calls.").format(name=name, type=type(layer).__name__),
               mistake="missing-flops")
        _check_one_count(name, got, node, layer)
        compared += 1
    return compared


def _check_one_batch(recorder_class: type, reference: torch.fx.GraphModule, x: torch.Tensor) -> tuple[Nodes, int]:
    """Run a new recorder on a fresh copy of ``reference`` and ``x``; compare its shapes and FLOPs with ShapeProp's and
    torch's counter. Returns the checker's nodes and how many FLOP counts were compared."""
    given = copy.deepcopy(reference)  # the checker's reference is never the learner's, and carries no shapes
    nodes = _recorded_nodes(copy.deepcopy(reference).to("meta"), x.to("meta"))  # shapes only: on the meta device
    recorder = call_learner(recorder_class, given)
    _expect_graph_unchanged(given, reference)
    expect(
        callable(getattr(recorder, "run", None)),
        _("{getattr!s} has no run() method: subclass torch.fx.Interpreter.").format(
            getattr=getattr(recorder_class, '__name__', recorder_class)),
        mistake="not-an-interpreter",
    )
    with torch.no_grad(), watching_calls(in_module(torch.utils.flop_counter)) as counted:
        call_learner(recorder.run, x.clone())
    expect(not counted, _("Your code called torch.utils.flop_counter ({value}), the counter the checker compares "
                          "with: that is torch's answer, not yours. Count each Conv2d's and Linear's "
                          "multiply-adds yourself, from its settings and the shapes of its input and output.").format(
                            value=counted[0] if counted else ""), mistake="calls-torchs-counter")
    _expect_graph_unchanged(given, reference)
    _check_shapes(getattr(recorder, "shapes", None), nodes)
    return nodes, _check_flops(getattr(recorder, "flops", None), nodes)


def check_shape_flop_recorder(recorder_class: type) -> CheckResult:
    """Exercise 1.2: ``recorder_class(graph_module).run(x)`` fills ``.shapes`` like ShapeProp and ``.flops``
    like ``torch.utils.flop_counter``.

    The learner's class gets a deep copy of the traced model; ShapeProp and the
    FLOP counter run on the checker's own copy, and a copy the answer changed
    (nodes erased, a module replaced) is named in the verdict.
    """

    def check() -> str:
        expect(
            isinstance(recorder_class, type),
            _("Pass the class itself (a subclass of torch.fx.Interpreter), e.g. "
              "check_shape_flop_recorder(ShapeFlopRecorder)."),
            mistake="passes-an-instance",
        )
        model, inputs = _recorder_case(case_draws())
        reference = torch.fx.symbolic_trace(model)
        for x in inputs:  # every batch size in one verdict: a count right at one batch only is not right
            nodes, compared = _check_one_batch(recorder_class, reference, x)
        return (_("all {nodes_count} tensor shapes match torch.fx's ShapeProp, and the FLOPs of all "
                  "{compared} Conv2d and Linear nodes match torch.utils.flop_counter.").format(
                    nodes_count=len(nodes), compared=compared))

    return run_check("1.2", check, recorder_class, "run_node")


# ------------------------------------------------------------------ exercise 1.3

#: (what it is, in_features, out_features, bias, eps). The square case comes first: there scaling the columns
#: instead of the rows computes silently and is told by value; eps=1e-3 tells a hard-coded 1e-5 from bn.eps.
FOLD_CASES = (
    (N_("a square Linear (4 in, 4 out) with bias"), 4, 4, True, 1e-3),
    (N_("a Linear with bias (6 in, 4 out)"), 6, 4, True, 1e-5),
    (N_("a Linear without bias (linear.bias is None)"), 6, 4, False, 1e-2),
)
_FLOAT64_TOLERANCE = 1e-9


def _fold_cases() -> list[tuple[str, nn.Linear, nn.BatchNorm1d]]:
    """(what it is, Linear, eval BatchNorm1d) in float64, with running statistics and affine parameters
    far from their defaults, so a fold that skips any of them gives a visibly different layer."""
    cases = []
    with seeded(0), torch.no_grad():
        for label, in_features, out_features, bias, eps in FOLD_CASES:
            linear = nn.Linear(in_features, out_features, bias=bias).double().eval()
            bn = nn.BatchNorm1d(out_features, eps=eps).double().eval()
            mean, variance, gamma, beta = _bn_terms(bn)
            mean.uniform_(-1, 1)
            variance.uniform_(0.05, 0.2)  # small variances: a forgotten eps shows
            gamma.uniform_(0.5, 2)
            beta.uniform_(-1, 1)
            cases.append((_(label), linear, bn))  # named in the learner's language in every verdict
    return cases


def _bn_terms(bn: nn.BatchNorm1d) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(running mean, running variance, gamma, beta) of the checker's BatchNorms, which have all four."""
    return cast(torch.Tensor, bn.running_mean), cast(torch.Tensor, bn.running_var), bn.weight, bn.bias


def _tolerance(dtype: torch.dtype) -> float:
    """Relative tolerance for a folded layer of ``dtype``: exact arithmetic in float64, float32's rounding otherwise."""
    return _FLOAT64_TOLERANCE if dtype == torch.float64 else 64 * torch.finfo(dtype).eps


def _close(got: torch.Tensor, want: torch.Tensor, tolerance: float) -> bool:
    """``got`` equals ``want`` (float64) to ``tolerance``, relative to the largest entry (a bias entry may be near 0)."""
    if got.shape != want.shape:
        return False
    return torch.allclose(got.double(), want, rtol=tolerance, atol=tolerance * float(want.abs().max()))


def _weight_hint(linear: nn.Linear, bn: nn.BatchNorm1d, weight: torch.Tensor, tolerance: float) -> _Hint:
    """Why a folded weight is off, for the usual slips; a pointer to the formula when none of them explains it."""
    _mean, variance, gamma, _beta = _bn_terms(bn)
    by_variance = _Hint(_(" The weights divide by the variance; divide by the standard deviation, "
                          "sqrt(running_var + eps)."),
                        mistake="divides-by-variance")
    rows = [
        (gamma / torch.sqrt(variance), _Hint(_(" The weights miss bn.eps: the scale is gamma / "
                                               "sqrt(running_var + eps)."),
                                             mistake="forgets-eps")),
        (gamma / torch.sqrt(variance + 1e-5), _Hint(_(" The weights use eps = 1e-5, but this BatchNorm has "
                                                      "eps={eps:g}: read it from bn.eps.").format(eps=bn.eps),
                                                      mistake="hard-coded-eps")),
        (gamma / variance, by_variance),
        (gamma / (variance + bn.eps), by_variance),
        (1 / torch.sqrt(variance + bn.eps), _Hint(_(" The weights miss bn.weight (gamma): the scale is "
                                                    "gamma / sqrt(running_var + eps)."), mistake="forgets-gamma")),
    ]
    scale = gamma / torch.sqrt(variance + bn.eps)
    if linear.in_features == linear.out_features and _close(weight, linear.weight * scale, tolerance):
        return _Hint(_(" Each output feature c is a *row* of linear.weight (its shape is (out_features, "
                       "in_features)): scale the rows, not the columns."), mistake="rows-and-columns")
    for wrong_scale, hint in rows:
        if _close(weight, linear.weight * wrong_scale.unsqueeze(1), tolerance):
            return hint
    return _Hint(_(" The folded weight is linear.weight with row c multiplied by s_c = gamma_c / "
                   "sqrt(running_var_c + eps)."),
                 mistake="wrong-weight")


def _bias_hint(linear: nn.Linear, bn: nn.BatchNorm1d, bias: torch.Tensor, tolerance: float) -> _Hint:
    """Why a folded bias is off (the weight is right), for the usual slips; the formula when none of them explains it."""
    mean, variance, gamma, beta = _bn_terms(bn)
    scale = gamma / torch.sqrt(variance + bn.eps)
    own = linear.bias if linear.bias is not None else torch.zeros_like(mean)
    slips = [
        (-mean * scale + beta, _Hint(_(" The Linear's own bias passes through BatchNorm too: the folded "
                                       "bias is (b - running_mean) * s + beta."), mistake="forgets-own-bias")),
        (own * scale + beta, _Hint(_(" The folded bias misses the running mean: (b - running_mean) * s + "
                                     "beta."),
                                   mistake="forgets-mean")),
        ((own - mean) * scale, _Hint(_(" The folded bias misses bn.bias (beta): (b - running_mean) * s + "
                                       "beta."),
                                     mistake="forgets-beta")),
        (own - mean + beta, _Hint(_(" The shift b - running_mean is scaled by s too: (b - running_mean) * "
                                    "s + beta."),
                                  mistake="unscaled-shift")),
    ]
    for wrong, hint in slips[0 if linear.bias is not None else 1:]:
        if _close(bias, wrong, tolerance):
            return hint
    return _Hint(_(" The folded bias is (b_c - running_mean_c) * s_c + beta_c."), mistake="wrong-bias")


def _same(before: object, after: object) -> bool:
    """Equal values of one setting or tensor (a tensor also of the same dtype and shape); never raises."""
    if isinstance(before, torch.Tensor) or isinstance(after, torch.Tensor):
        return (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.dtype == after.dtype
                and before.shape == after.shape and torch.equal(before, after))
    try:
        return type(before) is type(after) and bool(before == after)
    except Exception:  # noqa: BLE001 - an object whose == raises is compared by identity
        return before is after


def _module_changes(given: nn.Module, private: nn.Module, name: str) -> list[str]:
    """What the answer changed on the module it was given, against the checker's untouched copy: settings (``eps``,
    ``momentum``, ``training``...), parameters and buffers, and whether each parameter requires grad."""
    if type(given) is not type(private):
        return [_("{name} is now a {type}").format(name=name, type=type(given).__name__)]
    missing = object()
    settings = sorted(key for key in {*vars(private), *vars(given)} if not key.startswith("_"))
    changes = [_("{name}.{key}: {value!r} is now {value2!r}").format(
                   name=name, key=key, value=vars(private).get(key, missing), value2=vars(given).get(key, missing))
               for key in settings if not _same(vars(private).get(key, missing), vars(given).get(key, missing))]
    ours, theirs = private.state_dict(), given.state_dict()
    changes += [f"{name}.{key}" for key in sorted(ours.keys() | theirs.keys()) if not _same(ours.get(key), theirs.get(key))]
    grads = dict(given.named_parameters())
    changes += [f"{name}.{key}.requires_grad" for key, parameter in private.named_parameters()
                if key in grads and grads[key].requires_grad != parameter.requires_grad]
    return changes


def _expect_unchanged(label: str, given: tuple[nn.Linear, nn.BatchNorm1d], private: tuple[nn.Linear, nn.BatchNorm1d]) -> None:
    linear, bn = _module_changes(given[0], private[0], "linear"), _module_changes(given[1], private[1], "bn")
    which = " and the ".join(kind for kind, changes in (("Linear", linear), ("BatchNorm", bn)) if changes)
    expect(not which, _("For {label}, your code changed the {which} it was given ({value}); build a new "
                        "nn.Linear and leave both as they are. The checker compares with its own copies, "
                        "which your code never sees.").format(label=label, which=which, value='; '.join(linear + bn)),
                        mistake="changes-its-inputs")


def _shape_hint(label: str, linear: nn.Linear, error: BaseException) -> str:
    """The learner's broadcast error, cut to its first line, and what the shapes are: the weight's rows are outputs."""
    first_line = (str(error).strip().splitlines() or [""])[0]
    out_features, in_features = linear.weight.shape
    return (_("On {label}, your code raised {type}: {first_line}. linear.weight has shape (out_features, "
              "in_features) = ({out_features}, {in_features}) and the BatchNorm one value per output "
              "feature ({out_features}): output feature c is row c, so the scale multiplies the rows, and "
              "the folded layer maps in_features to out_features like the Linear it replaces.").format(
                label=label, type=type(error).__name__, first_line=first_line, out_features=out_features,
                in_features=in_features))


#: torch's own fold, the checker's reference: an answer that calls it has not written the fold.
_TORCH_FOLDS = {torch.nn.utils.fusion.fuse_linear_bn_eval.__code__, torch.nn.utils.fusion.fuse_linear_bn_weights.__code__}


def _watching_torch_fold() -> contextlib.AbstractContextManager[list[str]]:
    """Note a call of torch's fuse_linear_bn_eval or fuse_linear_bn_weights inside the block."""
    return watching_calls(_TORCH_FOLDS.__contains__)


def _call_fold(fold_linear_bn: Callable[..., Any], label: str, linear: nn.Linear, bn: nn.BatchNorm1d) -> Any:
    """The learner's fold of ``linear`` and ``bn``; a broadcast error (rows and columns mixed up) gets a hint, and a
    call of torch's own fold, the checker's reference, is refused."""
    try:
        with learner_case(label), _watching_torch_fold() as called:
            folded = call_learner(fold_linear_bn, linear, bn)
    except LearnerError as exc:
        if isinstance(exc.original, RuntimeError) and "must match the size" in str(exc.original):
            raise CheckFailed(_shape_hint(label, linear, exc.original), mistake="rows-and-columns") from exc
        raise
    expect(not called, _("For {label} your code called torch.nn.utils.fusion.{value}, the fold the checker "
                         "compares with: that is torch's answer, not yours. Compute the folded weight and "
                         "bias yourself from linear's and bn's tensors.").format(
                           label=label, value=called[0] if called else ''), mistake="calls-torchs-fold")
    return folded


def _check_fold(label: str, folded: Any, given: nn.Linear, linear: nn.Linear, bn: nn.BatchNorm1d) -> float:
    """Compare the learner's folded layer with torch's fold of the checker's own copies; return the tolerance used."""
    expect(isinstance(folded, nn.Linear) and folded is not given,
           _("For {label} you returned {type}; return one new nn.Linear (not a Sequential, not the Linear "
             "you were given).").format(label=label, type=type(folded).__name__), mistake="not-a-new-linear")
    same_shape_and_bias = (_("For {label} the folded Linear must have the same weight shape {shape} and a "
                             "bias (bias=True): BatchNorm's shift becomes its bias.").format(
                               label=label, shape=tuple(linear.weight.shape)))
    expect(folded.weight.shape == linear.weight.shape, same_shape_and_bias, mistake="wrong-weight-shape")
    expect(folded.bias is not None, same_shape_and_bias, mistake="no-folded-bias")
    for name in ("weight", "bias"):
        value = getattr(folded, name)
        expect(is_plain_tensor(value), tensor_subclass_hint(_("For {label} your folded layer's {name}").format(
                                                                label=label, name=name), value),
               mistake="tensor-subclass")
    dtype = folded.weight.dtype
    expect(dtype in (torch.float32, torch.float64) and folded.bias.dtype == dtype,
           _("For {label} your folded layer is {dtype} (bias {dtype2}); build it in float64, the dtype of "
             "the Linear you were given, or float32.").format(label=label, dtype=dtype, dtype2=folded.bias.dtype),
             mistake="wrong-dtype")
    tolerance = _tolerance(dtype)
    reference = fuse_linear_bn_eval(linear, bn)
    x = torch.randn(5, linear.in_features, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        weight, bias = folded.weight.detach(), folded.bias.detach()
        differs = _("For {label} your folded layer differs from torch.nn.utils.fusion.fuse_linear_bn_eval.").format(
                      label=label)
        if not _close(weight, reference.weight, tolerance):
            slip = _weight_hint(linear, bn, weight, tolerance)
            raise CheckFailed(differs + slip.text, mistake=slip.mistake)
        if not _close(bias, reference.bias, tolerance):
            slip = _bias_hint(linear, bn, bias, tolerance)
            raise CheckFailed(differs + slip.text, mistake=slip.mistake)
        output = call_learner(folded, x.to(dtype))
        expect(not isinstance(output, torch.Tensor) or is_plain_tensor(output),
               tensor_subclass_hint(_("For {label} your folded layer's output").format(label=label), output),
               mistake="tensor-subclass")
        expect(isinstance(output, torch.Tensor) and _close(output, bn(linear(x)), tolerance),
               _("For {label} the folded layer's output differs from bn(linear(x)), although its weight "
                 "and bias are right: return a plain nn.Linear.").format(label=label), mistake="not-a-plain-linear")
    return tolerance


def check_fold_linear_bn(fold_linear_bn: Callable[..., Any]) -> CheckResult:
    """Exercise 1.3: ``fold_linear_bn(linear, bn)`` returns one new ``nn.Linear`` computing ``bn(linear(x))`` in eval mode.

    The learner gets copies of the checker's float64 Linear and BatchNorm; the expected layer is
    ``torch.nn.utils.fusion.fuse_linear_bn_eval`` of the checker's own untouched copies. A float64
    layer must match to 1e-9, a float32 one (``nn.Linear``'s default) to float32's rounding.
    """

    def check() -> str:
        tolerances = []
        for label, linear, bn in _fold_cases():
            given = copy.deepcopy(linear), copy.deepcopy(bn)
            folded = _call_fold(fold_linear_bn, label, *given)
            _expect_unchanged(label, given, (linear, bn))
            tolerances.append(_check_fold(label, folded, given[0], linear, bn))
        done = _("for a Linear with and without bias, your layer equals "
                 "torch.nn.utils.fusion.fuse_linear_bn_eval's")
        if max(tolerances) == _FLOAT64_TOLERANCE:
            return _("{done} and computes bn(linear(x)) to 1e-9.").format(done=done)
        return (_("{done} and computes bn(linear(x)) to float32 precision ({max:.1e}): your layer is "
                  "float32, the Linear you were given float64; build it in linear's dtype to keep float64.").format(
                    done=done, max=max(tolerances)))

    return run_check("1.3", check, fold_linear_bn)
