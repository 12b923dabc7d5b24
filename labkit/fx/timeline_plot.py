"""A profile's timeline as a picture: one column per node, the modules it ran in above, live memory beneath.

Why a picture of columns and not of time: a trace viewer (Perfetto, speedscope) shows when each
node ran, and those times change on every run; a notebook's stored picture must be the same every
run for nbval to compare it. So every graph node gets an equal-width column in execution order,
the nested module lanes above it (``layer1`` holds ``layer1.0``, which holds ``layer1.0.conv1``)
come from the report's module stacks, and the curve beneath is the bytes alive after each node
(:mod:`labkit.fx.memory`), facts of the graph and the input shapes. The peak node is marked.

Headless: this module draws SVG markup by hand and imports no renderer. :func:`timeline_drawing`
returns the parts; :mod:`labkit.fx.widgets` wraps them in labkit's themed SVG document. Every
name drawn is escaped: a module's path can hold any character.
"""
from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass

from labkit.core.errors import LabkitValueError
from labkit.fx.report import NodeTiming, ProfileReport, format_bytes
from labkit.i18n.messages import _

INK = "currentColor"
COLUMN_PX, LANE_PX, CURVE_PX = 10, 18, 90  # one node's column, one module lane, the memory curve's height
MARGIN_PX, TITLE_PX, AXIS_PX = 8, 22, 36  # around the picture, the title line, the node axis under the curve
MIN_WIDTH_PX = 520  # room for the title and the axis labels of a small graph
FONT_PX = 10
LANE_FILLS = ("#4e79a7", "#59a14f")  # lanes alternate, so two neighbouring modules stay apart
CURVE_COLOUR, PEAK_COLOUR = "#1f77b4", "#d62728"


@dataclass(frozen=True)
class Drawing:
    """An SVG picture's size, title and markup parts (without the document around them)."""

    width: int
    height: int
    title: str
    parts: tuple[str, ...]


def _text(x: float, y: float, text: str, anchor: str = "start", colour: str = INK) -> str:
    return (f'<text x="{x:g}" y="{y:g}" text-anchor="{anchor}" dominant-baseline="central" fill="{colour}" '
            f'font-size="{FONT_PX}">{html.escape(text)}</text>')


def timeline_rows(report: ProfileReport) -> list[NodeTiming]:
    """The report's graph nodes in execution order, refused with what to do where no memory was measured."""
    if not isinstance(report, ProfileReport):
        raise LabkitValueError(f"the timeline takes a ProfileReport (got {type(report).__name__}); "
                               "pass what labkit.profile_model returned.")
    if report.memory is None or not report.rows:
        raise LabkitValueError("this profile has no memory per node (a hooked profile, mode='modules'); profile "
                               "the model in mode 'fast' or 'faithful' to draw its timeline.")
    return list(report.rows)


def lanes(rows: Sequence[NodeTiming]) -> list[tuple[int, int, int, str]]:
    """``(depth, first column, last column, module path)`` of every module's run of consecutive nodes."""
    found: list[tuple[int, int, int, str]] = []
    depth = max((len(row.module_stack) for row in rows), default=0)
    for level in range(depth):
        start, current = 0, None
        for column, row in enumerate([*rows, None]):
            path = row.module_stack[level][0] if row is not None and len(row.module_stack) > level else None
            if path != current:
                if current is not None:
                    found.append((level, start, column - 1, current))
                start, current = column, path
    return found


def timeline_drawing(report: ProfileReport, selected: str | None = None) -> Drawing:
    """The picture of ``report``'s timeline; ``selected`` (a node's name) is outlined."""
    rows = timeline_rows(report)
    names = [row.name for row in rows]
    if selected is not None and selected not in names:
        raise LabkitValueError(f"the profile has no node {selected!r}; pick one of its rows' names.")
    found = lanes(rows)
    depth = max((level + 1 for level, *_ in found), default=0)
    left, top = MARGIN_PX, TITLE_PX + MARGIN_PX
    curve_top = top + depth * LANE_PX + MARGIN_PX
    curve_bottom = curve_top + CURVE_PX
    width = max(left + COLUMN_PX * len(rows) + MARGIN_PX, MIN_WIDTH_PX)
    peak_node, peak_bytes = str(report.memory["peak_node"]), int(report.memory["peak_bytes"])  # type: ignore[index]
    title = _("{model}: {nodes} nodes in execution order, modules above, bytes alive beneath").format(
        model=report.model or "model", nodes=len(rows))
    parts = [_text(left, TITLE_PX / 2 + MARGIN_PX / 2, title)]
    for index, (level, first, last, path) in enumerate(found):
        x, y = left + COLUMN_PX * first, top + LANE_PX * level
        lane_width = COLUMN_PX * (last - first + 1)
        clip = f"labkit-lane-{index}"
        parts += [
            f'<clipPath id="{clip}"><rect x="{x}" y="{y}" width="{lane_width}" height="{LANE_PX - 2}"/></clipPath>',
            f'<rect class="lane" x="{x}" y="{y}" width="{lane_width}" height="{LANE_PX - 2}" '
            f'fill="{LANE_FILLS[index % 2]}" fill-opacity="0.35" stroke="{INK}" stroke-opacity="0.4">'
            f"<title>{html.escape(path)}</title></rect>",
            f'<g clip-path="url(#{clip})">{_text(x + 2, y + (LANE_PX - 2) / 2, path)}</g>',
        ]
    scale = CURVE_PX / peak_bytes if peak_bytes > 0 else 0.0
    points = []
    for column, row in enumerate(rows):
        height = (row.live_bytes or 0) * scale
        x = left + COLUMN_PX * column
        points += [f"{x},{curve_bottom - height:g}", f"{x + COLUMN_PX},{curve_bottom - height:g}"]
    parts += [
        f'<line x1="{left}" y1="{curve_bottom}" x2="{width - MARGIN_PX}" y2="{curve_bottom}" stroke="{INK}"/>',
        f'<polyline class="live-bytes" points="{" ".join(points)}" fill="none" stroke="{CURVE_COLOUR}" '
        'stroke-width="2"/>',
    ]
    if peak_node in names:
        peak_x = left + COLUMN_PX * names.index(peak_node) + COLUMN_PX / 2
        label = _("peak {bytes} after {node}").format(bytes=format_bytes(peak_bytes), node=peak_node)
        parts += [f'<line class="peak" x1="{peak_x:g}" y1="{curve_top}" x2="{peak_x:g}" y2="{curve_bottom}" '
                  f'stroke="{PEAK_COLOUR}" stroke-dasharray="3 2"/>',
                  _text(peak_x + 4, curve_top + FONT_PX / 2, label, colour=PEAK_COLOUR)]
    if selected is not None:
        x = left + COLUMN_PX * names.index(selected)
        parts.append(f'<rect class="selected" x="{x}" y="{top - 2}" width="{COLUMN_PX}" '
                     f'height="{curve_bottom - top + 4}" fill="none" stroke="{INK}" stroke-width="2"/>')
    parts += [_text(left, curve_bottom + AXIS_PX / 3, _("node {number} ({name})").format(number=1, name=names[0])),
              _text(width - MARGIN_PX, curve_bottom + 2 * AXIS_PX / 3,
                    _("node {number} ({name})").format(number=len(names), name=names[-1]), "end")]
    return Drawing(width, curve_bottom + AXIS_PX, title, tuple(parts))


def timeline_alt(report: ProfileReport) -> str:
    """The picture in words, with its one figure: where memory peaks."""
    rows = timeline_rows(report)
    memory = report.memory or {}
    return _("Timeline of {nodes} graph nodes in execution order, one column each, with the modules they ran in "
             "above and the bytes of tensors alive after each node beneath; the peak, {bytes}, is after node "
             "{node}.").format(nodes=len(rows), bytes=format_bytes(int(memory.get("peak_bytes", 0))),
                               node=memory.get("peak_node", ""))


__all__ = ["Drawing", "lanes", "timeline_alt", "timeline_drawing", "timeline_rows"]
