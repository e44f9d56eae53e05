"""`plan --data`'s tables (rich is loaded only here). Every figure says how it is found:
space is computed block by block from the data's sizes, not measured; within 80 columns."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.cli.plan_data import SUMMARY_BUCKETS, LayoutData
from poolbench.planner.capacity import nicenum
from poolbench.planner.dataspace import DataSpace
from poolbench.planner.filesizes import FileSizes
from poolbench.planner.search import Candidate
from poolbench.planner.special import SpecialLevel

NOTE_SPACE = (
    "  needs: what `zfs list` USED would grow by (deflated allocation), computed per block "
    "from the sizes: records at the recordsize, each block rounded to the sector with raidz "
    "parity and padding, plus a metadata model; x: needs / the files' bytes; small-file "
    "overhead: share of the allocation that is parity, padding and rounding of files under "
    "16K. Checked on zfs-fuse pools within 2% (docs/planner.md)."
)


def _n(x: object) -> str:
    return nicenum(int(x)) if isinstance(x, int) else "-"


def show_data(r: LayoutData, title: str) -> None:
    c = Console()
    c.print(f"[bold]{escape(title)}[/bold]")
    _print_summary(c, r.h)
    c.print(
        f"written at recordsize {nicenum(r.m.recordsize)}, compression "
        f"{'on' if r.m.compression else 'off'}, "
        f"{r.m.compressibility * 100:.0f}% compressible (declared)"
    )
    t = Table()
    for col in ("ashift", "files", "needs", "x", "usable", "small-file overhead"):
        t.add_column(col, justify="right")
    for s in r.spaces:
        _space_row(t, s, str(s.plan.ashift))
    c.print(t)
    for s in r.spaces:
        c.print(escape(_space_sentence(s)))
    c.print(escape(NOTE_SPACE))
    if r.advice:
        _print_advice(c, r.advice)
    for ashift, levels in r.special:
        _print_special(c, ashift, levels)


def _share(s: DataSpace) -> float:
    """The small files' overhead share as --json states it."""
    return round(s.small_overhead_share, 6)


def _space_row(t: Table, s: DataSpace, first: str) -> None:
    x = s.charged / s.logical_bytes if s.logical_bytes else 0.0
    t.add_row(
        first,
        _n(s.logical_bytes),
        _n(s.charged) + ("" if s.fits else " (!)"),
        f"{x:.2f}",
        _n(s.plan.usable_bytes),
        f"{_share(s) * 100:.1f}%",
    )


def _space_sentence(s: DataSpace) -> str:
    """The answer in words: "these 2.1T of files need 2.9T on raidz2:6x3.64T at ashift 12"."""
    logical, need = s.logical_bytes, s.charged
    x = f" ({need / logical:.2f}x)" if logical else ""
    text = (
        f"These {nicenum(logical)} of files need {nicenum(need)}{x} on {s.plan.layout.spec()} "
        f"at ashift {s.plan.ashift}, of {nicenum(s.plan.usable_bytes)} usable"
    )
    share = _share(s)
    if share >= 0.005:
        text += f"; {share * 100:.0f}% of the allocation is padding and parity of files under 16K"
    return text + ("." if s.fits else ": they do not fit.")


def _special_sentence(levels: list[SpecialLevel]) -> str:
    """ "fills past its 75% line at special_small_blocks=32K; 16K leaves 41% free"."""
    fits = [lv for lv in levels if lv.fits]
    over = [lv for lv in levels if lv.fits is False]
    if not over:
        return "The special vdev holds every level's blocks under its 75% line."
    if not fits:
        return "Even the metadata alone passes the special vdev's 75% line."
    best = fits[-1]
    return (
        f"The special vdev passes its 75% line at special_small_blocks="
        f"{nicenum(over[0].level)}; "
        f"{nicenum(best.level) if best.level else '0'} "
        f"leaves {(1 - (best.fill or 0.0)) * 100:.0f}% free."
    )


def _print_summary(c: Console, h: FileSizes) -> None:
    kind = "blocks" if h.kind == "blocks" else "files"
    c.print(
        f"{h.files:,} {kind}, {nicenum(h.logical_bytes)} ({h.logical_bytes:,} bytes) "
        f"from {escape(h.source)}"
    )
    parts = [f"{h.bucket(up)[0]:,} ≤ {nicenum(up)}" for up in SUMMARY_BUCKETS]
    c.print(f"  {kind} by size: " + ", ".join(parts))
    n = h.notes
    said = [
        f"{n.unreadable} unreadable" if n.unreadable else "",
        f"{n.symlinks_skipped} symlinks not followed" if n.symlinks_skipped else "",
        f"{n.hardlinks_skipped} extra hard links counted once" if n.hardlinks_skipped else "",
        f"{n.mounts_skipped} other filesystems not entered" if n.mounts_skipped else "",
        f"{n.changed_during_scan} changed during the scan" if n.changed_during_scan else "",
        f"{n.sparse_files} sparse (sized as written whole; allocated here "
        f"{nicenum(h.allocated_bytes)})" if n.sparse_files else "",
    ]  # fmt: skip
    if n.sampled_files:
        said.append(
            f"sampled past {n.sample_over:,} files, 1 in {n.sample_every}: total "
            f"±{n.total_error_95 * 100:.1f}% (95%)"
        )
    if any(said):
        c.print("  scan: " + "; ".join(s for s in said if s))
    for ex in n.unreadable_examples:
        c.print(f"  unreadable: {escape(str(ex))}")
    if h.measured_metadata_fraction is not None:
        c.print(f"  metadata in that pool (zdb): {h.measured_metadata_fraction * 100:.1f}%")


def _print_advice(c: Console, rows: list[DataSpace]) -> None:
    c.print("[bold]recordsize: space for this data[/bold] (computed)")
    t = Table()
    for col in ("ashift", "recordsize", "needs", "x", "small-file overhead", "metadata"):
        t.add_column(col, justify="right")
    for s in rows:
        x = s.charged / s.logical_bytes if s.logical_bytes else 0.0
        t.add_row(
            str(s.plan.ashift),
            nicenum(s.model.recordsize),
            _n(s.charged),
            f"{x:.2f}",
            f"{_share(s) * 100:.1f}%",
            _n(s.metadata_charged) if s.metadata_charged else "special",
        )
    c.print(t)
    c.print(
        "  Trade-offs, not one answer: a small recordsize wastes less in the last record "
        "when compression is off, but costs more block pointers and, on raidz, more "
        "parity and padding per byte; a large one rewrites and reads whole records for "
        "small changes (the `recordsize` study measures that)."
    )


def _print_special(c: Console, ashift: int, levels: list[SpecialLevel]) -> None:
    space = levels[0].space if levels else None
    head = f"special vdev of {nicenum(space)}" if space else "a special vdev (none in the layout)"
    c.print(f"[bold]{head}: bytes it takes, ashift {ashift}[/bold] (computed)")
    t = Table()
    for col in ("special_small_blocks", "small blocks", "+ metadata", "total", "fill"):
        t.add_column(col, justify="right")
    for lv in levels:
        fill = lv.fill
        state = "" if fill is None else f"{fill * 100:.0f}%" + ("" if lv.fits else " (!)")
        t.add_row(
            nicenum(lv.level) if lv.level else "0",
            _n(lv.small_bytes),
            _n(lv.metadata_bytes),
            _n(lv.total),
            state or "-",
        )
    c.print(t)
    if space:
        c.print(escape(_special_sentence(levels)))
    c.print(
        "  Blocks at or under special_small_blocks (after compression) and all metadata go "
        "to the special class; small blocks stop at 75% full (the last 25% is kept for "
        "metadata) and spill to the data vdevs: (!) marks a level past that line."
    )


def show_ranked(
    h: FileSizes, ranked: list[tuple[Candidate, list[DataSpace], int]], top: int
) -> None:
    """The search's layouts ranked by how much of this data they hold."""
    c = Console()
    c.print("[bold]layouts ranked by how much of your data they hold[/bold]")
    _print_summary(c, h)
    t = Table()
    for col in ("#", "layout", "fails", "usable", "needs", "x", "holds"):
        t.add_column(col, justify="right" if col != "layout" else "left")
    for i, (cand, spaces, holds) in enumerate(ranked[:top], 1):
        logical = spaces[0].logical_bytes if spaces else 0
        t.add_row(
            str(i),
            escape(cand.name),
            str(cand.failures_tolerated),
            _n(cand.usable_bytes),
            _n(spaces[0].charged) if spaces else "-",
            f"{spaces[0].charged / logical:.2f}" if logical else "-",
            _n(holds),
        )
    c.print(t)
    more = len(ranked) - top
    if more > 0:
        c.print(f"({more} more; --top N shows more, --json shows all)")
    c.print(
        "  needs: this data's `zfs list` USED on the layout's (first) pool, computed per "
        "block; x: needs / the files' bytes; holds: usable space ÷ x, the bytes of files "
        "of this shape that fit (the ranking)."
    )
