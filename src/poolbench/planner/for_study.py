"""The planner's prediction for a pool a study built (pure): usable space from the study's
layout, disk count and size, ashift and the ZFS in use, to set beside what the pool reported.
"""

from __future__ import annotations

from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import parse_zfs_version

MiB = 1024 * 1024


def planner_layout(layout: str, n_disks: int, disk_bytes: int) -> str:
    """A study layout (`raidz2` = every disk, `raidz1:3+mirror:2`) in the planner's grammar."""
    parts = []
    for part in layout.split("+"):
        kind, _, width = part.partition(":")
        n = int(width) if width else n_disks
        parts.append(f"{kind}:{n}x{disk_bytes}")
    return " + ".join(parts)


def rules_name(zfs_version: str) -> str:
    """'zfs-fuse ...' → 'v23'; '2.3.2-2~bpo12+2' → '2.3.2'."""
    if "fuse" in zfs_version or not zfs_version.strip():
        return "v23"
    return zfs_version.split()[0].split("-")[0]


def predicted_usable(
    layout: str, ashift: int, n_disks: int, disk_bytes: int, zfs_version: str
) -> int:
    """Usable bytes (AVAIL + USED of the empty pool) the planner predicts; raises UsageError
    for a layout or version it does not model."""
    rules = parse_zfs_version(rules_name(zfs_version))
    plan = plan_pool(parse_layout(planner_layout(layout, n_disks, disk_bytes)), ashift, rules)
    return plan.usable_bytes
