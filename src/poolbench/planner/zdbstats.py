"""An existing pool's block statistics (`zdb -Lbbbs POOL` output) as the data's shape (pure).

Two parts of that output are read (OpenZFS 2.x zdb.c, dump_block_stats()):

- the per-type table (``Blocks LSIZE PSIZE ASIZE avg comp %Total Type``): its "Total" row and
  the file data rows ("ZFS plain file", "zvol object"; level 0 when -bbb prints levels) give
  the pool's measured metadata share of the allocated space;
- the "Block Size Histogram" (dump_size_histograms(), OpenZFS 2.0 on): per power-of-two bin
  (512, 1K, … 16M) the count and total bytes of blocks by psize, lsize and asize.

Each bin's blocks are taken at the bin's mean psize (total / count): the histogram keeps no
finer shape. The figures are zfs_nicenum() forms (1.5K, 617M) unless zdb ran with -P (plain
numbers); both are read. These are blocks, not files: the recordsize cannot be changed on
them, so a plan from zdb stats shows the pool's blocks on other layouts and special vdev
levels, not recordsize advice.
"""

from __future__ import annotations

import re

from poolbench.errors import UsageError
from poolbench.planner.filesizes import FileSizes, ScanNotes, units_of

HEADER = "Block Size Histogram"
_ROW = re.compile(r"^\s*(\S+):\s+((?:\S+\s+){8}\S+)\s*$")
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


def _histogram(lines: list[str]) -> dict[int, int]:
    """psize bins: units of the bin's mean block size → block count."""
    start = next((i for i, line in enumerate(lines) if HEADER in line), None)
    if start is None:
        return {}
    counts: dict[int, int] = {}
    for line in lines[start + 1 :]:
        m = _ROW.match(line)
        if m is None:
            if counts and line.strip():
                break  # the table ended
            continue
        fields = m.group(2).split()
        count, size = parse_nicenum(fields[0]), parse_nicenum(fields[1])
        if count:
            u = units_of(-(-size // count))
            counts[u] = counts.get(u, 0) + count
    return counts


def _metadata_fraction(lines: list[str]) -> float | None:
    total = data = None
    rows = [m for m in map(_TYPE.match, lines) if m]
    levelled = any(re.match(r"L\d+ ", m.group(8)) for m in rows)
    for m in rows:
        if not re.fullmatch(r"[\d.]+[KMGTPE]?", m.group(1)):
            continue
        name, asize = m.group(8), parse_nicenum(m.group(4))
        if name == "Total":
            total = asize
        elif any(name == (f"L0 {t}" if levelled else t) for t in DATA_TYPES):
            data = (data or 0) + asize
    if not total or data is None:
        return None
    return max(0.0, (total - data) / total)


def parse_zdb(text: str, source: str) -> FileSizes:
    """The block histogram and metadata share of `zdb -Lbbbs` output."""
    lines = text.splitlines()
    try:
        counts = _histogram(lines)
        frac = _metadata_fraction(lines)
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
    return FileSizes(
        counts=counts,
        logical_bytes=logical,
        allocated_bytes=0,
        source=source,
        kind="blocks",
        notes=ScanNotes(),
        measured_metadata_fraction=frac,
    )
