"""Terminal tables that read at 80 columns (rich).

A study's configuration is shown as one column per factor that varies, each level one
unbroken word, instead of a "compression=lz4 compressibility=50" string that a narrow
terminal folds mid-word. Every cell is measured with rich's own measurement and the column
widths are set here (rich's own shrinking ignores words and folds them): each column gets at
least its longest word, figures and levels their whole width, prose (a change with its
interval, notes) what is left. When that does not fit, long factor names are set on two
lines, then optional columns are dropped in their order of priority (figures wrap at their
spaces before a latency column goes), and the table says which (`hidden`); no value is cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from poolbench.report.data import RunData

# Two-line headers for the factors whose names are long words (study/model.py
# KNOWN_FACTORS), hyphenated where a reader expects it; other long names split at "_".
SPLIT_HEADERS = {
    "compression": "compres-\nsion",
    "compressibility": "compress-\nibility",
    "recordsize": "record-\nsize",
    "primarycache": "primary-\ncache",
    "metadata_profile": "metadata\nprofile",
    "vdev_source": "vdev\nsource",
}


def factor_header(name: str, split: bool) -> str:
    """The column header of a factor: its name, on two lines when `split` and long."""
    if not split or len(name) <= 8:
        return name
    if name in SPLIT_HEADERS:
        return SPLIT_HEADERS[name]
    if "_" in name:
        head, _, tail = name.partition("_")
        return f"{head}\n{tail}"
    half = (len(name) + 1) // 2
    return f"{name[:half]}-\n{name[half:]}"


@dataclass(frozen=True)
class Column:
    """One column: its header, a cell per row, and whether it may be dropped to fit
    (`optional`: a lower number is dropped first; None: always shown)."""

    key: str
    header: str
    cells: Sequence[Text]
    justify: str = "left"
    optional: int | None = None
    factor: bool = False  # a factor's levels: the header may be split
    # Prose (a change with its interval, notes): wraps first. Other columns (levels, figures)
    # get their natural width before any prose column gets more than its longest word.
    prose: bool = False


def _headers(columns: Sequence[Column], split: bool) -> list[str]:
    return [factor_header(c.header, split) if c.factor else c.header for c in columns]


def _table(title: Text, columns: Sequence[Column], headers: list[str], widths: list[int]) -> Table:
    t = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1, 0, 0),
        pad_edge=False,
        show_edge=False,
    )  # a gap of two between columns: one of padding, one of rule
    for c, h, w in zip(columns, headers, widths, strict=True):
        t.add_column(h, justify=c.justify, overflow="fold", width=w)  # type: ignore[arg-type]
    for i in range(len(columns[0].cells) if columns else 0):
        t.add_row(*(c.cells[i] for c in columns))
    return t


def _range(console: Console, column: Column, header: str) -> tuple[int, int]:
    """(longest word, natural width) over the column's cells and header lines."""
    found = [Measurement.get(console, console.options, t) for t in column.cells]
    found += [Measurement.get(console, console.options, Text(ln)) for ln in header.splitlines()]
    return max(m.minimum for m in found), max(m.maximum for m in found)


def _overhead(console: Console, columns: Sequence[Column]) -> int:
    """Width the table's padding and rules add to its columns."""
    bare = _table(Text(""), [Column(c.key, "", [Text("")] * len(c.cells)) for c in columns],
                  [""] * len(columns), [1] * len(columns))  # fmt: skip
    return Measurement.get(console, console.options, bare).maximum - len(columns)


def _widths(
    columns: Sequence[Column], ranges: list[tuple[int, int]], room: int, strict: bool
) -> list[int] | None:
    """Each column at least its longest word; figures and levels then get their natural
    width, and what is left goes to prose in proportion to what each still lacks. None: the
    longest words alone do not fit, or (`strict`) a figure or level would have to wrap."""
    lo = [r[0] for r in ranges]
    hi = [r[1] for r in ranges]
    if sum(hi) <= room:
        return hi
    whole = sum(hi[i] if not c.prose else lo[i] for i, c in enumerate(columns))
    if sum(lo) > room or (strict and whole > room):
        return None
    widths = list(lo)
    for i, c in enumerate(columns):
        if not c.prose:
            widths[i] += min(hi[i] - lo[i], room - sum(widths))
    spare = room - sum(widths)
    lack = [hi[i] - widths[i] if c.prose else 0 for i, c in enumerate(columns)]
    if spare and sum(lack):
        for i, gap in enumerate(lack):
            widths[i] += spare * gap // sum(lack)
        widths[lack.index(max(lack))] += room - sum(widths)  # the rounding, to the neediest
    return widths


# Optional columns ranked at least this are worth wrapping the figures for before they go
# (a latency percentile beside random I/O); lower ranks (runs, device MiB/s) go first.
KEEP_RANK = 3


def _attempts(columns: Sequence[Column]) -> Iterator[tuple[list[Column], bool, bool]]:
    """(columns shown, long factor names split, figures kept on one line), in the order
    tried: everything on one line; long factor names on two; then without each optional
    column in turn, except that before one ranked KEEP_RANK or higher is given up, figures
    may wrap at their spaces; last, with figures wrapped and nothing optional."""
    shown = list(columns)
    yield shown, False, True
    yield shown, True, True
    for gone in sorted(
        (c for c in columns if c.optional is not None), key=lambda c: c.optional or 0
    ):
        if (gone.optional or 0) >= KEEP_RANK:
            yield shown, True, False
        shown = [c for c in shown if c.key != gone.key]
        yield shown, True, True
    yield shown, True, False


def fit(console: Console, title: Text, columns: Sequence[Column]) -> tuple[Table, list[str]]:
    """The table as wide as the terminal allows without cutting a word (`_attempts` in
    turn), and the headers of the columns that had to be left out (to say so under it)."""
    for shown, split, strict in _attempts(columns):
        headers = _headers(shown, split)
        room = console.width - _overhead(console, shown)
        ranges = [_range(console, c, h) for c, h in zip(shown, headers, strict=True)]
        widths = _widths(shown, ranges, room, strict)
        if widths is not None:
            break
    else:  # even the longest words do not fit: rich folds what it must
        widths = [lo for lo, _hi in ranges]
    hidden = [c.header.replace("\n", " ") for c in columns if c not in shown]
    return _table(title, shown, headers, widths), hidden


def print_fitted(
    console: Console, title: Text, columns: Sequence[Column], where: Callable[[], str]
) -> None:
    """Print the fitted table and, when columns were left out, which and where to see them."""
    table, hidden = fit(console, title, columns)
    console.print(table)
    if hidden:
        console.print(
            Text(f"not shown at {console.width} columns: {', '.join(hidden)} ({where()})",
                 style="dim")
        )  # fmt: skip


def config_columns(run: RunData, configs: Sequence[str]) -> list[Column]:
    """One column per factor that varies (levels unbroken), else the configuration itself
    (a bench run's target path), else nothing when there is only one configuration."""
    factors = run.factors()
    if factors:
        return [
            Column(f"factor:{k}", k, [Text(run.levels(c).get(k, "–")) for c in configs],
                   factor=True)
            for k in factors
        ]  # fmt: skip
    if len(run.configs) > 1 or any(run.label(c) != run.name for c in configs):
        labels = [Text(run.label(c)) for c in configs]
        return [Column("configuration", "configuration", labels, prose=True)]
    return []
