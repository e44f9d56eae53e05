"""Options and helpers shared by several commands."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from poolbench.errors import CommandLineError, UsageError
from poolbench.units import parse_size

if TYPE_CHECKING:  # rich and the store are loaded on use: `plan --json` needs neither
    from rich.console import Console

    from poolbench.store.db import Store
    from poolbench.store.opening import Mode
    from poolbench.study.model import Study

F = TypeVar("F", bound=Callable[..., Any])

# The most disks one study may use (a study file's [disks] count has the same limit): --disks
# 99999x1G or a list of 20,000 devices is refused here, before anything is probed or created.
MAX_DISKS = 64


def check_disk_count(n: int, disks: str) -> None:
    if not 1 <= n <= MAX_DISKS:
        shown = disks if len(disks) <= 60 else disks[:57] + "..."
        raise CommandLineError(
            f"--disks '{shown}' asks for {n} disks; a study uses 1 to {MAX_DISKS}.",
            f"Give at most {MAX_DISKS} disks, e.g. --disks 6x1G.",
        )


def cli_size(text: str, flag: str) -> int:
    """A size given on the command line, in bytes; 'nan', 'inf' or '1e400' are refused here
    (the size parser turns them into Python errors, not a sentence)."""
    try:
        return int(parse_size(text))
    except UsageError as exc:  # a flag's value: a usage error (exit 2), not a file's
        raise CommandLineError(exc.problem, exc.fix) from None
    except (ValueError, OverflowError):
        raise CommandLineError(
            f"{flag} '{text[:40]}' is not a size poolbench can use (not a finite number).",
            "Write a size like 512M, 4G or 1T.",
        ) from None


# One vocabulary for how many times a measurement is repeated, in every command and in a
# study file (replicates, max_replicates). `bench` called them --min-runs/--max-runs before;
# those names are still accepted, hidden, so scripts written for them keep working.
REPLICATE_ALIASES = {"--min-runs": "--replicates", "--max-runs": "--max-replicates"}


def check_replicates(least: int, most: int) -> None:
    if not 2 <= least <= most:
        raise CommandLineError(
            f"--replicates {least} / --max-replicates {most} are not a valid range.",
            "Use at least 2 (a confidence interval needs 2) and --max-replicates ≥ --replicates.",
        )


def old_flag(old: str, dest: str, kind: click.ParamType) -> Callable[[F], F]:
    """A hidden option under the flag's old name (REPLICATE_ALIASES), read by `pick`."""
    return click.option(old, dest, type=kind, default=None, hidden=True,
                        help=f"The old name of {REPLICATE_ALIASES[old]}.")  # fmt: skip


def pick(new: tuple[str, Any], old: tuple[str, Any], default: Any = None) -> Any:
    """The value of a flag given under its name or its old one; both, differing, is refused."""
    (new_flag, value), (old_flag_name, old_value) = new, old
    if value is not None and old_value is not None and value != old_value:
        raise CommandLineError(
            f"{new_flag} {value} and {old_flag_name} {old_value} say different things; "
            f"{old_flag_name} is the old name of {new_flag}.",
            f"Give {new_flag} alone.",
        )
    return value if value is not None else old_value if old_value is not None else default


# SQLite's integers: a run id or seed outside this range cannot be stored or looked up.
MAX_ID = 2**63 - 1


def a_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    """A directory path as typed (a click callback): an empty one is refused, since Path('')
    is the current directory, which would be used instead; so is one with a NUL byte."""
    if value is None:
        return None
    if not value or "\x00" in value:
        raise click.BadParameter(
            f"{value[:40]!r} is not a directory path; give one, e.g. /tank or /var/tmp/pb.",
            ctx,
            param,
        )
    return Path(value)


class WholeNumber(click.IntRange):
    """click.IntRange on ASCII digits only: Python's int() reads '١٢' as 12, and a number
    typed in another script must not silently become a setting."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            shown = value if len(value) <= 40 else value[:37] + "..."
            self.fail(f"{shown!r} is not a whole number in ASCII digits (0-9).", param, ctx)
        return super().convert(value, param, ctx)


# --replicates/--max-replicates, ASCII digits only. 1 is accepted by the type so that
# check_replicates can say why 2 are needed.
REPLICATES = WholeNumber(1, 1000)


class FiniteFloat(click.ParamType):
    """A finite float within [low, high] (click.FloatRange lets nan through: nan < x is False,
    and nan or inf would end up as invalid JSON or a meaningless figure)."""

    name = "number"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, str) and not value.isascii():  # float('١٢') is 12.0
            shown = value if len(value) <= 40 else value[:37] + "..."
            self.fail(f"{shown!r} is not a number in ASCII digits (0-9).", param, ctx)
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
        "`poolbench bench` run measured one: a run id, 'latest', or model:NAME; or a disk "
        "screen's median disk: screen:ID or screen:latest.",
    )(f)


def db_option(f: F) -> F:
    return click.option(
        "--db",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Result store (SQLite). "
        "Default: $POOLBENCH_DB or ~/.local/share/poolbench/results.db.",
    )(f)


def clock_text(seconds: float) -> str:
    """1:02:03, 2:05: elapsed and remaining times in progress lines."""
    s = max(0, round(seconds))
    h, m, sec = s // 3600, s // 60 % 60, s % 60
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class PlainProgress:
    """Progress where no bar can be drawn (nohup, a log file, a pipe): rich draws its bar only
    on a terminal, so a study run into a log said nothing for hours. One plain line per
    finished item: which, its figures, the time so far and an estimate of the time left
    (the mean time of the items finished in this invocation × the items still to do; a
    resumed run's earlier items took no time here and are not counted)."""

    def __init__(
        self,
        write: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        noun: str = "trial",
    ) -> None:
        self.write = write
        self.noun = noun
        self.clock = clock
        self.start = clock()
        self.first_done: int | None = None  # items already done when this invocation began
        self.pending: str | None = None  # (bench) the item being measured

    def finished(self, done: int, total: int, what: str, figures: str = "") -> str:
        """The line for item `done` of `total`, written and returned."""
        if self.first_done is None:
            self.first_done = done - 1
        elapsed = self.clock() - self.start
        here = done - self.first_done
        line = f"{self.noun} {done} of {total}: {what}"
        line += f": {figures}" if figures else ""
        line += f"; elapsed {clock_text(elapsed)}"
        if done < total and here > 0:
            line += f", about {clock_text(elapsed / here * (total - done))} left"
        self.write(line)
        return line

    def trial_done(self, done: int, total: int, what: str, figures: str) -> None:
        self.finished(done, total, what, figures)

    def update(self, description: str, done: int, total: int) -> None:
        """As a progress callback (bench): called before each item, so the previous one has
        finished when `done` moves on."""
        if self.first_done is None:
            self.first_done = done
        if self.pending is not None and done > self.first_done:
            self.finished(done, total, self.pending)
        self.pending = description if description != "done" else None


@contextmanager
def progress_bar(
    console: Console, *, plain_lines: bool = True
) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar with ETA on stderr; yields `update(description, done, total)`. Off a
    terminal, one plain line per finished item instead (`plain_lines`; a caller that prints
    its own lines, a study's per-trial ones, passes False)."""
    if not console.is_terminal:
        plain = PlainProgress(
            lambda line: console.print(line, markup=False, highlight=False), noun="measurement"
        )
        yield plain.update if plain_lines else (lambda _d, _done, _total: None)
        return
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


MIN_WINDOW_HELP = (
    "Shortest timed window in seconds: time-based workloads run at least this long, shorter "
    "size-bound writes are repeated (fio loops); 0 turns it off. Default: the study's "
    "[workloads] min_window (3), or the environment's POOLBENCH_MIN_WINDOW."
)
# The environment variable that sets --min-window where the command line does not (a test
# suite that checks mechanics, not figures, runs with 0). Every measurement records the
# window it was held to, so a figure measured with a short one says so.
MIN_WINDOW_ENV = "POOLBENCH_MIN_WINDOW"


def min_window_option(f: F) -> F:
    """--min-window SECONDS for commands that run a study file (run, demo)."""
    return click.option(
        "--min-window",
        "min_window",
        type=FiniteFloat(0, 3600),
        default=None,
        envvar=MIN_WINDOW_ENV,
        metavar="SECONDS",
        help=MIN_WINDOW_HELP,
    )(f)


def override_min_window(study: Study, seconds: float | None) -> Study:
    """The study with [workloads] min_window from --min-window, when given."""
    if seconds is None:
        return study
    workloads = study.workloads.model_copy(update={"min_window": float(seconds)})
    return study.model_copy(update={"workloads": workloads})


def say_bench_interrupted(store_path: Path) -> Callable[[int, int], None]:
    """What `bench` (and `bench --hosts`) says when a stop signal ends its run: a bench run is
    not resumed, it is run again. Through stopping.say: a terminal that hung up must not
    stop the way out."""
    from poolbench.system import stopping

    def say(run_id: int, kept: int) -> None:
        stopping.say(
            f"Interrupted: {kept} finished measurement(s) kept in run {run_id} ({store_path})."
        )

    return say


def check_writable(path: Path) -> None:
    """Refuse an output file that cannot be written before any work is done or anything is
    printed (`report 1 --html /nonexistent/r.html` printed the whole report first). Only
    checked, nothing created: a new or regular file only (a FIFO would block until some
    reader opened it, a device would receive a report), in a directory that exists and is
    writable."""
    if path.exists() and not path.is_file():
        raise UsageError(
            f"Cannot write {path}: it exists and is not a regular file (a directory, FIFO or "
            "device).",
            "Give the path of a new or regular file.",
        )
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(
            f"Cannot write {path}: the directory {parent} does not exist.",
            "Create it first, or give a path in an existing directory.",
        )
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK):
        raise UsageError(
            f"Cannot write {path}: {'it' if target == path else f'the directory {parent}'} "
            "is not writable.",
            "Choose a writable path.",
        )
