"""A real viewer opens labkit's traces: speedscope (npm, runs offline) in Chromium.

Why: :func:`labkit.fx.trace_events.check_trace` checks the rules as labkit reads
them; this test asks a viewer. One small ResNet18 cross-check gives every file
the viewer must read: labkit's own trace, torch.profiler's export of the same
runs (raw: speedscope refuses it, jlfwong/speedscope#470; its lanes numbered:
it opens), and the combined file with both; a hooked profile (no graph) adds
the hooks tier's module-only trace. speedscope's files are served from
a loopback server with the traces beside them (``index.html#profileURL=...``);
its Sandwich view is a table of names, read from the DOM (the flame graph is a
canvas), filtered with its own search box.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
import torch
import torchvision

from labkit.fx.crosscheck import compare_with_torch_profiler
from labkit.fx.profile import profile_model
from labkit.fx.trace_events import check_trace, numbered_lanes
from tests.ui.support import NODE_PACKAGES, require_npm_file, static_server

pytestmark = pytest.mark.ui

SPEEDSCOPE = NODE_PACKAGES / "node_modules" / "speedscope" / "dist" / "release"
LOAD_MS = 60_000
FAILED = "Something went wrong"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """speedscope's page, the four traces of one ResNet18 cross-check and a hooked profile's, served on loopback."""
    require_npm_file(SPEEDSCOPE / "index.html")
    folder = tmp_path_factory.mktemp("speedscope") / "site"
    shutil.copytree(SPEEDSCOPE, folder)
    torch.manual_seed(0)
    check = compare_with_torch_profiler(torchvision.models.resnet18(num_classes=10).eval(), torch.randn(1, 3, 32, 32),
                                        warmup=1, runs=1)
    assert check.report is not None and check.torch_trace is not None
    check.report.to_trace(folder / "labkit.json")
    (folder / "torch_raw.json").write_text(json.dumps(check.torch_trace))  # torch.profiler's export, as it wrote it
    (folder / "torch_numbered.json").write_text(json.dumps(numbered_lanes(check.torch_trace)))
    check.to_trace(folder / "beside.json")
    named = json.loads((folder / "labkit.json").read_text())  # labkit's trace as it would be under a string pid
    named["traceEvents"] = [{**event, "pid": "labkit"} for event in named["traceEvents"]]
    (folder / "labkit_string_pid.json").write_text(json.dumps(named))
    hooked = profile_model(torchvision.models.resnet18(num_classes=10).eval(), torch.randn(1, 3, 32, 32), runs=1,
                           warmup=0, mode="modules")
    hooked.to_trace(folder / "hooks.json")
    for name in ("labkit.json", "torch_numbered.json", "beside.json", "hooks.json"):
        check_trace(folder / name, strict=True)
    with static_server(folder) as base:
        yield base


def _open(browser, site: str, name: str):
    """A fresh tab on speedscope's Sandwich view of trace ``name``; the page and what its console said."""
    page = browser.new_page()
    console: list[str] = []
    page.on("console", lambda message: console.append(message.text))
    page.on("pageerror", lambda error: console.append(str(error)))
    page.goto(f"{site}/index.html#profileURL={site}/{name}&view=sandwich")
    page.wait_for_function(f"() => document.body.innerText.includes('Symbol Name') "
                           f"|| document.body.innerText.includes({FAILED!r})", timeout=LOAD_MS)
    return page, console


def _title(page) -> str:
    """The line naming the profile shown: speedscope's "process (pid ..), thread (tid ..) (1/3)"."""
    return next(line for line in page.inner_text("body").splitlines() if "(pid " in line)


# The Sandwich table's rows lie between its header and the search bar (🔍, "?/13"); each row is two timings
# ("233.79µs (0.14%)") and a name. Filtered: the search bar is open and every name holds the query.
_ROWS = """() => {
    const lines = document.body.innerText.split("\\n"), top = lines.findIndex((l) => l.includes("Symbol Name"));
    const bar = lines.indexOf("🔍");
    if (top < 0 || bar < top) return null;
    return lines.slice(top + 1, bar).map((l) => l.trim()).filter((l) => l && !l.endsWith("%)"));
}"""
_FILTERED = f"""(query) => {{
    const names = ({_ROWS})();
    return names !== null && names.every((name) => name.toLowerCase().includes(query.toLowerCase()));
}}"""


def _names(page, query: str) -> set[str]:
    """The Sandwich table's symbol names matching ``query`` (speedscope's search box), without the args it appends."""
    page.keyboard.press("Control+f")
    page.keyboard.press("Control+a")
    page.keyboard.type(query)
    page.wait_for_function(_FILTERED, arg=query, timeout=LOAD_MS)
    names = {name.split(" {")[0] for name in page.evaluate(_ROWS)}
    page.keyboard.press("Escape")
    return names


def _show_profile(page, wanted: str) -> None:
    """Step through the file's profiles (one per lane: speedscope's "n" key) to the one whose title holds ``wanted``."""
    for _ in range(10):
        if wanted in _title(page):
            return
        shown = _title(page)
        page.keyboard.press("n")
        page.wait_for_function("(shown) => !document.body.innerText.includes(shown)", arg=shown, timeout=LOAD_MS)
    pytest.fail(f"speedscope shows no profile named {wanted!r}; the last was {_title(page)!r}")


def test_speedscope_shows_labkits_module_and_node_names(browser, site):
    page, console = _open(browser, site, "labkit.json")
    try:
        assert FAILED not in page.inner_text("body"), console
        assert "labkit profile of ResNet" in _title(page)
        # module slices, one query each (the table draws only the rows that fit the window)
        assert "ResNet" in _names(page, '"class":"ResNet"')
        assert {"layer1", "layer4"} <= _names(page, '"class":"Sequential"')
        assert {"layer1.0", "layer4.1"} <= _names(page, '"class":"BasicBlock"')
        assert "layer1_0_conv1" in _names(page, "layer1_0_conv1")  # a graph node inside them
        assert "run 0" in _names(page, "run 0")
    finally:
        page.close()


def test_a_string_pid_is_why_labkits_pid_is_a_number(browser, site):
    page, console = _open(browser, site, "labkit_string_pid.json")
    try:
        assert FAILED in page.inner_text("body"), "speedscope now opens a string pid: LABKIT_PID need not be a number"
    finally:
        page.close()


def test_torch_profilers_raw_export_fails_in_speedscope_and_its_numbered_copy_opens(browser, site):
    page, console = _open(browser, site, "torch_raw.json")
    try:
        assert FAILED in page.inner_text("body")
        assert any("Could not find events for key" in line for line in console), console
    finally:
        page.close()
    page, console = _open(browser, site, "torch_numbered.json")
    try:
        assert FAILED not in page.inner_text("body"), console
        _show_profile(page, "thread ")  # torch.profiler's CPU thread ("thread 123 (python)")
        assert "aten::conv2d" in _names(page, "aten::conv2d")
    finally:
        page.close()


def test_the_combined_file_opens_with_labkits_names_and_the_aten_operators(browser, site):
    page, console = _open(browser, site, "beside.json")
    try:
        assert FAILED not in page.inner_text("body"), console
        _show_profile(page, "thread ")
        assert "aten::conv2d" in _names(page, "aten::conv2d")
        assert "labkit.crosscheck.run" in _names(page, "labkit.crosscheck.run")
        _show_profile(page, "labkit profile of ResNet")
        assert "layer1.0" in _names(page, '"class":"BasicBlock"')
        assert "layer1_0_conv1" in _names(page, "layer1_0_conv1")
    finally:
        page.close()


def test_a_hooked_profiles_trace_opens_with_its_module_calls(browser, site):
    page, console = _open(browser, site, "hooks.json")
    try:
        assert FAILED not in page.inner_text("body"), console
        assert "labkit profile of ResNet (hooks" in _title(page)
        assert "layer1.0.conv1" in _names(page, '"module":"layer1.0.conv1"')
        assert "run 0" in _names(page, "hooks tier")  # the run says what the file shows
    finally:
        page.close()
