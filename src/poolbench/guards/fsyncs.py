"""Did a sync workload really make every write durable? fio's own count of its fsyncs.

A workload that claims "fsync after every write" is only as honest as the fsyncs fio issued:
a job file edited by hand, an engine that ignores `fsync=`, or an fio that stopped early
would leave the figure labelled durable while most writes sat in the page cache. fio's JSON
counts the fsync calls it made (`sync.total_ios` per job). With fsync=1 it issues one after
each write except the last of each job, which end_fsync covers, so `writes - jobs` is the
floor. The count and the verdict go into the measurement's guards.
"""

from __future__ import annotations

from typing import TypedDict


class FsyncFinding(TypedDict):
    """The `fsync` section of a sync write's findings: what fio counted."""

    fsyncs: int
    writes: int
    every: int
    expected_at_least: int


def check(every: int, writes: int, fsyncs: int, jobs: int) -> tuple[FsyncFinding, list[str]]:
    """The fsync finding for a job with `fsync=every`, and a warning when fio made too few."""
    expected = max(0, writes // max(every, 1) - max(jobs, 1))
    finding: FsyncFinding = {
        "fsyncs": fsyncs,
        "writes": writes,
        "every": every,
        "expected_at_least": expected,
    }
    if fsyncs >= expected:
        return finding, []
    return finding, [
        f"fio made {fsyncs:,} fsyncs for {writes:,} writes (fsync={every} asks for at least "
        f"{expected:,}): these writes were not all made durable, so this is not a sync figure"
    ]
