"""Concurrency curves as inline SVG, drawn by matplotlib (imported here only, so that other
commands do not pay for it). SVG keeps the HTML file self-contained and sharp at any zoom."""

from __future__ import annotations

import io
from typing import Sequence


def curve_svg(title: str, unit: str, series: dict[str, Sequence[tuple[int, float]]]) -> str:
    """One plot: a line per method through (level, value); the x axis is log 2 like the levels."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.figure import Figure

    pyplot.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and no embedded glyph paths
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.subplots()
    for name, points in sorted(series.items()):
        if not points:
            continue
        xs, ys = zip(*sorted(points))
        axes.plot(xs, ys, marker="o", label=name)
    levels = sorted({x for points in series.values() for x, _ in points})
    if levels and max(levels) > 1:
        axes.set_xscale("log", base=2)
    axes.set_xticks(levels or [1])
    axes.set_xticklabels([str(level) for level in levels] or ["1"])
    axes.set_xlabel("concurrency (requests in flight)")
    axes.set_ylabel(unit)
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="best")
    figure.tight_layout()
    out = io.StringIO()
    figure.savefig(out, format="svg")
    svg = out.getvalue()
    return svg[svg.index("<svg") :]  # the XML prolog and doctype do not belong inside HTML
