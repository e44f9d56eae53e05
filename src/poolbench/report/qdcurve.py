"""The queue-depth curve chart: IOPS against latency, one line per configuration and job
count, one point per queue depth (the qd-curve study's workloads, rand-read-4k-qd8-j4).

The latency is the p99 of all I/Os of the replicates (their histograms merged; the geometric
mean of the runs' p99s for runs stored without histograms) when the measurement recorded
one, else the mean latency Little's law
gives for fio's closed loop (outstanding I/Os / IOPS, exact for a fixed queue depth); the axis
says which. Chart ids: `chart-qd-<workload base>` (e.g. chart-qd-rand-read-4k).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping

from poolbench.report.data import Cell, RunData
from poolbench.report.svg import Safe
from poolbench.report.svg_lines import Point, line_chart

_LOAD = re.compile(r"^(.*?)-qd(\d+)(?:-j(\d+))?$")  # the queue depth is what the curve sweeps


def _p99_ms(cell: Cell) -> float | None:
    """The p99 in ms of all I/Os of the replicates (their fio histograms merged,
    stats.pooled) when every replicate stored one; else the geometric mean of the recorded
    per-run p99s when every replicate carries one (store 0005_latency); else None."""
    from poolbench.stats import pooled

    clats = cell.clats or [None] * len(cell.values)
    bins = [c.get("bins") if isinstance(c, Mapping) else None for c in clats]
    if bins and all(isinstance(b, Mapping) and b for b in bins):
        runs = [{int(k): int(v) for k, v in b.items()} for b in bins if isinstance(b, Mapping)]
        got = pooled.pooled_percentile(runs, 99.0)
        if math.isfinite(got.value):
            return got.value / 1e6
    found = []
    for clat in clats:
        pct = clat.get("percentiles") if isinstance(clat, Mapping) else None
        p99 = pct.get("99") if isinstance(pct, Mapping) else None
        if not isinstance(p99, int | float) or not p99 > 0:
            return None
        found.append(math.log(float(p99)))
    return math.exp(sum(found) / len(found)) / 1e6 if found else None


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
    series: dict[str, list[Point]] = defaultdict(list)
    all_p99 = True
    for cfg in run.configs:
        for w, qd, jobs in sorted(members, key=lambda m: (m[2], m[1])):
            cell = run.cell(cfg, w)
            if cell is None or not cell.values:
                continue
            iops = sum(cell.values) / len(cell.values)
            p99 = _p99_ms(cell)
            all_p99 = all_p99 and p99 is not None
            lat = p99 if p99 is not None else (qd * jobs / iops * 1000 if iops > 0 else 0.0)
            series[f"{run.label(cfg)}, {jobs} job(s)"].append(Point(iops, lat))
    return series, all_p99


def chart(run: RunData, base: str, members: list[tuple[str, int, int]], chart_id: str) -> Safe:
    series, all_p99 = curve_points(run, members)
    y_label = "p99 latency (ms)" if all_p99 else "mean latency (ms, Little's law)"
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
