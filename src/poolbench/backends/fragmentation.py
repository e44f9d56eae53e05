"""Free-space fragmentation as each stack reports it, for the aging recipe's record (pure
parsing; the backends run the commands).

* OpenZFS: the pool's `fragmentation` property (what `zpool list -o frag` shows): each
  metaslab's free space weighted by the size of its free segments through `FRAG_TABLE`
  (module/zfs/metaslab.c `zfs_frag_table`), a percent. zfs-fuse (pool version 23) has no
  such property.
* ext4/ext3: `e2freefrag`'s histogram of free extents, weighted through the same table, so
  the figure means what OpenZFS's does (0: free space in runs of 16 MiB or more; 100: all in
  sectors).
* btrfs and xfs: none recorded (btrfs has no free-space fragmentation report of its own;
  `btrfs filesystem usage` shows allocation only; xfs_db's freesp is not run).
"""

from __future__ import annotations

import re

from poolbench import is_digits

# Free segment size 512 B, 1K, 2K, ... 16M → its fragmentation percent (OpenZFS metaslab.c).
FRAG_TABLE = (100, 100, 98, 95, 90, 80, 70, 60, 50, 40, 30, 20, 15, 10, 5, 0)
E2FREEFRAG_HOW = (
    "e2freefrag's free-extent histogram weighted by OpenZFS's fragmentation table "
    "(metaslab.c zfs_frag_table), so 0 = free space in runs of 16 MiB or more"
)
ZFS_HOW = "zpool get -Hp fragmentation (the figure `zpool list -o frag` shows)"
ZFS_FUSE_NONE = (
    "none: zfs-fuse (pool version 23) has no fragmentation property (OpenZFS 2.x has "
    "`zpool list -o frag`)"
)
BTRFS_NONE = (
    "none: btrfs has no free-space fragmentation report (`btrfs filesystem usage` shows "
    "allocation only)"
)

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# "    4K...    8K-  :             1             1    0.00%"
_ROW = re.compile(r"^\s*(\d+)([KMGT]?)\.\.\.\s*\d+[KMGT]?-\s*:\s*(\d+)\s+(\d+)\s+[\d.]+%\s*$")


def zfs_percent(value: str | None) -> float | None:
    """The `fragmentation` property: "12" (-p), "12%", or "-" (not known yet) → 12.0 / None."""
    text = (value or "").strip().rstrip("%")
    return float(text) if is_digits(text) and int(text) <= 100 else None


def frag_weight(segment_bytes: int) -> int:
    """FRAG_TABLE's percent for a free segment of this size (its power-of-two bucket)."""
    bucket = max(0, segment_bytes.bit_length() - 1 - 9)  # 512 B is bucket 0
    return FRAG_TABLE[min(bucket, len(FRAG_TABLE) - 1)]


def e2freefrag_percent(text: str) -> float | None:
    """The free-block-weighted fragmentation of e2freefrag's histogram, or None when the
    output has no histogram (no free space, or not e2freefrag's output)."""
    weighted = total = 0
    for line in text.splitlines():
        row = _ROW.match(line)
        if row is None:
            continue
        low = int(row.group(1)) * _UNITS[row.group(2)]
        blocks = int(row.group(4))
        weighted += frag_weight(low) * blocks
        total += blocks
    return round(weighted / total, 1) if total else None
