"""dedup: what does deduplication save and cost, and how much RAM would its table take?

The same layout at dedup=off and dedup=on, measured with `dup-write`: a sequential write in
128 KiB records, half of which repeat an earlier record (fio dedupe_percentage=50). After
each write the pool is read back (factors/dedup.py): its dedupratio and its dedup table
(DDT), whose entries (one per unique block) and in-core bytes are what deduplication asks of
RAM. The notes scale them to the user's pool: RAM = the data stored × the DDT's in-core bytes
per byte stored here (= blocks at this block size × entries per block × in-core bytes per
entry), not the rule of thumb.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from poolbench.factors.dedup import DedupReading
from poolbench.study.builtin.base import Builtin, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context
from poolbench.units import parse_size

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40
WORKLOAD = "dup-write"
# The rule of thumb the notes set their figure beside: about 320 bytes of RAM per DDT entry,
# 5 GiB per TiB of deduplicated data (at a 64 KiB average block).
RULE_GIB_PER_TIB = 5


def build(ctx: Context) -> StudyFile:
    need(ctx, 2, "dedup study")
    return study_file(
        ctx,
        "dedup",
        "deduplication off and on, on data half of whose records are duplicates: the write's "
        "throughput, the dedupratio, and the dedup table's entries and RAM",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["mirror:2"]),
            "dedup": ["off", "on"],
        },
        {"names": [WORKLOAD], "size": working_set(ctx, 0.25)},
    )


def pool_bytes(ctx: Context) -> int:
    """The data the RAM figure is projected for: --pool-size, else the disks' raw space."""
    given = ctx.options.get("pool_size")
    return parse_size(given) if given else ctx.disk_bytes * ctx.n


def basis_line(ctx: Context) -> str | None:
    """What the RAM figure's data stands for when --pool-size was not given: the disks' raw
    space, more than the data a mirror or raidz of them can hold."""
    if ctx.options.get("pool_size"):
        return None
    return (
        f"(the RAM figure takes the {ctx.n} disks' raw space, {_bytes(pool_bytes(ctx))}, as the "
        "data: more than their redundancy lets them hold; --pool-size says how much you mean)"
    )


def reading(c: ConfigFacts) -> DedupReading | None:
    """The dedup table after the configuration's last write (its last replicate)."""
    got = [(r["replicate"], DedupReading.decode(r["guards"])) for r in c.rows
           if r["workload"] == WORKLOAD]  # fmt: skip
    last = [d for _rep, d in sorted(got, key=lambda x: x[0]) if d is not None]
    return last[-1] if last else None


def table_line(d: DedupReading) -> str:
    ratio = f"dedupratio {d.ratio:.2f}x" if d.ratio is not None else "dedupratio not read"
    if d.unread:
        return f"{ratio}; WARNING: the dedup table could not be read ({d.unread}), no RAM figure"
    if not d.entries and d.level == "on":
        # dedup=on and a write behind it: a table with no entry is a reading not to trust
        return f"{ratio}; WARNING: dedup=on but the pool shows no dedup table, no RAM figure"
    if not d.entries:
        return f"{ratio}, no dedup table"
    per_gib = GiB / d.referenced_bytes if d.referenced_bytes else 0.0
    return (
        f"{ratio}; DDT {d.entries} entries for {d.referenced_blocks} blocks written "
        f"({d.entries_per_block or 0:.2f} per block), {d.core_bytes_per_entry or 0:.0f} B in "
        f"core and {d.disk_bytes / d.entries:.0f} B on disk each: "
        f"{d.entries * per_gib:,.0f} entries and {d.core_bytes * per_gib / MiB:.1f} MiB "
        "in core per GiB stored"
    )


def _bytes(n: float) -> str:
    """A size for people: 1.50 TiB, 6.50 GiB, 12.3 MiB."""
    for unit, size in (("TiB", TiB), ("GiB", GiB)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n / MiB:.1f} MiB"


def ram_line(d: DedupReading, stored: int) -> str | None:
    """The DDT's RAM at `stored` bytes of data like this: stored ÷ the block size here ×
    entries per block × in-core bytes per entry (= stored × in-core bytes per byte)."""
    if not (d.entries and d.referenced_blocks and d.referenced_bytes):
        return None
    block = d.referenced_bytes / d.referenced_blocks
    blocks = stored / block
    ram = blocks * (d.entries_per_block or 0) * (d.core_bytes_per_entry or 0)
    rule = stored / TiB * RULE_GIB_PER_TIB * GiB
    return (
        f"RAM for the DDT at {_bytes(stored)} stored like this: {blocks:,.0f} blocks of "
        f"{block / 1024:.0f} KiB × {d.entries_per_block:.2f} entries per block × "
        f"{d.core_bytes_per_entry:.0f} B in core = {_bytes(ram)} (the rule of thumb, "
        f"{RULE_GIB_PER_TIB} GiB per TiB deduplicated, says {_bytes(rule)})"
    )


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Per configuration the write's median throughput, the dedupratio and the DDT; for
    dedup=on the DDT's RAM at the user's pool size."""
    lines = []
    for c in facts.configs:
        d = reading(c)
        got = c.figures.get(WORKLOAD, ())
        speed = statistics.median(got) if got else None
        head = f"  {c.key}: {WORKLOAD} {speed:.1f} MiB/s" if speed is not None else f"  {c.key}:"
        if d is None:
            lines.append(f"{head}; the pool was not read back")
            continue
        lines.append(f"{head}; {table_line(d)}")
        ram = ram_line(d, pool_bytes(ctx)) if d.level == "on" else None
        if ram:
            lines.append(f"    {ram}")
            basis = basis_line(ctx)
            lines += [f"    {basis}"] if basis else []
    if not lines:
        return []
    return ["deduplication (the last replicate's dedup table, per configuration):", *lines]


BUILTIN = Builtin(
    "dedup",
    "What does deduplication save and cost, and how much RAM would its table take?",
    (2, "1G"),
    build,
    {
        "layouts": "layouts, e.g. mirror:2",
        "pool_size": "the data the dedup table's RAM is projected for, e.g. 20T (default: the "
        "disks' raw space)",
    },
    notes=notes,
)
