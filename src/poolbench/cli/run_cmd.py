"""`poolbench run`, `poolbench runs`, `poolbench cleanup`: studies from TOML files."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import click
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from poolbench.backends.base import Availability
from poolbench.cli.common import (
    MAX_ID,
    check_disk_count,
    cli_size,
    db_option,
    open_store,
    progress_bar,
)
from poolbench.cli.disks_cmd import claim_from_cli
from poolbench.engine import cleanup as cleanup_mod
from poolbench.engine import lifecycle, study_run
from poolbench.errors import UsageError
from poolbench.report import terminal
from poolbench.safety.claims import ClaimSet, GuardedRunner
from poolbench.store import queries
from poolbench.study import consistency, estimate, matrix, pilot
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
        cli_size(size, "--disks")
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


class DryRunLog:
    """A dry run's commands, collected and printed at once: one console.print per command
    (each parsing markup, highlighting and wrapping) made a 2,000-trial dry run take 8 s."""

    def __init__(self) -> None:
        self.parts: list[tuple[str, str]] = []  # (style, text): cheap to collect

    def command(self, argv: str) -> None:
        self.parts += [("dim", "would run: "), ("", argv + "\n")]

    def heading(self, line: str) -> None:
        self.parts.append(("bold", f"— {line}\n"))

    def flush(self, console: Console) -> None:
        if self.parts:
            emit(console, self.parts)
            self.parts = []


def emit(console: Console, parts: list[tuple[str, str]]) -> None:
    """Print a large block: styled on a terminal, plain when redirected to a file or pipe
    (rich's rendering of 10,000 lines costs more than the dry run itself). The text is never
    parsed as markup either way: paths and levels are data."""
    plain = "".join(text for _, text in parts).rstrip("\n")
    if console.is_terminal:
        text = Text()
        for style, part in parts:
            text.append(part, style=style or None)
        text.rstrip()
        console.print(text, highlight=False, soft_wrap=True)
    else:
        console.file.write(plain + "\n")
        console.file.flush()


# A dry run prints the commands of one trial for at most this many configurations (every
# configuration is still validated by the preflight): simulating and printing 14 commands for
# each of 2,500 configurations took most of a 10,000-trial dry run's time, for 35,000 lines no
# one reads. --all-commands prints them all.
DRY_RUN_CONFIGS = 200


def _print_dry_run(
    sr: study_run.StudyRun,
    study: Study,
    console: Console,
    err: Console,
    log: DryRunLog,
    all_commands: bool = False,
) -> None:
    """The plan (every trial, in order), its estimated duration, then the commands of one
    trial per configuration; each part printed in one piece (see DryRunLog)."""
    plan = matrix.plan(study, sr.seed or 0)
    lines = [
        f"plan for study '{study.name}' (seed {sr.seed}): {len(plan)} trials, "
        f"{len(sr.configs)} configurations × {study.replicates} replicates "
        f"(up to {study.max_replicates} while a CI is wider than ±{study.ci_target}%)"
    ]
    lines.append(study.disks.describe())
    lines += [f"  {t.index + 1:>3}. replicate {t.replicate + 1}: {t.config.key}" for t in plan]
    found = pilot.find(sr.store, set(study.workloads.names), os.uname().nodename)
    lines += [
        estimate.estimate(study).text(),
        estimate.detectable_text(study, *((found.cv, found.run_id) if found else (None, None))),
        "commands of one trial per configuration:",
    ]
    emit(console, [("", "\n".join(lines))])
    shown = sr.configs if all_commands else sr.configs[:DRY_RUN_CONFIGS]
    try:
        for i, cfg in enumerate(shown):
            log.heading(cfg.key)
            sr.trial(cfg, 0, i)
    finally:
        log.flush(err)
    if len(shown) < len(sr.configs):
        err.print(
            f"(commands shown for the first {len(shown)} of {len(sr.configs)} configurations; "
            "the others differ only in their levels and were all validated: "
            "--all-commands prints every one)",
            markup=False,
            highlight=False,
        )
    err.print("dry run: nothing was changed.")


def _measure(
    sr: study_run.StudyRun,
    availability: dict[str, Availability],
    resume: int | None,
    console: Console,
    err: Console,
) -> int:
    """The study as a stored run (new, or resumed), under the run lifecycle; then its
    table. Returns the run id."""
    store, claims = sr.store, sr.claims
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
    if sr.study.disks.source != "devices":
        console.print(
            "[yellow]note:[/] these disks are files on one physical disk of this machine: the "
            "figures show the method and the relative cost of each layout, not your hardware."
        )
    terminal.render_stored(console, store, sr.run_id)
    console.print(f"stored as run {sr.run_id} in {store.path}", markup=False)
    return sr.run_id


def _check_up_front(study: Study, err: Console) -> None:
    """What the study leaves implicit is said; what cannot work is refused (dry runs too)."""
    consistency.check_tarball(study)  # the real run would fail on it, hours in
    if "backend" not in study.factors:
        err.print(
            "note: the study names no backend; zfs is assumed "
            '(add backend = ["zfs"] under [factors] to say so).',
            markup=False,
            highlight=False,
        )


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
    all_commands: bool = False,
) -> int:
    """Shared by `run`, `study` and `demo`. Returns the run id."""
    err = Console(stderr=True)
    console = console or Console()
    _check_up_front(study, err)
    log = DryRunLog()
    runner: Runner = LocalRunner(dry_run=dry_run, echo=log.command)
    # Opened for writing only once the study passed its preflight: a refused study leaves
    # no new store (and no new directory) behind.
    store = open_store(db, "dry")
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
            err.print(f"cleaned up after an earlier crash: {outcome.journal.name}", markup=False)
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
    try:
        availability = sr.preflight()
    finally:
        log.flush(err)  # what the probes would have run (real devices: the claims)
    if dry_run:
        _print_dry_run(sr, study, console, err, log, all_commands)
        return 0
    store.close()
    sr.store = open_store(db, "write")
    return _measure(sr, availability, resume, console, err)


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
@db_option
def run(
    study_file: Path,
    disks: str | None,
    resume: int | None,
    seed: int | None,
    scratch_dir: Path | None,
    dry_run: bool,
    all_commands: bool,
    destroy_data_on: tuple[str, ...],
    yes: bool,
    db: Path | None,
) -> None:
    """Build every configuration of a study, measure it, store it, tear it down.

    Example: poolbench run examples/parity.toml --disks 6x1G
    """
    if resume is not None:
        store = open_store(db, "read")
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
            all_commands=all_commands,
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
        all_commands=all_commands,
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

    t = Table(title=f"runs in {escape(str(store.path))}")
    for col in ("id", "kind", "name", "status", "started", "measurements"):
        t.add_column(col)
    for i in items:
        try:
            started = dt.datetime.fromtimestamp(float(i["started_at"])).strftime("%Y-%m-%d %H:%M")
        except (ValueError, OverflowError, OSError):  # a time no calendar holds: show it raw
            started = str(i["started_at"])
        t.add_row(  # text from the store is data, never markup
            *(
                escape(str(v))
                for v in (i["id"], i["kind"], i["name"], i["status"], started, i["measurements"])
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

    Example: poolbench cleanup
    """
    store = open_store(db, "dry")  # only its directory is needed (the journals)
    runner = LocalRunner(dry_run=dry_run, echo=lambda s: click.echo(f"would run: {s}"))
    outcomes = cleanup_mod.cleanup(runner, study_run.default_paths(store).journals)
    if not outcomes:
        click.echo("nothing to clean up")
    for o in outcomes:
        click.echo(
            f"{o.journal.name}: {o.undone} recorded item(s) undone"
            + (f"; left alone: {'; '.join(o.left)}" if o.left else "")
        )
