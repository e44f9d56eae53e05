"""Comparison tables (pure): per workload, every configuration against a baseline level.

The baseline is a level of one factor (default: the first factor that varies, at its first
level), and each configuration is compared with its *partner* — the same configuration with
that factor at the baseline level — so `layout=raidz2 ashift=12` is compared with
`layout=raidz1 ashift=12`, never with a configuration that differs in two ways. A run whose
configurations are not factor levels (a bench run's target path) compares against the first
configuration. Within one workload's table the comparisons form one family and Holm's
procedure controls its error rate (see `poolbench.stats.compare`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from poolbench.errors import UsageError
from poolbench.report.data import Cell, RunData
from poolbench.report.metrics import (
    DEFAULT_LATENCY,
    VALUE,
    Figure,
    Metric,
    fallback_note,
    latency_matters,
    statistic_label,
)
from poolbench.report.verdict import Verdict, ratio_text
from poolbench.stats import outliers
from poolbench.stats.compare import Ratio, constant, exact_ratio


@dataclass(frozen=True)
class Baseline:
    factor: str | None  # None: `level` is a whole configuration key
    level: str

    @property
    def label(self) -> str:
        return f"{self.factor}={self.level}" if self.factor else self.level

    def partner(self, config: str, run: RunData, configs: list[str]) -> str | None:
        """The configuration `config` is compared with; itself when it is the baseline."""
        if self.factor is None:
            return self.level if self.level in configs else None
        levels = run.levels(config)
        if self.factor not in levels:
            return None
        levels[self.factor] = self.level
        for c in configs:
            if run.levels(c) == levels:
                return c
        return None


def choose_baseline(run: RunData, spec: str | None = None) -> Baseline | None:
    """`spec` is FACTOR=LEVEL or a whole configuration key; None picks the default."""
    if len(run.configs) < 2:
        return None
    factors = run.factors()
    if spec:
        if spec in run.configs:
            return Baseline(None, spec)
        k, sep, v = spec.partition("=")
        if sep and k in factors and v in factors[k]:
            return Baseline(k, v)
        choices = [f"{k}={v}" for k, vs in factors.items() for v in vs] or run.configs
        raise UsageError(
            f"--baseline '{spec}' is not a level that varies in run {run.id}.",
            f"Choose one of: {', '.join(choices)}.",
        )
    if factors:
        k = next(iter(factors))
        return Baseline(k, factors[k][0])
    return Baseline(None, run.configs[0])


@dataclass
class Row:
    cell: Cell
    role: str  # baseline | compared | no-baseline | single
    change: Ratio | None = None
    notes: list[int] = field(default_factory=list)  # footnote numbers
    figure: Figure | None = None  # the table's metric across replicates

    @property
    def figure_text(self) -> str:
        if self.figure is not None and not _exact([self.cell], [self.cell.values]):
            return self.figure.text()
        return value_text(self.cell)


@dataclass
class WorkloadTable:
    workload: str
    unit: str
    baseline: Baseline | None
    rows: list[Row]
    metric: Metric = VALUE

    @property
    def statistic(self) -> str:
        """The figure column's header: 'mean ± 95% CI', 'of all I/Os (95% CI)' (a latency
        percentile pooled over the runs), or 'geometric mean (95% CI)' (no histograms)."""
        return statistic_label(self.metric, [r.figure for r in self.rows if r.figure])

    @property
    def title(self) -> str:
        """'seq-write (MiB/s)'; 'rand-read-4k: p99 completion latency (µs)'."""
        if self.metric.is_latency:
            return f"{self.workload}: {self.metric.title} ({self.unit})"
        return f"{self.workload} ({self.unit})"


class Footnotes:
    """Warnings numbered once across a report; each figure lists the numbers it carries."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def number(self, text: str) -> int:
        if text not in self.items:
            self.items.append(text)
        return self.items.index(text) + 1


def _exact(cells: Sequence[Cell], samples: Sequence[Sequence[float]]) -> bool:
    """Figures read from the pool (`Cell.exact`) whose replicates all agree: compared
    exactly. Replicates that disagree fall back to the statistics, which say so."""
    return (
        bool(cells)
        and all(c.exact for c in cells)
        and all(constant(xs) and xs[0] > 0 for xs in samples)
    )


def cell_warnings(cell: Cell, ci_target: float, metric: Metric = VALUE) -> list[str]:
    """The stored guard warnings, plus what the statistics say about this figure."""
    out = list(cell.warnings)
    if metric.is_latency:
        f = cell.figure(metric)
        if f.reason:
            out.append(f"{metric.key}: {f.reason}")
        return out + cell.metric_warnings(metric)
    if latency_matters(cell.workload_kind, cell.fio_options) and cell.has(DEFAULT_LATENCY):
        # The p99 column beside the figure (report/terminal.py) says which p99 it is.
        note = fallback_note(DEFAULT_LATENCY)
        out += [w for w in cell.metric_warnings(DEFAULT_LATENCY) if w == note]
    s = cell.summary
    if _exact([cell], [cell.values]):
        return out  # a figure read from the pool: identical replicates are its nature
    if s.reason:
        out.append(s.reason)
    elif s.rel_halfwidth > ci_target:
        out.append(
            f"the 95% CI is wider than the target ±{ci_target:.0%} of the mean: the figure is "
            "noisy; more replicates or a quieter machine would narrow it"
        )
    if s.outliers:
        runs = ", ".join(str(cell.replicates[i] + 1) for i in s.outliers)
        out.append(outliers.note(runs))
    return out


def _role(run: RunData, row: Row, baseline: Baseline | None, present: list[str]) -> str | None:
    """The row's role against the baseline, and its partner's configuration if compared."""
    if baseline is None:
        return None
    partner = baseline.partner(row.cell.config, run, present)
    if partner is None:
        row.role = "no-baseline"
    elif partner == row.cell.config:
        row.role = "baseline"
    else:
        row.role = "compared"
        return partner
    return None


def workload_table(
    run: RunData, workload: str, baseline: Baseline | None, notes: Footnotes,
    metric: Metric = VALUE, known: Verdict | None = None,
) -> WorkloadTable:  # fmt: skip
    """One workload's rows in `metric` (cells without that figure are left out), each
    compared with its baseline partner: as the answer (`known`) compared them when it
    shows every such pair — one interval per pair in the whole report — else as one Holm
    family of the table's own."""
    cells = [c for c in (run.cell(cfg, workload) for cfg in run.configs) if c is not None]
    cells = [c for c in cells if c.has(metric)]
    present = [c.config for c in cells]
    rows: list[Row] = []
    pairs: list[tuple[list[float], list[float]]] = []
    compared: list[Row] = []
    shown: list[Ratio | None] = []  # the answer's comparison of each pair
    for cell in cells:
        row = Row(cell, "single", figure=cell.figure(metric))
        partner = _role(run, row, baseline, present)
        if partner is not None:
            base = run.cell(partner, workload)
            assert base is not None
            pairs.append((base.metric_values(metric), cell.metric_values(metric)))
            compared.append(row)
            mine = known if metric == VALUE else None  # the answer is about the figure
            shown.append(mine.ratio(workload, partner, cell.config) if mine else None)
        warnings = cell_warnings(cell, run.ci_target(), metric)
        row.notes = sorted({notes.number(w) for w in warnings})
        rows.append(row)
    answered = [r for r in shown if r is not None]
    if answered and len(answered) == len(pairs):
        family = answered
    elif not metric.is_latency and _exact(cells, [v for p in pairs for v in p]):
        family = [exact_ratio(a, b) for a, b in pairs]
    else:
        family = metric.compare(pairs, run.policy().min_runs)
    for row, ratio in zip(compared, family, strict=True):
        row.change = ratio
    unit = metric.unit(cells[0].unit) if cells else ""
    return WorkloadTable(workload, unit, baseline, rows, metric)


def tables(
    run: RunData, baseline: Baseline | None, notes: Footnotes, metric: Metric = VALUE,
    known: Verdict | None = None,
) -> list[WorkloadTable]:  # fmt: skip
    """Every workload's table in `metric`; workloads without that figure have none.
    `known`: the run's answer, whose comparisons the tables show where they are the same."""
    out = [workload_table(run, w, baseline, notes, metric, known) for w in run.workloads]
    return [t for t in out if t.rows]


def change_text(row: Row) -> str:
    if row.role == "baseline":
        return "baseline"
    if row.role == "no-baseline":
        return "no baseline measured"
    if row.change is None:
        return ""
    return row.change.full_text()


def value_text(cell: Cell) -> str:
    """A figure as tables and answers print it: an exact one (read from the pool, every
    replicate equal) with three decimals and no interval (0.318 GiB, not 0.3, for small
    test pools); a measured one as mean ± half its 95% interval."""
    if _exact([cell], [cell.values]):
        return f"{cell.values[0]:,.3f}"
    return mean_ci_text(cell)


def mean_ci_text(cell: Cell) -> str:
    from poolbench.report.data import fmt_value

    s = cell.summary
    if math.isnan(s.ci_low):
        return fmt_value(s.mean)
    return f"{fmt_value(s.mean)} ± {fmt_value((s.ci_high - s.ci_low) / 2)}"


def short_change(row: Row) -> str:
    """The change as the verdict prints it ('n.s. [-11.4%, +17.1%]'), in the terminal
    (a cell that stays within two lines at 80 columns; what n.s. could have detected is
    said under the table) and on the page alike: one text per interval."""
    if row.role == "compared" and row.change is not None:
        if row.change.undetermined:
            return row.change.undetermined
        return ratio_text(row.change)
    return change_text(row)
