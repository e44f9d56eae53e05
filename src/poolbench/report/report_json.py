"""`poolbench report RUN --json`: the report as one JSON document with stable keys
(docs/export.md, "report --json"): the tables, every comparison with its ratio, interval
and significance, and the verdict — the very records the terminal and the HTML print, so
the three agree to the digit (every `text` is what the terminal shows).

Add keys, never rename or remove one without raising REPORT_VERSION.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from poolbench.planner.performance import DiskSpeed
from poolbench.report import predicted
from poolbench.report.data import RunData
from poolbench.report.metrics import VALUE, Metric
from poolbench.report.tables import Baseline, Footnotes, Row, WorkloadTable, short_change, tables
from poolbench.report.verdict import Effect, Ranking, Verdict, ratio_text, verdict
from poolbench.report.verdict_text import level_changes, next_steps, ranking_sentence
from poolbench.stats.compare import Ratio

REPORT_VERSION = 1
Json = dict[str, object]


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def comparison(kind: str, workload: str, config: str, against: str, r: Ratio) -> Json:
    """One comparison: `config` ÷ `against` with its interval at Holm's level."""
    return {
        "kind": kind,
        "workload": workload,
        "config": config,
        "against": against,
        "ratio": _num(r.ratio),
        "ci_low": _num(r.low),
        "ci_high": _num(r.high),
        "confidence": r.confidence,
        "significant": r.significant,
        "p_value": _num(r.p_value),
        "detectable": _num(r.detectable),
        "exact": r.exact,
        "undetermined": r.undetermined or None,
        "text": ratio_text(r),
    }


def _row(run: RunData, wt: WorkloadTable, row: Row, notes: Footnotes, found: list[Json]) -> Json:
    change = None
    if row.role == "compared" and row.change is not None and wt.baseline is not None:
        partner = wt.baseline.partner(row.cell.config, run, [r.cell.config for r in wt.rows])
        change = comparison("baseline", wt.workload, row.cell.config, partner or "", row.change)
        found.append(change)
    return {
        "config": row.cell.config,
        "label": run.label(row.cell.config),
        "levels": run.levels(row.cell.config),
        "figure": row.cell.figure(wt.metric).as_dict(),
        "figure_text": row.figure_text,
        "role": row.role,
        "change": change,
        "change_text": short_change(row),
        "notes": [notes.items[n - 1] for n in row.notes],
    }


def _tables(
    run: RunData, baseline: Baseline | None, metrics: Sequence[Metric], v: Verdict,
    found: list[Json],
) -> list[Json]:  # fmt: skip
    notes = Footnotes()
    out: list[Json] = []
    for metric in metrics:
        for wt in tables(run, baseline, notes, metric, v):
            rows = [_row(run, wt, r, notes, found) for r in wt.rows]
            out.append({"workload": wt.workload, "unit": wt.unit, "metric": metric.key,
                        "rows": rows})  # fmt: skip
    return out


def _ranking(rk: Ranking, found: list[Json]) -> Json:
    ranked = []
    for i, s in enumerate(rk.standings):
        vs = None
        if s.ratio is not None:
            vs = comparison("vs_best", rk.workload, s.config, rk.best.config, s.ratio)
            found.append(vs)
        ranked.append({
            "rank": i + 1, "config": s.config, "label": s.label,
            "figure": s.figure.as_dict(), "figure_text": rk.figure_text(i),
            "vs_best": vs, "vs_best_text": ratio_text(s.ratio), **s.cost.as_dict(),
        })  # fmt: skip
    d = rk.to_decide
    decide = None if d is None else {
        "best": d.best, "other": d.other, "observed_change": d.change, "cv": _num(d.cv),
        "replicates": d.replicates, "have": d.have,
    }  # fmt: skip
    return {
        "workload": rk.workload, "unit": rk.unit, "higher_is_better": rk.higher_better,
        "exact": rk.exact, "ranked": ranked, "tied": list(rk.tied),
        "tie": rk.tie_text() or None, "to_decide": decide, "sentence": ranking_sentence(rk),
    }  # fmt: skip


def _effect(e: Effect, found: list[Json]) -> Json:
    found.append(comparison("effect", e.workload, e.config, e.partner, e.ratio))
    return {
        "workload": e.workload, "factor": e.factor, "base": e.base, "level": e.level,
        "context": e.context, "comparison": found[-1],
    }  # fmt: skip


def _verdict(run: RunData, v: Verdict, extra: Sequence[str], found: list[Json]) -> Json:
    changes = [
        {"factor": lc.factor, "base": lc.base, "level": lc.level, "costs": lc.costs or None,
         "sentence": lc.sentence()}
        for lc in level_changes(v, run)
    ]  # fmt: skip
    return {
        "rankings": [_ranking(rk, found) for rk in v.rankings],
        "effects": [_effect(e, found) for e in v.effects],
        "level_changes": changes,
        "next_steps": next_steps(v, run, extra),
    }


def report(
    run: RunData, baseline: Baseline | None, disk: DiskSpeed | None = None,
    metrics: Sequence[Metric] = (VALUE,),
) -> Json:  # fmt: skip
    """The document (see the module doc); `comparisons` lists every comparison once."""
    bases = {baseline.factor: baseline.level} if baseline and baseline.factor else {}
    v = verdict(run, bases)
    comparisons: list[Json] = []  # every comparison below, once, in the order shown
    doc_tables = _tables(run, baseline, metrics, v, comparisons)
    doc_verdict = _verdict(run, v, predicted.next_steps(run, disk), comparisons)
    return {
        "format": "poolbench-report",
        "version": REPORT_VERSION,
        "run": {
            "id": run.id,
            "kind": run.kind,
            "name": run.name,
            "status": run.status,
            **_not_screened(run),
        },
        "baseline": baseline.label if baseline else None,
        "tables": doc_tables,
        "comparisons": comparisons,
        "verdict": doc_verdict,
    }


def _not_screened(run: RunData) -> Json:
    """What --no-screen left out (engine/screen_check.py), as the terminal's header says it."""
    said = run.metadata.get("screen")
    return {"not_screened": said} if isinstance(said, str) else {}


def to_json(
    run: RunData, baseline: Baseline | None, disk: DiskSpeed | None = None,
    metrics: Sequence[Metric] = (VALUE,),
) -> str:  # fmt: skip
    return json.dumps(report(run, baseline, disk, metrics), indent=2, ensure_ascii=False) + "\n"
