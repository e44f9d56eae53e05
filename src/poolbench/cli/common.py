"""Options and helpers shared by several commands."""

from __future__ import annotations

from pathlib import Path

import click

from poolbench.store.db import Store, default_path


def db_option(f):  # type: ignore[no-untyped-def]
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Result store (SQLite). Default: $POOLBENCH_DB or ~/.local/share/poolbench/results.db.",
    )(f)


def open_store(db: Path | None) -> Store:
    return Store(db or default_path())
