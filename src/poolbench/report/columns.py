"""What a workload's table shows beside each figure, and the lines under it (pure): the
replicate count, device MiB/s, write amplification against the layout's model, p99 where
latency decides, and the legends. The terminal lays these out as columns, and `report
--json` carries the same texts and numbers, so the two cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from poolbench.report.data import fmt_value
from poolbench.report.metrics import DEFAULT_LATENCY, Figure, latency_matters
from poolbench.report.tables import Baseline, Row, WorkloadTable
from poolbench.report.verdict import NS
from poolbench.stats.power import BLIND


def runs(wt: WorkloadTable, row: Row) -> int:
    """The replicates behind the row's figure in the table's metric."""
    return len(row.cell.metric_values(wt.metric))


def device_texts(wt: WorkloadTable) -> list[str]:
    """Per row, the device MiB/s as printed: the mean over the replicates, 'unverified' where
    no device could be counted, 'no I/O' for figures read from the pool."""
    no_io = all(r.cell.exact for r in wt.rows)  # read from the pool: nothing to count
    out = []
    for r in wt.rows:
        d = r.cell.device_mean
        out.append("no I/O" if no_io else "unverified" if d is None else fmt_value(d))
    return out


@dataclass(frozen=True)
class LatencyBeside:
    """p99 beside the figure of a random or synchronous workload: which p99 it is (of all
    I/Os, histograms merged; else the geometric mean of the runs' own) and each row's."""

    statistic: str  # "all I/Os" | "geo. mean"
    figures: list[Figure | None]  # per row; None where the row recorded no latency

    def texts(self) -> list[str]:
        return [f.text() if f is not None else "–" for f in self.figures]


def latency_beside(wt: WorkloadTable) -> LatencyBeside | None:
    """p99 beside the figure where latency decides (random I/O, synchronous writes); None
    for a latency table (the figure is one) or when no row needs or has it."""
    rows = wt.rows
    if wt.metric.is_latency or not any(
        latency_matters(r.cell.workload_kind, r.cell.fio_options) and r.cell.has(DEFAULT_LATENCY)
        for r in rows
    ):
        return None
    figs = [r.cell.figure(DEFAULT_LATENCY) if r.cell.has(DEFAULT_LATENCY) else None
            for r in rows]  # fmt: skip
    # Cells without histograms carry the footnote that says theirs is the geometric mean.
    pooled = any(f is not None and f.pooled for f in figs)
    return LatencyBeside("all I/Os" if pooled else "geo. mean", figs)


def ns_legend(wt: WorkloadTable) -> str:
    """'n.s. = no significant difference; these comparisons could detect ≥ 19–21%'."""
    found = sorted(
        r.change.detectable
        for r in wt.rows
        if r.change is not None and r.change.determined and not r.change.significant
        and not r.change.exact and math.isfinite(r.change.detectable)
    )  # fmt: skip
    if not found:
        return ""
    if found[0] > BLIND:
        return (f"{NS} = no significant difference; too few replicates at this noise to "
                "detect even a 2× change (more replicates, or longer windows, would)")  # fmt: skip
    blind = found[-1] > BLIND
    found = [x for x in found if x <= BLIND]
    lo, hi = (math.ceil(x * 100 - 1e-9) for x in (found[0], found[-1]))
    span = f"{lo}%" if lo == hi else f"{lo}–{hi}%"
    if blind:
        span += " (some could not detect even a 2× change: too few replicates)"
    return f"{NS} = no significant difference; these comparisons could detect ≥ {span}"


def latency_change_legend(wt: WorkloadTable, baseline: Baseline | None) -> str:
    """Under a latency table with a change column: what the change compares, which is not
    the figure shown when that is the percentile of all I/Os."""
    if baseline is None or not wt.metric.is_latency:
        return ""
    return (
        f"change: ratio of the geometric means of the runs' own {wt.metric.key}s, "
        "95% t-interval on the log scale, Holm over the table"
    )


def legends(wt: WorkloadTable, baseline: Baseline | None) -> list[str]:
    """The lines printed under the table, in order."""
    return [t for t in (ns_legend(wt), latency_change_legend(wt, baseline)) if t]
