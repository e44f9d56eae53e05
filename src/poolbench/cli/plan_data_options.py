"""`plan`'s --data options, kept beside `plan_cmd.py` so that module stays one screenful of
click options shorter; they reach `plan()` as one `data` dict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import click

from poolbench.errors import UsageError

F = TypeVar("F", bound=Callable[..., Any])


def data_options(f: F) -> F:
    options = [
        click.option(
            "--data",
            "data_text",
            metavar="PATH|@NAME",
            help="Plan for your own data: a directory to scan (sizes only, read-only), a "
            "histogram saved with --save-data (@NAME), or a file of `zdb -Lbbbs POOL` "
            "output. Shows its space on the layout, recordsize trade-offs and special vdev "
            "sizing; with --disks alone, ranks layouts by how much of it they hold.",
        ),
        click.option(
            "--save-data",
            metavar="NAME",
            help="Keep the scanned histogram under NAME for a later --data @NAME.",
        ),
        click.option(
            "--recordsize",
            "recordsize_text",
            default="128K",
            show_default=True,
            help="With --data: the dataset's recordsize.",
        ),
        click.option(
            "--compression",
            type=click.Choice(["off", "lz4", "lzjb", "zstd", "gzip"]),
            default="lz4",
            show_default=True,
            help="With --data: the dataset's compression (on, it also shrinks the last "
            "record of a file to the bytes it holds).",
        ),
        click.option(
            "--compressibility",
            type=click.IntRange(0, 100),
            default=0,
            show_default=True,
            metavar="PCT",
            help="With --data: the share of the data that compresses away (declared).",
        ),
        click.option(
            "--sample-over",
            type=click.IntRange(1000, None),
            default=1_000_000,
            show_default=True,
            metavar="FILES",
            help="With --data DIR: past this many files, sample 1 in 10 (the total's 95% "
            "error is stated).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@dataclass(frozen=True)
class DataOptions:
    """--data and the options that describe the data (`data_options`), as click gave them."""

    data_text: str | None = None  # a directory, a zdb output file, or @NAME; None: not given
    save_data: str | None = None
    recordsize_text: str = "128K"
    compression: str = "lz4"
    compressibility: int = 0
    sample_over: int = 1_000_000


NO_DATA = DataOptions()


def check_data_options(data: DataOptions, expand_to: int | None) -> None:
    """--save-data, --recordsize … mean nothing without --data; --expand-to is another plan."""
    if data.data_text is None:
        given = [f.name for f in fields(data) if getattr(data, f.name) != f.default]
        if given:
            flag = "--" + given[0].removesuffix("_text").replace("_", "-")
            raise UsageError(
                f"{flag} describes the data of --data, which is not given.",
                "Add --data DIR (or @NAME), or drop it.",
            )
    elif expand_to is not None:
        raise UsageError(
            "--data and --expand-to are two different plans.",
            "Plan the data on the expanded width instead: --layout raidz2:8x4TB --data ...",
        )
