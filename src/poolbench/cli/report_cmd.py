"""`poolbench report`, `poolbench compare`, `poolbench export`: reading the result store."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from poolbench.cli.common import check_writable, db_option, disk_speed_option, open_store
from poolbench.errors import CommandLineError, UsageError
from poolbench.report import (
    compare_json,
    compare_runs,
    html,
    predicted,
    report_json,
    screened_disk,
    terminal,
)
from poolbench.report import export as export_mod
from poolbench.report.data import load_run
from poolbench.report.metrics import METRICS, parse_metrics
from poolbench.report.tables import choose_baseline

METRIC_HELP = (
    f"The figure(s) the tables show, comma-separated: {', '.join(METRICS)}. value = the "
    "workload's own figure (MiB/s, IOPS, ops/s; default); pNN = completion-latency "
    "percentile, the geometric mean of the runs' percentiles with its 95% CI, in µs."
)


def _write(path: Path, text: str) -> None:
    check_writable(path)  # again: the file system may have changed meanwhile
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(
            f"Cannot write {path}: {exc.strerror}.", "Choose a writable path."
        ) from exc


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--html",
    "html_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write a self-contained HTML report (charts, tables, "
    "metadata, the study file, every command) to this file.",
)
@click.option(
    "--baseline",
    default=None,
    metavar="FACTOR=LEVEL",
    help="Add a change column to the tables against this level, or a whole configuration "
    "key (default: none; the answer at the end ranks every configuration and gives each "
    "factor's effect without one). The answer then measures that factor from this level.",
)
@disk_speed_option
@click.option("--metric", "metric_text", default=None, metavar="METRIC[,METRIC]", help=METRIC_HELP)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the report as one JSON document instead (tables, every comparison, the "
    "verdict; keys in docs/export.md).",
)
@db_option
def report(
    run_ref: str, html_file: Path | None, baseline: str | None, disk_ref: str | None,
    metric_text: str | None, as_json: bool, db: Path | None,
) -> None:  # fmt: skip
    """Tables of a run: each configuration's mean ± 95% CI and its change against a
    baseline level with significance; with --html, a self-contained page with charts.

    Random and sync workloads show p99 completion latency beside the figure; --metric p99
    (p50, p90, p99.9) makes tables of latency instead, and the page has latency charts.

    RUN is a run id (see 'poolbench runs') or 'latest'.

    Every report ends with the answer: per workload the configurations ranked with their
    ratio to the best, each factor's effect, what the faster choice costs in usable space
    and failures survived, and what would decide what is still undecided.

    Example: poolbench report latest --baseline layout=raidz1 --metric value,p99
    """
    metrics = parse_metrics(metric_text)
    if html_file is not None:
        check_writable(html_file)
    store = open_store(db, "read")
    run = load_run(store, run_ref)
    # The verdict ranks and gives each factor's effect without a baseline; the tables
    # compare against one only when asked.
    base = choose_baseline(run, baseline) if baseline else None
    disk = predicted.report_disk(store, disk_ref) if disk_ref else None
    disk = screened_disk.disk_for(store, run, disk)  # a screen of the study's disks
    if as_json:
        sys.stdout.write(report_json.to_json(run, base, disk, metrics))
    else:
        terminal.render_run(Console(), run, base, disk, metrics)
    if html_file is not None:
        _write(html_file, html.render(run, base, disk))
        click.echo(f"HTML report written to {html_file}", err=True)


@click.command()
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option(
    "--force",
    is_flag=True,
    help="Compare even when the workload definition, data "
    "compressibility or working set differ (the differences are printed).",
)
@click.option("--metric", "metric_text", default=None, metavar="METRIC[,METRIC]", help=METRIC_HELP)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the comparison as one JSON document instead (both runs, every pair with "
    "its change; keys in docs/export.md).",
)
@db_option
def compare(
    run_a: str, run_b: str, force: bool, metric_text: str | None, as_json: bool,
    db: Path | None,
) -> None:  # fmt: skip
    """Two runs side by side (two machines, two dates, before/after a tuning): the change
    of B against A for each matching workload, with its 95% interval or "no significant
    difference". Runs that measured different things are refused unless --force.

    Example: poolbench compare 3 7 --metric p99
    """
    metrics = parse_metrics(metric_text)
    store = open_store(db, "read")
    a, b = load_run(store, run_a), load_run(store, run_b)
    if a.id == b.id:
        raise CommandLineError(
            f"'compare {run_a} {run_b}' compares run {a.id} with itself: every change would be "
            "its own noise.",
            "Give two different runs (see 'poolbench runs'); a run's own configurations are "
            f"compared by 'poolbench report {a.id}'.",
        )
    # Every metric is compared before anything is printed: a refusal of the second one
    # leaves no half document on standard output.
    comparisons = [compare_runs.compare(a, b, force=force, metric=m) for m in metrics]
    if as_json:
        sys.stdout.write(compare_json.to_json(comparisons))
        return
    for cmp in comparisons:
        terminal.render_comparison(Console(), cmp)


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option("--csv", "as_csv", is_flag=True, help="CSV: one row per measurement.")
@click.option(
    "--json", "as_json", is_flag=True, help="JSON: the run, its commands and every measurement."
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to this file instead of standard output.",
)
@db_option
def export(run_ref: str, as_csv: bool, as_json: bool, output: Path | None, db: Path | None) -> None:
    """Every measurement of a run with its metadata, in stable, documented columns
    (docs/export.md).

    Example: poolbench export latest --csv -o results.csv
    """
    if as_csv == as_json:  # neither, or both (the last of the two used to win in silence)
        raise CommandLineError(
            "Choose one format." if as_csv else "Choose a format.",
            "Pass --csv or --json (run export twice for both).",
        )
    fmt = "csv" if as_csv else "json"
    if output is not None:
        check_writable(output)
    store = open_store(db, "read")
    run = load_run(store, run_ref)
    text = export_mod.to_csv(run) if fmt == "csv" else export_mod.to_json(run)
    if output is None:
        sys.stdout.write(text)
    else:
        _write(output, text)
