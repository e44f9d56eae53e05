"""Options and helpers shared by several commands."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

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


def open_store(db: Path | None) -> Store:
    return Store(db or default_path())
