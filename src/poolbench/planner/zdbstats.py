"""An existing pool's block statistics (`zdb -Lbbbs POOL` output) as the data's shape (pure).

Two parts of that output are read (OpenZFS 2.x zdb.c, dump_block_stats()):

- the per-type table (``Blocks LSIZE PSIZE ASIZE avg comp %Total Type``): its "Metadata
  Total" row (or, from a zdb without it, "Total" less the file data rows) gives the pool's
  measured metadata share of the allocated space, and its block count the metadata's
  second copies (below);
- the "Block Size Histogram" (dump_size_histograms(), OpenZFS 2.0 on): per power-of-two bin
  the count and total bytes of blocks by psize, lsize and asize.

A bin keeps only its count and total, so its blocks are spread over the bin's 512-byte steps
by the distribution that assumes least (maximum entropy) with that count and mean: a bin's
lower edge is where blocks pile up (4K metadata blocks, power-of-two files), and on raidz
the edge costs a sector less than the rest of the bin; the bin mean alone priced all of them
like the rest (on the guest's raidz1 of 3: +2.8 % at the means, +1.1 % spread so;
docs/planner.md). OpenZFS up to 2.3 bins [size, 2 × size); later releases (which also print
"(note: ... binned ...)") (size / 2, size]. The histogram counts a block once whatever its
copies, and ZFS writes metadata with one copy more than data (dmu_write_policy), so each
metadata block of the type table is counted again at the metadata's mean psize. The figures
are zfs_nicenum() forms (1.5K, 617M) unless zdb ran with -P (plain numbers, tab-separated
rows); both are read. These are blocks, not files: the recordsize cannot be changed on them,
so a plan from zdb stats shows the pool's blocks on other layouts and special vdev levels,
not recordsize advice.
"""

from __future__ import annotations

import math
import re

from poolbench.errors import UsageError
from poolbench.planner.filesizes import FileSizes, ScanNotes, units_of

HEADER = "Block Size Histogram"
_NUM = r"\d+(?:\.\d+)?[KMGTPE]?"
_ROW = re.compile(rf"^\s*({_NUM}):?\s+((?:\S+\s+){{8}}\S+)\s*$")
_TYPE = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.+?)\s*$")
_SUFFIX = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
DATA_TYPES = ("ZFS plain file", "zvol object")


def looks_like_zdb(text: str) -> bool:
    return HEADER in text or bool(re.search(r"^\s*Blocks\s+LSIZE\s+PSIZE\s+ASIZE", text, re.M))


def parse_nicenum(text: str) -> int:
    """'1.50K' → 1536, '617' → 617, '-' → 0 (zfs_nicenum()'s 1024-based forms)."""
    if text == "-":
        return 0
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTPE]?)", text)
    if not m:
        raise ValueError(text)
    return round(float(m.group(1)) * (1 << (10 * _SUFFIX[m.group(2)])))


def spread(count: int, total_units: float, lo: int, hi: int) -> dict[int, int]:
    """`count` blocks of sizes lo … hi (512-byte units) with this total: the maximum-entropy
    distribution with that mean (p_u ∝ e^(θu))."""
    mean = total_units / count
    if mean <= lo + 1e-9 or mean >= hi - 1e-9 or lo == hi:  # all at an edge (128K records)
        return {lo if mean < (lo + hi) / 2 else hi: count}
    steps = range(lo, hi + 1)

    def weights(theta: float) -> list[float]:  # relative to the heaviest step: no overflow
        top = hi if theta > 0 else lo
        return [math.exp(theta * (u - top)) for u in steps]

    def mean_at(theta: float) -> float:
        w = weights(theta)
        return sum(u * x for u, x in zip(steps, w, strict=True)) / sum(w)

    a, b = -50.0, 50.0
    for _ in range(60):  # bisection: the mean grows with θ
        mid = (a + b) / 2
        a, b = (mid, b) if mean_at(mid) < mean else (a, mid)
    w = weights(a)
    # block i at the distribution's (i + ½)/count quantile: its shape at any count (a
    # largest-remainder share gave a thin bin's few blocks to its lowest steps)
    out: dict[int, int] = {}
    cum, k, total = 0.0, 0, sum(w)
    for u, x in zip(steps, w, strict=True):
        cum += x / total
        while k < count and (k + 0.5) / count <= cum:
            out[u] = out.get(u, 0) + 1
            k += 1
    if k < count:  # rounding at the top
        out[hi] = out.get(hi, 0) + count - k
    return out


def histogram_bins(lines: list[str]) -> list[tuple[int, int, int]]:
    """The psize columns of the Block Size Histogram as zdb printed them: (bin size, block
    count, bytes) per row; empty without the table."""
    start = next((i for i, line in enumerate(lines) if HEADER in line), None)
    if start is None:
        return []
    rows: list[tuple[int, int, int]] = []
    for line in lines[start + 1 :]:
        m = _ROW.match(line)
        if m is None:
            if rows and line.strip():
                break  # the table ended
            continue
        fields = m.group(2).split()
        rows.append((parse_nicenum(m.group(1)), parse_nicenum(fields[0]), parse_nicenum(fields[1])))
    return rows


def _histogram(lines: list[str]) -> dict[int, int]:
    """psize bins: units of block size → block count."""
    start = next((i for i, line in enumerate(lines) if HEADER in line), 0)
    upper = any("binned" in line for line in lines[start : start + 4])  # (size/2, size]
    counts: dict[int, int] = {}
    for edge_bytes, count, size in histogram_bins(lines):
        edge = units_of(edge_bytes)
        lo, hi = (edge // 2 + 1, edge) if upper else (edge, max(edge, 2 * edge - 1))
        if count:
            for u, c in spread(count, size / 512, max(1, lo), max(1, hi)).items():
                counts[u] = counts.get(u, 0) + c
    return counts


def _type_rows(lines: list[str]) -> dict[str, tuple[int, int, int, int]]:
    """The per-type table: name ("Total", "Metadata Total", "L0 ZFS plain file" …) →
    (blocks, lsize, psize, asize)."""
    out: dict[str, tuple[int, int, int, int]] = {}
    for m in map(_TYPE.match, lines):
        if m and re.fullmatch(r"[\d.]+[KMGTPE]?", m.group(1)):
            n, lsize, psize, asize = (parse_nicenum(m.group(i)) for i in (1, 2, 3, 4))
            out[m.group(8)] = (n, lsize, psize, asize)
    return out


def _metadata_fraction(rows: dict[str, tuple[int, int, int, int]]) -> float | None:
    """Metadata's share of the allocation: zdb's own "Metadata Total" row (OpenZFS 2.x), else
    all but the file data (a type's L0 row, or its total row where zdb left the L0 row out
    because it held all of the type's blocks)."""
    total = rows.get("Total")
    if not total or not total[3]:
        return None
    if "Metadata Total" in rows:
        return min(1.0, rows["Metadata Total"][3] / total[3])
    data = [rows.get(f"L0 {t}", rows.get(t)) for t in DATA_TYPES]
    if all(d is None for d in data):
        return None
    return max(0.0, (total[3] - sum(d[3] for d in data if d)) / total[3])


def parse_zdb(text: str, source: str) -> FileSizes:
    """The block histogram and metadata share of `zdb -Lbbbs` output."""
    lines = text.splitlines()
    try:
        counts = _histogram(lines)
        rows = _type_rows(lines)
    except ValueError as exc:
        raise UsageError(
            f"{source}: a figure in zdb's block statistics is not a number ({exc}).",
            "Give the output of `zdb -Lbbbs POOL` as zdb printed it.",
        ) from exc
    if not counts:
        raise UsageError(
            f"{source} has no '{HEADER}' (OpenZFS 2.0 or later prints it with zdb -bbb).",
            "Save it with: zdb -Lbbbs POOL > pool-blocks.txt, then --data pool-blocks.txt.",
        )
    logical = sum(u * 512 * c for u, c in counts.items())
    md = rows.get("Metadata Total")
    if md and md[0]:
        # The histogram counts a block once however many copies it has; ZFS writes metadata
        # with one copy more than data (dmu_write_policy), so each metadata block is
        # counted again, at the metadata's mean psize.
        u = units_of(-(-md[2] // md[0]))
        counts[u] = counts.get(u, 0) + md[0]
    return FileSizes(
        counts=counts,
        logical_bytes=logical,
        allocated_bytes=0,
        source=source,
        kind="blocks",
        notes=ScanNotes(),
        measured_metadata_fraction=_metadata_fraction(rows),
    )
