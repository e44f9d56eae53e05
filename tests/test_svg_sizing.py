"""Charts are as wide as their texts (issue 29), computed without a browser: the width
table gives the figures DejaVu Sans has, wrapping keeps every line within its width, and a
bar chart's viewBox is its label column + plot + value column as those widths make them.
(tests/test_html_layout.py checks the same pages in a real browser.)"""

from __future__ import annotations

import re

from poolbench.report.svg_bars import LABEL_LINE, Bar, bar_chart
from poolbench.report.svg_lines import Point, line_chart
from poolbench.report.textwidth import shorten, text_width, wrap

LONG = "layout=mirror:2 + mirror:2 + mirror:2 + special mirror:2 sync=standard recordsize=128K"


def test_widths_are_dejavu_sans_advances() -> None:
    # DejaVu Sans: every digit 636/1000 em, the space 318, 'W' 989; bold digits 696.
    assert text_width("0123456789", 12) == 10 * 636 * 12 / 1000
    assert text_width("W W", 10) == (989 + 318 + 989) * 10 / 1000
    assert text_width("42", 13, bold=True) == 2 * 696 * 13 / 1000
    assert text_width("µ—", 12) == 2 * 12.0  # outside the table: a full em each


def test_wrap_breaks_at_spaces_within_the_width_and_marks_a_cut() -> None:
    lines = wrap(LONG, 200, 12, max_lines=3)
    assert all(text_width(x, 12) <= 200 for x in lines)
    # The most words that fit 200 px: 'layout=mirror:2 + mirror:2 + mirror:2' is 229.4 px.
    assert lines == [
        "layout=mirror:2 + mirror:2 +",
        "mirror:2 + special mirror:2",
        "sync=standard recordsize=128K",
    ]
    # At 150 px three lines do not hold it all: the third ends where it was cut.
    assert wrap(LONG, 150, 12, 3)[2] == "special mirror:2 sync=…"
    assert wrap("short label", 200, 12) == ["short label"]
    assert shorten("x" * 100, 60, 12) == "x" * 6 + "…"  # 6 × 7.1 px + 12 px ≤ 60 < 7 × 7.1 + 12


def _viewbox_width(svg: str) -> float:
    m = re.search(r'viewBox="0 0 ([\d.]+) ', svg)
    assert m
    return float(m.group(1))


def test_bar_chart_is_as_wide_as_its_label_and_value_columns() -> None:
    note = "n.s. [-30.6%, +44.0%]"
    svg = bar_chart(
        "c", "w: mean", "MiB/s", [Bar(LONG, 500, 400, 600, note), Bar("a", 300, None, None)]
    )
    lines = wrap(LONG, LABEL_LINE, 12, 3)
    label_w = int(max(text_width(x, 12) for x in lines)) + 14
    right_w = int(text_width("500  " + note, 12)) + 16
    assert _viewbox_width(svg) == label_w + 380 + right_w
    assert all(f">{x}<" in svg for x in lines)  # each line is drawn, in its own tspan


def test_line_chart_legend_fits_its_longest_name() -> None:
    svg = line_chart("c", "t", "x", "y", [(LONG, [Point(1, 2), Point(2, 3)])])
    widest = max(text_width(x, 12) for x in wrap(LONG, 300, 12))
    assert _viewbox_width(svg) == 70 + 460 + 20 + int(widest) + 46
