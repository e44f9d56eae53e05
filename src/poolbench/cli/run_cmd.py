"""`poolbench run`, `poolbench runs`, `poolbench cleanup`: studies from TOML files."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from poolbench import cleanup as cleanup_mod
from poolbench import orchestrate
from poolbench.cli.common import MAX_ID, check_disk_count, db_option, open_store, progress_bar
from poolbench.cli.disks_cmd import claim_from_cli
from poolbench.errors import UsageError
from poolbench.report import terminal
from poolbench.safety.claims import ClaimSet, GuardedRunner
from poolbench.study import consistency, estimate, matrix
from poolbench.study.model import Disks, Study
from poolbench.study.model import load as load_study
from poolbench.system.runner import LocalRunner, Runner


def _override_disks(study: Study, disks: str | None) -> Study:
    """--disks 5x512M (sparse files as loop devices) or --disks /dev/sdb,/dev/sdc."""
    if not disks:
        return study
    if disks.startswith("/"):
        devices = [d.strip() for d in disks.split(",") if d.strip()]
        check_disk_count(len(devices), disks)
        update: dict[str, object] = {"source": "devices", "devices": devices}
    else:
        count, _, size = disks.lower().partition("x")
        # ASCII digits only: '²'.isdigit() is True, and '١٢' would reach zpool as 12.
        if not (count.isascii() and count.isdigit()) or len(count) > 6 or not size:
            raise UsageError(
                f"--disks '{disks[:60]}' is neither COUNTxSIZE nor a list of /dev paths.",
                "Example: --disks 5x512M or --disks /dev/sdb,/dev/sdc.",
            )
        check_disk_count(int(count), disks)
        update = {"count": int(count), "size": size.upper()}
    # Validated again (model_copy would skip the study's own checks on count and size).
    try:
        d = Disks.model_validate({**study.disks.model_dump(), **update})
    except ValidationError as exc:
        raise UsageError(
            f"--disks '{disks[:60]}' is not valid: {exc.errors()[0]['msg']}.",
            "Example: --disks 5x512M or --disks /dev/sdb,/dev/sdc.",
        ) from None
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
    consistency.check_tarball(study)  # at --dry-run already: the real run would fail on it
    if "backend" not in study.factors:
        err.print(
            "note: the study names no backend; zfs is assumed "
            '(add backend = ["zfs"] under [factors] to say so).',
            markup=False,
            highlight=False,
        )
    runner: Runner = LocalRunner(
        dry_run=dry_run, echo=lambda s: err.print(f"[dim]would run:[/] {s}")
    )
    store = open_store(db, "dry" if dry_run else "write")
    paths = orchestrate.default_paths(store)
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
    sr = orchestrate.StudyRun(
        runner,
        store,
        study,
        text,
        paths,
        seed=seed,
        argv=["poolbench", *sys.argv[1:]],
        claims=claims,
    )
    availability = sr.preflight()
    plan = matrix.plan(study, sr.seed or 0)
    if dry_run:
        console.print(
            f"plan for study '{study.name}' (seed {sr.seed}): {len(plan)} trials, "
            f"{len(sr.configs)} configurations × {study.replicates} replicates "
            f"(up to {study.max_replicates} while a CI is wider than ±{study.ci_target}%)"
        )
        for t in plan:
            console.print(f"  {t.index + 1:>3}. replicate {t.replicate + 1}: {t.config.key}")
        console.print(estimate.estimate(study).text(), highlight=False)
        console.print("commands of one trial per configuration:")
        for i, cfg in enumerate(sr.configs):
            err.print(f"[bold]— {cfg.key}[/]")
            sr.trial(cfg, 0, i)
        err.print("dry run: nothing was changed.")
        return 0
    if resume is not None:
        sr.run_id = resume
        store.finish_run(resume, "running")
    else:
        sr.run_id = store.start_run("study", study.name, sr.argv, sr.metadata(availability))
    if claims is not None:
        claims.record_overrides(store, sr.run_id)
    status, error = "failed", None
    try:
        with progress_bar(err) as update:
            sr.progress = update
            sr.execute()
        status = "finished"
    except KeyboardInterrupt:
        status = "interrupted"
        n = len(store.measurements(sr.run_id))
        err.print(
            f"Interrupted: everything created was torn down; {n} measurement(s) kept in run "
            f"{sr.run_id}. Finish it with: poolbench run STUDY --resume {sr.run_id}"
        )
        raise
    except Exception as exc:
        error = str(exc)
        raise
    finally:
        store.finish_run(sr.run_id, status, error)
        # The scratch root (default /var/tmp/poolbench) holds only trial directories, each
        # removed by its teardown; leave no empty directory behind either.
        with contextlib.suppress(OSError):
            paths.scratch.rmdir()
    if study.disks.source != "devices":
        console.print(
            "[yellow]note:[/] these disks are files on one physical disk of this machine: the "
            "figures show the method and the relative cost of each layout, not your hardware."
        )
    terminal.render_stored(console, store, sr.run_id)
    console.print(f"stored as run {sr.run_id} in {store.path}")
    return sr.run_id


@click.command()
@click.argument("study_file", type=click.Path(path_type=Path))
@click.option("--disks", default=None, help="Override the study's disks: 5x512M or /dev/sdb,...")
@click.option(
    "--resume",
    type=click.IntRange(1, MAX_ID),
    default=None,
    metavar="RUN",
    help="Finish an interrupted run: only the missing measurements are made.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, MAX_ID),
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
        store = open_store(db, "read")
        study, text, stored_seed = orchestrate.load_resume(store, resume)
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
    store = open_store(db, "read")
    items = []
    for r in store.runs():
        n = store.conn.execute(
            "SELECT count(*) FROM measurements WHERE run_id=?", (r["id"],)
        ).fetchone()[0]
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
    store = open_store(db, "dry")  # only its directory is needed (the journals)
    runner = LocalRunner(dry_run=dry_run, echo=lambda s: click.echo(f"would run: {s}"))
    outcomes = cleanup_mod.cleanup(runner, orchestrate.default_paths(store).journals)
    if not outcomes:
        click.echo("nothing to clean up")
    for o in outcomes:
        click.echo(
            f"{o.journal.name}: {o.undone} recorded item(s) undone"
            + (f"; left alone: {'; '.join(o.left)}" if o.left else "")
        )
