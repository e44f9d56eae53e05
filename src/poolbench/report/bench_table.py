"""The result of one `poolbench bench`: a rich table for people, JSON for scripts."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from poolbench.engine.session import WorkloadResult


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _amp_text(r: WorkloadResult) -> str:
    got = _mean(r.amplification)
    if got is None:
        return ""
    model = "?" if r.amplification_model is None else f"{r.amplification_model:.2f}"
    return f"{got:.2f}× ({model})"


def as_json(results: list[WorkloadResult]) -> list[dict[str, Any]]:
    out = []
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
                "write_amplification": _mean(r.amplification),
                "write_amplification_model": r.amplification_model,
                "cached_by_design": r.workload.cached_by_design,
                "served_by": list(r.served_by),
                "warnings": list(r.warnings),
            }
        )
    return out


def render(console: Console, results: list[WorkloadResult], header: str) -> None:
    table = Table(title=Text(header), title_justify="left", show_lines=False)
    table.add_column("workload", no_wrap=True)
    table.add_column("mean", justify="right", no_wrap=True)
    table.add_column("unit", no_wrap=True)
    table.add_column("95% CI", justify="right", no_wrap=True)
    table.add_column("runs", justify="right")
    table.add_column("device MiB/s", justify="right", no_wrap=True)
    amps = any(r.amplification for r in results)
    if amps:
        table.add_column("write amp. (model)", justify="right", no_wrap=True)
    table.add_column("notes")
    footnotes: list[str] = []
    for r in results:
        s = r.summary
        ci = "–" if math.isinf(s.rel_halfwidth) else f"±{s.rel_halfwidth:.1%}"
        dev = _fmt(sum(r.device_mib_s) / len(r.device_mib_s)) if r.device_mib_s else "unverified"
        notes = []
        if r.workload.cached_by_design:
            notes.append(f"[cyan]{r.served_label}[/]")
        for w in r.warnings:
            footnotes.append(w)
            notes.append(f"[yellow]⚠ {len(footnotes)}[/]")
        amp = [_amp_text(r)] if amps else []
        table.add_row(
            r.workload.name, _fmt(s.mean), r.workload.unit, ci, str(s.n), dev, *amp,
            " ".join(notes),
        )  # fmt: skip
    console.print(table)
    for i, text in enumerate(footnotes, 1):
        console.print(f"[yellow]⚠ {i}[/] {escape(text)}", highlight=False)
