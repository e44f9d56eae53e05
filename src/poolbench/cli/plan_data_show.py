"""`plan --data`'s tables (rich is loaded only here). Every figure says how it is found:
space is computed block by block from the data's sizes, not measured; within 80 columns."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.planner.capacity import nicenum
from poolbench.records.jsontypes import JsonObject

NOTE_SPACE = (
    "  needs: what `zfs list` USED would grow by (deflated allocation), computed per block "
    "from the sizes: records at the recordsize, each block rounded to the sector with raidz "
    "parity and padding, plus a metadata model; x: needs / the files' bytes; small-file "
    "overhead: share of the allocation that is parity, padding and rounding of files under "
    "16K. Checked on zfs-fuse pools within 2% (docs/planner.md)."
)


def _n(x: object) -> str:
    return nicenum(int(x)) if isinstance(x, int) else "-"


def show_data(doc: JsonObject, title: str) -> None:
    c = Console()
    c.print(f"[bold]{escape(title)}[/bold]")
    _print_summary(c, doc["data"])
    m = doc["model"]
    c.print(
        f"written at recordsize {nicenum(m['recordsize'])}, compression "
        f"{'on' if m['compression'] else 'off'}, "
        f"{m['compressibility'] * 100:.0f}% compressible (declared)"
    )
    t = Table()
    for col in ("ashift", "files", "needs", "x", "usable", "small-file overhead"):
        t.add_column(col, justify="right")
    for s in doc["space"]:
        _space_row(t, s, str(s["ashift"]))
    c.print(t)
    for s in doc["space"]:
        c.print(escape(_space_sentence(s)))
    c.print(escape(NOTE_SPACE))
    if doc["recordsize_advice"]:
        _print_advice(c, doc["recordsize_advice"])
    for sp in doc["special"]:
        _print_special(c, sp)


def _space_row(t: Table, s: JsonObject, first: str) -> None:
    x = s["charged_bytes"] / s["logical_bytes"] if s["logical_bytes"] else 0.0
    t.add_row(
        first,
        _n(s["logical_bytes"]),
        _n(s["charged_bytes"]) + ("" if s["fits"] else " (!)"),
        f"{x:.2f}",
        _n(s["usable_bytes"]),
        f"{s['small_file_overhead_share'] * 100:.1f}%",
    )


def _space_sentence(s: JsonObject) -> str:
    """The answer in words: "these 2.1T of files need 2.9T on raidz2:6x3.64T at ashift 12"."""
    logical, need = s["logical_bytes"], s["charged_bytes"]
    x = f" ({need / logical:.2f}x)" if logical else ""
    text = (
        f"These {nicenum(logical)} of files need {nicenum(need)}{x} on {s['layout']} at "
        f"ashift {s['ashift']}, of {nicenum(s['usable_bytes'])} usable"
    )
    share = s["small_file_overhead_share"]
    if share >= 0.005:
        text += f"; {share * 100:.0f}% of the allocation is padding and parity of files under 16K"
    return text + ("." if s["fits"] else ": they do not fit.")


def _special_sentence(levels: list[JsonObject]) -> str:
    """ "fills past its 75% line at special_small_blocks=32K; 16K leaves 41% free"."""
    fits = [lv for lv in levels if lv["fits_under_75_percent"]]
    over = [lv for lv in levels if lv["fits_under_75_percent"] is False]
    if not over:
        return "The special vdev holds every level's blocks under its 75% line."
    if not fits:
        return "Even the metadata alone passes the special vdev's 75% line."
    best = fits[-1]
    return (
        f"The special vdev passes its 75% line at special_small_blocks="
        f"{nicenum(over[0]['special_small_blocks'])}; "
        f"{nicenum(best['special_small_blocks']) if best['special_small_blocks'] else '0'} "
        f"leaves {(1 - best['fill']) * 100:.0f}% free."
    )


def _print_summary(c: Console, d: JsonObject) -> None:
    kind = "blocks" if d["kind"] == "blocks" else "files"
    c.print(
        f"{d['files']:,} {kind}, {nicenum(d['logical_bytes'])} ({d['logical_bytes']:,} bytes) "
        f"from {escape(str(d['source']))}"
    )
    parts = [f"{b['files']:,} ≤ {nicenum(b['up_to_bytes'])}" for b in d["cumulative"]
             if b["up_to_bytes"]]  # fmt: skip
    c.print(f"  {kind} by size: " + ", ".join(parts))
    n = d["notes"]
    said = [
        f"{n['unreadable']} unreadable" if n.get("unreadable") else "",
        f"{n['symlinks_skipped']} symlinks not followed" if n.get("symlinks_skipped") else "",
        f"{n['hardlinks_skipped']} extra hard links counted once"
        if n.get("hardlinks_skipped") else "",
        f"{n['mounts_skipped']} other filesystems not entered" if n.get("mounts_skipped") else "",
        f"{n['changed_during_scan']} changed during the scan" if n.get("changed_during_scan")
        else "",
        f"{n['sparse_files']} sparse (sized as written whole; allocated here "
        f"{nicenum(d['allocated_bytes'])})" if n.get("sparse_files") else "",
    ]  # fmt: skip
    if n.get("sampled_files"):
        said.append(
            f"sampled past {n['sample_over']:,} files, 1 in {n['sample_every']}: total "
            f"±{n['total_error_95'] * 100:.1f}% (95%)"
        )
    if any(said):
        c.print("  scan: " + "; ".join(s for s in said if s))
    for ex in n.get("unreadable_examples") or []:
        c.print(f"  unreadable: {escape(str(ex))}")
    if d.get("measured_metadata_fraction") is not None:
        c.print(f"  metadata in that pool (zdb): {d['measured_metadata_fraction'] * 100:.1f}%")


def _print_advice(c: Console, rows: list[JsonObject]) -> None:
    c.print("[bold]recordsize: space for this data[/bold] (computed)")
    t = Table()
    for col in ("ashift", "recordsize", "needs", "x", "small-file overhead", "metadata"):
        t.add_column(col, justify="right")
    for s in rows:
        x = s["charged_bytes"] / s["logical_bytes"] if s["logical_bytes"] else 0.0
        t.add_row(
            str(s["ashift"]),
            nicenum(s["recordsize"]),
            _n(s["charged_bytes"]),
            f"{x:.2f}",
            f"{s['small_file_overhead_share'] * 100:.1f}%",
            _n(s["metadata_charged_bytes"]) if s["metadata_charged_bytes"] else "special",
        )
    c.print(t)
    c.print(
        "  Trade-offs, not one answer: a small recordsize wastes less in the last record "
        "when compression is off, but costs more block pointers and, on raidz, more "
        "parity and padding per byte; a large one rewrites and reads whole records for "
        "small changes (the `recordsize` study measures that)."
    )


def _print_special(c: Console, sp: JsonObject) -> None:
    levels = sp["levels"]
    space = levels[0]["special_space_bytes"] if levels else None
    head = f"special vdev of {nicenum(space)}" if space else "a special vdev (none in the layout)"
    c.print(f"[bold]{head}: bytes it takes, ashift {sp['ashift']}[/bold] (computed)")
    t = Table()
    for col in ("special_small_blocks", "small blocks", "+ metadata", "total", "fill"):
        t.add_column(col, justify="right")
    for lv in levels:
        fill = lv["fill"]
        state = (
            ""
            if fill is None
            else f"{fill * 100:.0f}%" + ("" if lv["fits_under_75_percent"] else " (!)")
        )
        t.add_row(
            nicenum(lv["special_small_blocks"]) if lv["special_small_blocks"] else "0",
            _n(lv["small_block_bytes"]),
            _n(lv["metadata_bytes"]),
            _n(lv["total_bytes"]),
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


def show_ranked(doc: JsonObject, top: int) -> None:
    """The search's layouts ranked by how much of this data they hold."""
    c = Console()
    c.print("[bold]layouts ranked by how much of your data they hold[/bold]")
    _print_summary(c, doc["data"])
    t = Table()
    for col in ("#", "layout", "fails", "usable", "needs", "x", "holds"):
        t.add_column(col, justify="right" if col != "layout" else "left")
    for i, cand in enumerate(doc["candidates"][:top], 1):
        spaces = cand["data"]
        logical = spaces[0]["logical_bytes"] if spaces else 0
        t.add_row(
            str(i),
            escape(str(cand["name"])),
            str(cand["failures_tolerated"]),
            _n(cand["usable_bytes"]),
            _n(spaces[0]["charged_bytes"]) if spaces else "-",
            f"{spaces[0]['charged_bytes'] / logical:.2f}" if logical else "-",
            _n(cand["holds_bytes"]),
        )
    c.print(t)
    more = len(doc["candidates"]) - top
    if more > 0:
        c.print(f"({more} more; --top N shows more, --json shows all)")
    c.print(
        "  needs: this data's `zfs list` USED on the layout's (first) pool, computed per "
        "block; x: needs / the files' bytes; holds: usable space ÷ x, the bytes of files "
        "of this shape that fit (the ranking)."
    )
