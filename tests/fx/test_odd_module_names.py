"""Modules named anything ``add_module`` takes (a quote, a backslash, a newline, a keyword...): every capture tier
profiles them under their own names, or falls back, or refuses with a labkit error; never a raw SyntaxError.

Why: torch.fx pastes a module's name into the Python it compiles (``getattr(self, "say "hi"")``, ``self.class``),
and torch.export's ``module()`` does the same with its parameters' names.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import random
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from labkit.core.errors import LabkitError
from labkit.fx.capture import ExportFailedError
from labkit.fx.profile import InstrumentedModule, TraceFallbackWarning, profile_model
from labkit.fx.report import shown_name
from labkit.fx.trace_events import check_trace
from labkit.fx.tracing import code_names, odd_name, trace
from tests.fx.support import needs_export
from tests.test_side_effects import _differences, call, model_picture, process_picture

#: Names fx cannot write as code (a quote, a backslash, a newline, a NUL, a keyword, an NFKC-changed identifier),
#: names it can but labkit's own code once misread ("#", " (own code)", its stamps' attribute, dynamo's "[0]" and
#: "L__self__" spellings of a path), and plain odd ones.
ODD = [
    "it's", 'say "hi"', 'x\'y"z', "back\\slash", "ends\\", "new\nline", "nul\x00", "слой", "with space", "1st", "class",
    "None", "\ufb01", "self", "a#2", "x (own code)", "graph", "code", "_labkit_stamps", "{brace}", "a[0]", "L__self__",
]
IDS = [ascii(name) for name in ODD]
X = torch.randn(2, 4, generator=torch.Generator().manual_seed(0))


def _sequential(name: str) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module(name, nn.Linear(4, 4))
    model.add_module("relu", nn.ReLU())
    return model.eval()


class ShapeBranch(nn.Module):
    """symbolic_trace cannot branch on a shape; torch.export can. Its layer's name is any string."""

    def __init__(self, name: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layer_name = name
        self.add_module(name, nn.Linear(4, 4))
        self.tail = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = getattr(self, self.layer_name)(x)
        if x.shape[0] > 1:
            y = y + 1
        return self.tail(y)


class SelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.q(x).softmax(-1) + x


class OddBlock(nn.Module):
    """A unit holding a unit (timed as a split) whose inner unit has the odd name too."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.inner_name = name
        self.add_module(name, SelfAttention())
        self.mlp = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(getattr(self, self.inner_name)(x)) * 2 + x


class ReadsValues(nn.Module):
    """Neither symbolic_trace nor torch.export captures it (a loop count from .item()): the hooks time it."""

    def __init__(self, name: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.block_name = name
        self.add_module(name, OddBlock(name))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        block = getattr(self, self.block_name)
        for _ in range(int(x.abs().sum().item() > 0) + 1):
            x = block(x)
        return x


def _written(report: Any, folder: Path) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The report as CSV, JSON and trace-event JSON (checked as Perfetto and speedscope read it), read back."""
    with open(report.to_csv(folder / "nodes.csv"), newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    saved = json.loads(report.to_json(folder / "nodes.json").read_text(encoding="utf-8"))
    check_trace(json.loads(report.to_trace(folder / "nodes.trace.json").read_text(encoding="utf-8")), strict=True)
    return rows, saved


def _quiet_profile(model: nn.Module, *inputs: Any, **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SyntaxWarning)  # fx's code must not even hold an invalid escape
        warnings.simplefilter("error", DeprecationWarning)
        warnings.simplefilter("ignore", TraceFallbackWarning)
        return profile_model(model, *inputs, warmup=0, runs=1, **options)


# ------------------------------------------------------------------------------------ the names themselves


def test_odd_names_are_those_fx_cannot_write_as_code() -> None:
    assert [name for name in ODD if odd_name(name)] == [
        'say "hi"', 'x\'y"z', "back\\slash", "ends\\", "new\nline", "nul\x00", "class", "None", "\ufb01",
    ]
    assert not any(odd_name(name) for name in ("conv1", "слой", "with space", "1st", "a#2", "self"))


def test_code_names_are_identifiers_unique_among_siblings_and_kept_under_a_renamed_module() -> None:
    renamed = code_names(["say\"hi\"", "say\"hi\".weight", "blocks.class", "blocks.class.bias", "graph"],
                         reserved=["_say_hi_"])
    assert renamed == {
        'say"hi"': "_say_hi__2", 'say"hi".weight': "_say_hi__2.weight", "blocks.class": "blocks._class",
        "blocks.class.bias": "blocks._class.bias", "graph": "_graph_2",
    }
    assert code_names(["conv1", "layer1.0.conv1", "слой"]) == {}


# ------------------------------------------------------------------------------------------- symbolic_trace


@pytest.mark.parametrize("mode", ["fast", "interpreter"])
@pytest.mark.parametrize("name", ODD, ids=IDS)
def test_symbolic_trace_profiles_a_module_of_any_name_under_that_name(name: str, mode: str, tmp_path: Path) -> None:
    model = _sequential(name)
    report = _quiet_profile(model, X, mode=mode, capture="symbolic_trace", fallback=False)
    assert report.capture == "symbolic_trace"
    layer = report.rows[0]
    assert (layer.op, layer.target, layer.module, layer.op_type) == ("call_module", name, name, "Linear")
    assert layer.name.isidentifier()  # fx's node name: its own, an identifier
    by_module = report.by_module()
    assert by_module.rows[0].path == name
    assert shown_name(name) in by_module.to_text()
    assert len(by_module.to_text().splitlines()) == 3 + len(by_module.rows)  # title, header, rule: one line per module
    rows, saved = _written(report, tmp_path)
    assert rows[0]["target"] == name and saved["nodes"][0]["module"] == name


@pytest.mark.parametrize("name", ["it's", 'say "hi"', "new\nline", "class", "self", "\ufb01", "_labkit_stamps"], ids=ascii)
def test_fx_trace_of_an_odd_name_computes_what_the_model_does_and_leaves_it_as_it_was(name: str) -> None:
    class ReadsAttributes(nn.Module):
        """A layer called through getattr, and a parameter and a non-persistent buffer read by get_attr."""

        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.layer_name, self.holder_name = name, name + "!"
            self.add_module(name, nn.Linear(4, 4))
            holder = nn.Module()
            holder.register_buffer("scale", torch.full((4,), 2.0), persistent=False)
            holder.register_parameter("bias", nn.Parameter(torch.ones(4)))
            self.add_module(self.holder_name, holder)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            holder = getattr(self, self.holder_name)
            return getattr(self, self.layer_name)(x) * holder.scale + holder.bias

    model = ReadsAttributes()
    holder = getattr(model, name + "!")
    before = model_picture(model)
    graph_module = trace(model)
    assert torch.equal(graph_module(X), model(X))
    assert torch.equal(copy.deepcopy(graph_module)(X), model(X))  # recompiles: the code names stay valid
    assert not _differences(before, model_picture(model))
    assert holder._non_persistent_buffers_set == {"scale"}
    instrumented = InstrumentedModule(graph_module)
    assert torch.equal(instrumented(X), model(X))
    stamps = [line.strip() for line in instrumented.module.code.splitlines() if "_perf_counter_stamp(" in line]
    assert stamps and all(line.startswith("labkit_fx_profile__perf_counter_stamp(") for line in stamps)  # bare calls
    assert len(instrumented.last_durations()) == sum(1 for n in graph_module.graph.nodes if n.op not in ("placeholder", "output"))


# --------------------------------------------------------------------------------------------------- export


@needs_export
@pytest.mark.parametrize("name", ODD, ids=IDS)
def test_export_profiles_a_module_of_any_name_under_that_name(name: str, tmp_path: Path) -> None:
    report = _quiet_profile(_sequential(name), X, capture="export", fallback=False)
    assert report.capture == "export"
    targets = {row.target for row in report.rows if row.op == "get_attr"}
    assert targets == {f"{name}.weight", f"{name}.bias"}
    linear = next(row for row in report.rows if row.op_type == "aten.linear")
    assert (linear.module, linear.module_class) == (name, "Linear")
    rows, saved = _written(report, tmp_path)
    assert {row["module"] for row in rows} == {name, "relu"}
    assert saved["capture"] == "export"


@needs_export
@pytest.mark.parametrize("name", ["it's", 'say "hi"', "new\nline", "class", "слой"], ids=ascii)
def test_auto_goes_on_to_export_for_an_odd_name_symbolic_trace_cannot_follow(name: str) -> None:
    report = _quiet_profile(ShapeBranch(name).eval(), X)
    assert report.capture == "export"
    assert "symbolic_trace" in report.fallback_reason or "torch.fx" in report.fallback_reason
    assert name in {row.module for row in report.rows}


@needs_export
def test_a_torch_that_cannot_build_the_renamed_module_is_an_export_failure_the_hooks_take_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def cannot(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise SyntaxError("invalid syntax")

    monkeypatch.setattr(torch.export.ExportedProgram, "module", cannot)
    with pytest.raises(ExportFailedError, match="Rename those modules") as failure:
        _quiet_profile(_sequential('say "hi"'), X, capture="export", fallback=False)
    assert "'say \"hi\"'" in str(failure.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = profile_model(ShapeBranch('say "hi"').eval(), X, warmup=0, runs=1)
    assert report.capture == "hooks" and "Rename those modules" in report.fallback_reason
    assert any(issubclass(w.category, TraceFallbackWarning) for w in caught)


# ---------------------------------------------------------------------------------------------------- hooks


@pytest.mark.parametrize("name", ODD, ids=IDS)
def test_hooks_time_units_of_any_name_under_that_name(name: str, tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = profile_model(ReadsValues(name).eval(), X, warmup=0, runs=1)
    assert report.capture == "hooks"
    assert any(issubclass(w.category, TraceFallbackWarning) for w in caught)
    rows = {row.name: row for row in report.rows}
    own, inner, inner_again = f"{name} (own code)", f"{name}.{name}", f"{name}.{name}#2"
    assert {own, inner, inner_again, f"{name}.mlp", f"{name}.mlp#2"} <= set(rows)
    assert (rows[own].target, rows[own].module_class) == (name, "OddBlock")
    assert (rows[inner_again].target, rows[inner_again].module_class) == (name + "." + name, "SelfAttention")
    assert report.largest_children[0][:2] == (name, "OddBlock")
    written, _ = _written(report, tmp_path)
    assert {row["name"] for row in written} == set(rows)
    assert shown_name(name) in report.to_text()


@pytest.mark.parametrize("name", ["a#2", "x (own code)", 'say "hi"', "new\nline"], ids=ascii)
def test_mode_modules_times_leaves_of_any_name(name: str) -> None:
    report = _quiet_profile(_sequential(name), X, mode="modules")
    assert [(row.name, row.target, row.op_type) for row in report.rows[:2]] == [(name, name, "Linear"), ("relu", "relu", "ReLU")]


# ------------------------------------------------------------------------------------ nothing of the user's


@pytest.mark.parametrize("options", [{}, {"capture": "export"}, {"mode": "modules"}, {"mode": "interpreter"}], ids=str)
@pytest.mark.parametrize("name", ['say "hi"', "class", "new\nline", "a#2"], ids=ascii)
def test_profiling_an_odd_name_changes_nothing_of_the_users(name: str, options: dict[str, Any]) -> None:
    def helper(model: nn.Module, x: torch.Tensor, kwargs: Any) -> Any:
        return profile_model(model, x, warmup=0, runs=1, **options)

    call(helper, _sequential("warm-up"), X.clone(), None)  # torch's own first-call set-up is not the helper's
    for make in (_sequential, ShapeBranch, ReadsValues):
        model, x = make(name), X.clone()
        model_before = model_picture(model)
        random.seed(1), np.random.seed(1), torch.manual_seed(1)
        process_before = process_picture()
        outcome = call(helper, model, x, None)
        changed = _differences(process_before, outcome.process_after)
        changed += [f"module {key!r}" for key in _differences(model_before, model_picture(model))]
        assert not changed and torch.equal(x, X), f"changed: {changed} ({outcome.error!r})"
        if outcome.error is not None and not isinstance(outcome.error, LabkitError):
            raise AssertionError(f"a raw {type(outcome.error).__name__}") from outcome.error


# ---------------------------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("mode", ["fast", "modules"])
def test_the_profile_commands_report_prints_and_writes_an_odd_name(
    mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from labkit.learner.profile import _print_report, _run_profile

    args = argparse.Namespace(warmup=0, runs=1, mode=mode, top=10, csv=str(tmp_path / "a.csv"),
                              json=str(tmp_path / "a.json"), trace=str(tmp_path / "a.trace.json"))
    report = _run_profile(args, ReadsValues('say "hi"\n').eval(), (X,), {}, {})
    assert _print_report("odd", report, args) == 0
    printed = capsys.readouterr().out
    assert 'say "hi"\\n' in printed and "wrote" in printed
    check_trace(json.loads((tmp_path / "a.trace.json").read_text(encoding="utf-8")), strict=True)
