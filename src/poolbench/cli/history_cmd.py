"""`poolbench history`: one measurement over time, its steps and drifts, from the store."""

from __future__ import annotations

import json
from pathlib import Path

import click

from poolbench.cli.common import check_writable, db_option, open_store
from poolbench.errors import CommandLineError, Regression
from poolbench.report.history import SeriesEntryJson, SeriesView, StepView


@click.command()
@click.argument("name", required=False)
@click.option("--workload", default=None, help="Only this workload's series.")
@click.option("--config", default=None, help="A study's configuration (as `report` names it).")
@click.option("--host", default=None, help="Only this host's series (stores merged by import).")
@click.option("--json", "as_json", is_flag=True, help="Print the series as JSON on stdout.")
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the charts (each run's mean with its 95% interval) to this HTML file.",
)
@click.option(
    "--fail-on-regression",
    "fail_pct",
    default=None,
    metavar="PCT",
    help="Exit 8 when a chosen series' newest level is PCT or more below the level before "
    "it (a step found with its interval), e.g. 10%; for cron jobs and systemd timers.",
)
@db_option
def history(
    name: str | None,
    workload: str | None,
    config: str | None,
    host: str | None,
    as_json: bool,
    html_path: Path | None,
    fail_pct: str | None,
    db: Path | None,
) -> None:
    """The same measurement over time: steps and drifts, and what changed when they happened.

    NAME is a bench target (the path given to `bench`) or a study's name; each workload (and
    a study's configuration) on each host is one series. Per run: date, mean with its 95%
    interval, replicates, fill level, and what changed since the previous run (ZFS, kernel,
    properties, disks: the runs' fingerprints). Steps are found with their uncertainty and
    named by what changed where they happened; a drift along the fill level is told apart
    (docs/history.md). Without NAME: the series the store holds.

    Example: poolbench history /tank/bench --workload seq-write --html history.html

    Scheduled: poolbench bench /tank/bench --record-as tank && poolbench history tank
    --fail-on-regression 10%
    """
    from poolbench.report import history as hist
    from poolbench.store import history as stored

    fraction = None if fail_pct is None else _fraction(fail_pct)
    if fraction is not None and name is None:
        raise CommandLineError(
            "--fail-on-regression needs the NAME of the series to check.",
            "Example: poolbench history tank --fail-on-regression 10%",
        )
    if html_path is not None:
        check_writable(html_path)
    store = open_store(db, "read")
    series = stored.load(store)
    if name is None:
        _list(hist.listing(series), as_json)
        return
    views = [hist.view(k, p) for k, p in hist.select(series, name, workload, config, host)]
    if html_path is not None:
        from poolbench.report import history_html

        html_path.write_text(history_html.page(views))
    fell = [] if fraction is None else [
        (v, s) for v in views if (s := hist.regression(v, fraction)) is not None]  # fmt: skip
    if as_json:
        _json(views, None if fraction is None else fell)
    else:
        for i, v in enumerate(views):
            click.echo(("\n" if i else "") + "\n".join(v.lines()))
    if fell:
        raise Regression(
            f"{len(fell)} series fell by {fail_pct} or more: "
            + "; ".join(f"{v.key.text()}: {s.text(v.key.workload)}" for v, s in fell)
            + ".",
            "Look at what changed there (the history above); the check passes again once "
            "three runs after a fix are back at the old level.",
        )


def _list(entries: list[SeriesEntryJson], as_json: bool) -> None:
    """Without NAME: the series the store holds, each with the options that choose it."""
    if as_json:
        click.echo(json.dumps({"series": entries}, indent=2))
        return
    for e in entries:
        what = e["name"] if e["kind"] == "bench" else f"{e['name']} --config {e['config']}"
        click.echo(f"{what}  --workload {e['workload']}  --host {e['host']}: {e['runs']} "
                   f"runs, {e['first']} … {e['last']}")  # fmt: skip
    if not entries:
        click.echo("No series yet: `poolbench bench PATH` makes the first point.")


def _json(views: list[SeriesView], fell: list[tuple[SeriesView, StepView]] | None) -> None:
    doc: dict[str, object] = {"series": [v.as_json() for v in views]}
    if fell is not None:  # --fail-on-regression
        doc["regressions"] = [{"name": v.key.name, "workload": v.key.workload,
                               "config": v.key.config or None, "host": v.key.host,
                               "date": s.date, "ratio": s.ratio, "low": s.low,
                               "high": s.high, "changed": list(s.changed)}
                              for v, s in fell]  # fmt: skip
    click.echo(json.dumps(doc, indent=2))


def _fraction(text: str) -> float:
    """'10%' or '10' → 0.10; refused unless strictly between 0 and 100."""
    try:
        pct = float(text.strip().removesuffix("%"))
    except ValueError:
        pct = float("nan")
    if not 0 < pct < 100:
        raise CommandLineError(
            f"--fail-on-regression {text!r} is not a percentage between 0 and 100.",
            "Example: --fail-on-regression 10%",
        )
    return pct / 100
