"""What a configuration costs and buys beside its speed (pure): usable space and the disk
failures it survives.

Usable space is read back from the pool where the engine recorded it (`usable_bytes` in
the pool description); otherwise it is the planner's figure for the same layout, ashift,
disks and ZFS version (sparse-file studies only: real devices of unrecorded size cannot be
planned). Failures survived come from the one layout grammar (`Layout.failures_tolerated`:
parity, or a mirror's width − 1, the weakest top-level vdev's).
"""

from __future__ import annotations

from dataclasses import dataclass

from poolbench.errors import PoolbenchError
from poolbench.report.data import RunData
from poolbench.report.predicted import study_layout
from poolbench.study.matrix import DEFAULT_BACKEND

POOL_FACTORS = ("backend", "layout", "ashift")  # what decides a pool's usable space


@dataclass(frozen=True)
class Cost:
    """One configuration's usable space and failures survived (None: not known)."""

    config: str
    usable_bytes: int | None
    usable_source: str  # "pool" (read back), "planner" (predicted) or "" (unknown)
    failures_survived: int | None

    def as_dict(self) -> dict[str, object]:
        return {
            "usable_bytes": self.usable_bytes,
            "usable_source": self.usable_source or None,
            "failures_survived": self.failures_survived,
        }


def pool_usable(run: RunData, config: str) -> tuple[int | None, str]:
    """The configuration's pool as read back (its usable bytes and ZFS version)."""
    for w in run.workloads:
        cell = run.cell(config, w)
        pool = cell.pool() if cell is not None else {}
        usable = pool.get("usable_bytes")
        if isinstance(usable, int | float) and usable > 0:
            return int(usable), str(pool.get("zfs_version") or "")
    return None, ""


def predicted_usable(run: RunData, levels: dict[str, str], zfs_version: str) -> int | None:
    """The planner's usable space for a ZFS pool built from the study's sparse-file disks;
    None where it cannot say (other backends, real devices of unrecorded size)."""
    disks = run.study.disks
    if levels.get("backend", DEFAULT_BACKEND) != "zfs" or disks is None:
        return None
    if disks.source == "devices" or disks.count is None or disks.size is None:
        return None
    try:
        from poolbench.planner.capacity import predicted_usable as plan
        from poolbench.units import parse_size

        return plan(
            levels["layout"], int(levels.get("ashift", "12")), disks.count,
            parse_size(disks.size), zfs_version,
        )  # fmt: skip
    except (PoolbenchError, KeyError, ValueError, TypeError):  # a layout the planner lacks
        return None


def cost(run: RunData, config: str) -> Cost:
    levels = run.levels(config)
    usable, version = pool_usable(run, config)
    source = "pool" if usable is not None else ""
    if usable is None:
        usable = predicted_usable(run, levels, version)
        source = "planner" if usable is not None else ""
    layout = study_layout(run, levels)
    failures = layout.failures_tolerated if layout is not None and layout.vdevs else None
    return Cost(config, usable, source, failures)


def disk_bytes(run: RunData) -> int | None:
    """The size of one of the study's disks, to say space in disks; None when unknown."""
    disks = run.study.disks
    if disks is None or disks.size is None:
        return None
    try:
        from poolbench.units import parse_size

        return int(parse_size(disks.size))
    except (PoolbenchError, ValueError):
        return None
