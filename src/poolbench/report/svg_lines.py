"""Line charts: one line per series with an error bar at each point, x on a log2 axis if
asked, the legend right of the plot as wide as its longest name (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.report.svg import (
    LABEL,
    LINE_H,
    PALETTE,
    Safe,
    fmt,
    join,
    nice_max,
    num,
    svg_head,
    text_lines,
    tick_label,
    title_width,
)
from poolbench.report.textwidth import text_width, wrap

LEGEND_LINE = 300  # px: a longer series name wraps (two lines at most)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    low: float | None = None
    high: float | None = None


@dataclass(frozen=True)
class _LineFrame:
    """Geometry of a line chart: y axis on the left, the plot, the legend on the right."""

    lo_x: float  # smallest x, already on the axis scale (log2 if asked)
    span: float
    ymax: float
    log2_x: bool
    left: int = 70
    plot_w: int = 460
    plot_h: int = 260
    top: int = 30
    legend_w: int = 300
    legend_h: int = 0

    @property
    def width(self) -> int:
        return self.left + self.plot_w + 20 + self.legend_w

    @property
    def height(self) -> int:
        return max(self.top + self.plot_h + 50, self.top + self.legend_h + 8)

    def tx(self, v: float) -> float:
        return math.log2(v) if self.log2_x else v

    def px(self, v: float) -> float:
        return self.left + 10 + (self.plot_w - 20) * (self.tx(v) - self.lo_x) / self.span

    def py(self, v: float) -> float:
        # Negative values are drawn at zero: the axis starts there.
        return self.top + self.plot_h - self.plot_h * max(0.0, v) / self.ymax


def _line_frame(
    xs: list[float],
    series: Sequence[tuple[str, Sequence[Point]]],
    log2_x: bool,
    legend: list[list[str]],
    title: str,
) -> _LineFrame:
    """Scale both axes to the data (x from the smallest to the largest x, y from zero) and
    size the legend to its names and the plot to the title."""
    tx = _LineFrame(0.0, 1.0, 1.0, log2_x).tx
    lo_x, hi_x = tx(xs[0]), tx(xs[-1])
    span = hi_x - lo_x or 1.0  # a single x sits at the left edge instead of dividing by 0
    ymax = nice_max(max((p.high or p.y) for _n, pts in series for p in pts))
    widest = max((text_width(x, LABEL) for ls in legend for x in ls), default=0.0)
    legend_w = int(widest) + 46
    plot_w = max(460, int(title_width(title)) - 70 - 20 - legend_w + 1)
    legend_h = 12 + sum(18 + (len(ls) - 1) * LINE_H for ls in legend)
    return _LineFrame(lo_x, span, ymax, log2_x, plot_w=plot_w, legend_w=legend_w, legend_h=legend_h)


def line_chart(
    chart_id: str,
    title: str,
    x_label: str,
    y_label: str,
    series: Sequence[tuple[str, Sequence[Point]]],
    *,
    log2_x: bool = False,
    x_tick_text: dict[float, str] | None = None,
) -> Safe:
    """One line per series with error bars at each point; x on a log2 axis if asked."""
    xs = sorted({p.x for _n, pts in series for p in pts})
    legend = [wrap(name or "(all)", LEGEND_LINE, LABEL) for name, _pts in series]
    frame = _line_frame(xs, series, log2_x, legend, title)
    parts = svg_head(chart_id, title, frame.width, frame.height)
    parts.append(
        fmt(
            '<rect x="{}" y="{}" width="{}" height="{}" class="frame"/>',
            frame.left,
            frame.top,
            frame.plot_w,
            frame.plot_h,
        )
    )
    parts += _line_y_axis(frame)
    parts += _line_x_axis(frame, xs, x_tick_text or {})
    parts += _line_axis_labels(frame, x_label, y_label)
    ly = frame.top + 12
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        parts += _line_series(frame, name, pts, color)
        parts += _legend_entry(frame, ly, legend[i], color)
        ly += 18 + (len(legend[i]) - 1) * LINE_H
    parts.append(Safe("</svg>"))
    return join(parts, "\n")


def _line_y_axis(frame: _LineFrame) -> list[Safe]:
    """Five horizontal grid lines with their values left of the plot."""
    parts: list[Safe] = []
    for i in range(5):
        v = frame.ymax * i / 4
        parts.append(
            fmt(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" class="grid"/>',
                frame.left,
                num(frame.py(v)),
                frame.left + frame.plot_w,
                num(frame.py(v)),
            )
        )
        parts.append(
            fmt(
                '<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>',
                frame.left - 4,
                num(frame.py(v) + 4),
                tick_label(v),
            )
        )
    return parts


def _line_x_axis(frame: _LineFrame, xs: list[float], tick_text: dict[float, str]) -> list[Safe]:
    """One tick per measured x (not evenly spaced values): the caller's text, else the number."""
    return [
        fmt(
            '<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
            num(frame.px(v)),
            frame.top + frame.plot_h + 16,
            tick_text.get(v, tick_label(v)),
        )
        for v in xs
    ]


def _line_axis_labels(frame: _LineFrame, x_label: str, y_label: str) -> list[Safe]:
    """The x label under the ticks and the y label rotated along the left edge."""
    mid_y = frame.top + frame.plot_h / 2
    return [
        fmt(
            '<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>',
            frame.left + frame.plot_w / 2,
            frame.top + frame.plot_h + 36,
            x_label,
        ),
        fmt(
            '<text x="14" y="{}" class="axis" text-anchor="middle" '
            'transform="rotate(-90 14 {})">{}</text>',
            mid_y,
            mid_y,
            y_label,
        ),
    ]


def _line_series(frame: _LineFrame, name: str, pts: Sequence[Point], color: str) -> list[Safe]:
    """The line through the points in x order, then each point's error bar and marker."""
    ordered = sorted(pts, key=lambda p: p.x)
    d = " ".join(
        f"{'M' if j == 0 else 'L'}{num(frame.px(p.x))},{num(frame.py(p.y))}"
        for j, p in enumerate(ordered)
    )
    parts = [fmt('<path d="{}" stroke="{}" class="series"/>', d, color)]
    for p in ordered:
        if p.low is not None and p.high is not None:
            parts.append(
                fmt(
                    '<path d="M{},{}V{}" stroke="{}" class="err"/>',
                    num(frame.px(p.x)),
                    num(frame.py(p.low)),
                    num(frame.py(p.high)),
                    color,
                )
            )
        parts.append(
            fmt(
                '<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}: {}</title></circle>',
                num(frame.px(p.x)),
                num(frame.py(p.y)),
                color,
                name,
                tick_label(p.y),
            )
        )
    return parts


def _legend_entry(frame: _LineFrame, ly: float, name: list[str], color: str) -> list[Safe]:
    """One legend entry right of the plot, its first baseline at ly: a colour swatch and the
    series name (wrapped)."""
    return [
        fmt(
            '<rect x="{}" y="{}" width="12" height="4" fill="{}"/>',
            frame.left + frame.plot_w + 20,
            num(ly - 5),
            color,
        ),
        text_lines(frame.left + frame.plot_w + 38, ly, name, 'class="lbl"'),
    ]
