"""A disk screen as the planner's disk (`--disk-speed-from screen:ID`): its median disk, and
each screened disk's own figures (`DiskSpeed.members`) that a layout takes vdev by vdev in
the order screened, each vdev at its slowest member's (performance.py `vdev_disk`). Pure:
the store side is report/screened_disk.py.
"""

from __future__ import annotations

import dataclasses

from poolbench.errors import UsageError
from poolbench.planner.performance import DiskSpeed

# The end of a screen's source text while its members bound the vdevs.
BOUND = "; each vdev at its slowest member's figures, the disks taken in the order screened"
MEDIAN_ONLY = "; every vdev at the median disk, the layouts not being the screened disks in order"


def fit_screen(disk: DiskSpeed, disks: int | None) -> DiskSpeed:
    """A screen's disk for a layout of `disks` disks: refused when the layout has more disks
    than were screened (its extra vdevs would have no figures of their own); with `disks`
    None (a search, a study's report: their layouts are not the screened disks in order)
    the median disk alone."""
    n = len(disk.members)
    if not n:
        return disk
    if disks is None:
        source = disk.source.replace(
            BOUND,
            "; every vdev at the median disk, the layouts not being the screened disks in order",
        )
        return dataclasses.replace(disk, members=(), source=source)
    if disks > n:
        raise UsageError(
            f"The layout has {disks} disks; the screen behind --disk-speed-from has {n}.",
            f"Give a layout of at most {n} disks, or screen all {disks} disks together.",
        )
    if disks < n:
        return dataclasses.replace(
            disk, source=disk.source[:-1] + f"; the layout takes the first {disks} of {n})"
        )
    return disk
