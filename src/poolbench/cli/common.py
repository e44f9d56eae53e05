"""Options and helpers shared by several commands."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from poolbench.store.db import Store, default_path

F = TypeVar("F", bound=Callable[..., Any])


def db_option(f: F) -> F:
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Result store (SQLite). "
        "Default: $POOLBENCH_DB or ~/.local/share/poolbench/results.db.",
    )(f)


@contextmanager
def progress_bar(console: Console) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar with ETA on stderr; yields `update(description, done, total)`."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("starting", total=None)

        def update(description: str, done: int, total: int) -> None:
            bar.update(task, description=description, completed=done, total=total)

        yield update


def open_store(db: Path | None) -> Store:
    return Store(db or default_path())
