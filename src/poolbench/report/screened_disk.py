"""The disk speeds a study's report takes from a disk screen (`poolbench disks --screen`) of
the same disks: matched by serial number among the devices the study claimed, screened
within RECENT_DAYS of the run. Each figure is the median over the screened disks of their
mean (a pool of unequal disks is warned about before the study: engine/screen_check.py).
The planner's 4K figures are at queue depth 1 (bench's rand-read-4k is psync), so the
screen's QD1 tests feed them.
"""

from __future__ import annotations

import math
import statistics
import time

from poolbench.engine.screen_records import DiskScreen
from poolbench.planner.performance import DiskSpeed, Medium
from poolbench.report.data import RunData
from poolbench.store.db import Store
from poolbench.store.screens import RECENT_DAYS, recent_by_serial

MiB = 1024 * 1024
# DiskSpeed's field → (the screen test, its unit in bytes/s or IOPS)
FEEDS = {
    "read_bps": ("seq-read", MiB),
    "write_bps": ("seq-write", MiB),
    "read_iops": ("rand-read-4k-qd1", 1),
    "write_iops": ("rand-write-4k-qd1", 1),
}


def claimed_serials(run: RunData) -> list[str]:
    """Serial numbers of the devices the study claimed (none for sparse files or loops)."""
    claims = run.metadata.get("claims")
    rows = claims.get("claims") if isinstance(claims, dict) else None
    return [str(c["serial"]) for c in rows or [] if isinstance(c, dict) and c.get("serial")]


def _median(screens: list[DiskScreen], test: str, unit: int) -> float:
    means = [s.figures[test].mean * unit for s in screens if test in s.figures]
    return statistics.median(means) if means else math.nan


def screened_disk(store: Store, run: RunData) -> DiskSpeed | None:
    """The screen's figures as the disk speed of `run`'s disks; None without a screen."""
    serials = claimed_serials(run)
    found = recent_by_serial(store, serials, at=run.started_at)
    if not found:
        return None
    screens = [DiskScreen.from_json(found[s].result) for s in serials if s in found]
    figs = {k: _median(screens, test, unit) for k, (test, unit) in FEEDS.items()}
    if all(math.isnan(v) for v in figs.values()):
        return None
    when = time.strftime("%Y-%m-%d", time.localtime(max(f.created_at for f in found.values())))
    source = (
        f"disk screen of {len(screens)} of the study's {len(serials)} disks (by serial, "
        f"screened {when}, within {RECENT_DAYS} days of the run; median per figure)"
    )
    medium: Medium = "media" if any(s.rotational for s in screens) else "transfer"
    return DiskSpeed(**figs, source=source, medium=medium)


def disk_for(store: Store, run: RunData, disk: DiskSpeed | None) -> DiskSpeed | None:
    """The disk figures a report uses: the user's (--disk-speed-from), else a screen's."""
    return disk if disk is not None else screened_disk(store, run)
