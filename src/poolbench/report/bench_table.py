"""The result of one `poolbench bench`: a rich table for people, JSON for scripts.

Beside each workload's figure the table shows completion-latency percentiles: p99 for the
workloads chosen on latency (random I/O, synchronous writes) unless `--metric` names others;
each is the percentile of all I/Os of the replicates (their histograms merged) with its 95%
interval, or, for runs without histograms, the geometric mean of the replicates' percentiles,
labelled so (report/metrics.py). The JSON carries all four percentiles for every fio workload.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypedDict

from rich.console import Console
from rich.text import Text

from poolbench.engine.subject import WorkloadResult
from poolbench.report.layout import Column, print_fitted
from poolbench.report.metrics import (
    DEFAULT_LATENCY,
    LATENCY,
    LATENCY_UNIT,
    Metric,
    fallback_note,
    latency_matters,
    tail_warning,
)


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


class BenchResultJson(TypedDict):
    """One workload's result in `bench --json` (its `results`)."""

    workload: str
    mean: float
    unit: str
    ci_low: float | None
    ci_high: float | None
    confidence: float
    stdev: float | None
    replicates: int
    values: list[float]
    outliers: list[int]
    device_mean: float | None
    device_unit: str
    device_bytes_per_txn: float | None
    cpu_s_per_gib: float | None
    write_amplification: float | None
    write_amplification_model: float | None
    write_amplification_values: list[float]
    cached_by_design: bool
    served_by: list[str]
    # `unit`, `kind` and one entry per percentile of metrics.LATENCY (keys such as "p99.9",
    # each the figure's own as_dict with the replicates' values), filled by a loop over them
    latency: dict[str, object] | None
    warnings: list[str]


def latency_json(r: WorkloadResult) -> dict[str, object] | None:
    """Every percentile across the replicates (µs), or None when fio timed no completion."""
    out: dict[str, object] = {}
    for key, m in LATENCY.items():
        xs = m.values(r.values, r.clats)
        if xs:
            out[key] = {**m.figure(r.policy, r.values, r.clats).as_dict(), "values": xs}
    if not out:
        return None
    return {"unit": LATENCY_UNIT, "kind": "completion latency (fio clat)", **out}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _amp_text(r: WorkloadResult) -> str:
    got = _mean(r.amplification)
    if got is None:
        return ""
    model = "?" if r.amplification_model is None else f"{r.amplification_model:.2f}"
    return f"{got:.2f}× ({model})"


def per_txn(r: WorkloadResult) -> float | None:
    """pgbench: the mean device bytes written per transaction over the replicates."""
    got = [float(v) for g in r.guards if isinstance(pg := g.get("pgbench"), dict)
           and isinstance(v := pg.get("device_bytes_per_txn"), int | float)]  # fmt: skip
    return _mean(got)


def _per_txn_text(r: WorkloadResult) -> str:
    got = per_txn(r)
    return "–" if got is None else f"{got / 1024:,.1f}"


def as_json(results: list[WorkloadResult]) -> list[BenchResultJson]:
    out: list[BenchResultJson] = []
    for r in results:
        s = r.summary
        dev = sum(r.device_mib_s) / len(r.device_mib_s) if r.device_mib_s else None
        out.append(
            {
                "workload": r.workload.name,
                "mean": s.mean,
                "unit": r.workload.unit,
                "ci_low": None if math.isnan(s.ci_low) else s.ci_low,
                "ci_high": None if math.isnan(s.ci_high) else s.ci_high,
                "confidence": s.confidence,
                "stdev": None if math.isnan(s.first_stage_sd) else s.first_stage_sd,
                "replicates": s.n,
                "values": r.values,
                "outliers": list(s.outliers),
                "device_mean": dev,
                "device_unit": "MiB/s",
                "device_bytes_per_txn": per_txn(r),  # pgbench workloads (None: others)
                # fio's CPU + the filesystem's (guards/cpu.py), seconds per GiB moved
                "cpu_s_per_gib": _mean(r.cpu_s_per_gib),
                "write_amplification": _mean(r.amplification),
                "write_amplification_model": r.amplification_model,
                # each replicate's, in order: a window another writer disturbed stands out
                "write_amplification_values": list(r.amplification),
                "cached_by_design": r.workload.cached_by_design,
                "served_by": list(r.served_by),
                "latency": latency_json(r),
                "warnings": list(r.warnings),
            }
        )
    return out


def _shown(results: list[WorkloadResult], metrics: Sequence[Metric] | None) -> list[Metric]:
    """The latency columns: those asked for, else p99 when a workload is chosen on latency."""
    if metrics is not None:
        return [m for m in metrics if m.is_latency]
    wanted = any(latency_matters(r.workload.kind, r.workload.fio) and any(r.clats) for r in results)
    return [DEFAULT_LATENCY] if wanted else []


def _latency_text(r: WorkloadResult, m: Metric, metrics: Sequence[Metric] | None) -> str:
    xs = m.values(r.values, r.clats)
    if not xs or (metrics is None and not latency_matters(r.workload.kind, r.workload.fio)):
        return "–"
    return m.figure(r.policy, r.values, r.clats).text()


def render(
    console: Console,
    results: list[WorkloadResult],
    header: str,
    metrics: Sequence[Metric] | None = None,
) -> None:
    """The table; `metrics`: the latency percentiles to show (None: p99 where it matters)."""
    footnotes: list[str] = []
    notes: list[Text] = []
    lat = _shown(results, metrics)
    for r in results:
        t = Text()
        if r.workload.cached_by_design:
            t.append(f"{r.served_label} ", style="cyan")
        shown = [m for m in lat if _latency_text(r, m, metrics) != "–"]
        extra = [w for m in shown if (w := tail_warning(m, r.clats))]
        extra += [fallback_note(m) for m in shown
                  if not m.figure(r.policy, r.values, r.clats).pooled]  # fmt: skip
        for w in [*r.warnings, *extra]:
            footnotes.append(w)
            t.append(f"⚠{len(footnotes)} ", style="yellow")
        notes.append(t)
    cols = _columns(results, lat, metrics, notes)
    print_fitted(console, Text(header), cols, lambda: "see --json, or widen the terminal")
    for i, text in enumerate(footnotes, 1):
        line = Text(f"⚠{i} ", style="yellow")
        line.append(text)
        console.print(line)


def _columns(
    results: list[WorkloadResult],
    lat: list[Metric],
    metrics: Sequence[Metric] | None,
    notes: list[Text],
) -> list[Column]:
    def col(key: str, header: str, texts: list[str], **kw: Any) -> Column:
        return Column(key, header, [Text(x) for x in texts], **kw)

    sums = [r.summary for r in results]
    dev = [
        _fmt(sum(r.device_mib_s) / len(r.device_mib_s)) if r.device_mib_s else "unverified"
        for r in results
    ]
    cols = [
        col("workload", "workload", [r.workload.name for r in results]),
        col("mean", "mean", [_fmt(s.mean) for s in sums], justify="right"),
        col("unit", "unit", [r.workload.unit for r in results]),
        col(
            "ci",
            "95% CI",
            ["–" if math.isinf(s.rel_halfwidth) else f"±{s.rel_halfwidth:.1%}" for s in sums],
            justify="right",
        ),  # fmt: skip
        col("runs", "runs", [str(s.n) for s in sums], justify="right", optional=1),
        col("device", "device\nMiB/s", dev, justify="right", optional=2),
    ]
    if any(r.workload.kind == "pgbench" for r in results):
        texts = [_per_txn_text(r) for r in results]
        cols.append(col("txn", "device\nKiB/txn", texts, justify="right", optional=3))
    if any(r.amplification for r in results):
        amps = [_amp_text(r) for r in results]
        cols.append(col("amp", "write amp.\n(model)", amps, justify="right", optional=3))
    for m in lat:
        texts = [_latency_text(r, m, metrics) for r in results]
        figs = [m.figure(r.policy, r.values, r.clats)
                for r in results if m.values(r.values, r.clats)]  # fmt: skip
        what = "all I/Os" if any(f.pooled for f in figs) else "geo. mean"  # which percentile
        cols.append(col(m.key, f"{m.key} {LATENCY_UNIT}\n{what}", texts, justify="right"))
    cols.append(Column("notes", "notes", notes, prose=True))
    return cols
