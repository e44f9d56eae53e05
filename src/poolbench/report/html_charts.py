"""The HTML report's charts: which charts a run gets and the data each one draws (pure).

Chart ids (stable, for tests and links): `chart-bar-<workload>` per workload,
`chart-recordsize-<workload>` when configurations differ by the `recordsize` factor,
`chart-record-<family>` when workloads of one family differ by application record size
(the mirror study's iozone set), `chart-fill-<workload>` when a factor is `fill`,
`chart-space` when the pool descriptions carry `usable_bytes`, `chart-latency-<workload>`
per random or synchronous workload whose runs recorded completion latency (p50/p90/p99/p99.9
per configuration), `chart-qd-<workload base>` when workloads sweep the queue depth
(report/qdcurve.py).
"""

from __future__ import annotations

import re
from collections import defaultdict

from poolbench.errors import UsageError
from poolbench.report import qdcurve
from poolbench.report.costs import POOL_FACTORS, predicted_usable
from poolbench.report.data import Cell, RunData
from poolbench.report.metrics import LATENCY, latency_matters
from poolbench.report.svg import Safe, fmt, join
from poolbench.report.svg_bars import Bar, bar_chart
from poolbench.report.svg_latency import LatencyRow, latency_chart
from poolbench.report.svg_lines import Point, line_chart
from poolbench.report.tables import Footnotes, WorkloadTable, short_change
from poolbench.units import parse_size


def unique_id(prefix: str, text: str, used: set[str]) -> str:
    """A stable, unique element id: prefix-<name in lowercase letters, digits and '-'>."""
    s = prefix + "-" + (re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x")
    base, i = s, 2
    while s in used:
        s, i = f"{base}-{i}", i + 1
    used.add(s)
    return s


def _size_bytes(text: str) -> float | None:
    """A size level in bytes by the one size grammar (4K = 4096, 4KB = 4000); None if not."""
    try:
        return float(parse_size(text))
    except UsageError:
        return None


def _size_text(n: float) -> str:
    for unit, size in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n >= size and n % size == 0:
            return f"{int(n // size)}{unit}"
    return f"{int(n)}"


def _percent(text: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*%?", text.strip())
    return float(m.group(1)) if m else None


def _point(cell: Cell, x: float) -> Point:
    s = cell.summary
    ok = s.determined  # no interval (identical or < 2 replicates): the mean alone
    return Point(x, s.mean, s.ci_low if ok else None, s.ci_high if ok else None)


def _notes_cell(numbers: list[int]) -> Safe:
    links = [fmt('<a href="#note-{}">⚠{}</a>', n, n) for n in numbers]
    return fmt('<td class="warn">{}</td>', join(links, " "))


def latency_section(run: RunData, workload: str, chart_id: str, notes: Footnotes) -> list[Safe]:
    """The workload's completion-latency chart and table (every percentile, per configuration,
    of all I/Os of the runs with its 95% CI; the geometric mean of the runs' percentiles for
    runs stored without histograms, footnoted), for random and synchronous workloads; the
    other workloads' latency is in the export."""
    cells = [c for c in (run.cell(cfg, workload) for cfg in run.configs) if c is not None]
    cells = [c for c in cells if any(c.has(m) for m in LATENCY.values())]
    if not cells or not latency_matters(cells[0].workload_kind, cells[0].fio_options):
        return []  # shown where latency decides (random I/O, sync writes), as in the tables
    rows, trs = [], []
    for c in cells:
        figs = {k: c.figure(m) for k, m in LATENCY.items() if c.has(m)}
        marks = [
            (k, f.center, f.low if f.determined else None, f.high if f.determined else None)
            for k, f in figs.items()
        ]
        rows.append(LatencyRow(run.label(c.config), marks))
        warned = {notes.number(w) for m in LATENCY.values() for w in c.metric_warnings(m)}
        tds = [fmt("<td>{}</td>", run.label(c.config))]
        tds += [
            fmt('<td class="num">{}</td>', figs[k].text() if k in figs else "–") for k in LATENCY
        ]
        trs.append(fmt("<tr>{}</tr>", join([*tds, _notes_cell(sorted(warned))])))
    head = join(
        [fmt("<th>{}</th>", h) for h in ("configuration", *(f"{k} µs" for k in LATENCY), "notes")]
    )
    table = fmt("<table><tr>{}</tr>{}</table>", head, join(trs, "\n"))
    pooled = any(f.pooled for c in cells for m in LATENCY.values() if c.has(m)
                 for f in [c.figure(m)])  # fmt: skip
    what = ("percentiles of all I/Os of the runs" if pooled
            else "geometric mean of the runs' percentiles")  # fmt: skip
    title = f"{workload}: completion latency per configuration ({what}, 95% CI)"
    return [latency_chart(chart_id, title, rows), table]


def workload_bars(run: RunData, wt: WorkloadTable, chart_id: str) -> Safe:
    bars = []
    for r in wt.rows:
        s = r.cell.summary
        ok = s.determined
        note = short_change(r) if r.role == "compared" else ""
        bars.append(
            Bar(
                run.label(r.cell.config),
                s.mean,
                s.ci_low if ok else None,
                s.ci_high if ok else None,
                note,
            )
        )
    return bar_chart(chart_id, f"{wt.workload}: mean with 95% CI", wt.unit, bars)


def _factor_curves(
    run: RunData, factor: str, workload: str, chart_id: str, parse: str
) -> Safe | None:
    series: dict[str, list[Point]] = defaultdict(list)
    ticks: dict[float, str] = {}
    unit = ""
    for cfg in run.configs:
        cell = run.cell(cfg, workload)
        level = run.levels(cfg).get(factor)
        if cell is None or level is None:
            continue
        x = _size_bytes(level) if parse == "size" else _percent(level)
        if x is None or x <= 0:
            return None
        ticks[x] = level
        unit = cell.unit
        series[run.label(run.without(cfg, factor))].append(_point(cell, x))
    if len(ticks) < 2:
        return None
    if parse == "size":
        title = f"{workload}: throughput against {factor}"
        x_label = f"{factor} (log scale)"
    else:
        title = f"{workload}: throughput as the pool fills"
        x_label = "fill level (%)"
    return line_chart(
        chart_id,
        title,
        x_label,
        unit,
        sorted(series.items()),
        log2_x=parse == "size",
        x_tick_text=ticks,
    )


_RECORD_NAME = re.compile(r"^(.*)-(\d+[kmgKMG])$")


def _record_families(run: RunData) -> dict[str, list[tuple[str, float]]]:
    """Workload family → [(workload, record bytes)] for families measured at ≥ 2 sizes."""
    fams: dict[str, list[tuple[str, float]]] = defaultdict(list)
    for w in run.workloads:
        m = _RECORD_NAME.match(w)
        cell = next((c for c in (run.cell(cfg, w) for cfg in run.configs) if c), None)
        bs = cell.fio_options.get("bs") if cell else None
        if not m or bs is None:
            continue
        try:
            size = float(str(bs))
        except ValueError:
            size = _size_bytes(str(bs)) or 0.0
        if size > 0:
            fams[m.group(1)].append((w, size))
    return {f: v for f, v in fams.items() if len({s for _w, s in v}) >= 2}


def _record_curves(
    run: RunData, family: str, members: list[tuple[str, float]], chart_id: str
) -> Safe:
    series: dict[str, list[Point]] = defaultdict(list)
    unit = ""
    for cfg in run.configs:
        for w, size in members:
            cell = run.cell(cfg, w)
            if cell is not None:
                unit = cell.unit
                series[run.label(cfg)].append(_point(cell, size))
    ticks = {s: _size_text(s) for _w, s in members}
    return line_chart(
        chart_id,
        f"{family}: throughput against application record size",
        "record size (log scale)",
        unit,
        list(series.items()),
        log2_x=True,
        x_tick_text=ticks,
    )


def _space_chart(run: RunData) -> Safe | None:
    """Usable space per layout as the pool reported it (`usable_bytes` in its description),
    each beside the planner's prediction for the same layout, disks and ZFS version."""
    bars: list[Bar] = []
    seen: set[str] = set()
    for cfg in run.configs:
        cell = next((c for c in (run.cell(cfg, w) for w in run.workloads) if c), None)
        pool = cell.pool() if cell else {}
        usable = pool.get("usable_bytes")
        if not isinstance(usable, int | float) or usable <= 0:
            continue
        levels = run.levels(cfg)
        key = " ".join(f"{k}={levels[k]}" for k in POOL_FACTORS if k in levels) or cfg
        if key in seen:
            continue
        seen.add(key)
        label = run.label(key)
        predicted = predicted_usable(run, levels, str(pool.get("zfs_version") or ""))
        if predicted is None:
            bars.append(Bar(label, usable / 1024**3, None, None))
            continue
        diff = (usable - predicted) / predicted * 100
        bars.append(Bar(f"{label} (pool)", usable / 1024**3, None, None, f"{diff:+.2f}% vs plan"))
        bars.append(Bar(f"{label} (planner)", predicted / 1024**3, None, None, "predicted"))
    if not bars:
        return None
    return bar_chart(
        "chart-space", "usable space per layout: as the pool reports it, and as planned", "GiB",
        bars,
    )  # fmt: skip


def extra_charts(run: RunData) -> list[tuple[str, Safe]]:
    """Extra charts (beyond the per-workload bars), with their headings."""
    used: set[str] = set()
    out: list[tuple[str, Safe]] = []
    factors = run.factors()
    for factor, kind, prefix in (
        ("recordsize", "size", "chart-recordsize"),
        ("fill", "percent", "chart-fill"),
    ):
        if factor not in factors:
            continue
        for w in run.workloads:
            chart = _factor_curves(run, factor, w, unique_id(prefix, w, used), kind)
            if chart is not None:
                out.append((f"{w} against {factor}", chart))
    for fam, members in _record_families(run).items():
        out.append(
            (
                f"{fam} against record size",
                _record_curves(run, fam, members, unique_id("chart-record", fam, used)),
            )
        )
    for base, sweep in qdcurve.families(run).items():
        qd_id = unique_id("chart-qd", base, used)
        out.append((f"{base}: queue-depth curve", qdcurve.chart(run, base, sweep, qd_id)))
    space = _space_chart(run)
    if space is not None:
        out.append(("usable space", space))
    return out
