"""`poolbench compare RUN_A RUN_B --json`: the comparison of two runs as one JSON document
with stable keys (docs/export.md, "compare --json"). Built from the same RunComparison the
terminal prints, so every `text` is the terminal's string and the figures agree to the digit.

Add keys, never rename or remove one without raising COMPARE_VERSION.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from poolbench.report.compare_runs import Pair, RunComparison
from poolbench.report.data import RunData
from poolbench.report.export import iso_time
from poolbench.report.report_json import comparison

COMPARE_VERSION = 1
Json = dict[str, object]


def _run(run: RunData) -> Json:
    return {
        "id": run.id,
        "kind": run.kind,
        "name": run.name,
        "status": run.status,
        "started_at": iso_time(run.started_at),
    }


def _pair(cmp: RunComparison, p: Pair) -> Json:
    """One workload on one matching configuration: both figures and the change of B vs A
    (a comparison whose `config` is B's configuration and `against` A's)."""
    m = cmp.metric
    fig_a, fig_b = p.cell_a.figure(m), p.cell_b.figure(m)
    change = comparison("b_vs_a", p.workload, p.cell_b.config, p.cell_a.config, p.change)
    change["text"] = p.change.full_text()  # the terminal's column: a non-result says more
    return {
        "metric": m.key,
        "workload": p.workload,
        "unit": m.unit(p.cell_a.unit),
        "config_a": p.cell_a.config,
        "config_b": p.cell_b.config,
        "label_a": cmp.a.label(p.cell_a.config),
        "label_b": cmp.b.label(p.cell_b.config),
        "figure_a": fig_a.as_dict(),
        "figure_b": fig_b.as_dict(),
        "figure_a_text": fig_a.text(),
        "figure_b_text": fig_b.text(),
        "change": change,
        "warnings_a": list(p.warnings_a),
        "warnings_b": list(p.warnings_b),
    }


def to_dict(comparisons: Sequence[RunComparison]) -> Json:
    """The document for one comparison per metric (`--metric value,p99`: two)."""
    first = comparisons[0]
    return {
        "format": "poolbench-compare",
        "version": COMPARE_VERSION,
        "a": _run(first.a),
        "b": _run(first.b),
        "metrics": [c.metric.key for c in comparisons],
        "metadata_differences": [
            {"what": what, "a": va, "b": vb} for what, va, vb in first.metadata_differences
        ],
        "forced_past": list(dict.fromkeys(p for c in comparisons for p in c.problems)),
        "pairs": [_pair(c, p) for c in comparisons for p in c.pairs],
        "only_a": [
            {"metric": c.metric.key, "config": cfg, "workload": wl}
            for c in comparisons
            for cfg, wl in c.only_a
        ],
        "only_b": [
            {"metric": c.metric.key, "config": cfg, "workload": wl}
            for c in comparisons
            for cfg, wl in c.only_b
        ],
    }


def to_json(comparisons: Sequence[RunComparison]) -> str:
    return json.dumps(to_dict(comparisons), indent=2, ensure_ascii=False) + "\n"
