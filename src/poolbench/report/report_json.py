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
from poolbench.report import columns, header, predicted, replay_view
from poolbench.report.data import RunData
from poolbench.report.metrics import VALUE, Metric
from poolbench.report.tables import Baseline, Footnotes, WorkloadTable, short_change, tables
from poolbench.report.verdict import Effect, Ranking, Verdict, ratio_text, verdict
from poolbench.report.verdict_text import (
    HOW_VERDICT,
    level_changes,
    next_steps,
    ranking_sentence,
)
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


def _row(run: RunData, wt: WorkloadTable, i: int, notes: Footnotes, found: list[Json]) -> Json:
    row = wt.rows[i]
    change = None
    if row.role == "compared" and row.change is not None and wt.baseline is not None:
        partner = wt.baseline.partner(row.cell.config, run, [r.cell.config for r in wt.rows])
        change = comparison("baseline", wt.workload, row.cell.config, partner or "", row.change)
        found.append(change)
    cell = row.cell
    beside = columns.latency_beside(wt)
    p99 = beside.figures[i] if beside is not None else None
    return {
        "config": cell.config,
        "label": run.label(cell.config),
        "levels": run.levels(cell.config),
        "figure": cell.figure(wt.metric).as_dict(),
        "figure_text": row.figure_text,
        "role": row.role,
        "change": change,
        "change_text": short_change(row),
        "runs": columns.runs(wt, row),
        "device_mib_s": _opt(cell.device_mean),
        "device_text": columns.device_texts(wt)[i],
        "write_amplification": _opt(cell.amplification),
        "write_amplification_model": _opt(cell.amplification_model),
        "write_amplification_text": cell.amplification_text() or None,
        "p99": p99.as_dict() if p99 is not None else None,
        "p99_text": beside.texts()[i] if beside is not None else None,
        "notes": [notes.items[n - 1] for n in row.notes],
    }


def _opt(x: float | None) -> float | None:
    return None if x is None else _num(x)


def _tables(
    run: RunData, baseline: Baseline | None, metrics: Sequence[Metric], v: Verdict,
    found: list[Json],
) -> list[Json]:  # fmt: skip
    notes = Footnotes()
    out: list[Json] = []
    for metric in metrics:
        for wt in tables(run, baseline, notes, metric, v):
            rows = [_row(run, wt, i, notes, found) for i in range(len(wt.rows))]
            beside = columns.latency_beside(wt)
            out.append({
                "workload": wt.workload, "unit": wt.unit, "metric": metric.key,
                "title": wt.title, "statistic": wt.statistic,
                "p99_statistic": beside.statistic if beside is not None else None,
                "rows": rows, "legends": columns.legends(wt, baseline),
            })  # fmt: skip
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
    compared = any(len(rk.standings) > 1 for rk in v.rankings)
    return {
        "how": HOW_VERDICT if compared else None,
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
    doc_tables = _tables(run, baseline, metrics, v, comparisons) if run.measurements else []
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
        "title": header.title(run),
        "header": [{"label": label, "text": text} for label, text in header.lines(run, baseline)],
        "failed_trials": _failed(run),
        "baseline": baseline.label if baseline else None,
        "tables": doc_tables,
        "comparisons": comparisons,
        "replay_fidelity": replay_view.cells(run),
        "predicted": predicted.as_json(predicted.predicted_table(run, disk), run),
        "verdict": doc_verdict,
    }


def _failed(run: RunData) -> list[Json]:
    """The trials that failed, as the terminal lists them before the tables."""
    return [{"trial": f.trial_index, "config": f.config, "label": run.label(f.config),
             "replicate": f.replicate + 1, "reason": f.reason}
            for f in run.failed_trials]  # fmt: skip


def _not_screened(run: RunData) -> Json:
    """What --no-screen left out (engine/screen/check.py), as the terminal's header says it."""
    said = run.metadata.not_screened
    return {"not_screened": said} if said is not None else {}


def to_json(
    run: RunData, baseline: Baseline | None, disk: DiskSpeed | None = None,
    metrics: Sequence[Metric] = (VALUE,),
) -> str:  # fmt: skip
    return json.dumps(report(run, baseline, disk, metrics), indent=2, ensure_ascii=False) + "\n"
