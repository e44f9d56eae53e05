"""`poolbench report RUN` and `poolbench compare` in the terminal (rich tables).

Every string that comes from the store is passed to rich as `Text`, never as markup, so a
configuration or warning containing "[bold]" prints as written.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from poolbench.planner.performance import DiskSpeed
from poolbench.report import header, predicted
from poolbench.report.compare_runs import RunComparison
from poolbench.report.data import RunData, fmt_value, load_run
from poolbench.report.tables import (
    Baseline,
    Footnotes,
    change_text,
    choose_baseline,
    mean_ci_text,
    tables,
)
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


def render_run(
    console: Console, run: RunData, baseline: Baseline | None, disk: DiskSpeed | None = None
) -> None:
    console.print(Text(header.title(run), style="bold"))
    render_header(console, header.lines(run, baseline))
    render_failed_trials(console, run)
    if not run.measurements:
        console.print("no measurements stored in this run")
        return
    notes = Footnotes()
    for wt in tables(run, baseline, notes):
        t = Table(title=Text(f"{wt.workload} ({wt.unit})"), title_justify="left")
        t.add_column("configuration", overflow="fold")
        t.add_column("mean ± 95% CI", justify="right", no_wrap=True)
        if baseline is not None:
            t.add_column(Text(f"vs {baseline.label}"))
        t.add_column("runs", justify="right")
        t.add_column("device MiB/s", justify="right", no_wrap=True)
        amps = any(row.cell.amplification is not None for row in wt.rows)
        if amps:
            t.add_column("write amp. (model)", justify="right", no_wrap=True)
        t.add_column("notes")
        for row in wt.rows:
            dev = row.cell.device_mean
            cells: list[Text] = [Text(run.label(row.cell.config)), Text(mean_ci_text(row.cell))]
            if baseline is not None:
                sig = row.change is not None and row.change.significant
                cells.append(_change(change_text(row), sig))
            cells += [
                Text(str(row.cell.summary.n)),
                Text("unverified" if dev is None else fmt_value(dev)),
                *([Text(row.cell.amplification_text())] if amps else []),
                _notes(row.notes),
            ]
            t.add_row(*cells)
        console.print(t)
    render_footnotes(console, notes)
    predicted.render_terminal(console, run, disk)  # the model beside the measured figures


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
    console.print(
        "change B vs A: ratio of means with its 95% Fieller interval (Welch df), "
        'Holm-corrected over all pairs; "no significant difference" when the interval '
        "includes no change",
        highlight=False,
    )
    notes = Footnotes()
    table = Table(title="matching workloads", title_justify="left")
    table.add_column("workload")
    table.add_column("configuration", overflow="fold")
    table.add_column("A mean ± CI", justify="right", no_wrap=True)
    table.add_column("B mean ± CI", justify="right", no_wrap=True)
    table.add_column("unit")
    table.add_column("change B vs A")
    table.add_column("runs A/B", justify="right")
    table.add_column("notes")
    for p in cmp.pairs:
        numbers = [notes.number(f"A: {w}") for w in p.warnings_a]
        numbers += [notes.number(f"B: {w}") for w in p.warnings_b]
        config = a.label(p.cell_a.config)
        if p.cell_a.config != p.cell_b.config:
            config = f"{config} → {b.label(p.cell_b.config)}"
        table.add_row(
            Text(p.workload),
            Text(config),
            Text(mean_ci_text(p.cell_a)),
            Text(mean_ci_text(p.cell_b)),
            Text(p.cell_a.unit),
            _change(p.change.full_text(), p.change.significant),
            Text(f"{p.cell_a.summary.n}/{p.cell_b.summary.n}"),
            _notes(sorted(set(numbers))),
        )
    console.print(table)
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
) -> None:
    """The report of a stored run (what `poolbench run` prints at the end of a study)."""
    run = load_run(store, str(run_id))
    render_run(console, run, choose_baseline(run, baseline), disk)


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
    console.print(Text(f"Measure them with: poolbench run STUDY --resume {run.id}"))
