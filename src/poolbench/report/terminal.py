"""`poolbench report RUN` and `poolbench compare` in the terminal (rich tables).

Every string that comes from the store is passed to rich as `Text`, never as markup, so a
configuration or warning containing "[bold]" prints as written.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from poolbench.planner.performance import DiskSpeed
from poolbench.report import (
    columns,
    header,
    predicted,
    replay_view,
    screened_disk,
    verdict_view,
)
from poolbench.report.compare_runs import Pair, RunComparison
from poolbench.report.data import RunData, load_run
from poolbench.report.layout import Column, config_columns, print_fitted
from poolbench.report.metrics import (
    DEFAULT_LATENCY,
    LATENCY_UNIT,
    VALUE,
    Metric,
    statistic_label,
)
from poolbench.report.tables import (
    Baseline,
    Footnotes,
    WorkloadTable,
    choose_baseline,
    short_change,
    tables,
)
from poolbench.report.verdict import verdict
from poolbench.store.db import Store


def _notes(numbers: list[int]) -> Text:
    return Text(" ".join(f"⚠{n}" for n in numbers), style="yellow")


def _change(text: str, significant: bool) -> Text:
    if significant:
        return Text(text, style="bold")
    return Text(text, style="dim")


def render_header(console: Console, lines: list[tuple[str, str]]) -> None:
    for label, text in lines:
        t = Text()
        t.append(f"{label}: ", style="bold")
        t.append(text)
        console.print(t)


def render_footnotes(console: Console, notes: Footnotes) -> None:
    for i, text in enumerate(notes.items, 1):
        t = Text(f"⚠{i} ", style="yellow")
        t.append(text)
        console.print(t)


WIDER = "the figures are in `poolbench export`, or widen the terminal (COLUMNS)"


def _latency_column(wt: WorkloadTable) -> Column | None:
    """p99 beside the figure where latency decides (random I/O, synchronous writes)."""
    beside = columns.latency_beside(wt)
    if beside is None:
        return None
    header = f"{DEFAULT_LATENCY.key} {LATENCY_UNIT}\n{beside.statistic}"
    return Column("p99", header, [Text(t) for t in beside.texts()], "right", optional=3)


def workload_columns(run: RunData, wt: WorkloadTable, baseline: Baseline | None) -> list[Column]:
    """The columns of one workload's table, in order; optional ones may be left out to fit."""
    rows = wt.rows
    cols = config_columns(run, [r.cell.config for r in rows])
    cols.append(Column("figure", wt.statistic, [Text(r.figure_text) for r in rows], "right"))
    if baseline is not None:
        changes = [
            _change(short_change(r), r.change is not None and r.change.significant) for r in rows
        ]
        cols.append(Column("change", "change", changes, prose=True))
    cols.append(
        Column("runs", "runs", [Text(str(columns.runs(wt, r))) for r in rows], "right",
               optional=1)
    )  # fmt: skip
    if not wt.metric.is_latency:
        cells = [Text(t) for t in columns.device_texts(wt)]
        cols.append(Column("device", "device\nMiB/s", cells, "right", optional=2))
        if any(r.cell.amplification is not None for r in rows):
            amps = [Text(r.cell.amplification_text()) for r in rows]
            cols.append(Column("amp", "write amp.\n(model)", amps, "right", optional=3))
        lat = _latency_column(wt)
        cols += [lat] if lat is not None else []
    cols.append(Column("notes", "notes", [_notes(r.notes) for r in rows], prose=True))
    return cols


def render_run(
    console: Console,
    run: RunData,
    baseline: Baseline | None,
    disk: DiskSpeed | None = None,
    metrics: Sequence[Metric] = (VALUE,),
) -> None:
    console.print(Text(header.title(run), style="bold"))
    render_header(console, header.lines(run, baseline))
    render_failed_trials(console, run)
    if not run.measurements:
        console.print("no measurements stored in this run")
        return
    notes = Footnotes()
    bases = {baseline.factor: baseline.level} if baseline and baseline.factor else {}
    answer = verdict(run, bases)  # first: the tables show its comparisons where they agree
    for metric in metrics:
        wts = tables(run, baseline, notes, metric, answer)
        if not wts:
            console.print(Text(f"{metric.key}: not recorded for any workload of this run"))
        for wt in wts:
            title = wt.title + (f"; change against {baseline.label}" if baseline else "")
            print_fitted(console, Text(title), workload_columns(run, wt, baseline), lambda: WIDER)
            for legend in columns.legends(wt, baseline):
                console.print(Text(legend, style="dim"))
    render_footnotes(console, notes)
    replay_view.render(console, run)  # how faithful each replayed trace was
    hints = predicted.render_terminal(console, run, disk)  # the model beside the figures
    verdict_view.render(console, run, answer, hints)


def comparison_columns(cmp: RunComparison, pairs: list[Pair], notes: Footnotes) -> list[Column]:
    """One workload's pairs: the factors (or A → B targets), both figures, the change."""
    a, b, m = cmp.a, cmp.b, cmp.metric
    cols: list[Column] = []
    if any(p.cell_a.config != p.cell_b.config for p in pairs):
        texts = [f"{a.label(p.cell_a.config)} → {b.label(p.cell_b.config)}" for p in pairs]
        cols.append(Column("configuration", "configuration", [Text(t) for t in texts], prose=True))
    else:
        cols += config_columns(a, [p.cell_a.config for p in pairs])
    for side, run in (("A", "cell_a"), ("B", "cell_b")):
        figs = [Text(getattr(p, run).figure(m).text()) for p in pairs]
        cols.append(Column(f"fig{side}", side, figs, "right"))
    changes = [_change(p.change.full_text(), p.change.significant) for p in pairs]
    cols.append(Column("change", "change B vs A", changes, prose=True))
    runs = [f"{len(p.cell_a.metric_values(m))}/{len(p.cell_b.metric_values(m))}" for p in pairs]
    cols.append(Column("runs", "runs A/B", [Text(r) for r in runs], "right", optional=1))
    numbers = [
        sorted({notes.number(f"A: {w}") for w in p.warnings_a}
               | {notes.number(f"B: {w}") for w in p.warnings_b})
        for p in pairs
    ]  # fmt: skip
    cols.append(Column("notes", "notes", [_notes(n) for n in numbers], prose=True))
    return cols


def render_comparison(console: Console, cmp: RunComparison) -> None:
    a, b = cmp.a, cmp.b
    console.print(Text(f"A: {header.title(a)}", style="bold"))
    console.print(Text(f"B: {header.title(b)}", style="bold"))
    for label, va, vb in cmp.metadata_differences:
        t = Text()
        t.append(f"{label}: ", style="bold")
        t.append(f"A {va} | B {vb}")
        console.print(t)
    for problem in cmp.problems:
        t = Text("forced past: ", style="bold red")
        t.append(problem)
        console.print(t)
    how = (
        "ratio of geometric means with its 95% t-interval on the log scale"
        if cmp.metric.is_latency
        else "ratio of means with its 95% Fieller interval (Welch df)"
    )
    console.print(
        f'change B vs A: {how}, Holm-corrected over all pairs; "no significant difference" '
        "when the interval includes no change",
        highlight=False,
    )
    notes = Footnotes()
    by_workload: dict[str, list[Pair]] = {}
    for p in cmp.pairs:
        by_workload.setdefault(p.workload, []).append(p)
    m = cmp.metric
    for workload, pairs in by_workload.items():
        unit = m.unit(pairs[0].cell_a.unit)
        what = f"{m.title}, " if m.is_latency else ""
        figs = [c.figure(m) for p in pairs for c in (p.cell_a, p.cell_b) if c.has(m)]
        title = Text(f"{workload} ({unit}): {what}{statistic_label(m, figs)} in A and B")
        print_fitted(console, title, comparison_columns(cmp, pairs, notes), lambda: WIDER)
    for side, items in (("A", cmp.only_a), ("B", cmp.only_b)):
        if items:
            t2 = Text(f"only in {side}: ", style="bold")
            t2.append(", ".join(f"{c} / {w}" for c, w in items))
            console.print(t2)
    render_footnotes(console, notes)


def render_stored(
    console: Console,
    store: Store,
    run_id: int,
    baseline: str | None = None,
    disk: DiskSpeed | None = None,
    metrics: Sequence[Metric] = (VALUE,),
) -> None:
    """The report of a stored run (what `poolbench run` prints at the end of a study)."""
    run = load_run(store, str(run_id))
    base = choose_baseline(run, baseline) if baseline else None
    render_run(console, run, base, screened_disk.disk_for(store, run, disk), metrics)


def render_failed_trials(console: Console, run: RunData) -> None:
    """The trials that failed (each torn down, its cells left to `run --resume`), with why."""
    if not run.failed_trials:
        return
    t = Table(
        title=Text(f"{len(run.failed_trials)} trial(s) failed (not measured)", style="red"),
        title_justify="left",
    )
    t.add_column("trial", justify="right")
    t.add_column("configuration", overflow="fold")
    t.add_column("replicate", justify="right")
    t.add_column("reason", overflow="fold")
    for f in run.failed_trials:
        t.add_row(
            Text(str(f.trial_index)),
            Text(run.label(f.config)),
            Text(str(f.replicate + 1)),
            Text(f.reason),
        )
    console.print(t)
    console.print(Text(f"Measure them with: {run.resume_hint}"))
