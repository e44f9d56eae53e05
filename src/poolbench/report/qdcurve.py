"""The queue-depth curve chart: IOPS against latency, one line per configuration and job
count, one point per queue depth (the qd-curve study's workloads, rand-read-4k-qd8-j4).

The latency is the p99 of all I/Os of the replicates (their histograms merged; the geometric
mean of the runs' p99s for runs stored without histograms), with its 95% interval as a
whisker, when the measurement recorded one, else the mean latency Little's law
gives for fio's closed loop (outstanding I/Os / IOPS, exact for a fixed queue depth); the axis
says which. Chart ids: `chart-qd-<workload base>` (e.g. chart-qd-rand-read-4k).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

from poolbench.report.data import Cell, RunData
from poolbench.report.svg import Safe
from poolbench.report.svg_lines import Point, line_chart

_LOAD = re.compile(r"^(.*?)-qd(\d+)(?:-j(\d+))?$")  # the queue depth is what the curve sweeps


def _p99_ms(cell: Cell) -> float | None:
    """The p99 in ms of `_p99`, or None."""
    got = _p99(cell)
    return got[0].y if got is not None else None


def _p99(cell: Cell) -> tuple[Point, bool] | None:
    """The p99 in ms (x left 0) with its 95% interval: of all I/Os of the replicates (their
    fio histograms merged, stats.pooled) when every replicate stored one; else the geometric
    mean of the recorded per-run p99s when every replicate carries one (store 0005_latency),
    with its log-scale interval; else None. With it: whether it is of all I/Os. No whisker
    when the interval is undetermined or its upper end is only the slowest completion seen
    (a bound, not an end)."""
    from poolbench.report.metrics import DEFAULT_LATENCY, histograms, percentile_ns

    runs = histograms(cell.clats) if cell.clats else None
    if not (runs is not None and len(runs) == len(cell.values)) and not all(
        percentile_ns(c, "99") for c in (cell.clats or [None] * len(cell.values))
    ):
        return None
    f = DEFAULT_LATENCY.figure(cell.policy, cell.values, cell.clats)
    if not math.isfinite(f.center):
        return None
    whisker = f.determined and not f.open_high
    low, high = (f.low / 1000, f.high / 1000) if whisker else (None, None)
    return Point(0.0, f.center / 1000, low, high), f.pooled  # µs → ms


def families(run: RunData) -> dict[str, list[tuple[str, int, int]]]:
    """Workload base → [(workload, queue depth, jobs)], for bases swept over ≥ 2 depths."""
    out: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for w in run.workloads:
        m = _LOAD.match(w)
        if m:
            out[m.group(1)].append((w, int(m.group(2)), int(m.group(3) or 1)))
    return {b: v for b, v in out.items() if len({qd for _w, qd, _j in v}) >= 2}


def curve_points(
    run: RunData, members: list[tuple[str, int, int]]
) -> tuple[dict[str, list[Point]], bool]:
    """Series name → points (x = mean IOPS, y = latency ms), and whether all y are p99."""
    series, what = _curve(run, members)
    return series, what is not None


def _curve(
    run: RunData, members: list[tuple[str, int, int]]
) -> tuple[dict[str, list[Point]], str | None]:
    """The points, and what every y is: 'pooled' (of all I/Os), 'geomean' (no histograms),
    'mixed', or None (Little's law somewhere: no p99 on the axis)."""
    series: dict[str, list[Point]] = defaultdict(list)
    kinds: set[bool] = set()
    all_p99 = True
    for cfg in run.configs:
        for w, qd, jobs in sorted(members, key=lambda m: (m[2], m[1])):
            cell = run.cell(cfg, w)
            if cell is None or not cell.values:
                continue
            iops = sum(cell.values) / len(cell.values)
            got = _p99(cell)
            all_p99 = all_p99 and got is not None
            if got is not None:
                kinds.add(got[1])
                point = Point(iops, got[0].y, got[0].low, got[0].high)
            else:
                point = Point(iops, qd * jobs / iops * 1000 if iops > 0 else 0.0)
            series[f"{run.label(cfg)}, {jobs} job(s)"].append(point)
    what = None
    if all_p99:
        what = "pooled" if kinds == {True} else "geomean" if kinds == {False} else "mixed"
    return series, what


def chart(run: RunData, base: str, members: list[tuple[str, int, int]], chart_id: str) -> Safe:
    series, what = _curve(run, members)
    y_label = {
        "pooled": "p99 latency of all I/Os (ms, 95% CI)",
        "geomean": "p99 latency, geometric mean of the runs' p99s (ms, 95% CI)",
        "mixed": "p99 latency of all I/Os, or the runs' geometric mean without histograms (ms)",
        None: "mean latency (ms, Little's law)",
    }[what]
    xs = sorted({p.x for pts in series.values() for p in pts})
    # Only the ends are labelled: the points are IOPS values, too close to print each.
    ticks = {x: "" for x in xs} | ({xs[0]: f"{xs[0]:,.0f}", xs[-1]: f"{xs[-1]:,.0f}"} if xs else {})
    return line_chart(
        chart_id,
        f"{base}: latency against IOPS as the queue deepens",
        "IOPS",
        y_label,
        sorted(series.items()),
        x_tick_text=ticks,
    )
