"""``python -m labkit zoo``: will my model work? Profile torchvision and Hugging Face models, one process each, and tabulate.

Why: a learner who moves from ResNet18 to "their" model wants to know, before
an afternoon is gone, whether labkit can trace it, what the profile costs, and
whether channels_last and Conv-BN fusion are safe on it. For each model (random
weights; a torchvision model gets its kind's input at its default size, see
:mod:`labkit.fx.model_zoo`; a Hugging Face type, ``--hf bert``, its base model
from a small config with keyword inputs, see :mod:`labkit.fx.hf_zoo`) this reports:

- traced: whether torch.fx traced it, and if not the first line of why;
- mode: the mode :func:`~labkit.fx.profile.profile_model` used (``fast``, or
  ``modules`` when it fell back to hooks on the layers); capture: how the graph
  was captured, where the report says (``report.capture``); nodes: nodes timed;
- outside: in mode ``modules``, the share of the time spent outside every timed
  module (the report's "outside" row), the part of the model the profile cannot show;
- x eager: the profile's median total over an eager forward's median, the two
  interleaved run by run in the same process (a :class:`~labkit.core.timing.SideBySide`),
  marked "(noisy)" when either spread (IQR) is at least 10% of its median;
- top op: the op type that takes the most time;
- channels_last drops: operators that returned another layout from a channels_last
  input for no reason of the caller's (:meth:`FormatTracker.dropped`; deliberate
  layout ops such as ``permute`` are not counted); model and image inputs
  converted (``channels_last_3d`` for video; a detector's 3-D images stay as they are);
- channels_last same / fusion same: whether that run, and the Conv-BN-fused model
  (:func:`~labkit.fx.fusion.fuse_safely`; models profiled from a graph only, folded in
  the ATen graph ``torch.export`` captures where symbolic_trace fails), give the eager
  output within ``rtol=1e-4, atol=1e-5`` of its scale. A detector's output is a
  selection (boxes above a score threshold, after non-maximum suppression): with
  random weights the scores are near-ties, so a rounding difference can keep
  other boxes, and "NO" there says little about the layers; a detector that
  keeps no box at all has nothing to compare ("n/a"). A Hugging Face model
  without image input, or without BatchNorm, has nothing to convert or fold ("n/a").

Each model runs in its own ``python -m labkit zoo --one NAME`` process with a
time limit: a crash, a timeout or a model that eats the memory becomes a row,
never the end of the sweep. ``--csv`` and ``--markdown`` are rewritten
(atomically) after every model, so an interrupted sweep keeps what it measured.
It is a benchmark, not a test: timings move with the machine's load.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import re
import subprocess
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TextIO

from labkit.core.errors import LabkitError, LabkitValueError
from labkit.core.files import writable_target, write_file, write_text
from labkit.core.tables import ShowsAsTable, Table
from labkit.i18n.messages import _

ROW_MARKER = "labkit-zoo-row: "  # the child's one line of result on stdout
RTOL, ATOL = 1e-4, 1e-5  # verify_fusion's defaults: max|a - b| <= RTOL * max|a| + ATOL
TRACED, FELL_BACK, FAILED, TIMEOUT, CRASHED = "traced", "fell back", "failed", "timeout", "crashed"
HF_PREFIX = "hf:"  # a sweep's item (and the child's --one) for a Hugging Face type: hf:bert
WHY_WIDTH = 70  # characters of the reason shown in the printed table (CSV and markdown keep it whole)


@dataclass(frozen=True)
class ZooRow:
    """What the sweep learned about one model; ``outcome`` is one of traced, fell back, failed, timeout, crashed."""

    model: str
    kind: str
    input: str
    outcome: str
    why: str = ""  # why it was not traced, or why it failed
    mode: str = ""
    nodes: int | None = None
    over_eager: float | None = None  # profile total / eager forward (medians)
    noisy: bool = False  # either timing's IQR is at least 10% of its median (SideBySide.noisy)
    top_op: str = ""
    channels_last_drops: str = ""
    channels_last_same: str = ""
    fusion_same: str = ""
    seconds: float = 0.0  # wall time of the model's process, imports included
    capture: str = ""  # the report's capture (how the graph was taken), where the report has one
    outside_pct: float | None = None  # percent of the total in the report's "outside" rows; None when it has none

    @property
    def traced(self) -> str:
        return {TRACED: "yes", FELL_BACK: "no"}.get(self.outcome, "-")

    @property
    def over_eager_text(self) -> str:
        """``1.02x``, ``1.40x (noisy)``, or "" when nothing was timed."""
        if self.over_eager is None:
            return ""
        return f"{self.over_eager:.2f}x{' (noisy)' if self.noisy else ''}"

    @property
    def outside_text(self) -> str:
        return "" if self.outside_pct is None else f"{self.outside_pct:.1f}%"


HEADERS = ["model", "kind", "traced", "mode", "capture", "nodes", "x eager", "outside", "top op", "channels_last drops",
           "channels_last same", "fusion same", "s", "why"]


def _cells(row: ZooRow, why_width: int | None) -> list[Any]:
    why = row.why if why_width is None or len(row.why) <= why_width else row.why[: why_width - 3] + "..."
    return [
        row.model, row.kind, row.traced if row.outcome in (TRACED, FELL_BACK) else row.outcome, row.mode, row.capture,
        "" if row.nodes is None else row.nodes, row.over_eager_text, row.outside_text,
        row.top_op, row.channels_last_drops, row.channels_last_same, row.fusion_same, f"{row.seconds:.0f}", why,
    ]


@dataclass(frozen=True, repr=False)
class ZooResult(ShowsAsTable):
    """The rows of a sweep, in the order the models were given, and its wall time."""

    rows: Sequence[ZooRow]
    seconds: float
    title: str = "torchvision model zoo"

    def count(self, *outcomes: str) -> int:
        return sum(row.outcome in outcomes for row in self.rows)

    def totals(self) -> str:
        failed = self.count(FAILED, TIMEOUT, CRASHED)
        detail = ", ".join(f"{n} {what}" for what in (TIMEOUT, CRASHED) if (n := self.count(what)))
        captures = Counter(row.capture for row in self.rows if row.capture)
        by_capture = f"; by capture: {', '.join(f'{name} {n}' for name, n in captures.most_common())}" if captures else ""
        return (f"{len(self.rows)} models: {self.count(TRACED)} traced, {self.count(FELL_BACK)} fell back to mode "
                f"'modules', {failed} failed{f' ({detail})' if detail else ''}{by_capture}; "
                f"wall time {self.seconds / 60:.1f} min")

    def table(self) -> Table:
        return Table(HEADERS, [_cells(row, WHY_WIDTH) for row in self.rows], title=self.title)

    def to_text(self) -> str:
        return f"{self.table().to_text()}\n{self.totals()}"

    def to_csv(self, path: str | Path) -> Path:
        """Every field of every row (``over_eager`` as a number), written atomically."""
        names = [f.name for f in fields(ZooRow)]

        def write(handle: TextIO) -> None:
            writer = csv.DictWriter(handle, fieldnames=names)
            writer.writeheader()
            writer.writerows(asdict(row) for row in self.rows)

        return write_file(path, write)

    def to_markdown(self, path: str | Path) -> Path:
        """A GitHub-flavoured markdown table with the whole reasons, and the totals line, written atomically."""
        from tabulate import tabulate

        body = tabulate([_cells(row, None) for row in self.rows], headers=HEADERS, tablefmt="github")
        return write_text(path, f"# {self.title}\n\n{body}\n\n{self.totals()}\n")


# ---------------------------------------------------------------------- one model, in its own process


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


def _short_reason(reason: str) -> str:
    """The fallback reason's first sentence and the line saying where it failed ("It failed in ...")."""
    lines = reason.strip().splitlines()
    from labkit.fx.tracing import could_not_trace_prefix, failed_in_prefix  # torch's import only where a reason is read

    first = lines[0].split(". ")[0].removeprefix(could_not_trace_prefix()) if lines else ""
    where = next((line for line in lines[1:] if line.startswith(failed_in_prefix())), "")
    return f"{first}. {where}".strip()


def _failure_cell(exc: BaseException) -> str:
    """What stopped a side measurement: a labkit error is "n/a (...)", anything else "error (...)"."""
    return f"{'n/a' if isinstance(exc, LabkitError) else 'error'} ({_first_line(exc)})"


def _plain(value: Any) -> Any:
    """``value`` with every mapping a plain dict: transformers 4.x registers its ModelOutputs with pytree without the
    keys that :func:`~labkit.fx.fusion.compare_outputs` names a difference by."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if type(value) in (list, tuple):  # a namedtuple is left as it is
        return type(value)(_plain(item) for item in value)
    return value


def _same_text(reference: Any, output: Any, actual_name: str, extra: str = "") -> str:
    """``yes``, ``NO (max diff 0.003)``, or ``n/a (why)`` when there is nothing to compare (a detector that found nothing)."""
    import torch
    from torch.utils._pytree import tree_flatten

    from labkit.fx.fusion import compare_outputs

    reference, output = _plain(reference), _plain(output)
    if not any(isinstance(leaf, torch.Tensor) and leaf.numel() for leaf in tree_flatten(reference)[0]):
        return "n/a (empty output)"
    try:
        max_diff, same = compare_outputs(reference, output, rtol=RTOL, atol=ATOL, actual_name=actual_name)
    except LabkitValueError as exc:
        return f"n/a ({re.split(r'[:.] ', str(exc), maxsplit=1)[0]})"
    verdict = "yes" if same else f"NO (max diff {max_diff:.2g})"
    return f"{verdict}{f', {extra}' if extra else ''}"


@dataclass(frozen=True)
class Call:
    """A model's inputs: ``model(*args, **kwargs)`` (torchvision models take positional, Hugging Face keyword ones)."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def _batchnorms(model: Any) -> int:
    import torch

    return sum(isinstance(m, (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)) for m in model.modules())


def _batchnorms_left(fused: Any) -> int:
    """BatchNorms a fused model still runs: modules (symbolic_trace's graph) or ATen nodes (an exported graph's)."""
    nodes = sum(node.op == "call_function" and "batch_norm" in str(node.target) for node in fused.graph.nodes)
    return _batchnorms(fused) + nodes


def _fusion_same(model: Any, call: Call, reference: Any) -> str:
    """Fold Conv-BN pairs (torch's fuse where safe, or in the ATen graph torch.export captures when symbolic_trace
    fails) and compare with the eager output."""
    import torch

    from labkit.fx.fusion import fuse_safely

    fused, note = fuse_safely(model, *call.args, kwargs=call.kwargs)
    with torch.no_grad():
        output = fused(*call.args, **call.kwargs)
    where = " in the exported graph" if "torch.export" in note else ""
    return _same_text(reference, output, "the fused model", f"{_batchnorms(model) - _batchnorms_left(fused)} BN folded{where}")


def _channels_last(model: Any, kind: str, call: Call, reference: Any) -> tuple[str, str]:
    """(operators that dropped the format, same output?) with model and inputs in channels_last(_3d). Converts ``model``."""
    import torch
    from torch.utils._pytree import tree_map

    from labkit.memory_format import FormatTracker

    memory_format, rank = (torch.channels_last_3d, 5) if kind == "video" else (torch.channels_last, 4)
    model.to(memory_format=memory_format)
    args, kwargs = tree_map(
        lambda t: t.contiguous(memory_format=memory_format) if isinstance(t, torch.Tensor) and t.dim() == rank else t,
        (call.args, call.kwargs),
    )
    with torch.no_grad(), FormatTracker() as tracker:
        output = model(*args, **kwargs)
    counts = Counter(record.short_name for record in tracker.dropped())
    drops = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in counts.most_common()) or "none"
    return drops, _same_text(reference, output, "the channels_last run")


def _profile_against_eager(model: Any, call: Call, warmup: int, runs: int, device: Any) -> tuple[Any, float, bool]:
    """The profile, its median total over an eager forward's median (eager runs interleaved with the profile's), noisy?"""
    import torch

    from labkit.core.timing import RunStats, SideBySide, SyncTimer
    from labkit.fx.profile import TraceFallbackWarning, profile_model

    eager: list[float] = []

    def time_eager(_report: Any) -> None:
        with torch.no_grad(), SyncTimer(device) as timer:
            model(*call.args, **call.kwargs)
        eager.append(timer.elapsed)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TraceFallbackWarning)  # the row says why
        report = profile_model(model, *call.args, kwargs=call.kwargs, warmup=warmup, runs=runs, on_run=time_eager)
    profiled = f"{report.mode} mode"
    timings = SideBySide({"eager forward": RunStats.from_samples(eager), profiled: report.total}, "eager forward")
    return report, timings.slowdown(profiled), timings.noisy(profiled) or timings.noisy("eager forward")


def _prepare(info: Any, batch: int, side: int, device: Any) -> tuple[Any, Call, Any]:
    """The model with random weights, its input, and its eager output (the reference every variant is compared with)."""
    import torch

    from labkit.fx import model_zoo

    torch.manual_seed(0)
    model = model_zoo.build_model(info.name).to(device)
    call = Call(model_zoo.example_inputs(info.name, batch, side, device))
    with torch.no_grad():
        reference = model(*call.args)
    return model, call, reference


def _prepare_hf(name: str, batch: int, device: Any) -> tuple[Any, Call, Any]:
    """As :func:`_prepare`, for a Hugging Face type: its small config, seeded weights, keyword inputs."""
    import torch

    from labkit.fx import hf_zoo

    model = hf_zoo.build_model(name).to(device)
    call = Call(kwargs=hf_zoo.example_inputs(name, model, batch, device))
    with torch.no_grad():
        reference = model(**call.kwargs)
    return model, call, reference


def _fusion_cell(model: Any, call: Call, reference: Any, graph_captured: bool) -> str:
    """The fusion column (models profiled from a graph only); a failure fills the cell, not the end of the row."""
    if not graph_captured:
        return "n/a (not traced)"
    try:
        return _fusion_same(model, call, reference)
    except Exception as exc:  # noqa: BLE001 - a failing side measurement is a cell of the row, not the end of it
        return _failure_cell(exc)


def _channels_last_cells(model: Any, kind: str, call: Call, reference: Any) -> tuple[str, str]:
    """The two channels_last columns (it converts ``model``, so it runs last); a failure fills both cells."""
    try:
        return _channels_last(model, kind, call, reference)
    except Exception as exc:  # noqa: BLE001 - as above
        return _failure_cell(exc), _failure_cell(exc)


def _with_variants(row: ZooRow, model: Any, call: Call, reference: Any, graph_captured: bool) -> ZooRow:
    """``row`` with fusion, then channels_last."""
    fusion = _fusion_cell(model, call, reference, graph_captured)
    drops, same = _channels_last_cells(model, row.kind, call, reference)
    return replace(row, fusion_same=fusion, channels_last_drops=drops, channels_last_same=same)


def _with_hf_variants(row: ZooRow, model: Any, call: Call, reference: Any, graph_captured: bool) -> ZooRow:
    """As :func:`_with_variants`, where a transformer has something to fold (BatchNorm) or to convert (an image input)."""
    import torch

    fusion = _fusion_cell(model, call, reference, graph_captured) if _batchnorms(model) else "n/a (no BatchNorm)"
    drops = same = "n/a (no image input)"
    if any(isinstance(value, torch.Tensor) and value.dim() == 4 for value in call.kwargs.values()):
        drops, same = _channels_last_cells(model, row.kind, call, reference)
    return replace(row, fusion_same=fusion, channels_last_drops=drops, channels_last_same=same)


def _outside_pct(report: Any) -> float | None:
    """The share of the total no timed node accounts for: the report's ``outside_pct`` where it has one, else its
    "outside" rows (a hooked profile's time between leaf modules); None when it has neither."""
    share = getattr(report, "outside_pct", None)
    if share is not None:
        return float(share)
    rows = [row.pct for row in report.rows if row.op == "outside"]
    return sum(rows) if rows else None


def _profiled_row(row: ZooRow, model: Any, call: Call, warmup: int, runs: int, device: Any) -> tuple[ZooRow, bool]:
    """``row`` with the profile's columns, and whether a graph was captured (a failed profile: the row says why)."""
    try:
        report, over_eager, noisy = _profile_against_eager(model, call, warmup, runs, device)
    except Exception as exc:  # noqa: BLE001 - as above; a non-labkit error is named as such
        kind = "" if isinstance(exc, LabkitError) else " (not a labkit error)"
        return replace(row, why=f"profile failed: {_first_line(exc)}{kind}"), False
    graph = report.mode != "modules"  # a graph was captured (by symbolic_trace, or by a later tier such as export)
    capture = str(getattr(report, "capture", None) or "")
    why = _short_reason(report.fallback_reason) if report.fallback_reason else ""
    row = replace(
        row, outcome=TRACED if graph else FELL_BACK, why=f"not by symbolic_trace: {why}" if why and graph else why,
        mode=report.mode, capture=capture, nodes=report.graph_nodes,
        over_eager=over_eager, noisy=noisy, outside_pct=_outside_pct(report), top_op=report.by_op_type().rows[0][0],
    )
    return row, graph


def measure_model(name: str, *, size: int | None = None, batch: int = 1, warmup: int = 1, runs: int = 3,
                  device: str | None = None) -> ZooRow:
    """Everything the sweep reports about one model, measured in this process (the sweep runs it in a child)."""
    from labkit.core.device import pick_device
    from labkit.fx import model_zoo

    info = model_zoo.model_info(name)
    side = info.size if size is None else size
    row = ZooRow(info.name, info.kind, info.input_text(batch, side), FAILED)
    try:
        model_zoo.validate_size(info.name, side)
        chosen = pick_device(device)
    except LabkitError as exc:
        return replace(row, why=str(exc))
    try:
        model, call, reference = _prepare(info, batch, side, chosen)
    except Exception as exc:  # noqa: BLE001 - the model failing on its own input is this row's finding
        return replace(row, why=f"the model itself failed, before labkit: {_first_line(exc)}")
    row, graph_captured = _profiled_row(row, model, call, warmup, runs, chosen)
    return row if row.outcome == FAILED else _with_variants(row, model, call, reference, graph_captured)


def measure_hf_model(name: str, *, batch: int = 1, warmup: int = 1, runs: int = 3, device: str | None = None) -> ZooRow:
    """:func:`measure_model` for a Hugging Face type (:mod:`labkit.fx.hf_zoo`); transformers missing is a failed row."""
    from labkit.core.device import pick_device
    from labkit.fx import hf_zoo

    entry = hf_zoo.registry()[hf_zoo.resolve_name(name)]
    row = ZooRow(entry.name, f"hf {entry.kind}", entry.input_text(batch), FAILED)
    try:
        chosen = pick_device(device)
        hf_zoo.transformers_module()
    except LabkitError as exc:
        return replace(row, why=str(exc))
    try:
        model, call, reference = _prepare_hf(entry.name, batch, chosen)
    except LabkitError as exc:
        return replace(row, why=str(exc))
    except Exception as exc:  # noqa: BLE001 - the model failing on its own input is this row's finding
        return replace(row, why=f"the model itself failed, before labkit: {_first_line(exc)}")
    row, graph_captured = _profiled_row(row, model, call, warmup, runs, chosen)
    return row if row.outcome == FAILED else _with_hf_variants(row, model, call, reference, graph_captured)


# ---------------------------------------------------------------------- the sweep


def _hf_name(item: str) -> str | None:
    """``bert`` for the sweep's item ``hf:bert`` (a Hugging Face type), None for a torchvision name."""
    return item.removeprefix(HF_PREFIX) if item.startswith(HF_PREFIX) else None


def _child_command(name: str, args: argparse.Namespace) -> list[str]:
    command = [sys.executable, "-m", "labkit", "zoo", "--one", name, "--batch", str(args.batch),
               "--warmup", str(args.warmup), "--runs", str(args.runs)]
    if args.size is not None and _hf_name(name) is None:
        command += ["--size", str(args.size)]
    if args.device is not None:
        command += ["--device", args.device]
    return command


def _row_from_child(stdout: str) -> ZooRow | None:
    lines = [line for line in stdout.splitlines() if line.startswith(ROW_MARKER)]
    return ZooRow(**json.loads(lines[-1].removeprefix(ROW_MARKER))) if lines else None


def _placeholder(name: str, args: argparse.Namespace) -> ZooRow:
    """The row of a model whose process gave none: its name, kind and input, outcome crashed."""
    hf_name = _hf_name(name)
    if hf_name is not None:
        from labkit.fx import hf_zoo

        entry = hf_zoo.registry()[hf_zoo.resolve_name(hf_name)]
        return ZooRow(entry.name, f"hf {entry.kind}", entry.input_text(args.batch), CRASHED)
    from labkit.fx import model_zoo

    info = model_zoo.model_info(name)
    return ZooRow(info.name, info.kind, info.input_text(args.batch, args.size), CRASHED)


def run_in_child(name: str, args: argparse.Namespace) -> ZooRow:
    """One model in a fresh ``python -m labkit zoo --one NAME``; a timeout or a crash becomes the row."""
    placeholder = _placeholder(name, args)
    command_name = name if _hf_name(name) is not None else placeholder.model
    start = time.perf_counter()
    try:
        done = subprocess.run(_child_command(command_name, args), capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return replace(placeholder, outcome=TIMEOUT, why=f"stopped after {args.timeout:g} s (--timeout)",
                       seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    row = _row_from_child(done.stdout)
    if row is None:
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return replace(placeholder, why=f"process ended with code {done.returncode}: {last}", seconds=seconds)
    return replace(row, seconds=seconds)


def selected_models(names: Sequence[str], every: bool, kinds: Sequence[str], hf: Sequence[str] = ()) -> list[str]:
    """The models to sweep: torchvision ones in the catalog's order for ``--all`` / ``--kind``, else as named;
    then the Hugging Face types of ``hf`` (``--hf``), each as ``hf:NAME``."""
    from labkit.fx import hf_zoo, model_zoo

    hf_items = [HF_PREFIX + name for name in hf_zoo.resolve_names(hf)]
    if names:
        chosen = list(dict.fromkeys(model_zoo.resolve_model_name(name) for name in names))
    elif every or kinds:
        chosen = list(model_zoo.catalog())
    elif hf_items:
        return hf_items
    else:
        raise LabkitValueError("Name the models to try (e.g. `python -m labkit zoo resnet18 vit_b_16`, or "
                               "`--hf bert` for a Hugging Face type), or use --all or --kind.")
    if kinds:
        chosen = [name for name in chosen if model_zoo.catalog()[name].kind in kinds]
    if not chosen and not hf_items:
        raise LabkitValueError(f"None of the named models is of kind {', '.join(kinds)}.")
    return chosen + hf_items


def sweep(names: Sequence[str], args: argparse.Namespace, on_row: Callable[[ZooResult], None],
          title: str = "torchvision model zoo") -> ZooResult:
    """Each model in its own process, in order; ``on_row(result so far)`` after each."""
    rows: list[ZooRow] = []
    start = time.perf_counter()
    for index, name in enumerate(names, 1):
        row = run_in_child(name, args)
        rows.append(row)
        over = f", {row.over_eager_text} eager" if row.over_eager_text else ""
        print(f"[{index}/{len(names)}] {row.model}: {row.outcome}{f', mode {row.mode}' if row.mode else ''}{over}"
              f"{f' ({row.why})' if row.why else ''}, {row.seconds:.0f} s", flush=True)
        on_row(ZooResult(list(rows), time.perf_counter() - start, title))
    return ZooResult(rows, time.perf_counter() - start, title)


def _title(names: Sequence[str]) -> str:
    hf = sum(_hf_name(name) is not None for name in names)
    return "torchvision model zoo" if not hf else "Hugging Face model zoo" if hf == len(names) else "model zoo"


# ---------------------------------------------------------------------- the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from labkit.fx.model_zoo import KINDS

    parser.add_argument("models", nargs="*", metavar="MODEL", help=_("torchvision model names (any case); see --list"))
    parser.add_argument("--all", action="store_true",
                        help=_("every torchvision model labkit knows (about a hundred: hours on a laptop CPU)"))
    parser.add_argument("--kind", action="append", choices=KINDS, default=[],
                        help=_("only torchvision models of this kind (repeatable)"))
    parser.add_argument("--hf", action="append", default=[], metavar="TYPE", help=_(
        "a Hugging Face model type from a small config, random weights, no download, e.g. bert; repeatable or a comma "
        "list (bert,gpt2); 'all' for every type (needs pip install 'torch-labkit[hf]')"))
    parser.add_argument("--list", action="store_true",
                        help=_("list every torchvision model and Hugging Face type, and exit"))
    parser.add_argument("--size", type=int, default=None, help=_(
        "image side for every torchvision model (default: each model's own); a Hugging Face type's inputs are its config's"))
    parser.add_argument("--batch", type=int, default=1, help=_("batch size (default {batch})").format(batch=1))
    parser.add_argument("--warmup", type=int, default=1,
                        help=_("untimed profile runs per model (default {runs})").format(runs=1))
    parser.add_argument("--runs", type=int, default=3, help=_("timed profile runs per model (default {runs})").format(runs=3))
    parser.add_argument("--timeout", type=float, default=300.0,
                        help=_("seconds per model before it is stopped (default {seconds})").format(seconds=300))
    parser.add_argument("--device", default=None, help=_("cpu, cuda, mps (default: best available, or ${variable})").format(
        variable="LABKIT_DEVICE"))
    parser.add_argument("--csv", metavar="PATH", help=_("write the table as CSV (rewritten after every model)"))
    parser.add_argument("--markdown", metavar="PATH", help=_("write the table as markdown (rewritten after every model)"))
    parser.add_argument("--one", metavar="MODEL", help=argparse.SUPPRESS)  # the child process: one model, one JSON line


def _validate_arguments(args: argparse.Namespace) -> None:
    """Counts, the time limit and the output paths, before the first model: a typo must not cost a sweep."""
    for option, minimum in (("size", 1), ("batch", 1), ("warmup", 0), ("runs", 1)):
        value = getattr(args, option)
        if value is not None and value < minimum:
            requirement = "cannot be negative" if minimum == 0 else f"must be at least {minimum}"
            raise LabkitValueError(f"--{option} {requirement} (got {value}).")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise LabkitValueError(f"--timeout must be a number of seconds above 0 (got {args.timeout}).")
    for path in (args.csv, args.markdown):
        if path:
            writable_target(path)


def _selected(args: argparse.Namespace) -> list[str]:
    """The sweep's models; a ``--size`` that no chosen model would use, or transformers missing, is refused up front."""
    from labkit.fx import hf_zoo

    names = selected_models(args.models, args.all, args.kind, args.hf)
    hf = [name for name in names if _hf_name(name) is not None]
    if hf and args.size is not None and len(hf) == len(names):
        raise LabkitValueError("--size sets a torchvision model's image side; a Hugging Face type's inputs come from its "
                               "small config (see --list). Leave --size out.")
    if hf:
        hf_zoo.transformers_module()  # one clear error, not one failed row per type
    return names


def _write_outputs(result: ZooResult, args: argparse.Namespace) -> None:
    if args.csv:
        result.to_csv(args.csv)
    if args.markdown:
        result.to_markdown(args.markdown)


def _measure_one(args: argparse.Namespace) -> ZooRow:
    """The child's row: ``--one NAME`` (torchvision) or ``--one hf:NAME``."""
    hf_name = _hf_name(args.one)
    if hf_name is not None:
        return measure_hf_model(hf_name, batch=args.batch, warmup=args.warmup, runs=args.runs, device=args.device)
    return measure_model(args.one, size=args.size, batch=args.batch, warmup=args.warmup, runs=args.runs,
                         device=args.device)


def run(args: argparse.Namespace) -> int:
    from labkit.learner.profile import catalog_text

    try:
        if args.list:
            print(catalog_text())
            return 0
        _validate_arguments(args)
        if args.one:
            print(ROW_MARKER + json.dumps(asdict(_measure_one(args))), flush=True)
            return 0
        names = _selected(args)
        title = _title(names)
        result = sweep(names, args, on_row=lambda partial: _write_outputs(partial, args), title=title)
    except LabkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print()
    print(result.to_text())
    for path in (args.csv, args.markdown):
        if path:
            print(f"wrote {path}")
    return 0
