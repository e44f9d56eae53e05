"""`poolbench import OTHER.db`: bring another machine's runs into the local store."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import click

from poolbench.cli.common import MAX_ID, WholeNumber, db_option, open_store
from poolbench.errors import PoolbenchError
from poolbench.store.db import Store, default_path
from poolbench.store.merge import check_source, import_store


def _holds_runs(path: Path) -> bool:
    """Whether a store this import created holds any run (then it is kept)."""
    try:
        return bool(Store(path, "read").runs())
    except PoolbenchError:
        return False


def _remove_created(target: Path, new_dirs: list[Path]) -> None:
    """Undo what opening a new store made: the file, then the directories made for it."""
    target.unlink(missing_ok=True)
    for d in new_dirs:  # deepest first
        with contextlib.suppress(OSError):
            d.rmdir()


@click.command("import")
@click.argument("other", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--run",
    "runs",
    multiple=True,
    type=WholeNumber(1, MAX_ID),
    metavar="ID",
    help="Import only run ID of OTHER.",
)
@click.option("--json", "as_json", is_flag=True, help="Print what was imported as JSON.")
@db_option
def import_(other: Path, runs: tuple[int, ...], as_json: bool, db: Path | None) -> None:
    """Bring the runs of another result store (OTHER.db) into the local one.

    OTHER is only read. Each run gets a new local id, with its measurements, commands and
    hosts; nothing local is overwritten. A run already here (imported before, or the same
    run) is skipped and named, so `report` and `compare` see every run once.

    Example: poolbench import nas2-results.db
    """
    check_source(other)  # before the local store exists: a bad source creates nothing
    target = default_path() if db is None else db
    created = not target.exists()
    new_dirs = [d for d in [target.parent, *target.parent.parents] if not d.exists()]
    store = open_store(db)
    try:
        report = import_store(store, other, runs or None)
    except BaseException:
        store.close()
        if created and not _holds_runs(target):
            _remove_created(target, new_dirs)  # a failed import leaves no empty store behind
        raise
    if as_json:
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        for theirs, ours in report.imported:
            click.echo(f"imported run {theirs} of {other} as run {ours}")
        for theirs, why in report.skipped:
            click.echo(f"skipped run {theirs} of {other}: {why}", err=True)
        if report.imported:
            rows = ", ".join(f"{n} {t}" for t, n in sorted(report.rows.items()))
            click.echo(f"{len(report.imported)} run(s) into {store.path} ({rows or 'no rows'})")
    if not report.imported and report.skipped:
        raise PoolbenchError(
            f"Nothing imported: all {len(report.skipped)} run(s) of {other} are already in "
            f"{store.path}.",
            "Each run is imported once; a second import of the same store is refused.",
        )
