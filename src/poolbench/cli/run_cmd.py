"""`poolbench run`, `poolbench runs`, `poolbench cleanup`: studies from TOML files."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from poolbench.backends.base import Availability
from poolbench.cli.common import db_option, open_store, progress_bar
from poolbench.cli.disks_cmd import claim_from_cli
from poolbench.engine import cleanup as cleanup_mod
from poolbench.engine import lifecycle, study_run
from poolbench.errors import UsageError
from poolbench.report import terminal
from poolbench.safety.claims import ClaimSet, GuardedRunner
from poolbench.store import queries
from poolbench.study import estimate, matrix
from poolbench.study.model import Study
from poolbench.study.model import load as load_study
from poolbench.system.runner import LocalRunner, Runner


def _override_disks(study: Study, disks: str | None) -> Study:
    """--disks 5x512M (sparse files as loop devices) or --disks /dev/sdb,/dev/sdc."""
    if not disks:
        return study
    if disks.startswith("/"):
        d = study.disks.model_copy(update={"source": "devices", "devices": disks.split(",")})
    else:
        count, _, size = disks.lower().partition("x")
        if not count.isdigit() or not size:
            raise UsageError(
                f"--disks '{disks}' is neither COUNTxSIZE nor a list of /dev paths.",
                "Example: --disks 5x512M or --disks /dev/sdb,/dev/sdc.",
            )
        d = study.disks.model_copy(update={"count": int(count), "size": size.upper()})
    return study.model_copy(update={"disks": d})


def execute_study(
    study: Study,
    text: str,
    *,
    db: Path | None,
    dry_run: bool,
    resume: int | None = None,
    seed: int | None = None,
    scratch_dir: Path | None = None,
    console: Console | None = None,
    destroy_data_on: Sequence[str] = (),
    yes: bool = False,
) -> int:
    """Shared by `run`, `study` and `demo`. Returns the run id."""
    err = Console(stderr=True)
    console = console or Console()
    runner: Runner = LocalRunner(
        dry_run=dry_run, echo=lambda s: err.print(f"[dim]would run:[/] {s}")
    )
    store = open_store(db)
    paths = study_run.default_paths(store)
    if scratch_dir:
        paths.scratch = scratch_dir
    claims: ClaimSet | None = None
    if study.disks.source == "devices":
        # Real devices only through the safety layer: each one checked (mounted, signatures,
        # pool labels, holders, ...) and claimed now, before anything runs, and re-checked
        # right before the first destructive command by the guarded runner.
        claims = claim_from_cli(
            runner, study.disks.devices, destroy_data_on, yes, store.path, paths.scratch
        )
        runner = GuardedRunner(runner, claims)
    if not dry_run:
        for outcome in cleanup_mod.cleanup(runner, paths.journals):
            err.print(f"cleaned up after an earlier crash: {outcome.journal.name}")
    sr = study_run.StudyRun(
        runner,
        store,
        study,
        text,
        paths,
        seed=seed,
        argv=lifecycle.command_line(),
        claims=claims,
    )
    availability = sr.preflight()
    if dry_run:
        _print_plan(sr, console, err)
        return 0
    _measure(sr, availability, resume, claims, err)
    if study.disks.source != "devices":
        console.print(
            "[yellow]note:[/] these disks are files on one physical disk of this machine: the "
            "figures show the method and the relative cost of each layout, not your hardware."
        )
    terminal.render_stored(console, store, sr.run_id)
    console.print(f"stored as run {sr.run_id} in {store.path}")
    return sr.run_id


def _print_plan(sr: study_run.StudyRun, console: Console, err: Console) -> None:
    """--dry-run: the trial order, the estimate, and one trial's commands per configuration."""
    study = sr.study
    plan = matrix.plan(study, sr.seed or 0)
    console.print(
        f"plan for study '{study.name}' (seed {sr.seed}): {len(plan)} trials, "
        f"{len(sr.configs)} configurations × {study.replicates} replicates "
        f"(up to {study.max_replicates} while a CI is wider than ±{study.ci_target}%)"
    )
    console.print(study.disks.describe(), markup=False, highlight=False)
    for t in plan:
        console.print(f"  {t.index + 1:>3}. replicate {t.replicate + 1}: {t.config.key}")
    console.print(estimate.estimate(study).text(), highlight=False)
    console.print("commands of one trial per configuration:")
    for i, cfg in enumerate(sr.configs):
        err.print(f"[bold]— {cfg.key}[/]")
        sr.trial(cfg, 0, i)
    err.print("dry run: nothing was changed.")


def _measure(
    sr: study_run.StudyRun,
    availability: dict[str, Availability],
    resume: int | None,
    claims: ClaimSet | None,
    err: Console,
) -> None:
    """The study as a stored run (new, or resumed), under the run lifecycle."""
    store = sr.store
    if resume is not None:
        sr.run_id = lifecycle.reopen(store, resume)
    else:
        meta = sr.metadata(availability)
        sr.run_id = lifecycle.start(store, "study", sr.study.name, meta, sr.argv)
    if claims is not None:
        claims.record_overrides(store, sr.run_id)

    def interrupted(kept: int) -> None:
        err.print(
            f"Interrupted: everything created was torn down; {kept} measurement(s) kept in run "
            f"{sr.run_id}. Finish it with: poolbench run STUDY --resume {sr.run_id}"
        )

    try:
        with (
            lifecycle.tracked(store, sr.run_id, on_interrupt=interrupted),
            progress_bar(err) as update,
        ):
            sr.progress = update
            sr.run()
    finally:
        # The scratch root (default /var/tmp/poolbench) holds only trial directories, each
        # removed by its teardown; leave no empty directory behind either.
        with contextlib.suppress(OSError):
            sr.paths.scratch.rmdir()


@click.command()
@click.argument("study_file", type=click.Path(path_type=Path))
@click.option("--disks", default=None, help="Override the study's disks: 5x512M or /dev/sdb,...")
@click.option(
    "--resume",
    type=int,
    default=None,
    metavar="RUN",
    help="Finish an interrupted run: only the missing measurements are made.",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Trial order seed (default: the study's, else random; recorded either way).",
)
@click.option(
    "--scratch-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where sparse-file disks and mountpoints go (default /var/tmp/poolbench).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and every command; change nothing.")
@click.option(
    "--destroy-data-on",
    "destroy_data_on",
    multiple=True,
    metavar="ID",
    help="Use this in-use device anyway, destroying its data (serial, /dev/disk/by-id path, "
    "or the /dev path of a device with neither). Repeat per device; asks unless --yes.",
)
@click.option("--yes", is_flag=True, help="Do not ask before destroying overridden devices.")
@db_option
def run(
    study_file: Path,
    disks: str | None,
    resume: int | None,
    seed: int | None,
    scratch_dir: Path | None,
    dry_run: bool,
    destroy_data_on: tuple[str, ...],
    yes: bool,
    db: Path | None,
) -> None:
    """Build every configuration of a study, measure it, store it, tear it down.

    Example: poolbench run examples/parity.toml --disks 6x1G
    """
    if resume is not None:
        store = open_store(db)
        study, text, stored_seed = study_run.load_resume(store, resume)
        store.close()
        execute_study(
            study,
            text,
            db=db,
            dry_run=dry_run,
            resume=resume,
            seed=stored_seed,
            scratch_dir=scratch_dir,
            destroy_data_on=destroy_data_on,
            yes=yes,
        )
        return
    study, text = load_study(study_file)
    execute_study(
        _override_disks(study, disks),
        text,
        db=db,
        dry_run=dry_run,
        seed=seed,
        scratch_dir=scratch_dir,
        destroy_data_on=destroy_data_on,
        yes=yes,
    )


@click.command()
@db_option
@click.option("--json", "as_json", is_flag=True)
def runs(db: Path | None, as_json: bool) -> None:
    """List the runs in the result store.

    Example: poolbench runs --json
    """
    store = open_store(db)
    items = []
    for r in store.runs():
        n = queries.measurement_count(store, r["id"])
        items.append(
            {
                "id": r["id"],
                "kind": r["kind"],
                "name": r["name"],
                "status": r["status"],
                "started_at": r["started_at"],
                "measurements": n,
            }
        )
    if as_json:
        click.echo(json.dumps(items, indent=2))
        return
    import datetime as dt

    t = Table(title=f"runs in {store.path}")
    for col in ("id", "kind", "name", "status", "started", "measurements"):
        t.add_column(col)
    for i in items:
        started = dt.datetime.fromtimestamp(float(i["started_at"])).strftime("%Y-%m-%d %H:%M")
        t.add_row(
            str(i["id"]),
            str(i["kind"]),
            str(i["name"]),
            str(i["status"]),
            started,
            str(i["measurements"]),
        )
    Console().print(t)


@click.command()
@db_option
@click.option("--dry-run", is_flag=True, help="Print what would be undone; change nothing.")
def cleanup(db: Path | None, dry_run: bool) -> None:
    """Tear down what a crashed poolbench left behind (pools, mounts, loop devices, files).

    Only things recorded in poolbench's journals are touched, and only if they are still what
    was recorded (a pool by name and GUID). Journals of a running poolbench are left alone.

    Example: poolbench cleanup
    """
    store = open_store(db)
    runner = LocalRunner(dry_run=dry_run, echo=lambda s: click.echo(f"would run: {s}"))
    outcomes = cleanup_mod.cleanup(runner, study_run.default_paths(store).journals)
    if not outcomes:
        click.echo("nothing to clean up")
    for o in outcomes:
        click.echo(
            f"{o.journal.name}: {o.undone} recorded item(s) undone"
            + (f"; left alone: {'; '.join(o.left)}" if o.left else "")
        )
