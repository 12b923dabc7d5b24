"""LiveProfile, headless: set the controls, press the button, read the table and the plot."""
import re
import xml.etree.ElementTree as ET

import pytest
import torch
from torch import nn

import labkit.fx.widgets as fx_widgets
from labkit.core.errors import LabkitError, LabkitTypeError, LabkitValueError
from labkit.fx.profile import NodeProfiler, TrainModeWarning, profile_model
from labkit.fx.widgets import BAR_AXIS_LABELS, TABLE_CLASS
from labkit.widgets import LiveProfile

X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))


def small_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.BatchNorm2d(4), nn.ReLU()
    ).eval()


def body_rows(widget) -> list[list[str]]:
    body = re.search(r"<tbody>(.*)</tbody>", widget.table.value, re.S).group(1)
    return [re.findall(r"<td[^>]*>\s*(.*?)\s*</td>", row) for row in re.findall(r"<tr>.*?</tr>", body, re.S)]


@pytest.fixture
def widget():
    return LiveProfile(small_cnn(), X, runs=3, warmup=0, top_k=4)


def test_nothing_is_shown_before_the_first_run(widget):
    assert widget.table.value == "" and widget.image.value == ""  # nothing, not an empty (broken) image
    assert widget.progress.value == 0 and "Run profile" in widget.status.value
    assert "labkit-live-profile" in widget._dom_classes


def test_pressing_the_button_fills_table_plot_and_progress(widget):
    widget.button.click()
    assert widget.progress.value == widget.progress.max == 3
    assert f'<div class="{TABLE_CLASS}">' in widget.table.value
    rows = body_rows(widget)
    assert len(rows) == 4 and {r[2] for r in rows} <= {"Conv2d", "BatchNorm2d", "ReLU"}  # columns: op, node, type, ...
    assert widget.image.picture.startswith(b"<svg") and "data:image/svg+xml;base64," in widget.image.value
    assert widget.image.layout.align_self == "flex-start"  # never stretched to the box's width
    assert widget.image.alt.startswith("Horizontal bar chart of the table above, one bar per row in the table's order: 4 of")
    assert "bar length: median time per run (ms)" in widget.image.alt  # ranked by medians by default
    assert "run 3 of 3" in widget.status.value and not widget.button.disabled
    assert widget.report.runs == 3


def test_table_and_plot_update_after_every_run(widget):
    tables, images, progress = [], [], []
    widget.table.observe(lambda change: tables.append(change["new"]), names="value")
    widget.image.observe(lambda change: images.append(change["new"]), names="value")
    widget.progress.observe(lambda change: progress.append(change["new"]), names="value")
    widget.runs.value = 4
    widget.button.click()
    assert progress == [1, 2, 3, 4]
    assert len(tables) >= 4 and len(images) == 4


def test_top_k_sort_and_group_by_type_redraw_without_new_runs(widget):
    widget.button.click()
    png = widget.image.picture
    widget.top_k.value = 2
    assert len(body_rows(widget)) == 2
    widget.top_k.value = 10
    widget.sort_by.value = "name"
    assert [r[1] for r in body_rows(widget)] == ["_0", "_1", "_2", "_3", "_4", "_5"]
    widget.group_by_type.value = True
    rows = body_rows(widget)
    assert [r[0] for r in rows] == ["BatchNorm2d", "Conv2d", "ReLU"] and [r[1] for r in rows] == ["2", "2", "2"]
    assert "<th>type" in widget.table.value and widget.image.picture != png
    assert "time per op type" in widget.image.alt and "summed median time per run (ms)" in widget.image.alt
    assert widget.report.runs == 3


def test_sorting_by_mean_puts_the_slowest_first(widget):
    widget.button.click()
    widget.sort_by.value = "mean"  # the widget sorts by median until asked (one disturbed run must not reorder it)
    means = [r.stats.mean for r in widget.report.sorted("mean")[:4]]
    assert [r[1] for r in body_rows(widget)] == [r.name for r in widget.report.sorted("mean")[:4]]
    assert means == sorted(means, reverse=True)


def test_bad_model_fails_at_construction_with_a_labkit_error():
    with pytest.raises(LabkitTypeError):
        LiveProfile(42, X)


def test_a_model_input_mismatch_shows_in_the_status_and_re_enables_the_button():
    widget = LiveProfile(nn.Sequential(nn.Conv2d(3, 4, 3)).eval(), torch.randn(1, 5, 8, 8))
    widget.run()
    assert widget.status.value.startswith("<b>error:</b> ModelRunError: Sequential itself fails on a 1x5x8x8")
    assert "5 channels" in widget.status.value and not widget.button.disabled and widget.report is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"runs": -5}, r"runs must be at least 1 \(got -5\); LiveProfile takes 1 to 200"),
        ({"runs": 0}, r"runs must be at least 1 \(got 0\)"),
        ({"runs": 10**9}, r"runs must be at most 200 \(got 1000000000\); LiveProfile takes 1 to 200"),
        ({"top_k": 0}, r"top_k must be at least 1 \(got 0\); LiveProfile takes 1 to 100"),
        ({"top_k": 101}, r"top_k must be at most 100"),
        ({"warmup": -1}, r"warmup cannot be negative \(got -1\)"),
    ],
)
def test_values_out_of_range_are_refused_not_clamped(kwargs, message):
    with pytest.raises(LabkitValueError, match=message):
        LiveProfile(small_cnn(), X, **kwargs)


@pytest.mark.parametrize("kwargs", [{"runs": 2.5}, {"runs": "5"}, {"top_k": True}, {"warmup": 0.5}])
def test_counts_that_are_not_whole_numbers_are_refused(kwargs):
    with pytest.raises(LabkitTypeError, match=f"{next(iter(kwargs))} must be a whole number"):
        LiveProfile(small_cnn(), X, **kwargs)


def test_the_boxes_show_the_values_asked_for():
    widget = LiveProfile(small_cnn(), X, runs=200, top_k=100)
    assert widget.runs.value == 200 and widget.top_k.value == 100 and widget.progress.max == 200


def status_text(widget) -> str:
    return re.sub(r"<[^>]+>", "", widget.status.value)


def interrupt_call(monkeypatch, method: str, call: int) -> None:
    """Raise KeyboardInterrupt (what a kernel interrupt does) in the ``call``-th call of NodeProfiler.``method``."""
    original, calls = getattr(NodeProfiler, method), []

    def interrupted(self, *args):
        calls.append(method)
        if len(calls) == call:
            raise KeyboardInterrupt
        return original(self, *args)

    monkeypatch.setattr(NodeProfiler, method, interrupted)


def test_an_interrupt_mid_run_says_interrupted_and_how_many_runs_the_table_holds(widget, monkeypatch):
    widget.runs.value = 5
    interrupt_call(monkeypatch, "run_once", 3)
    with pytest.raises(KeyboardInterrupt):
        widget.button.click()
    assert status_text(widget).startswith("interrupted after 2 of 5 runs: the table holds those 2 runs only")
    assert widget.progress.value == 2 and widget.progress.bar_style == "warning"
    assert widget.report.runs == 2 and "2 runs after" in widget.table.value and not widget.button.disabled
    monkeypatch.undo()
    widget.button.click()  # and it runs again normally
    assert widget.report.runs == 5 and "interrupted" not in widget.status.value and widget.progress.bar_style == ""


def test_an_interrupt_during_warm_up_does_not_stay_warming_up(monkeypatch):
    widget = LiveProfile(small_cnn(), X, runs=3, warmup=2)
    interrupt_call(monkeypatch, "_timed_call", 1)
    with pytest.raises(KeyboardInterrupt):
        widget.button.click()
    assert status_text(widget).startswith("interrupted before the first timed run finished: no runs were timed")
    assert widget.report is None and widget.table.value == "" and not widget.button.disabled


def test_a_second_click_while_running_is_ignored_with_a_note(widget, monkeypatch):
    original, profilers, statuses = NodeProfiler.run_once, set(), []
    widget.status.observe(lambda change: statuses.append(change["new"]), names="value")

    def run_once_and_click(self):
        profilers.add(id(self))
        if len(profilers) == 1 and not self.totals:  # once: a click that arrives while the profile runs
            widget.button.click()
        original(self)

    monkeypatch.setattr(NodeProfiler, "run_once", run_once_and_click)
    widget.button.click()
    assert len(profilers) == 1 and widget.report.runs == 3 and widget.progress.value == 3
    assert any("already running" in status for status in statuses)
    assert not widget.button.disabled


def test_a_train_mode_model_warns_and_leaves_the_global_rng_as_it_was():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 8), nn.Dropout(0.5)).train()
    widget = LiveProfile(model, X, runs=3, warmup=1)
    state = torch.get_rng_state()
    with pytest.warns(TrainModeWarning, match=r"model\.eval\(\)"):
        widget.button.click()
    assert torch.equal(torch.get_rng_state(), state) and widget.report.runs == 3


def test_an_interrupt_between_a_report_and_its_redraw_still_shows_every_finished_run(widget, monkeypatch):
    original, calls = fx_widgets.bar_svg, []

    def interrupted(*args):
        calls.append(args)
        if len(calls) == 2:  # run 2's report arrived, its plot is being drawn
            raise KeyboardInterrupt
        return original(*args)

    monkeypatch.setattr(fx_widgets, "bar_svg", interrupted)
    with pytest.raises(KeyboardInterrupt):
        widget.button.click()
    assert status_text(widget).startswith("interrupted after 2 of 3 runs") and widget.report.runs == 2
    assert "2 runs after" in widget.table.value and widget.progress.value == 2
    assert len(calls) == 3 and "after 2 run(s)" in calls[-1][2]  # the plot was redrawn for run 2


def test_an_interrupt_in_the_report_of_run_2_leaves_run_1_in_table_and_status(widget, monkeypatch):
    interrupt_call(monkeypatch, "report", 2)
    with pytest.raises(KeyboardInterrupt):
        widget.button.click()
    assert status_text(widget).startswith("interrupted after 1 of 3 runs: the table holds those 1 runs only")
    assert widget.report.runs == 1 and "1 run after" in widget.table.value and widget.progress.value == 1


def test_an_interrupted_warm_up_after_a_full_profile_says_the_table_is_the_previous_one(widget, monkeypatch):
    widget.button.click()
    interrupt_call(monkeypatch, "warmup", 1)
    with pytest.raises(KeyboardInterrupt):
        widget.button.click()
    assert "The table still shows the previous profile." in status_text(widget) and widget.report.runs == 3


def test_a_press_is_one_profile_model_call_that_reports_every_run(widget, monkeypatch):
    calls = []

    def counted(*args, **kwargs):
        calls.append(kwargs)
        return profile_model(*args, **kwargs)

    monkeypatch.setattr(fx_widgets, "profile_model", counted)
    widget.button.click()
    assert len(calls) == 1 and calls[0]["runs"] == 3 and calls[0]["warmup"] == 0 and calls[0]["mode"] == "fast"
    assert callable(calls[0]["on_run"]) and widget.report.runs == 3


def test_building_the_widget_profiles_nothing(monkeypatch):
    monkeypatch.setattr(NodeProfiler, "_timed_call", lambda self: pytest.fail("construction must not run the model"))
    monkeypatch.setattr(fx_widgets, "profile_model", lambda *a, **k: pytest.fail("construction must not profile"))
    LiveProfile(small_cnn(), X)


def record_bars(monkeypatch) -> list[tuple]:
    drawn = []

    def recording(labels, values, title, xlabel):
        drawn.append((labels, values, title, xlabel))
        return original(labels, values, title, xlabel)

    original = fx_widgets.bar_svg
    monkeypatch.setattr(fx_widgets, "bar_svg", recording)
    return drawn


@pytest.mark.parametrize("key", ["mean", "median", "min", "iqr", "pct", "name"])
def test_the_bars_follow_sort_by_and_match_the_table(widget, monkeypatch, key):
    widget.button.click()
    drawn = record_bars(monkeypatch)
    widget.sort_by.value = key
    widget.redraw()  # "median" is the value already set, so the dropdown does not redraw by itself
    labels, values, title, xlabel = drawn[-1]
    expected = widget.report.top(4, key).rows
    assert labels == [r.name for r in expected] == [r[1] for r in body_rows(widget)]
    assert xlabel == BAR_AXIS_LABELS[key]
    if key == "name":
        assert labels == sorted(labels) and "A-Z" in title
        assert values == pytest.approx([r.stats.median * 1e3 for r in expected])
    else:
        assert values == sorted(values, reverse=True) and f"slowest first by {key}" in title
        assert values == pytest.approx([r.pct if key == "pct" else getattr(r.stats, key) * 1e3 for r in expected])


SVG = "{http://www.w3.org/2000/svg}"


def drawn_bars(svg: bytes) -> tuple[ET.Element, list[tuple[str, float, float]]]:
    """The parsed picture, and each bar's (label, top y, width), top to bottom."""
    root = ET.fromstring(svg)
    texts = [(float(t.get("y")), t.text) for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    bars = [(float(r.get("y")) + float(r.get("height")) / 2, float(r.get("width"))) for r in root.iter(f"{SVG}rect")
            if r.get("class") == "bar"]
    labels = {y: text for y, text in texts}
    return root, [(labels[y], y, width) for y, width in sorted(bars)]


def test_the_bars_draw_what_they_are_given_first_on_top_in_proportion():
    root, bars = drawn_bars(fx_widgets.bar_svg(["a", "b", "c"], [3.0, 2.0, 1.0], "title", "ms"))
    assert [label for label, _, _ in bars] == ["a", "b", "c"]  # the first label on top
    widths = [width for _, _, width in bars]
    assert widths[0] > widths[1] > widths[2] > 0 and widths[0] / widths[2] == pytest.approx(3.0, rel=0.01)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "ms" in texts and "title" in texts and root.find(f"{SVG}title").text == "title"
    assert {"3", "2", "1"} <= set(texts)  # each bar's value


def test_a_long_label_widens_the_picture_instead_of_being_cut():
    short = ET.fromstring(fx_widgets.bar_svg(["a"], [1.0], "t", "ms"))
    long_name = "layer4_1_downsample_0_" * 3
    long = ET.fromstring(fx_widgets.bar_svg([long_name], [1.0], "t", "ms"))
    label = next(t for t in long.iter(f"{SVG}text") if t.text == long_name)
    assert float(label.get("x")) >= fx_widgets.text_width(long_name)  # right-aligned at x: all of it inside
    assert float(long.get("width")) - float(short.get("width")) >= fx_widgets.text_width(long_name) - fx_widgets.text_width("a")


def test_all_zero_values_still_draw_an_axis():
    _, bars = drawn_bars(fx_widgets.bar_svg(["a", "b"], [0.0, 0.0], "t", "ms"))
    assert [width for _, _, width in bars] == [0.0, 0.0]


def test_grouped_bars_follow_the_grouped_table(widget, monkeypatch):
    widget.button.click()
    drawn = record_bars(monkeypatch)
    widget.group_by_type.value = True
    labels, values, _, _ = drawn[-1]
    assert labels == [r[0] for r in body_rows(widget)] and values == sorted(values, reverse=True)
    widget.sort_by.value = "name"
    labels, _, title, _ = drawn[-1]
    assert labels == ["BatchNorm2d", "Conv2d", "ReLU"] == [r[0] for r in body_rows(widget)] and "A-Z" in title


def test_a_model_fx_cannot_trace_is_profiled_module_by_module():
    from labkit.fx.profile import TraceFallbackWarning

    class LoopsOverImages(nn.Module):
        """Neither fx (a loop over a list) nor torch.export (a branch on a value) captures it."""

        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, images):
            return [self.conv(image) if image.sum() > -1e9 else image for image in images]

    widget = LiveProfile(LoopsOverImages().eval(), [torch.randn(1, 3, 8, 8)], runs=2, warmup=0)
    with pytest.warns(TraceFallbackWarning):
        widget.run()
    assert widget.report.mode == "modules" and widget.report.rows[0].name == "conv"


def test_live_profile_takes_the_models_keyword_inputs_as_profile_model_does():
    from labkit.fx.widgets import LiveProfile

    class Scaled(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(4, 4)

        def forward(self, x, scale=1.0):
            return self.linear(x) * scale

    widget = LiveProfile(Scaled().eval(), torch.randn(2, 4), kwargs={"scale": 2.0}, runs=2, warmup=0)
    widget.button.click()
    assert widget.report is not None and widget.report.runs == 2
    with pytest.raises(LabkitError):
        LiveProfile(Scaled().eval(), torch.randn(2, 4), kwargs={"bogus": 1.0})


def test_every_control_has_a_label_that_names_it(widget):
    labels = [widget.runs.description, widget.top_k.description, widget.sort_by.description,
              widget.group_by_type.description, widget.button.description, widget.progress.description]
    assert labels == ["runs", "top k", "sort by", "group by type", "Run profile", "progress"]


# ---------------------------------------------------------------- MemoryTimeline


@pytest.fixture(scope="module")
def timeline_report():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 4, 1), nn.Flatten()).eval()
    return profile_model(model, torch.randn(1, 3, 8, 8), warmup=0, runs=1)


def test_memory_timeline_starts_at_the_peak_and_the_slider_outlines_the_node_it_picks(timeline_report):
    from labkit.widgets import MemoryTimeline

    widget = MemoryTimeline(timeline_report)
    names = [row.name for row in timeline_report.rows]
    assert widget.selected.name == timeline_report.memory["peak_node"]
    assert "labkit-memory-timeline" in widget._dom_classes
    widget.slider.value = 2
    assert widget.image.picture == fx_widgets.timeline_svg(timeline_report, names[2])
    row = timeline_report.rows[2]
    assert f"{names[2]} ({row.op_type})" in widget.caption.value
    assert "alive after it" in widget.caption.value
    assert widget.image.alt == fx_widgets.timeline_alt(timeline_report)


def test_timeline_picture_is_the_svg_with_its_alt_text(timeline_report):
    picture = fx_widgets.timeline_picture(timeline_report)
    assert picture.data == fx_widgets.timeline_svg(timeline_report)
    assert "peak" in picture.alt
    ET.fromstring(picture.data)  # well-formed XML
