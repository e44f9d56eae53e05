"""Horizontal bar charts: one bar per configuration with its error bar, the value and its
change beside it (pure). The label column is as wide as its longest label (wrapped onto up
to three lines past LABEL_LINE px), the right column as wide as its longest value and change."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

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

LABEL_LINE = 280  # px: a longer configuration label wraps (three lines at most, then …)
LABEL_LINES = 3
BAR_H = 18  # px, however tall the row: a row grows for its label, not its bar


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    low: float | None  # error bar (None: no interval)
    high: float | None
    note: str = ""  # e.g. "−30% [−33%, −27%]"


def label_column(labels: Sequence[str]) -> tuple[list[list[str]], int]:
    """Each label's lines and the column's width: the widest line plus a margin."""
    lines = [wrap(label, LABEL_LINE, LABEL, LABEL_LINES) for label in labels]
    widest = max((text_width(x, LABEL) for ls in lines for x in ls), default=0.0)
    return lines, int(widest) + 14


def row_height(lines: Sequence[Sequence[str]], least: int) -> int:
    """A row tall enough for the most lines any label wrapped into."""
    return max(least, LINE_H * max((len(ls) for ls in lines), default=1) + 8)


@dataclass(frozen=True)
class BarFrame:
    """Geometry of a bar chart: labels on the left, bars in the middle, values on the right."""

    rows: int
    vmax: float
    label_w: int
    right_w: int
    row_h: int = 26
    plot_w: int = 380
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

    def label_y(self, i: int, lines: int) -> float:
        """The first baseline of row i's label, its lines centred on the row."""
        mid = self.top + (i + 0.5) * self.row_h
        return mid + 4 - (lines - 1) * LINE_H / 2

    def widened(self, title: str, least_plot: int = 0) -> BarFrame:
        """The frame with a plot wide enough for the title (and `least_plot` px)."""
        need = max(least_plot, int(title_width(title)) - self.label_w - self.right_w + 1)
        return self if need <= self.plot_w else replace(self, plot_w=need)


def _right_text(b: Bar) -> str:
    return (tick_label(b.value) + "  " + b.note).strip()


def bar_chart(chart_id: str, title: str, unit: str, bars: Sequence[Bar]) -> Safe:
    """Horizontal bars with error bars: one per configuration (labels can be long)."""
    lines, label_w = label_column([b.label for b in bars])
    right_w = int(max((text_width(_right_text(b), LABEL) for b in bars), default=0.0)) + 16
    frame = BarFrame(
        len(bars),
        nice_max(max([b.high or b.value for b in bars] + [0.0])),
        label_w=label_w,
        right_w=right_w,
        row_h=row_height(lines, 26),
    ).widened(title, int(text_width(unit, LABEL)) + 8)
    parts = svg_head(chart_id, title, frame.width, frame.height)
    parts += _bar_value_axis(frame, unit)
    for i, b in enumerate(bars):
        parts += _bar_row(frame, i, b, lines[i], unit)
    parts.append(Safe("</svg>"))
    return join(parts, "\n")


def _bar_value_axis(frame: BarFrame, unit: str) -> list[Safe]:
    """Five vertical grid lines with their tick values, and the unit under the axis."""
    parts: list[Safe] = []
    for i in range(5):
        v = frame.vmax * i / 4
        parts.append(
            fmt(
                '<line x1="{}" y1="{}" x2="{}" y2="{}" class="grid"/>',
                num(frame.x(v)),
                frame.top,
                num(frame.x(v)),
                frame.height - frame.bottom,
            )
        )
        parts.append(
            fmt(
                '<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
                num(frame.x(v)),
                frame.height - frame.bottom + 14,
                tick_label(v),
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


def _bar_row(frame: BarFrame, i: int, b: Bar, label: list[str], unit: str) -> list[Safe]:
    """Row i: the (wrapped) label, the bar, its error bar if any, the value and note."""
    y = frame.top + i * frame.row_h
    parts = [
        text_lines(
            frame.label_w - 6,
            frame.label_y(i, len(label)),
            label,
            'class="lbl" text-anchor="end"',
        ),
        fmt(
            '<rect x="{}" y="{}" width="{}" height="{}" fill="{}" class="bar">'
            "<title>{}: {} {}</title></rect>",
            frame.label_w,
            num(y + frame.row_h / 2 - BAR_H / 2),
            num(frame.x(b.value) - frame.label_w),
            BAR_H,
            PALETTE[i % len(PALETTE)],
            b.label,
            tick_label(b.value),
            unit,
        ),
    ]
    if b.low is not None and b.high is not None:
        parts.append(_bar_error(frame, y + frame.row_h / 2, b.low, b.high))
    parts.append(
        fmt(
            '<text x="{}" y="{}" class="val">{}</text>',
            frame.label_w + frame.plot_w + 8,
            num(frame.label_y(i, 1)),
            _right_text(b),
        )
    )
    return parts


def _bar_error(frame: BarFrame, cy: float, low: float, high: float) -> Safe:
    """A horizontal interval from low to high at height cy, with short end caps."""
    return fmt(
        '<path d="M{},{}H{}M{},{}V{}M{},{}V{}" class="err"/>',
        num(frame.x(low)),
        num(cy),
        num(frame.x(high)),
        num(frame.x(low)),
        num(cy - 6),
        num(cy + 6),
        num(frame.x(high)),
        num(cy - 6),
        num(cy + 6),
    )
