"""Inline SVG for the HTML report: escaping, numbers, and the parts every chart shares (pure;
no JavaScript, no external files). The chart kinds live in `svg_bars` (bars), `svg_lines`
(curves) and `svg_latency` (percentiles on a log axis).

Every text that reaches the SVG goes through `esc`; numbers are formatted by us. The
functions return `Safe` markup for the page to embed as is.

Each chart is as wide as its texts need: widths are estimated with `textwidth` (DejaVu Sans,
a wide face), so no label is cut at the edge of its SVG; the page scales a chart down to its
column (`max-width:100%`), text and all, instead of scrolling sideways.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

from poolbench.report.textwidth import shorten, text_width

PALETTE = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)
# Font sizes in px, as the page's CSS sets them (svg .lbl/.val/.axis, .tick, .ct bold).
LABEL = 12
TICK = 11
TITLE = 13
LINE_H = 14  # between the lines of a wrapped label
MAX_W = 1000  # no chart grows past this to fit a title: the title is shortened instead


class Safe(str):
    """Markup we generated ourselves; everything else is escaped on the way in."""

    __slots__ = ()


def esc(value: object) -> Safe:
    if isinstance(value, Safe):
        return value
    return Safe(html.escape(str(value), quote=True))


def fmt(template: str, *args: object) -> Safe:
    """`template.format(*args)` with every argument escaped unless it is already Safe."""
    return Safe(template.format(*(esc(a) for a in args)))


def join(parts: Sequence[Safe], sep: str = "") -> Safe:
    return Safe(sep.join(parts))


def num(x: float) -> str:
    return f"{x:.1f}"


def nice_step(vmax: float, ticks: int = 4) -> float:
    """A 1-2-2.5-5 step so that `ticks` steps cover vmax."""
    if vmax <= 0 or math.isnan(vmax):
        return 0.25
    raw = vmax / ticks
    exp = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * exp >= raw:
            return float(m * exp)
    return float(10 * exp)


def nice_max(x: float, ticks: int = 4) -> float:
    return nice_step(x, ticks) * ticks


def tick_label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == 0 or v == int(v) else f"{v:,.3g}"


def title_width(title: str) -> float:
    """The width a chart needs for its visible title (capped: past MAX_W it is shortened)."""
    return min(text_width(title, TITLE, bold=True) + 8, MAX_W)


def svg_head(chart_id: str, title: str, width: float, height: float) -> list[Safe]:
    """The opening <svg> tag, its accessible title (whole) and the visible chart title
    (shortened to the chart's width if it must be)."""
    return [
        fmt(
            '<svg id="{}" class="chart" role="img" xmlns="http://www.w3.org/2000/svg" '
            'width="{}" height="{}" viewBox="0 0 {} {}" aria-label="{}">',
            chart_id,
            num(width),
            num(height),
            num(width),
            num(height),
            title,
        ),
        fmt("<title>{}</title>", title),
        fmt(
            '<text x="4" y="18" class="ct">{}</text>',
            _shorten_bold(title, width - 8),
        ),
    ]


def _shorten_bold(title: str, width: float) -> str:
    bold = text_width(title, TITLE, bold=True)
    if bold <= width:
        return title
    # shorten() measures the book face; the bold title is wider by this ratio.
    return shorten(title, width * text_width(title, TITLE) / bold, TITLE)


def text_lines(x: float, y: float, lines: Sequence[str], attrs: str) -> Safe:
    """One <text> of one or more lines (tspans LINE_H apart), the first line's baseline at
    y; `attrs` is our own markup (class, anchor)."""
    if len(lines) == 1:
        return fmt('<text x="{}" y="{}" {}>{}</text>', num(x), num(y), Safe(attrs), lines[0])
    spans = [
        fmt('<tspan x="{}" dy="{}">{}</tspan>', num(x), 0 if i == 0 else LINE_H, line)
        for i, line in enumerate(lines)
    ]
    return fmt('<text x="{}" y="{}" {}>{}</text>', num(x), num(y), Safe(attrs), join(spans))
