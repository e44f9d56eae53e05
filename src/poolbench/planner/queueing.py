"""Requests in flight on disks that seek (pure): how many of a pool's members Q requests keep
busy, and what a read that needs several members at once loses waiting for the slowest
(docs/planner.md, "Random reads on disks that seek"). Used by planner/performance.py."""

from __future__ import annotations

from poolbench.planner.layout import VdevSpec


def queued_share(outstanding: int, members: float) -> float:
    """The fraction of K members' IOPS that Q requests in flight, each sent to a member at
    random, keep busy: Q / (Q + K − 1) (the closed queueing network of K equal queues; Q = 1
    gives one member's IOPS, Q → ∞ all of them)."""
    if outstanding < 1:
        raise ValueError("outstanding must be at least 1")
    return outstanding / (outstanding + max(members, 1.0) - 1)


# A spinning disk's random service time, a seek by distance plus a rotation of 0 to one
# revolution, taken as spread evenly within ± this share of its mean. Fitted to nothing
# measured: the disk emulator's own model (emulate/model.py) gives 0.66-0.70 for a 7200 rpm
# disk over a small or a whole span and 0.56 for 5400 rpm with 9.5 ms seeks (the max of d
# draws against d × the mean); docs/planner.md, "Random reads on disks that seek".
SERVICE_SPREAD = 2 / 3


def members_per_read(spec: VdevSpec, recordsize: int, ashift: int) -> int:
    """How many members one random read of a whole block needs: raidz its data columns
    (a block of s sectors has data on min(s, W − P) of them), dRAID its data children,
    a mirror or a disk one."""
    sectors = -(-recordsize // (1 << ashift))
    if spec.kind == "raidz":
        return min(sectors, spec.width - spec.parity)
    if spec.kind == "draid":
        return min(sectors, spec.draid_data)
    return 1


def fork_join_share(members: int, outstanding: int) -> float:
    """The share of its random IOPS a vdev keeps when each read needs `members` disks at
    once: with one read in flight it ends with the slowest of them, and the mean of the
    largest of d service times spread evenly within ±a of their mean is the mean ×
    (1 + a(d − 1)/(d + 1)). With Q reads in flight a member that finishes early takes up
    the next read's part, so the loss is taken to fall as 1/Q (measured on emulated disks:
    docs/planner.md)."""
    d = members
    return 1 / (1 + SERVICE_SPREAD * (d - 1) / (d + 1) / outstanding)
