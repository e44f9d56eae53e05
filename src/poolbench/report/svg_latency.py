"""The latency chart: a dot per percentile and configuration with its 95% interval, on a
logarithmic axis (pure). Shares the bar chart's label column and row geometry."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from poolbench.report.svg import (
    LABEL,
    PALETTE,
    Safe,
    fmt,
    join,
    num,
    svg_head,
    text_lines,
)
from poolbench.report.svg_bars import BarFrame, label_column, row_height
from poolbench.report.textwidth import text_width

AXIS = "completion latency (log scale), geometric mean of the runs with its 95% CI"


@dataclass(frozen=True)
class LatencyRow:
    """One configuration: each percentile's (name, centre, low, high) in µs."""

    label: str
    marks: Sequence[tuple[str, float, float | None, float | None]]


def _decade_ticks(lo: float, hi: float) -> list[float]:
    """Ticks from the decade at or below lo to the one at or above hi: every decade, and
    2 and 5 between them when there are at most two decades (else their labels collide)."""
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    steps = (1, 2, 5) if last - first <= 2 else (1,)
    ticks = [m * 10.0**e for e in range(first, last + 1) for m in steps]
    return [t for t in ticks if 10.0**first <= t <= 10.0**last]


def _latency_text(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:g} s"
    return f"{us / 1e3:g} ms" if us >= 1e3 else f"{us:g} µs"


def latency_chart(chart_id: str, title: str, rows: Sequence[LatencyRow]) -> Safe:
    """A dot per percentile and configuration with its 95% interval, x on a log scale (p50
    and p99.9 are often 100× apart: on a linear axis the median would be a dot at zero)."""
    values = [v for r in rows for _k, c, lo, hi in r.marks for v in (c, lo, hi) if v]
    ticks = _decade_ticks(min(values), max(values))
    lo_e, hi_e = math.log10(ticks[0]), math.log10(ticks[-1])
    names = list(dict.fromkeys(k for r in rows for k, *_ in r.marks))
    lines, label_w = label_column([r.label for r in rows])
    legend_w = int(max(text_width(n, LABEL) for n in names)) + 40  # room for the legend
    frame = BarFrame(
        max(len(rows), 2), 1.0, label_w=label_w, right_w=legend_w, row_h=row_height(lines, 30)
    ).widened(title, int(text_width(AXIS, LABEL)) + 8)

    def px(v: float) -> float:
        return frame.label_w + frame.plot_w * (math.log10(v) - lo_e) / ((hi_e - lo_e) or 1.0)

    parts = svg_head(chart_id, title, frame.width, frame.height)
    for t in ticks:
        x, y0, y1 = num(px(t)), frame.top, frame.height - frame.bottom
        parts.append(fmt('<line x1="{}" y1="{}" x2="{}" y2="{}" class="grid"/>', x, y0, x, y1))
        parts.append(
            fmt('<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
                x, y1 + 14, _latency_text(t))
        )  # fmt: skip
    parts.append(
        fmt('<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>',
            frame.label_w + frame.plot_w / 2, frame.height - 4, AXIS)
    )  # fmt: skip
    for i, r in enumerate(rows):
        parts += _latency_row(frame, i, r, lines[i], names, px)
    parts += _latency_legend(frame, names)
    parts.append(Safe("</svg>"))
    return join(parts, "\n")


def _latency_row(
    frame: BarFrame,
    i: int,
    row: LatencyRow,
    label: list[str],
    names: list[str],
    px: Callable[[float], float],
) -> list[Safe]:
    """Row i: the label, then per percentile its interval and its dot, a little apart."""
    y = frame.top + i * frame.row_h
    parts = [
        text_lines(frame.label_w - 6, frame.label_y(i, len(label)), label,
                   'class="lbl" text-anchor="end"')
    ]  # fmt: skip
    for name, c, lo, hi in row.marks:
        k = names.index(name)
        color = PALETTE[k % len(PALETTE)]
        cy = y + 6 + (frame.row_h - 12) * (k + 0.5) / len(names)
        if lo is not None and hi is not None:
            parts.append(
                fmt('<path d="M{},{}H{}" stroke="{}" class="err"/>',
                    num(px(lo)), num(cy), num(px(hi)), color)
            )  # fmt: skip
        parts.append(
            fmt('<circle cx="{}" cy="{}" r="3.5" fill="{}" class="lat"><title>{} {}: {}'
                "</title></circle>", num(px(c)), num(cy), color, row.label, name,
                _latency_text(round(c, 1)))
        )  # fmt: skip
    return parts


def _latency_legend(frame: BarFrame, names: list[str]) -> list[Safe]:
    """The percentiles' colours, right of the plot."""
    x = frame.label_w + frame.plot_w + 16
    parts: list[Safe] = []
    for k, name in enumerate(names):
        y = frame.top + 12 + k * 18
        color = PALETTE[k % len(PALETTE)]
        parts.append(fmt('<circle cx="{}" cy="{}" r="4" fill="{}"/>', x, y - 4, color))
        parts.append(fmt('<text x="{}" y="{}" class="lbl">{}</text>', x + 10, y, name))
    return parts
