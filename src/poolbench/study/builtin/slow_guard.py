"""When the slow-member guard can name the throttled disk in one window, computed from the caps.

The guard (guards/members.py) names a member whose rate while busy is more than 25% under
its peers' median AND who was busy longer than they were, by more than 3 sampling intervals
(0.3 s). Where every member must move the same bytes B (a mirror's writes, raidz and dRAID
writes), the slow member at S MiB/s is busy B/S against its peers' B/P: longer by
B × (1/S - 1/P). So the guard can see it only when

* S < 0.75 × P (a member within 25% of its peers is never slow to it), and
* B × (1/S - 1/P) > 0.3 s: at 8 MiB windows on three disks capped at 20 and 10 MiB/s, a
  raidz1:3 write puts 4 MiB on each member and a zfs-fuse mirror read takes 4 MiB from each
  side: 4 × (1/10 - 1/20) = 0.2 s, under the 0.3 s, so the guard cannot name it except by
  the sampling's chance (measured on zfs-fuse: 1 of 2 mirror reads). A 16 MiB window makes
  it 0.4 s.

On OpenZFS the counters cannot show it at all (measured in the guest: 16 MiB windows on
loop disks at 4 MiB/s with one at 2, 0 of 2 replicates named it on any layout or workload).
A write is done only when every child's write is, and the pool keeps a bounded number of
writes in flight, so the fast members get new writes at the pace the slow one finishes
them: every member is busy in the same sampling intervals and moves the same bytes (the
slow side of a mirror wrote 16.9 MiB busy 5.6 s, its peer 16.9 MiB busy 6.1 s). Mirror
reads follow their stream's side (study/builtin/slow_disk.py), which is busy the whole
window whichever it is. What does tell the slow member there is the time each I/O waits,
as ZFS counts it (`zpool iostat -l`): on OpenZFS the guard also judges each leaf's write
disk_wait against its peers' (guards/member_latency.py), and the notes say whether either
rule named the throttled disk.
"""

from __future__ import annotations

from dataclasses import dataclass

# guards/members.py's rule, restated: a study may not import the guards (docs/architecture.md);
# tests/test_slow_guard.py holds these equal to the guard's own.
SLOW_FRACTION = 0.25  # slower while busy than the peers' median by more than this
RESOLUTION_SAMPLES = 3  # and busy longer by more than this many sampling intervals
SAMPLE_INTERVAL = 0.1  # seconds
NEEDED_S = RESOLUTION_SAMPLES * SAMPLE_INTERVAL  # the busy gap the guard needs (0.3 s)
MIN_REPLICATES = 2  # engine/slow_members.py: named when slow in a majority, at least two


def needed(judged: int) -> int:
    """Replicates a member must be flagged in to be named (engine/slow_members.needed)."""
    return max(MIN_REPLICATES, judged // 2 + 1)


@dataclass(frozen=True)
class GuardView:
    """What one window lets the guard see of the slow member."""

    visible: bool
    gap_s: float | None  # how much longer the slow member is busy (None: not modelled)
    why: str


def per_member_mib(kind: str, width: int, data: float, workload: str, window_mib: float,
                   dialect: str) -> float | None:  # fmt: skip
    """MiB each member moves in a window of `window_mib` when all must move alike; None
    where they do not (OpenZFS mirror reads: steered; raidz reads: by where parity fell)."""
    if workload == "seq-write":
        return window_mib if kind == "mirror" else window_mib / data
    if workload == "seq-read" and kind == "mirror" and dialect != "openzfs":
        return window_mib / width  # zfs-fuse: every side takes an equal share
    return None


def view(kind: str, width: int, data: float, workload: str, window_mib: float, slow: float,
         peer: float, dialect: str) -> GuardView | None:  # fmt: skip
    """Whether the guard can name a member at `slow` MiB/s among peers at `peer` from one
    window of this workload; None where no simple model holds."""
    if slow >= (1 - SLOW_FRACTION) * peer:
        return GuardView(False, None, f"a member at {slow / peer:.0%} of its peers' speed is "
                         f"within the guard's {SLOW_FRACTION:.0%} tolerance")  # fmt: skip
    if dialect == "openzfs" and workload == "seq-write":
        return GuardView(False, None, "OpenZFS paces every member's writes to the slowest (a "
                         "write is done when all its children's are, and the writes in flight "
                         "are bounded), so all members' counters move in the same intervals "
                         "at the same rate")  # fmt: skip
    if dialect == "openzfs" and workload == "seq-read" and kind == "mirror":
        return GuardView(False, None, "an OpenZFS mirror read follows its stream's side: the "
                         "side serving it is busy the whole window, the other one idle or "
                         "busy as long")  # fmt: skip
    each = per_member_mib(kind, width, data, workload, window_mib, dialect)
    if each is None:
        return None
    gap = each * (1 / slow - 1 / peer)
    if gap > NEEDED_S:
        return GuardView(True, gap, f"busy {gap:.2f} s longer than its peers per window")
    least = NEEDED_S / (1 / slow - 1 / peer) * window_mib / each
    return GuardView(False, gap, f"a {window_mib:g} MiB window keeps it busy only {gap:.2f} s "
                     f"longer than its peers, within the guard's {NEEDED_S:.1f} s of sampling "
                     f"chance; windows over {least:.0f} MiB would show it")  # fmt: skip
