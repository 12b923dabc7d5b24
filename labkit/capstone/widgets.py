"""The capstone's chart: each variant's time side by side, as a matplotlib figure.

Why a module of its own: it is the only part of the capstone that imports
matplotlib, so :mod:`labkit.capstone.variants` stays importable headless.
Show it in a notebook with :func:`labkit.core.plots.figure_image`, sharp on a HiDPI screen, on
the white card every labkit PNG has (readable on a dark page too), with the figure's label as
its alt text: every variant's median and speedup in words (:func:`variant_bars_alt`).
"""
from __future__ import annotations

from matplotlib.figure import Figure

from labkit.capstone.variants import VariantComparison
from labkit.core.errors import LabkitTypeError
from labkit.core.plots import new_figure
from labkit.i18n.messages import N_, _

X_LABEL = N_("median time per forward pass (ms)\nerror bars span the IQR (the middle half of the rounds)")


def _require_comparison(comparison: object) -> None:
    if not isinstance(comparison, VariantComparison):
        raise LabkitTypeError(
            f"comparison must be the result of capstone.compare_variants(...), got {type(comparison).__name__}."
        )


def variant_bars_alt(comparison: VariantComparison) -> str:
    """The chart in words, with its numbers: each variant's median time and speedup, in the chart's order."""
    _require_comparison(comparison)
    bars = "; ".join(f"{r.name} {r.stats.median * 1e3:.3g} ms ({r.speedup:.2f}x)" for r in comparison.results)
    return _("Horizontal bar chart of the median time per forward pass of each variant, IQR as error bars, "
             "speedup over the baseline as labels: {bars}. The table of the comparison has the same numbers.").format(
                 bars=bars)


def variant_bars(comparison: VariantComparison) -> Figure:
    """Horizontal bars of each variant's median time, IQR as error bars, speedup as labels right of the whiskers.

    The x label is centred on the figure, not on the axes: long variant names push the axes
    to the right, and a label centred there ran past the figure's right edge.
    """
    _require_comparison(comparison)
    results = comparison.results
    names = [r.name for r in results]
    medians = [r.stats.median * 1e3 for r in results]
    half_iqrs = [r.stats.iqr * 1e3 / 2 for r in results]
    figure = new_figure(6.5, 0.8 + 0.45 * len(results))
    figure.set_label(variant_bars_alt(comparison))  # figure_image's alt text
    axes = figure.add_subplot()
    positions = list(range(len(results)))[::-1]
    axes.barh(positions, medians, xerr=half_iqrs, color="tab:blue", alpha=0.85, capsize=3)
    axes.set_yticks(positions, names)
    whisker_ends = [median + half for median, half in zip(medians, half_iqrs, strict=True)]
    for y, result, end in zip(positions, results, whisker_ends, strict=True):
        axes.text(end, y, f"  {result.speedup:.2f}x", va="center", color="black", fontweight="bold")
    axes.set_xlim(0, max(whisker_ends) * 1.2)  # room for the labels right of the whiskers
    figure.supxlabel(_(X_LABEL), fontsize="medium")
    return figure
