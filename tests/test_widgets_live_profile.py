"""LiveProfile, headless: set the controls, press the button, read the table and the plot."""
import re

import pytest
import torch
from torch import nn

from labkit.errors import LabkitTypeError
from labkit.widgets import LiveProfile
from labkit.widgets.live_profile import TABLE_CLASS

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
    assert widget.table.value == "" and widget.image.value == b""
    assert widget.progress.value == 0 and "Run profile" in widget.status.value
    assert "labkit-live-profile" in widget._dom_classes


def test_pressing_the_button_fills_table_plot_and_progress(widget):
    widget.button.click()
    assert widget.progress.value == widget.progress.max == 3
    assert f'<div class="{TABLE_CLASS}">' in widget.table.value
    rows = body_rows(widget)
    assert len(rows) == 4 and {r[2] for r in rows} <= {"Conv2d", "BatchNorm2d", "ReLU"}  # columns: op, node, type, ...
    assert bytes(widget.image.value).startswith(b"\x89PNG")
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
    png = bytes(widget.image.value)
    widget.top_k.value = 2
    assert len(body_rows(widget)) == 2
    widget.top_k.value = 10
    widget.sort_by.value = "name"
    assert [r[1] for r in body_rows(widget)] == ["_0", "_1", "_2", "_3", "_4", "_5"]
    widget.group_by_type.value = True
    rows = body_rows(widget)
    assert [r[0] for r in rows] == ["BatchNorm2d", "Conv2d", "ReLU"] and [r[1] for r in rows] == ["2", "2", "2"]
    assert "<th>type" in widget.table.value and bytes(widget.image.value) != png
    assert widget.report.runs == 3


def test_sorting_by_mean_puts_the_slowest_first(widget):
    widget.button.click()
    means = [r.stats.mean for r in widget.report.sorted("mean")[:4]]
    assert [r[1] for r in body_rows(widget)] == [r.name for r in widget.report.sorted("mean")[:4]]
    assert means == sorted(means, reverse=True)


def test_bad_model_fails_at_construction_with_a_labkit_error():
    with pytest.raises(LabkitTypeError):
        LiveProfile(42, X)


def test_a_model_input_mismatch_shows_in_the_status_and_re_enables_the_button():
    widget = LiveProfile(nn.Sequential(nn.Conv2d(3, 4, 3)), torch.randn(1, 5, 8, 8))
    widget.run()
    assert widget.status.value.startswith("<b>error:</b> RuntimeError: ")
    assert "5 channels" in widget.status.value and not widget.button.disabled and widget.report is None
