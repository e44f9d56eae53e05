"""Options and helpers shared by several commands."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from poolbench.errors import UsageError
from poolbench.units import parse_size

if TYPE_CHECKING:  # rich and the store are loaded on use: `plan --json` needs neither
    from rich.console import Console

    from poolbench.store.db import Store
    from poolbench.store.opening import Mode

F = TypeVar("F", bound=Callable[..., Any])

# The most disks one study may use (a study file's [disks] count has the same limit): --disks
# 99999x1G or a list of 20,000 devices is refused here, before anything is probed or created.
MAX_DISKS = 64


def check_disk_count(n: int, disks: str) -> None:
    if not 1 <= n <= MAX_DISKS:
        shown = disks if len(disks) <= 60 else disks[:57] + "..."
        raise UsageError(
            f"--disks '{shown}' asks for {n} disks; a study uses 1 to {MAX_DISKS}.",
            f"Give at most {MAX_DISKS} disks, e.g. --disks 6x1G.",
        )


def cli_size(text: str, flag: str) -> int:
    """A size given on the command line, in bytes; 'nan', 'inf' or '1e400' are refused here
    (the size parser turns them into Python errors, not a sentence)."""
    try:
        return int(parse_size(text))
    except (ValueError, OverflowError):
        raise UsageError(
            f"{flag} '{text[:40]}' is not a size poolbench can use (not a finite number).",
            "Write a size like 512M, 4G or 1T.",
        ) from None


# SQLite's integers: a run id or seed outside this range cannot be stored or looked up.
MAX_ID = 2**63 - 1


class FiniteFloat(click.ParamType):
    """A finite float within [low, high] (click.FloatRange lets nan through: nan < x is False,
    and nan or inf would end up as invalid JSON or a meaningless figure)."""

    name = "number"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{value!r} is not a number.", param, ctx)
        if not math.isfinite(number) or not self.low <= number <= self.high:
            self.fail(
                f"{value!r} is not a finite number from {self.low:g} to {self.high:g}.", param, ctx
            )
        return number


def disk_speed_option(f: F) -> F:
    """`--disk-speed-from` of `run` and `report` (stored as `disk_ref`)."""
    return click.option(
        "--disk-speed-from",
        "disk_ref",
        default=None,
        metavar="RUN",
        help="Show the speed model's figures beside the measured ones, for disks as a stored "
        "`poolbench bench` run measured one: a run id, 'latest', or model:NAME.",
    )(f)


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
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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


def open_store(db: Path | None, mode: Mode = "write") -> Store:
    """The result store: "write" creates it if needed; "read" (reports, listings, the source
    of an import) never creates or changes it; "dry" (dry runs) reads it if it exists."""
    from poolbench.store.db import Store, default_path

    return Store(default_path() if db is None else db, mode)
