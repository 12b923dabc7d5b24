"""Cross-check labkit's per-node timings against ``torch.profiler``.

Why: a profiler that times itself could be fooling itself (the interpreter's
overhead is the cautionary tale). ``torch.profiler`` watches the same forward
passes independently, with its own clock, at the level of aten operators. If
the two split the time between op types alike, the FX numbers are honest.

**Names.** torch.profiler names top-level aten operators (``aten::conv2d``,
``aten::hardswish_``); labkit names op types (a torch.nn class such as ``Conv2d``,
a function or method name such as ``cat`` or ``relu``). :data:`ATEN_TO_OP_TYPES`
lists, per operator, every op type whose node issues it, in-place variants
included. The aten name alone cannot always tell them apart: ``aten::batch_norm``
serves BatchNorm1d, BatchNorm2d and BatchNorm3d, ``aten::relu_`` serves ``nn.ReLU``
and ``F.relu``. Input ranks (``record_shapes``) would separate the BatchNorms but
cost the profiler work on every operator of the runs being measured, and still
cannot tell ``nn.ReLU`` from ``F.relu``. So an operator is matched against the op
types this model's labkit report actually has: one candidate present, it is that
type; several (densenet121 has ``ReLU`` modules and one ``F.relu``), they share
one row, ``ReLU + relu``, because the profiler cannot split them.

**Time.** labkit times a node from the stamp before it to the stamp after it:
the Python that calls the operator (module ``__call__``, a functional's argument
checks) *and* the operator. An aten operator's own CPU time leaves that Python
out, and at small sizes the Python is a large part: on resnet18 at 64 px about
half of a BatchNorm2d node's time is outside ``aten::batch_norm``, and operator
time alone puts Conv2d's share several points above labkit's. So on
the CPU the profiler side is wall time too (``basis="wall"``): each top-level
operator is charged from the end of the operator before it, in the same run, to
its own end, which is the Python that led to it, as labkit charges a node with
the Python before its operator. The first operator of a run gets only its own
duration. On CUDA the profiler side is each operator's kernel time
(``basis="kernel"``); labkit's node time there also holds the launch and its
per-node synchronize, so small operators look larger in labkit. On another
accelerator (MPS) torch.profiler sees only the CPU side (``basis="operator"``).
On both sides a type's time is taken run by run (the sum of its nodes, or of its
operators, in that run), then the median over the runs: one disturbed run moves
neither side, and both are the same statistic of the same runs.

**Rows.** Only op types both instruments name are compared: :attr:`CrossCheck.rows`.
Their shares are renormalised over the matched types on each side, so time one
instrument cannot see (a Python-only node like ``getattr``; an operator no node
type of this model issues) does not shift every other row. The unmatched types
keep their share of that side's whole time, in :attr:`CrossCheck.only_labkit` and
:attr:`CrossCheck.only_profiler`, listed under the table, outside
:attr:`CrossCheck.max_difference`.

**Every capture.** The cross-check profiles the model as :func:`~labkit.fx.profile.profile_model`
would with the same options (``mode``, ``capture``, ``concrete_args``, ``leaf_modules``,
``tracer``, ``fallback``, keyword inputs in ``kwargs``), then matches what that profile
has (:attr:`CrossCheck.capture`):

- ``"symbolic_trace"``: op types are torch.nn classes and function names, matched
  through :data:`ATEN_TO_OP_TYPES` as described above;
- ``"export"``: every node is one ATen operator, ``aten.linear``, which is
  torch.profiler's ``aten::linear``: matched by name, no table (parameter reads,
  ``get_attr``, and ``getitem`` of a tuple issue none);
- ``"hooks"`` (``mode="modules"``, or a fallback to it): op types are the hooked
  modules' classes, matched through the same table as a traced ``call_module``,
  and through what the labelled run below saw: a block timed as a unit
  (``BertSelfAttention``) and the "(outside leaf modules)" row issue operators no
  table lists.

**Operators no table lists.** After the timed runs, one more run (untimed) wraps each
node, or each hooked module, in a ``record_function`` label naming its op type
(:func:`issued_operators`), and records which top-level operators each op type
issued: an ``LSTM``'s ``aten::lstm``, a dynamically quantized ``Linear``'s
``quantized::linear_dynamic``, an ``EmbeddingBag``'s ``aten::embedding_bag``, a
parametrized layer's parametrization and ``aten::linear``, an attention block timed
whole (its ``aten::matmul``, ``aten::softmax``...), and, in a hooked profile, the
operators of the model's own code between hooked modules, which are the
``(outside leaf modules)`` row's. Those pairs match like the table's.

**How much was compared, and the verdict.** :attr:`CrossCheck.compared_pct` is the share
of each side's time that the rows cover. labkit's op types that issue operators but
matched none are :attr:`CrossCheck.unmapped`. Nodes that issue no operator at all
(:data:`NO_OPERATOR_TYPES`: ``getattr``, ``getitem``) have nothing to be compared with;
they are listed, and a verdict is on the rest (:attr:`CrossCheck.operator_compared_pct`).
An exported graph's parameter reads (``get_attr`` nodes, most of a small model's labkit
time on a loaded CPU) are the run's bookkeeping, like the time between nodes: they are
left out of labkit's side, not listed as an op type.
Shares renormalised over a small compared part can agree closely and say nothing about
the rest, so a verdict (:attr:`CrossCheck.max_difference`, :meth:`CrossCheck.agrees`,
:meth:`CrossCheck.verdict`) needs :data:`MIN_COMPARED_PCT` (90 %) of labkit's operator
time *and* of torch.profiler's time compared; below that :attr:`~CrossCheck.max_difference`
raises :class:`TooLittleComparedError`, and the rows and :meth:`CrossCheck.difference`
stay readable. Why 90 %: on a CPU the differences a cross-check finds are a point or two
per type (traced resnet18, mobilenet_v3_small, densenet121, convnext_tiny and the
exported small transformers: at most about 1.5), so an uncompared tenth is already
larger than what the check looks for. Those models compare 99-100 % of both sides, and so, with the labelled run, do
LSTM, GRU, quantized and hooked models (before it: 10-35 %).

**What still differs, and why.**

- Where the boundary between two nodes sits. labkit's is its stamp, after the
  node's Python has returned and released the tensors it was the last user of;
  on the wall basis it is the end of the operator, so that return path counts
  for the next operator. At small sizes this moves a point or two between
  neighbours (Conv2d to the BatchNorm2d after it). Only operators inside a run's
  marker count, and the first one gets no Python before it: the run loop's own
  time is on neither side.
- A node that issues no operator (``getattr``, torchvision's ``stochastic_depth``
  in eval mode, ``Identity``) is labkit-only; on the wall basis its Python time
  lands in the next operator's share.
- A node that issues several top-level operators is counted under their names on
  the profiler side: torchvision's ``shifted_window_attention`` (an fx-wrapped
  function, one node) issues ``aten::linear``, ``aten::matmul``, ``aten::softmax``...;
  ``x[0::2, 1::2]`` issues two ``aten::slice``. The ``calls`` column (nodes per run
  in labkit / top-level operators per run in torch.profiler) shows where that
  happens (:attr:`CrossCheck.calls_differ`, named under the table): such a row is
  not a like-for-like comparison.
- torch.profiler records every operator and each of its children, at a cost per
  event. Both sides time the same profiled runs, so the cost is in both; but it
  weighs more on operators with deep call trees (``aten::conv2d`` calls
  ``aten::convolution``, which calls ``aten::_convolution``...) than it does in
  an unprofiled run.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import html
import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.fx

from labkit.core.copies import fresh_inputs
from labkit.core.errors import LabkitValueError
from labkit.core.noise import filtered_native_stderr, silence_known_warnings
from labkit.core.tables import ShowsAsTable, Table
from labkit.core.untouched import left_as_found
from labkit.fx.model_inputs import keyword_inputs
from labkit.fx.module_hooks import OUTSIDE, ModuleProfiler
from labkit.fx.profile import make_profiler, require_count
from labkit.fx.report import ProfileReport
from labkit.fx.runs import run_series
from labkit.fx.trace_beside import clock_offset_ns
from labkit.fx.tracing import LeafModules
from labkit.i18n.messages import N_, _

# (aten operators without "aten::", the labkit op types whose nodes issue them: torch.nn classes first, then
# function and method names as fx records them: x + y and x += y -> "add", torch.cat -> "cat", x.add_(y) -> "add_").
_OPERATORS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("conv1d",), ("Conv1d", "conv1d")),
    (("conv2d",), ("Conv2d", "conv2d")),
    (("conv3d",), ("Conv3d", "conv3d")),
    (("conv_transpose1d",), ("ConvTranspose1d", "conv_transpose1d")),
    (("conv_transpose2d",), ("ConvTranspose2d", "conv_transpose2d")),
    (("conv_transpose3d",), ("ConvTranspose3d", "conv_transpose3d")),
    (("batch_norm",), ("BatchNorm2d", "BatchNorm1d", "BatchNorm3d", "SyncBatchNorm", "batch_norm")),
    (("instance_norm",), ("InstanceNorm2d", "InstanceNorm1d", "InstanceNorm3d", "instance_norm")),
    (("layer_norm",), ("LayerNorm", "layer_norm")),
    (("group_norm",), ("GroupNorm", "group_norm")),
    (("rms_norm",), ("RMSNorm", "rms_norm")),
    # nn.Linear issues aten::linear; aten::addmm / aten::matmul run below it and are top level only when called as such.
    (("linear",), ("Linear", "NonDynamicallyQuantizableLinear", "linear")),
    (("addmm",), ("addmm",)),
    (("matmul",), ("matmul",)),
    (("bmm",), ("bmm",)),
    (("einsum",), ("einsum",)),
    (("scaled_dot_product_attention",), ("scaled_dot_product_attention",)),
    # nn.MultiheadAttention's fast path (eval, no grad, batch_first); off it, it issues linear, view, ... at top level.
    (("_native_multi_head_attention",), ("MultiheadAttention",)),
    (("_transformer_encoder_layer_fwd",), ("TransformerEncoderLayer",)),
    (("relu", "relu_"), ("ReLU", "relu", "relu_")),
    # nn.ReLU6 is a Hardtanh: it issues aten::hardtanh(_); F.relu6 issues aten::relu6(_).
    (("hardtanh", "hardtanh_"), ("Hardtanh", "ReLU6", "hardtanh", "hardtanh_")),
    (("relu6", "relu6_"), ("relu6",)),
    (("leaky_relu", "leaky_relu_"), ("LeakyReLU", "leaky_relu", "leaky_relu_")),
    (("elu", "elu_"), ("ELU", "elu", "elu_")),
    (("prelu",), ("PReLU", "prelu")),
    (("gelu", "gelu_"), ("GELU", "gelu")),
    (("silu", "silu_"), ("SiLU", "silu")),
    (("mish", "mish_"), ("Mish", "mish")),
    (("hardswish", "hardswish_"), ("Hardswish", "hardswish")),
    (("hardsigmoid", "hardsigmoid_"), ("Hardsigmoid", "hardsigmoid")),
    (("sigmoid", "sigmoid_"), ("Sigmoid", "sigmoid", "sigmoid_")),
    (("tanh", "tanh_"), ("Tanh", "tanh", "tanh_")),
    (("softmax",), ("Softmax", "softmax")),
    (("log_softmax",), ("LogSoftmax", "log_softmax")),
    (("dropout", "dropout_"), ("Dropout", "dropout")),
    (("feature_dropout", "feature_dropout_"), ("Dropout2d", "Dropout1d", "Dropout3d", "dropout2d", "dropout1d", "dropout3d")),
    (("max_pool1d",), ("MaxPool1d", "max_pool1d")),
    (("max_pool2d", "max_pool2d_with_indices"), ("MaxPool2d", "max_pool2d")),
    (("max_pool3d", "max_pool3d_with_indices"), ("MaxPool3d", "max_pool3d")),
    (("avg_pool1d",), ("AvgPool1d", "avg_pool1d")),
    (("avg_pool2d",), ("AvgPool2d", "avg_pool2d")),
    (("avg_pool3d",), ("AvgPool3d", "avg_pool3d")),
    (("adaptive_avg_pool1d",), ("AdaptiveAvgPool1d", "adaptive_avg_pool1d")),
    (("adaptive_avg_pool2d",), ("AdaptiveAvgPool2d", "adaptive_avg_pool2d")),
    (("adaptive_avg_pool3d",), ("AdaptiveAvgPool3d", "adaptive_avg_pool3d")),
    (("adaptive_max_pool2d",), ("AdaptiveMaxPool2d", "adaptive_max_pool2d")),
    (("upsample_nearest2d", "upsample_bilinear2d"), ("Upsample", "interpolate")),
    (("embedding",), ("Embedding", "embedding")),
    (("add", "add_"), ("add", "add_")),
    (("sub", "sub_", "rsub"), ("sub", "sub_", "rsub")),
    (("mul", "mul_"), ("mul", "mul_")),
    (("div", "div_"), ("truediv", "div", "div_")),
    (("cat", "concat", "concatenate"), ("cat", "concat", "concatenate")),
    (("stack",), ("stack",)),
    (("flatten",), ("flatten", "Flatten")),
    (("view",), ("view",)),
    (("reshape",), ("reshape",)),
    (("permute",), ("permute",)),
    (("transpose", "transpose_"), ("transpose",)),
    (("swapaxes", "swapdims"), ("swapaxes", "swapdims")),
    (("contiguous",), ("contiguous",)),
    (("unsqueeze",), ("unsqueeze",)),
    (("squeeze",), ("squeeze",)),
    (("expand",), ("expand",)),
    (("chunk",), ("chunk",)),
    (("split",), ("split",)),
    (("unbind",), ("unbind",)),
    (("select", "slice", "index"), ("getitem",)),
    (("mean",), ("mean",)),
    (("sum",), ("sum",)),
    (("pad",), ("pad",)),
    (("roll",), ("roll",)),
    (("clone",), ("clone",)),
)

#: Top-level aten operator -> every labkit op type whose node issues it (torch.nn classes first).
ATEN_TO_OP_TYPES: dict[str, tuple[str, ...]] = {f"aten::{op}": types for ops, types in _OPERATORS for op in ops}
#: Top-level aten operator -> the op type labkit reports for a torch.nn layer (or function) that issues it.
ATEN_TO_OP_TYPE: dict[str, str] = {op: types[0] for op, types in ATEN_TO_OP_TYPES.items()}

#: The ``record_function`` label around each profiled run: the operators directly inside it are its top level.
RUN_MARKER = "labkit.crosscheck.run"
#: A verdict needs at least this percent of each side's time compared (see the module docstring).
MIN_COMPARED_PCT = 90.0
#: The largest difference, in percentage points, :meth:`CrossCheck.agrees` accepts by default.
AGREEMENT_POINTS = 5.0
#: Op types whose nodes issue no operator (a parameter read, ``x.shape``, a tuple's item): nothing to compare them
#: with, so a verdict is on the rest of labkit's time. Not "(outside leaf modules)": that code issues operators.
NO_OPERATOR_TYPES = frozenset({"getattr", "get_attr", "getitem", "size", "dim", "Identity"})


class TooLittleComparedError(LabkitValueError):
    """A cross-check compared less than :data:`MIN_COMPARED_PCT` of one side's time, so it gives no verdict."""


#: The prefix of the ``record_function`` label around each node (or hooked module) in the labelled pass.
NODE_LABEL = "labkit.crosscheck.node:"
#: Top-level operator -> the labkit op types seen issuing it in a labelled pass (:func:`issued_operators`).
Issued = Mapping[str, frozenset[str]]


def _candidates(operator: str, capture: str, issued: Issued | None = None) -> tuple[str, ...]:
    """The labkit op types a top-level operator can come from: an exported graph's own spelling, else the table,
    then the op types a labelled pass saw issue it (an ``LSTM``'s ``aten::lstm``, a block's ``aten::softmax``)."""
    if capture == "export":
        namespace, _, name = operator.partition("::")
        known: tuple[str, ...] = (f"{namespace}.{name}",)
    else:
        known = ATEN_TO_OP_TYPES.get(operator, ())
    seen = sorted((issued or {}).get(operator, frozenset()) - set(known))
    return known + tuple(seen)


@dataclass(frozen=True, repr=False)
class CrossCheck(ShowsAsTable):
    """Shares of the forward time per op type (percent), labkit and torch.profiler side by side.

    ``rows`` holds the op types both name, as shares of the matched types' time on
    each side; ``only_labkit`` / ``only_profiler`` the rest, as shares of that
    side's whole time; ``calls`` per row (nodes per run in labkit, top-level
    operators per run in torch.profiler); ``capture`` and ``mode`` those of labkit's
    profile. A verdict needs :data:`MIN_COMPARED_PCT` of each side compared. See the
    module docstring for why.
    """

    rows: list[tuple[str, float, float]]  # (op_type, labkit_pct, profiler_pct), largest labkit share first
    only_labkit: dict[str, float] = field(default_factory=dict)
    only_profiler: dict[str, float] = field(default_factory=dict)
    calls: dict[str, tuple[int, float]] = field(default_factory=dict)
    basis: str = "wall"
    capture: str = "symbolic_trace"  # what labkit's profile was captured by: symbolic_trace, export or hooks
    mode: str = "fast"
    #: The runs both instruments watched, kept for :meth:`to_trace`: labkit's report (its timeline), torch.profiler's
    #: profile of the same window (in memory: exported only when a trace is asked for), and the offset between
    #: their clocks (:mod:`labkit.fx.trace_beside`).
    report: ProfileReport | None = field(default=None, compare=False)
    torch_profile: Any = field(default=None, compare=False)
    clock_offset_ns: int = field(default=0, compare=False)

    @functools.cached_property
    def torch_trace(self) -> dict[str, Any] | None:
        """torch.profiler's own ``export_chrome_trace`` of the timed runs, as a dict; None when none was kept.

        Why lazy: exporting writes and parses a file of every operator event, a
        cost no cross-check that only wants its table should pay. Read once, kept.
        """
        if self.torch_profile is None:
            return None
        from labkit.fx.trace_beside import exported_trace

        with filtered_native_stderr():
            return exported_trace(self.torch_profile)

    def to_trace(self, path: str | Path) -> Path:
        """One trace-event file: labkit's run, module and node slices above torch.profiler's operators, one clock.

        Each top-level operator names its labkit node in ``args``; how the clocks
        are aligned and within what: :mod:`labkit.fx.trace_beside`. Returns the path.
        """
        from labkit.fx.trace_beside import write_combined

        model = self.report.model if self.report is not None else ""
        return write_combined(self.report, self.torch_trace, self.clock_offset_ns, path, model_name=model)

    @property
    def labkit_pct(self) -> dict[str, float]:
        return {t: a for t, a, _ in self.rows}

    @property
    def profiler_pct(self) -> dict[str, float]:
        return {t: b for t, _, b in self.rows}

    @property
    def compared_pct(self) -> tuple[float, float]:
        """How much of each side's time (labkit, torch.profiler) the rows cover, in percent."""
        return 100 - sum(self.only_labkit.values()), 100 - sum(self.only_profiler.values())

    @property
    def no_operator_pct(self) -> float:
        """Percent of labkit's time in nodes that issue no operator (:data:`NO_OPERATOR_TYPES`: parameter reads...)."""
        return sum(pct for t, pct in self.only_labkit.items() if t in NO_OPERATOR_TYPES)

    @property
    def operator_compared_pct(self) -> float:
        """labkit's compared share of its time in nodes that issue operators, in percent: what a verdict needs.

        Why not of all its time: an exported graph reads each parameter in a node
        of its own (``get_attr``), 5-20 % of a small transformer's time, which no
        profiler can see; that part is listed, not compared.
        """
        rest = 100 - self.no_operator_pct
        return self.compared_pct[0] / rest * 100 if rest > 0 else 0.0

    @property
    def comparable(self) -> bool:
        """Whether the rows cover enough for a verdict: :data:`MIN_COMPARED_PCT` of labkit's operator time
        (:attr:`operator_compared_pct`) and of torch.profiler's time."""
        return bool(self.rows) and min(self.operator_compared_pct, self.compared_pct[1]) >= MIN_COMPARED_PCT

    @property
    def unmapped(self) -> dict[str, float]:
        """labkit's op types that issue operators but matched none, in percent of labkit's time.

        ``LSTM`` and ``GRU`` (no table entry), a dynamically quantized ``Linear``
        (it issues ``quantized::linear_dynamic``, not ``aten::linear``), a hooked
        ``BertSelfAttention`` (many operators, none its own). The other labkit-only
        types issue no operator (:data:`NO_OPERATOR_TYPES`) or are no op type at all
        ("(outside leaf modules)").
        """
        return {t: pct for t, pct in self.only_labkit.items() if t not in NO_OPERATOR_TYPES and t != OUTSIDE}

    @property
    def calls_differ(self) -> list[str]:
        """Rows whose labkit node count differs from torch.profiler's operator count per run.

        Such a row is not like for like: a node of another type issues some of its
        operators (swin_t's ``shifted_window_attention`` issues ``aten::linear``), one
        node issues several (``x[0::2, 1::2]``: two ``aten::slice``), or none (``getitem``
        on a tuple).
        """
        return [name for name, (nodes, operators) in self.calls.items() if abs(nodes - operators) > 1e-9]

    def difference(self, op_type: str) -> float:
        """Absolute difference of the two shares, in percentage points.

        ``op_type`` is a row's name or one type of a merged row (``"ReLU"`` finds ``"ReLU + relu"``).
        """
        for name, a, b in self.rows:
            if op_type == name or op_type in name.split(" + "):
                return abs(a - b)
        for side, other, unmatched in (("labkit", "torch.profiler", self.only_labkit),
                                       ("torch.profiler", "labkit", self.only_profiler)):
            if op_type in unmatched:
                raise LabkitValueError(
                    f"{op_type!r} is only in {side}'s profile ({unmatched[op_type]:.1f}% of its time): {other} has "
                    f"no op type to compare it with. Compared: {[r[0] for r in self.rows]}."
                )
        raise LabkitValueError(f"No op type {op_type!r} in this cross-check; known: {[r[0] for r in self.rows]}.")

    @property
    def max_difference(self) -> float:
        """Largest disagreement over the op types both instruments name, in percentage points: the verdict's number.

        Raises :class:`TooLittleComparedError` when the rows cover less than
        :data:`MIN_COMPARED_PCT` of labkit's operator time or of torch.profiler's
        time (:attr:`comparable`): a small difference over a small share is no
        agreement. :meth:`difference` still gives each row's.
        """
        if not self.rows:
            raise LabkitValueError(
                "This cross-check has no op types that both labkit and torch.profiler name, so there is no "
                f"difference to take (labkit only: {_listed(self.only_labkit)}; torch.profiler only: "
                f"{_listed(self.only_profiler)}). Build it with compare_with_torch_profiler(model, x) on a model "
                "that runs at least one aten operator."
            )
        if not self.comparable:
            raise TooLittleComparedError(f"{self._too_little()} {self._what_to_do()}")
        return max(abs(a - b) for _, a, b in self.rows)

    def agrees(self, points: float = AGREEMENT_POINTS) -> bool:
        """Whether every compared op type's shares are within ``points`` percentage points (a verdict: see max_difference)."""
        return self.max_difference <= points

    def _largest(self) -> tuple[str, float]:
        name, a, b = max(self.rows, key=lambda row: abs(row[1] - row[2]))  # a tie: the larger share
        return name, abs(a - b)

    def _compared_words(self) -> str:
        labkit, profiler = self.compared_pct
        words = {"labkit": f"{labkit:.1f}%", "profiler": f"{profiler:.1f}%",
                 "operators": f"{self.operator_compared_pct:.1f}%"}
        if self.no_operator_pct >= 0.05:
            return _("{labkit} of labkit's time ({operators} of its time in nodes that issue operators) and "
                     "{profiler} of torch.profiler's").format(**words)
        return _("{labkit} of labkit's time and {profiler} of torch.profiler's").format(**words)

    def _too_little(self) -> str:
        return _(
            "Compared only {compared}; a verdict needs {needed} of each, because "
            "shares that agree over a small part say nothing about the rest."
        ).format(compared=self._compared_words(), needed=f"{MIN_COMPARED_PCT:.0f}%")

    def _what_to_do(self) -> str:
        unmapped = " " + _("Not mapped to operators: {names}.").format(names=_listed(self.unmapped)) if self.unmapped else ""
        if self.capture == "hooks":
            hint = _("A hooked profile times modules, and its blocks and its outside row issue operators no table maps: "
                     "for a verdict, cross-check a graph of the model (capture='export', or a part of it that traces).")
        elif self.capture == "symbolic_trace":
            hint = _("For a verdict, cross-check with capture='export' (each node is one ATen operator, matched by "
                     "name), or a part of the model whose op types map to operators.")
        else:
            hint = _("For a verdict, cross-check a part of the model whose operators labkit's graph names.")
        remain = _("The rows and difference(op_type) remain, for the part that was compared.")
        return f"{hint}{unmapped} {remain}"

    def verdict(self) -> str:
        """One sentence: how much was compared, and whether the shares agree within :data:`AGREEMENT_POINTS`."""
        if not self.rows:
            return _("No verdict: no op type is named by both labkit and torch.profiler.")
        if not self.comparable:
            return _("No verdict.") + " " + self._too_little()
        name, points = self._largest()
        words = {"compared": self._compared_words(), "points": f"{AGREEMENT_POINTS:g}", "largest": f"{points:.1f}",
                 "name": name}
        if points <= AGREEMENT_POINTS:
            return _("Compared {compared}: the shares agree within {points} points "
                     "(largest difference {largest}, {name}).").format(**words)
        return _("Compared {compared}: the shares do not agree within {points} points "
                 "(largest difference {largest}, {name}).").format(**words)

    def table(self) -> Table:
        headers = [_("op type"), _("labkit %"), _("torch.profiler %"), _("difference (points)")]
        rows = [[t, f"{a:.1f}", f"{b:.1f}", f"{abs(a - b):.1f}"] for t, a, b in self.rows]
        if self.calls:
            headers.append(_("calls (labkit / profiler)"))
            for row in rows:
                nodes, operators = self.calls.get(row[0], (0, 0.0))
                row.append(f"{nodes} / {operators:g}")
        title = _("Share of forward time per op type (labkit: {capture}, mode {mode}; torch.profiler: {basis})").format(
            capture=self.capture, mode=self.mode, basis=_(_BASIS_WORDS[self.basis]))
        return Table(headers, rows, title=title)

    def note(self) -> str:
        """The verdict, then what the table leaves out: the op types only one side names, with their share of that side's time."""
        unmapped = self.unmapped
        others = {t: pct for t, pct in self.only_labkit.items() if t not in unmapped}
        lines = [self.verdict(), _("The shares above are of the compared part on each side: the op types both name.")]
        if unmapped:
            lines.append(_("Could not map to operators: {names}").format(names=_listed(unmapped)))
        lines += [_("Only in labkit: {names}").format(names=_listed(others)),
                  _("Only in torch.profiler: {names}").format(names=_listed(self.only_profiler))]
        if self.calls_differ:
            lines.append(_("Calls differ, so these rows are not like for like: {names}").format(
                names=", ".join(self.calls_differ)))
        return "\n".join(lines)

    def to_text(self) -> str:
        return f"{self.table().to_text()}\n{self.note()}"

    def _repr_html_(self) -> str:
        lines = "<br>\n".join(html.escape(line) for line in self.note().splitlines())
        return f"{self.table().to_html()}\n<p>{lines}</p>"


_BASIS_WORDS = {
    "wall": N_("wall time from the previous operator's end"),
    "kernel": N_("kernel time"),
    "operator": N_("operator CPU time"),
}


def _listed(shares: Mapping[str, float]) -> str:
    if not shares:
        return _("none")
    ranked = sorted(shares.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} {pct:.1f}%" for name, pct in ranked)


def _is_top_level(event: Any) -> bool:
    parent = event.cpu_parent
    return parent is None or parent.name == RUN_MARKER


def seconds_by_op_type(events: Any, *, use_device_time: bool = False) -> dict[str, float]:
    """Sum the top-level aten operators of ``torch.profiler`` events per op type (operator time, no model needed).

    Top level: no parent, or directly inside a :data:`RUN_MARKER`. Operators map
    through :data:`ATEN_TO_OP_TYPE` (the torch.nn spelling); the ones missing there
    keep their aten name. :func:`compare_with_torch_profiler` matches names against
    the model's own op types instead.
    """
    seconds: dict[str, float] = {}
    for event in events:
        if event.name == RUN_MARKER or not _is_top_level(event):
            continue
        op_type = ATEN_TO_OP_TYPE.get(event.name, event.name)
        micros = event.device_time_total if use_device_time else event.cpu_time_total
        seconds[op_type] = seconds.get(op_type, 0.0) + micros * 1e-6
    return seconds


def _operators_under(event: Any) -> Iterator[Any]:
    """The operators directly under ``event``, looking through labels that are not operators (no ``::``).

    A model's own ``record_function`` label is seen through; a CUDA runtime call
    (``cudaDeviceSynchronize``: no ``::``, no children) is skipped.
    """
    for child in event.cpu_children:
        if "::" in child.name:
            yield child
        else:
            yield from _operators_under(child)


def charged_seconds(operators: list[Any], basis: str) -> list[float]:
    """Seconds charged to each of one run's top-level operators (in the order they started).

    ``"wall"``: from the previous operator's end (the first: its own start) to its
    end; ``"kernel"``: its kernels' device time; ``"operator"``: its own CPU time.
    """
    if basis == "kernel":
        return [op.device_time_total * 1e-6 for op in operators]
    if basis == "operator":
        return [op.cpu_time_total * 1e-6 for op in operators]
    starts = [operators[0].time_range.start] if operators else []
    starts += [op.time_range.end for op in operators[:-1]]
    return [(op.time_range.end - start) * 1e-6 for op, start in zip(operators, starts, strict=True)]


def operators_per_run(events: Iterable[Any], basis: str) -> dict[str, tuple[float, float]]:
    """aten operator -> (calls, seconds) in a run, the median over the runs marked with :data:`RUN_MARKER`.

    Medians, as labkit's side (:func:`_median_seconds_by_type`): a disturbed run
    moves neither. An operator missing from a run counts 0 there.
    """
    markers = [event for event in events if event.name == RUN_MARKER]
    per_run: dict[str, list[tuple[int, float]]] = {}
    for index, marker in enumerate(markers):
        operators = sorted(_operators_under(marker), key=lambda op: op.time_range.start)
        for op, seconds in zip(operators, charged_seconds(operators, basis), strict=True):
            runs = per_run.setdefault(op.name, [(0, 0.0)] * len(markers))
            calls, total = runs[index]
            runs[index] = (calls + 1, total + seconds)
    return {
        name: (statistics.median(calls for calls, _ in runs), statistics.median(seconds for _, seconds in runs))
        for name, runs in per_run.items()
    }


def _merged_types(
    operators: Iterable[str], labkit_seconds: Mapping[str, float], capture: str, issued: Issued | None = None
) -> dict[str, str]:
    """labkit op type -> its row's name, for every type some operator matches.

    Types one operator could come from are merged (``ReLU`` and ``relu`` under
    ``aten::relu_``): the row is named by its members, largest labkit time first.
    """
    parent: dict[str, str] = {}

    def root(op_type: str) -> str:
        while parent.get(op_type, op_type) != op_type:
            op_type = parent[op_type]
        return op_type

    for operator in operators:
        present = [t for t in _candidates(operator, capture, issued) if t in labkit_seconds]
        for op_type in present:
            parent[root(op_type)] = root(present[0])
    groups: dict[str, list[str]] = {}
    for op_type in parent:
        groups.setdefault(root(op_type), []).append(op_type)
    names = {}
    for members in groups.values():
        name = " + ".join(sorted(members, key=lambda t: (-labkit_seconds[t], t)))
        names.update({member: name for member in members})
    return names


def _percent(part: float, whole: float) -> float:
    return part / whole * 100 if whole > 0 else 0.0


def match_op_types(
    labkit: Mapping[str, tuple[int, float]], profiler: Mapping[str, tuple[float, float]], basis: str = "wall",
    capture: str = "symbolic_trace", mode: str = "fast", issued: Issued | None = None,
) -> CrossCheck:
    """Pair labkit's op types (type -> (nodes, seconds)) with torch.profiler's operators (name -> (calls, seconds)).

    Both per run. Rows are the matched types, renormalised over the matched
    time on each side; the rest are listed as shares of their side's whole time.
    ``capture`` is that of labkit's profile: an exported one's ``aten.linear`` is
    ``aten::linear``; the others match through :data:`ATEN_TO_OP_TYPES`. ``issued``
    adds what a labelled pass saw each op type issue (:func:`issued_operators`).
    """
    labkit_seconds = {t: seconds for t, (_, seconds) in labkit.items()}
    row_of = _merged_types(profiler, labkit_seconds, capture, issued)
    ours: dict[str, float] = defaultdict(float)
    theirs: dict[str, float] = defaultdict(float)
    nodes: dict[str, int] = defaultdict(int)
    operators: dict[str, float] = defaultdict(float)
    for op_type, (node_count, seconds) in labkit.items():
        if op_type in row_of:
            ours[row_of[op_type]] += seconds
            nodes[row_of[op_type]] += node_count
    only_profiler = {}
    for operator, (calls, seconds) in profiler.items():
        row = next((row_of[t] for t in _candidates(operator, capture, issued) if t in row_of), None)
        if row is None:
            only_profiler[operator] = seconds
            continue
        theirs[row] += seconds
        operators[row] += calls
    labkit_matched, profiler_matched = sum(ours.values()), sum(theirs.values())
    rows = [(row, _percent(ours[row], labkit_matched), _percent(theirs[row], profiler_matched)) for row in ours]
    rows.sort(key=lambda row: (-row[1], row[0]))
    profiler_whole = sum(seconds for _, seconds in profiler.values())
    return CrossCheck(
        rows,
        only_labkit={t: _percent(s, sum(labkit_seconds.values())) for t, s in labkit_seconds.items() if t not in row_of},
        only_profiler={op: _percent(s, profiler_whole) for op, s in only_profiler.items()},
        calls={row: (nodes[row], operators[row]) for row in ours},
        basis=basis,
        capture=capture,
        mode=mode,
    )


_OPTIONS = ("kwargs", "warmup", "runs", "mode", "capture", "concrete_args", "leaf_modules", "tracer", "fallback")


def compare_with_torch_profiler(
    model: Any,
    *inputs: Any,
    kwargs: Mapping[str, Any] | None = None,
    warmup: int = 2,
    runs: int = 5,
    mode: str = "fast",
    capture: str = "auto",
    concrete_args: dict[str, Any] | None = None,
    leaf_modules: LeafModules = (),
    tracer: Any = None,
    fallback: bool = True,
    **stray: Any,
) -> CrossCheck:
    """Time the same runs with labkit and with ``torch.profiler``; compare shares per op type.

    labkit profiles the model as :func:`~labkit.fx.profile.profile_model` does with
    the same arguments: keyword inputs in ``kwargs``, ``mode``, ``capture``, the
    tracing options, and a fallback to forward hooks (with its
    :class:`~labkit.fx.profile.TraceFallbackWarning`) when no graph can be
    captured, unless ``fallback=False``. Both instruments watch the very same
    forward passes (labkit's timed runs happen inside the profiler's window, each
    inside a :data:`RUN_MARKER` label), so a burst of background load hits both
    alike. ``warmup`` untimed passes come first, so cold-start costs (allocation,
    kernel selection) distort neither side. How names are matched, which time is
    compared and when there is a verdict: see the module docstring. Python's, NumPy's
    and torch's random states are left as they were.
    """
    keywords = keyword_inputs("compare_with_torch_profiler", kwargs, stray, _OPTIONS)
    warmup = require_count("warmup", warmup, 0, "use warmup=0 to skip it")
    runs = require_count("runs", runs, 1, "e.g. runs=5")
    with left_as_found():  # capturing runs the model too; the known noise is silenced for this call only
        silence_known_warnings()
        return _cross_check(
            model, inputs, keywords, warmup=warmup, runs=runs, mode=mode, capture=capture, concrete_args=concrete_args,
            leaf_modules=leaf_modules, tracer=tracer, fallback=fallback,
        )


def _cross_check(
    model: Any, inputs: tuple[Any, ...], keywords: dict[str, Any], *, warmup: int, runs: int, mode: str, capture: str,
    concrete_args: dict[str, Any] | None, leaf_modules: LeafModules, tracer: Any, fallback: bool,
) -> CrossCheck:
    """:func:`compare_with_torch_profiler` once its arguments are checked: capture, timed runs, labelled run, match."""
    from torch.profiler import ProfilerActivity, profile, record_function

    profiler = make_profiler(
        model, *inputs, kwargs=keywords, mode=mode, capture=capture, concrete_args=concrete_args,
        leaf_modules=leaf_modules, tracer=tracer, fallback=fallback, stacklevel=4,
    )
    device_type = profiler.device.type
    basis = {"cpu": "wall", "cuda": "kernel"}.get(device_type, "operator")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device_type == "cuda" else [])
    prof = profile(activities=activities)

    @contextlib.contextmanager
    def window() -> Iterator[None]:
        with filtered_native_stderr(), prof:
            yield

    run_series(profiler, warmup, runs, window=window, each_run=lambda: record_function(RUN_MARKER), stacklevel=4)
    offset = clock_offset_ns()  # right after the runs (see labkit.fx.trace_beside)
    report = profiler.report()
    labkit = _median_seconds_by_type(report, profiler.samples)
    issued = issued_operators(profiler, report, activities)  # after the timed runs: its labels time nothing
    check = match_op_types(labkit, operators_per_run(prof.events(), basis), basis, report.capture, report.mode, issued)
    return dataclasses.replace(check, report=report, torch_profile=prof, clock_offset_ns=offset)


def issued_operators(profiler: Any, report: ProfileReport, activities: list[Any]) -> dict[str, frozenset[str]]:
    """Top-level operator -> the op types whose nodes (or hooked modules) issued it, from one labelled, untimed run.

    Why: a name table cannot know that an ``LSTM`` issues ``aten::lstm``, a quantized
    ``Linear`` ``quantized::linear_dynamic``, a parametrized layer its parametrization's
    operators and ``aten::linear``, an attention block timed whole ``aten::matmul`` and
    ``aten::softmax``, or that the operators between hooked modules are the
    ``(outside leaf modules)`` row. This run wraps each node, or each hooked module,
    in a ``record_function`` label (:data:`NODE_LABEL`) and records which operators
    run directly under which label, as the timed runs see them under their marker.
    """
    from torch.profiler import profile, record_function

    by_path = {row.target: row.op_type for row in report.rows}
    by_node = {row.name: row.op_type for row in report.rows}
    with filtered_native_stderr(), profile(activities=activities) as prof:
        with record_function(RUN_MARKER):
            if isinstance(profiler, ModuleProfiler):
                _run_labelled_modules(profiler, by_path)
            else:
                _LabelledGraph(profiler.graph_module, by_node).run(*fresh_inputs(profiler.inputs))
    issued: dict[str, set[str]] = defaultdict(set)
    outside = OUTSIDE if OUTSIDE in by_node else None

    def visit(event: Any, op_type: str | None) -> None:
        for child in event.cpu_children:
            if "::" in child.name:
                if op_type is not None:
                    issued[child.name].add(op_type)
            else:
                visit(child, child.name.removeprefix(NODE_LABEL) if child.name.startswith(NODE_LABEL) else op_type)

    for marker in (event for event in prof.events() if event.name == RUN_MARKER):
        visit(marker, outside)
    return {operator: frozenset(types) for operator, types in issued.items()}


class _LabelledGraph(torch.fx.Interpreter):
    """Runs a captured graph node by node, each node inside a label naming its op type."""

    def __init__(self, graph_module: torch.fx.GraphModule, op_types: Mapping[str, str]) -> None:
        super().__init__(graph_module)
        self.op_types = op_types

    def placeholder(self, target: Any, args: Any, kwargs: Any) -> Any:
        if str(target).startswith("**"):  # fx's Interpreter fills forward's **kwargs with a list of the rest: it is {}
            return {}
        return super().placeholder(target, args, kwargs)

    def run_node(self, n: torch.fx.Node) -> Any:
        if n.name not in self.op_types:
            return super().run_node(n)
        with torch.profiler.record_function(NODE_LABEL + self.op_types[n.name]), torch.no_grad():
            return super().run_node(n)


def _run_labelled_modules(profiler: ModuleProfiler, op_types: Mapping[str, str]) -> None:
    """One run of a hooked profile with each hooked module inside a label naming its op type (hooks removed after)."""
    handles = []
    open_labels: list[Any] = []

    def enter(label: str) -> Any:
        def hook(module: torch.nn.Module, args: Any) -> None:
            open_labels.append(torch.profiler.record_function(label).__enter__())

        return hook

    def leave(module: torch.nn.Module, args: Any, output: Any) -> None:
        open_labels.pop().__exit__(None, None, None)

    for hooked in profiler.plan:
        if hooked.kind is not None and hooked.name in op_types:
            handles.append(hooked.module.register_forward_pre_hook(enter(NODE_LABEL + op_types[hooked.name])))
            handles.append(hooked.module.register_forward_hook(leave))
    try:
        profiler.prepare_run()
        profiler.run_once()
    finally:
        for handle in handles:
            handle.remove()
        while open_labels:
            open_labels.pop().__exit__(None, None, None)


def _median_seconds_by_type(report: ProfileReport, samples: Mapping[str, list[float]]) -> dict[str, tuple[int, float]]:
    """op type -> (nodes, seconds in a run): each run's sum over the type's nodes, the median over the runs.

    Why per run, then the median: torch.profiler's side is taken so
    (:func:`operators_per_run`), and both watch the same runs, so a disturbed run
    drops out of both. The report's own breakdown (sums of node medians) against
    the profiler's means split over one disturbed run (resnet18 at 224 px on a
    busy machine: Conv2d 15-20 points apart); means on both sides let one stall
    in a node the profiler cannot see (a parameter read) take most of labkit's time.
    """
    nodes: dict[str, int] = {}
    runs: dict[str, list[float]] = {}
    for row in report.rows:
        if row.op == "get_attr":  # a parameter read issues no operator: the run's bookkeeping, not an op type
            continue
        nodes[row.op_type] = nodes.get(row.op_type, 0) + 1
        timed = samples[row.name][-report.runs:]
        sums = runs.setdefault(row.op_type, [0.0] * len(timed))
        for index, seconds in enumerate(timed):
            sums[index] += seconds
    return {op_type: (nodes[op_type], statistics.median(runs[op_type])) for op_type in nodes}


__all__ = [
    "AGREEMENT_POINTS",
    "ATEN_TO_OP_TYPE",
    "ATEN_TO_OP_TYPES",
    "MIN_COMPARED_PCT",
    "NO_OPERATOR_TYPES",
    "RUN_MARKER",
    "CrossCheck",
    "TooLittleComparedError",
    "charged_seconds",
    "compare_with_torch_profiler",
    "match_op_types",
    "operators_per_run",
    "seconds_by_op_type",
]
