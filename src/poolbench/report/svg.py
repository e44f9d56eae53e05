"""Inline SVG charts for the HTML report (pure; no JavaScript, no external files).

Every text that reaches the SVG goes through `esc`; numbers are formatted by us. The
functions return `Safe` markup for the page to embed as is.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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


def _num(x: float) -> str:
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


def _tick_label(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 10 or v == 0 or v == int(v) else f"{v:,.3g}"


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float | None  # error bar (None: no interval)
    high: float | None
    note: str = ""  # e.g. "−30% [−33%, −27%]"


def _svg_head(chart_id: str, title: str, width: float, height: float) -> list[Safe]:
    """The opening <svg> tag, its accessible title and the visible chart title."""
    return [
        fmt(
            '<svg id="{}" class="chart" role="img" xmlns="http://www.w3.org/2000/svg" '
            'width="{}" height="{}" viewBox="0 0 {} {}" aria-label="{}">',
            chart_id,
            width,
            height,
            width,
            height,
            title,
        ),
        fmt("<title>{}</title>", title),
        fmt('<text x="4" y="18" class="ct">{}</text>', title),
    ]


@dataclass(frozen=True)
class _BarFrame:
    """Geometry of a bar chart: labels on the left, bars in the middle, values on the right."""

    rows: int
    vmax: float
    row_h: int = 26
    label_w: int = 300
    plot_w: int = 380
    right_w: int = 190
    top: int = 30
    bottom: int = 36

    @property
    def width(self) -> int:
        return self.label_w + self.plot_w + self.right_w

    @property
    def height(self) -> int:
        return self.top + self.row_h * self.rows + self.bottom

    def x(self, v: float) -> float:
        # Negative values are drawn at zero: the axis starts there.
        return self.label_w + self.plot_w * max(0.0, v) / self.vmax


def bar_chart(chart_id: str, title: str, unit: str, bars: Sequence[Bar]) -> Safe:
    """Horizontal bars with error bars: one per configuration (labels can be long)."""
    frame = _BarFrame(len(bars), nice_max(max([b.high or b.value for b in bars] + [0.0])))
    parts = _svg_head(chart_id, title, frame.width, frame.height)
    parts += _bar_value_axis(frame, unit)
    for i, b in enumerate(bars):
        parts += _bar_row(frame, i, b, unit)
    parts.append(Safe("</svg>"))
    return join(parts, "\n")


def _bar_value_axis(frame: _BarFrame, unit: str) -> list[Safe]:
    """Five vertical grid lines with their tick values, and the unit under the axis."""
    parts: list[Safe] = []
    for i in range(5):
        v = frame.vmax * i / 4
        parts.append(
            fmt(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" class="grid"/>',
                _num(frame.x(v)),
                frame.top,
                _num(frame.x(v)),
                frame.height - frame.bottom,
            )
        )
        parts.append(
            fmt(
                '<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
                _num(frame.x(v)),
                frame.height - frame.bottom + 14,
                _tick_label(v),
            )
        )
    parts.append(
        fmt(
            '<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>',
            frame.label_w + frame.plot_w / 2,
            frame.height - 4,
            unit,
        )
    )
    return parts


def _bar_row(frame: _BarFrame, i: int, b: Bar, unit: str) -> list[Safe]:
    """Row i: the (shortened) label, the bar, its error bar if any, the value and note."""
    y = frame.top + i * frame.row_h
    parts = [
        fmt(
            '<text x="{}" y="{}" class="lbl" text-anchor="end">{}</text>',
            frame.label_w - 6,
            _num(y + frame.row_h * 0.65),
            _short(b.label, 46),
        ),
        fmt(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" class="bar">'
            "<title>{}: {} {}</title></rect>",
            frame.label_w,
            _num(y + 4),
            _num(frame.x(b.value) - frame.label_w),
            frame.row_h - 8,
            PALETTE[i % len(PALETTE)],
            b.label,
            _tick_label(b.value),
            unit,
        ),
    ]
    if b.low is not None and b.high is not None:
        parts.append(_bar_error(frame, y + frame.row_h / 2, b.low, b.high))
    parts.append(
        fmt(
            '<text x="{}" y="{}" class="val">{}</text>',
            frame.label_w + frame.plot_w + 8,
            _num(y + frame.row_h * 0.65),
            (_tick_label(b.value) + "  " + b.note).strip(),
        )
    )
    return parts


def _bar_error(frame: _BarFrame, cy: float, low: float, high: float) -> Safe:
    """A horizontal interval from low to high at height cy, with short end caps."""
    return fmt(
        '<path d="M{},{}H{}M{},{}V{}M{},{}V{}" class="err"/>',
        _num(frame.x(low)),
        _num(cy),
        _num(frame.x(high)),
        _num(frame.x(low)),
        _num(cy - 6),
        _num(cy + 6),
        _num(frame.x(high)),
        _num(cy - 6),
        _num(cy + 6),
    )


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

    @property
    def width(self) -> int:
        return self.left + self.plot_w + 20 + self.legend_w

    @property
    def height(self) -> int:
        return self.top + self.plot_h + 50

    def tx(self, v: float) -> float:
        return math.log2(v) if self.log2_x else v

    def px(self, v: float) -> float:
        return self.left + 10 + (self.plot_w - 20) * (self.tx(v) - self.lo_x) / self.span

    def py(self, v: float) -> float:
        # Negative values are drawn at zero: the axis starts there.
        return self.top + self.plot_h - self.plot_h * max(0.0, v) / self.ymax


def _line_frame(
    xs: list[float], series: Sequence[tuple[str, Sequence[Point]]], log2_x: bool
) -> _LineFrame:
    """Scale both axes to the data: x from the smallest to the largest x, y from zero."""
    tx = _LineFrame(0.0, 1.0, 1.0, log2_x).tx
    lo_x, hi_x = tx(xs[0]), tx(xs[-1])
    span = hi_x - lo_x or 1.0  # a single x sits at the left edge instead of dividing by 0
    ymax = nice_max(max((p.high or p.y) for _n, pts in series for p in pts))
    return _LineFrame(lo_x, span, ymax, log2_x)


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
    frame = _line_frame(xs, series, log2_x)
    parts = _svg_head(chart_id, title, frame.width, frame.height)
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
    for i, (name, pts) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        parts += _line_series(frame, name, pts, color)
        parts += _legend_entry(frame, i, name, color)
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
                _num(frame.py(v)),
                frame.left + frame.plot_w,
                _num(frame.py(v)),
            )
        )
        parts.append(
            fmt(
                '<text x="{}" y="{}" class="tick" text-anchor="end">{}</text>',
                frame.left - 4,
                _num(frame.py(v) + 4),
                _tick_label(v),
            )
        )
    return parts


def _line_x_axis(frame: _LineFrame, xs: list[float], tick_text: dict[float, str]) -> list[Safe]:
    """One tick per measured x (not evenly spaced values): the caller's text, else the number."""
    return [
        fmt(
            '<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
            _num(frame.px(v)),
            frame.top + frame.plot_h + 16,
            tick_text.get(v, _tick_label(v)),
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
        f"{'M' if j == 0 else 'L'}{_num(frame.px(p.x))},{_num(frame.py(p.y))}"
        for j, p in enumerate(ordered)
    )
    parts = [fmt('<path d="{}" stroke="{}" class="series"/>', d, color)]
    for p in ordered:
        if p.low is not None and p.high is not None:
            parts.append(
                fmt(
                    '<path d="M{},{}V{}" stroke="{}" class="err"/>',
                    _num(frame.px(p.x)),
                    _num(frame.py(p.low)),
                    _num(frame.py(p.high)),
                    color,
                )
            )
        parts.append(
            fmt(
                '<circle cx="{}" cy="{}" r="3.5" fill="{}"><title>{}: {}</title></circle>',
                _num(frame.px(p.x)),
                _num(frame.py(p.y)),
                color,
                name,
                _tick_label(p.y),
            )
        )
    return parts


def _legend_entry(frame: _LineFrame, i: int, name: str, color: str) -> list[Safe]:
    """Row i of the legend right of the plot: a colour swatch and the series name."""
    ly = frame.top + 12 + i * 18
    return [
        fmt(
            '<rect x="{}" y="{}" width="12" height="4" fill="{}"/>',
            frame.left + frame.plot_w + 20,
            ly - 5,
            color,
        ),
        fmt(
            '<text x="{}" y="{}" class="lbl">{}</text>',
            frame.left + frame.plot_w + 38,
            ly,
            _short(name or "(all)", 46),
        ),
    ]


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


# -- latency: percentiles per configuration on a logarithmic axis ----------------------------
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
    frame = _BarFrame(max(len(rows), 2), 1.0, row_h=30, right_w=110)  # room for the legend

    def px(v: float) -> float:
        return frame.label_w + frame.plot_w * (math.log10(v) - lo_e) / ((hi_e - lo_e) or 1.0)

    parts = _svg_head(chart_id, title, frame.width, frame.height)
    for t in ticks:
        x, y0, y1 = _num(px(t)), frame.top, frame.height - frame.bottom
        parts.append(fmt('<line x1="{}" y1="{}" x2="{}" y2="{}" class="grid"/>', x, y0, x, y1))
        parts.append(
            fmt('<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
                x, y1 + 14, _latency_text(t))
        )  # fmt: skip
    parts.append(
        fmt('<text x="{}" y="{}" class="axis" text-anchor="middle">{}</text>',
            frame.label_w + frame.plot_w / 2, frame.height - 4,
            "completion latency (log scale), geometric mean of the runs with its 95% CI")
    )  # fmt: skip
    names = list(dict.fromkeys(k for r in rows for k, *_ in r.marks))
    for i, r in enumerate(rows):
        parts += _latency_row(frame, i, r, names, px)
    parts += _latency_legend(frame, names)
    parts.append(Safe("</svg>"))
    return join(parts, "\n")


def _latency_row(
    frame: _BarFrame, i: int, row: LatencyRow, names: list[str], px: Callable[[float], float]
) -> list[Safe]:
    """Row i: the label, then per percentile its interval and its dot, a little apart."""
    y = frame.top + i * frame.row_h
    parts = [
        fmt('<text x="{}" y="{}" class="lbl" text-anchor="end">{}</text>',
            frame.label_w - 6, _num(y + frame.row_h * 0.6), _short(row.label, 40))
    ]  # fmt: skip
    for name, c, lo, hi in row.marks:
        k = names.index(name)
        color = PALETTE[k % len(PALETTE)]
        cy = y + 6 + (frame.row_h - 12) * (k + 0.5) / len(names)
        if lo is not None and hi is not None:
            parts.append(
                fmt('<path d="M{},{}H{}" stroke="{}" class="err"/>',
                    _num(px(lo)), _num(cy), _num(px(hi)), color)
            )  # fmt: skip
        parts.append(
            fmt('<circle cx="{}" cy="{}" r="3.5" fill="{}" class="lat"><title>{} {}: {}'
                "</title></circle>", _num(px(c)), _num(cy), color, row.label, name,
                _latency_text(round(c, 1)))
        )  # fmt: skip
    return parts


def _latency_legend(frame: _BarFrame, names: list[str]) -> list[Safe]:
    """The percentiles' colours, right of the plot."""
    x = frame.label_w + frame.plot_w + 16
    parts: list[Safe] = []
    for k, name in enumerate(names):
        y = frame.top + 12 + k * 18
        color = PALETTE[k % len(PALETTE)]
        parts.append(fmt('<circle cx="{}" cy="{}" r="4" fill="{}"/>', x, y - 4, color))
        parts.append(fmt('<text x="{}" y="{}" class="lbl">{}</text>', x + 10, y, name))
    return parts
