"""The disk speeds a study's report takes from a disk screen (`poolbench disks --screen`) of
the same disks: matched by serial number among the devices the study claimed, screened
within RECENT_DAYS of the run. Each figure is the median over the screened disks of their
mean (a pool of unequal disks is warned about before the study: engine/screen/check.py).
The planner's 4K figures are at queue depth 1 (bench's rand-read-4k is psync), so the
screen's QD1 tests feed them.

`plan --disk-speed-from screen:ID` (or `screen:latest`) takes a screen as one disk's speed
the same way (the median disk) and keeps every screened disk's own figures, in the order
screened: a layout takes them vdev by vdev, and each vdev runs at its slowest member's
figures (planner/performance.py `vdev_disk`).
"""

from __future__ import annotations

import math
import statistics
import time

from poolbench.engine.screen.records import DiskScreen
from poolbench.errors import UsageError
from poolbench.planner.performance import DiskSpeed, Medium
from poolbench.planner.screened import BOUND
from poolbench.report.data import RunData
from poolbench.store.db import Store
from poolbench.store.screens import RECENT_DAYS, latest_screen, recent_by_serial, screen_disks

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
    return list(run.metadata.claimed_serials)


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
    return DiskSpeed.of(figs, source, medium)


def disk_speed_from_screen(store: Store, ref: str, fallback: DiskSpeed) -> DiskSpeed:
    """Screen `ref` (an id, or 'latest') as the planner's disk: the median of its disks per
    figure, each disk's own figures as `members` (in the order screened); a figure the screen
    did not measure (the write tests of a read-only screen) comes from `fallback`, for every
    disk, and the source says which."""
    sid = latest_screen(store) if ref.strip().lower() == "latest" else ref.strip()
    stored = screen_disks(store, sid) if sid else []
    if not stored:
        raise UsageError(
            f"No disk screen '{ref}' in {store.path}.",
            "Screen the disks first (poolbench disks --screen DEVICES); its last line names "
            "the screen's id, or give screen:latest.",
        )
    screens = [DiskScreen.from_json(s.result) for s in stored]

    def own(s: DiskScreen) -> dict[str, float]:
        return {k: _median([s], test, unit) for k, (test, unit) in FEEDS.items()}

    measured = [k for k in FEEDS if not math.isnan(_median(screens, *FEEDS[k]))]
    if not measured:
        raise UsageError(
            f"Screen {sid} measured none of {', '.join(t for t, _ in FEEDS.values())}.",
            "Screen with those tests: poolbench disks --screen DEVICES --tests "
            "seq-read,rand-read-4k-qd1 (and --write-tests for the write figures).",
        )

    def filled(figs: dict[str, float]) -> dict[str, float]:
        return {k: getattr(fallback, k) if math.isnan(v) else v for k, v in figs.items()}

    medium: Medium = "media" if any(s.rotational for s in screens) else "transfer"
    members = tuple(DiskSpeed.of(filled(own(s)), s.device, medium) for s in screens)
    median = filled({k: _median(screens, *FEEDS[k]) for k in FEEDS})
    rest = [k for k in FEEDS if k not in measured]
    source = (
        f"disk screen {sid} of {len(screens)} disks (median per figure of "
        f"{', '.join(FEEDS[k][0] for k in measured)}"
        + (f"; {', '.join(rest)} {fallback.source}" if rest else "")
        + BOUND
        + ")"
    )
    return DiskSpeed.of(median, source, medium, members)


def disk_for(store: Store, run: RunData, disk: DiskSpeed | None) -> DiskSpeed | None:
    """The disk figures a report uses: the user's (--disk-speed-from), else a screen's."""
    return disk if disk is not None else screened_disk(store, run)
