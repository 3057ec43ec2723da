"""Concurrency curves as inline SVG, drawn by matplotlib (imported here only, so that other
commands do not pay for it). SVG keeps the HTML file self-contained and sharp at any zoom."""

from __future__ import annotations

import io
from typing import Mapping, Sequence

from fleet.measure.stats import Estimated


def curve_svg(title: str, unit: str, series: Mapping[str, Sequence[tuple[int, Estimated]]], reference: float | None = None) -> str:
    """One plot: a line per method through (level, estimate), each point with its 95 % interval
    as an error bar where it has one; the x axis is log 2 like the levels. `reference`: a dashed
    horizontal line (1.0 on a speed-up plot: where speculative decoding stops paying)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot
    from matplotlib.figure import Figure

    pyplot.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and no embedded glyph paths
    figure = Figure(figsize=(6.4, 3.6), dpi=100)
    axes = figure.subplots()
    for name, points in series.items():
        if not points:
            continue
        ordered = sorted(points, key=lambda point: point[0])
        xs = [x for x, _ in ordered]
        ys = [value.estimate for _, value in ordered]
        below = [value.estimate - value.interval.low if value.interval else 0.0 for _, value in ordered]
        above = [value.interval.high - value.estimate if value.interval else 0.0 for _, value in ordered]
        axes.errorbar(xs, ys, yerr=[below, above], marker="o", capsize=3, label=name)
    if reference is not None:
        axes.axhline(reference, color="#888888", linestyle="--", linewidth=1)
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
