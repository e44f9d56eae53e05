"""`poolbench history --html FILE`: each series as a line chart of its runs' means with their
95% intervals (the report's own line chart, svg_lines), its table and its verdict, on the
report's self-contained page (html_page: no network, a self-check of the charts)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from poolbench.report.history import SeriesView
from poolbench.report.html_page import document
from poolbench.report.svg import Safe, fmt, join
from poolbench.report.svg_lines import Point, line_chart


def _chart(i: int, s: SeriesView) -> Safe:
    pts = [Point(float(j), r.mean, None if math.isnan(r.low) else r.low,
                 None if math.isnan(r.high) else r.high) for j, r in enumerate(s.rows)]  # fmt: skip
    ticks = {float(j): r.date[:10] for j, r in enumerate(s.rows)}
    return line_chart(f"history-{i}", s.key.text(), "run (date, UTC)",
                      f"{s.key.workload} ({s.unit})", [(s.key.workload, pts)],
                      x_tick_text=ticks)  # fmt: skip


def _table(s: SeriesView) -> Safe:
    head = Safe("<tr><th>date (UTC)</th><th>mean</th><th>95% CI</th><th>n</th><th>fill</th>"
                "<th>changed since the previous point</th></tr>")  # fmt: skip
    rows = [head]
    for r in s.rows:
        ci = "" if math.isnan(r.low) else f"[{r.low:.1f}, {r.high:.1f}]"
        fill = "" if r.fill is None else f"{r.fill * 100:.1f}%"
        rows.append(fmt('<tr><td>{}</td><td class="num">{}</td><td class="num">{}</td>'
                        '<td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>',
                        r.date, f"{r.mean:.1f}", ci, r.n, fill,
                        "; ".join(r.changed) or "-"))  # fmt: skip
    return fmt("<table>{}</table>", join(rows, "\n"))


def page(views: Sequence[SeriesView]) -> str:
    body: list[Safe] = [Safe("<h1>poolbench history</h1>")]
    for i, s in enumerate(views):
        verdict = join([fmt("<li>{}</li>", v) for v in s.verdict()])
        body += [fmt("<h2>{}</h2>", s.key.text()), _chart(i, s), _table(s),
                 fmt("<ul>{}</ul>", verdict)]  # fmt: skip
    body.append(Safe('<p id="pb-selfcheck" data-rendered="" data-failed="" data-errors="">'
                     "self-check did not run (scripts disabled?)</p>"))  # fmt: skip
    return str(document("poolbench — history", body))
