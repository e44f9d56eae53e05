"""`poolbench run`, `poolbench runs`, `poolbench cleanup`: studies from TOML files."""

from __future__ import annotations

import json
from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench import is_digits
from poolbench.cli.common import (
    MAX_ID,
    WholeNumber,
    a_path,
    check_disk_count,
    cli_size,
    db_option,
    disk_speed_option,
    min_window_option,
    open_store,
    override_min_window,
)
from poolbench.cli.study_exec import DRY_RUN_CONFIGS, execute_study, no_screen_option
from poolbench.engine import cleanup as cleanup_mod
from poolbench.engine import trial_loop
from poolbench.engine.study_lifecycle import StudyRequest
from poolbench.errors import CommandLineError, PoolbenchError
from poolbench.report import predicted
from poolbench.store import queries
from poolbench.store.timestamps import stored_time
from poolbench.study.model import Disks, Study, check_consistency
from poolbench.study.model import load as load_study
from poolbench.system.runner import LocalRunner


def _override_disks(study: Study, disks: str | None) -> Study:
    """--disks 5x512M (sparse files as loop devices) or --disks /dev/sdb,/dev/sdc."""
    if disks is None:  # '' is refused below, not taken as "the study's own disks"
        return study
    if disks.startswith("/"):
        devices = [d.strip() for d in disks.split(",") if d.strip()]
        check_disk_count(len(devices), disks)
        update: dict[str, object] = {"source": "devices", "devices": devices}
    else:
        count, _, size = disks.lower().partition("x")
        # ASCII digits only: '²'.isdigit() is True, and '١٢' would reach zpool as 12.
        if not is_digits(count) or len(count) > 6 or not size:
            raise CommandLineError(
                f"--disks '{disks[:60]}' is neither COUNTxSIZE nor a list of /dev paths.",
                "Example: --disks 5x512M or --disks /dev/sdb,/dev/sdc.",
            )
        check_disk_count(int(count), disks)
        cli_size(size, "--disks")
        update = {"count": int(count), "size": size.upper()}
    # Validated again (model_copy would skip the study's own checks on count and size).
    try:
        d = Disks.model_validate({**study.disks.model_dump(), **update})
    except ValidationError as exc:
        raise CommandLineError(
            f"--disks '{disks[:60]}' is not valid: {exc.errors()[0]['msg']}.",
            "Example: --disks 5x512M or --disks /dev/sdb,/dev/sdc.",
        ) from None
    changed = study.model_copy(update={"disks": d})
    check_consistency(changed, f"with --disks {disks[:60]}")  # e.g. ZFS on disks under 64 MiB
    return changed


@click.command()
@click.argument("study_file", type=click.Path(path_type=Path), required=False)
@click.option("--disks", default=None, help="Override the study's disks: 5x512M or /dev/sdb,...")
@click.option(
    "--resume",
    type=WholeNumber(1, MAX_ID),
    default=None,
    metavar="RUN",
    help="Finish an interrupted run: only the missing measurements are made.",
)
@click.option(
    "--seed",
    type=WholeNumber(0, MAX_ID),
    default=None,
    help="Trial order seed (default: the study's, else random; recorded either way).",
)
@click.option(
    "--scratch-dir",
    callback=a_path,
    default=None,
    help="Where sparse-file disks and mountpoints go (default /var/tmp/poolbench).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and every command; change nothing.")
@click.option(
    "--all-commands",
    is_flag=True,
    help=f"With --dry-run: print one trial's commands for every configuration, not only the "
    f"first {DRY_RUN_CONFIGS}.",
)
@click.option(
    "--destroy-data-on",
    "destroy_data_on",
    multiple=True,
    metavar="ID",
    help="Use this in-use device anyway, destroying its data (serial, /dev/disk/by-id path, "
    "or the /dev path of a device with neither). Repeat per device; asks unless --yes.",
)
@click.option("--yes", is_flag=True, help="Do not ask before destroying overridden devices.")
@no_screen_option
@min_window_option
@disk_speed_option
@db_option
def run(
    study_file: Path | None,
    disks: str | None,
    resume: int | None,
    seed: int | None,
    scratch_dir: Path | None,
    dry_run: bool,
    all_commands: bool,
    destroy_data_on: tuple[str, ...],
    yes: bool,
    no_screen: bool,
    min_window: float | None,
    disk_ref: str | None,
    db: Path | None,
) -> None:
    """Build every configuration of a study, measure it, store it, tear it down.

    With --resume RUN the study is the one stored with that run, so STUDY_FILE may be left
    out (a built-in study has none).

    Example: poolbench run examples/parity.toml --disks 6x1G
    """
    # A bad --disk-speed-from is refused before anything is built.
    disk = predicted.report_disk(open_store(db, "read"), disk_ref) if disk_ref else None
    if resume is not None:
        store = open_store(db, "read")
        study, text, stored_seed = trial_loop.load_resume(store, resume)
        store.close()
        request = StudyRequest(study, text, db, resume, stored_seed, scratch_dir,
                               screen=not no_screen)  # fmt: skip
        execute_study(
            request,
            dry_run=dry_run,
            destroy_data_on=destroy_data_on,
            yes=yes,
            all_commands=all_commands,
            disk=disk,
        )
        return
    if study_file is None:
        raise CommandLineError(
            "poolbench run needs a study file (or --resume RUN, to finish a stored run).",
            "Example: poolbench study parity --print-toml > parity.toml; poolbench run "
            "parity.toml ('poolbench study --list' shows the built-in studies).",
        )
    study, text = load_study(study_file)
    study = override_min_window(_override_disks(study, disks), min_window)
    request = StudyRequest(study, text, db, seed=seed, scratch_dir=scratch_dir,
                           screen=not no_screen)  # fmt: skip
    execute_study(
        request,
        dry_run=dry_run,
        destroy_data_on=destroy_data_on,
        yes=yes,
        all_commands=all_commands,
        disk=disk,
    )


def _iso_or_raw(value: object) -> str:
    """A run's start as ISO 8601 UTC; a damaged stored time (1e300 s) is given back as
    stored, as text (as the table shows it: `started_at` is always a string), so one bad
    row does not hide the others."""
    try:
        return stored_time(value, "a run's start time").isoformat(timespec="seconds")
    except PoolbenchError:
        return str(value)


@click.command()
@db_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="A JSON list instead: id, kind, name, status, stopped_by, started_at (ISO 8601 "
    "UTC), measurements (docs/export.md).",
)
def runs(db: Path | None, as_json: bool) -> None:
    """List the runs in the result store.

    Example: poolbench runs --json
    """
    store = open_store(db, "read")
    items = []
    for r in store.runs():
        n = queries.measurement_count(store, r["id"])
        items.append(
            {
                "id": r["id"],
                "kind": r["kind"],
                "name": r["name"],
                "status": r["status"],
                "stopped_by": r["stopped_by"],
                "started_at": r["started_at"],
                "measurements": n,
            }
        )
    if as_json:  # times as every JSON output gives them: ISO 8601, UTC, with the offset
        click.echo(json.dumps([{**i, "started_at": _iso_or_raw(i["started_at"])} for i in items],
                              indent=2))  # fmt: skip
        return

    t = Table(title=f"runs in {escape(str(store.path))}")
    for col in ("id", "kind", "name", "status", "started", "measurements"):
        t.add_column(col)
    for i in items:
        try:
            when = stored_time(i["started_at"], "an interrupted run's start time", utc=False)
            started = when.strftime("%Y-%m-%d %H:%M")
        except (ValueError, OverflowError, OSError):  # a time no calendar holds: show it raw
            started = str(i["started_at"])
        status = f"{i['status']} ({i['stopped_by']})" if i["stopped_by"] else i["status"]
        t.add_row(  # text from the store is data, never markup
            *(
                escape(str(v))
                for v in (i["id"], i["kind"], i["name"], status, started, i["measurements"])
            )
        )
    Console().print(t)


@click.command()
@db_option
@click.option("--dry-run", is_flag=True, help="Print what would be undone; change nothing.")
def cleanup(db: Path | None, dry_run: bool) -> None:
    """Tear down what a crashed poolbench left behind (pools, mounts, loop devices, files).

    Only things recorded in poolbench's journals are touched, and only if they are still what
    was recorded (a pool by name and GUID). Journals of a running poolbench are left alone.
    Runs left "running" by a poolbench that is gone (kill -9, a crash, a reboot) are marked
    interrupted, with the command that finishes each.

    Example: poolbench cleanup
    """
    store = open_store(db, "dry")  # its directory holds the journals
    runner = LocalRunner(dry_run=dry_run, echo=lambda s: click.echo(f"would run: {s}"))
    outcomes = cleanup_mod.cleanup(runner, trial_loop.default_paths(store).journals)
    abandoned = cleanup_mod.abandoned_runs(store)
    if abandoned and not dry_run:
        store.close()
        store = open_store(db, "write")
        cleanup_mod.mark_interrupted(store, abandoned)
    if not outcomes and not abandoned:
        click.echo("nothing to clean up")
    for o in outcomes:
        click.echo(
            f"{o.journal.name}: {o.undone} recorded item(s) undone"
            + (f"; left alone: {'; '.join(o.left)}" if o.left else "")
        )
    for a in abandoned:
        click.echo(
            f"run {a.run_id}{' would be' if dry_run else ''} marked interrupted: "
            f"{cleanup_mod.ABANDONED}." + (f" Finish it with: {a.resume}" if a.resume else "")
        )
