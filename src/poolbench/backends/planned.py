"""What a dry run's pool would report, planned from the study: the pool is not built, so the
few read-backs a trial's own code needs an answer from (the usable space a fill level is a
share of, the members a degraded read takes offline and the disk a resilver replaces it with)
are answered here, once, and every other read of it answers nothing."""

from __future__ import annotations

import contextlib

from poolbench.backends.base import Pool, parse_topology
from poolbench.errors import UsageError
from poolbench.planner.capacity import predicted_usable
from poolbench.zfs.parse import TopVdev

# The planner's rules for a pool whose ZFS did not report itself (study/consistency.py's).
RULES = "2.3"


def describe(pool: Pool, disk_bytes: int) -> None:
    """Fill in `pool.described` (a dry run's: `dry_run` set) with its planned usable space on
    disks of `disk_bytes`: the planner's for a ZFS layout it models, else the raw space of
    its members (which bounds every stack; a real run reads it back)."""
    spec = pool.spec
    n = len(spec.devices)
    usable = n * disk_bytes
    if spec.backend == "zfs":
        ashift = int(spec.pool_options.get("ashift", 12))
        with contextlib.suppress(UsageError, ValueError):
            usable = predicted_usable(spec.layout, ashift, n, disk_bytes, RULES)
    pool.described.setdefault("usable_bytes", usable)


def data_vdevs(pool: Pool) -> list[TopVdev]:
    """The data vdevs as `zpool status` would name them, each with its members in the order
    `zpool create` was given them (the trial's devices, then its unused ones)."""
    leaves = list(pool.described.get("leaves") or pool.spec.devices)
    out: list[TopVdev] = []
    for i, v in enumerate(parse_topology(pool.spec.layout, len(pool.spec.devices))):
        words = v.zpool_words()  # a stripe's members are top vdevs of their own
        name = f"{words[0]}-{i}" if words else leaves[0]
        out.append(TopVdev(words[0] if words else "stripe", name, tuple(leaves[: v.width])))
        leaves = leaves[v.width :]
    return out
