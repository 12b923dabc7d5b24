"""axe-core in the browser tests: run it on a page, sort what it finds into labkit's and upstream's.

Why: labkit's pages (the docs site, its notebooks' outputs and widgets in JupyterLab)
must have no accessibility violation of impact "serious" or "critical" that labkit's
own content causes. axe-core (the npm package in tests/ui/package.json, installed
into tests/ui/node_modules like the hub's proxy: ``npm ci`` when it is missing) is
loaded from disk into the page, so no network is needed.

A violation found inside labkit's content (``labkit_content``: a CSS selector) fails
the test. One found elsewhere (JupyterLab's own interface, the docs theme) must be in
an allow-list (:class:`Upstream`: the rule, where it occurs, the upstream issue), so a
new one is noticed and listed rather than ignored. An entry marked ``in_labkit`` also
covers elements inside labkit's content: a control ipywidgets draws for a labkit widget
that Python cannot change.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.ui.support import NODE_PACKAGES, require_npm_file

AXE_SCRIPT = NODE_PACKAGES / "node_modules" / "axe-core" / "axe.min.js"
FAILING_IMPACTS = ("serious", "critical")
# axe's default rules (WCAG 2.x A and AA, best practices), as pydata-sphinx-theme's own axe tests run them; every node
# of the violations and of the "incomplete" results (see _AUDIT), only a sample of the passes.
RUN_OPTIONS = {"resultTypes": ["violations", "incomplete"]}


@dataclass(frozen=True)
class Upstream:
    """A violation labkit cannot fix: rule ``rule`` on elements matching (or inside) ``where``."""

    rule: str
    where: str
    source: str  # "JupyterLab", "theme (pydata-sphinx-theme)", "ipywidgets", ...
    issue: str  # the upstream issue's URL, or why there is none
    in_labkit: bool = False  # also inside labkit's content (see the module's docstring)


# In labkit's widgets, from ipywidgets, in JupyterLab and on the docs site alike.
IPYWIDGETS_UPSTREAM = [
    # A slider's handle (noUiSlider, role="slider") gets no name: ipywidgets does not tie the widget's description
    # (its visible label) to the handle, and passes noUiSlider no handle attributes.
    Upstream("aria-input-field-name", ".widget-slider .noUi-handle", "ipywidgets",
             "https://github.com/jupyter-widgets/ipywidgets/issues/2650", in_labkit=True),
]


@dataclass(frozen=True)
class Finding:
    """One element axe-core flags: which rule, how bad, where, and whose it is."""

    rule: str
    impact: str
    target: str
    html: str
    source: str  # "labkit", or the allow-list entry's source, or "unlisted"
    help_url: str

    def line(self) -> str:
        return f"{self.rule} ({self.impact}, {self.source}): {self.target}  {self.html[:160]}"


def require_axe() -> Path:
    """axe.min.js in tests/ui/node_modules (see :func:`~tests.ui.support.require_npm_file`)."""
    return require_npm_file(AXE_SCRIPT)


_AUDIT = """async ([content, allowed, options]) => {
    const results = await axe.run(document, options);
    const whose = (element, rule) => {
        if (!element) return "unlisted";
        const inside = Boolean(content && element.closest(content));
        const entry = allowed.find(([r, where, , inLabkit]) => r === rule && element.closest(where) && (inLabkit || !inside));
        return entry ? entry[2] : inside ? "labkit" : "unlisted";
    };
    const finding = (rule, impact, node, help_url) => {
        const selector = node.target[node.target.length - 1];
        const element = typeof selector === "string" ? document.querySelector(selector) : null;
        return {rule, impact, target: JSON.stringify(node.target), html: node.html, source: whose(element, rule), help_url};
    };
    // axe leaves text it cannot be sure about "incomplete": text on a background it paints itself, such as code on
    // the docs theme's light output card in dark mode. One whose measured contrast is too low is a violation here.
    const tooFaint = (node) => {
        const data = (node.any[0] || {}).data || {};
        return typeof data.contrastRatio === "number" && data.contrastRatio > 0
            && data.contrastRatio < parseFloat(data.expectedContrastRatio || "0");
    };
    return [
        ...results.violations.flatMap(
            (v) => v.nodes.map((node) => finding(v.id, node.impact || v.impact || "", node, v.helpUrl))),
        ...results.incomplete.filter((v) => v.id === "color-contrast").flatMap(
            (v) => v.nodes.filter(tooFaint).map((node) => finding(v.id, "serious", node, v.helpUrl))),
    ];
}"""


def audit(page, labkit_content: str, allowed: Sequence[Upstream]) -> list[Finding]:
    """Every violation axe-core finds on ``page`` as it is now, each attributed (see the module's docstring)."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.add_script_tag(path=str(require_axe()))
    entries = [[entry.rule, entry.where, entry.source, entry.in_labkit] for entry in allowed]
    found = page.evaluate(_AUDIT, [labkit_content, entries, RUN_OPTIONS])
    return [Finding(**item) for item in found]


def failures(findings: Sequence[Finding]) -> list[Finding]:
    """What fails a test: a serious or critical violation that is labkit's or that no allow-list entry explains."""
    return [f for f in findings if f.impact in FAILING_IMPACTS and f.source in ("labkit", "unlisted")]


def summary(findings: Sequence[Finding]) -> str:
    """``rule impact source xcount`` lines, the most serious first: what the test reports for a page."""
    order = {"critical": 0, "serious": 1, "moderate": 2, "minor": 3}
    counts = Counter((f.rule, f.impact, f.source) for f in findings)
    rows = sorted(counts.items(), key=lambda item: (order.get(item[0][1], 4), item[0]))
    return "; ".join(f"{rule} {impact} {source} x{count}" for (rule, impact, source), count in rows) or "none"
