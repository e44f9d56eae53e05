"""The slow member by ZFS's own per-I/O wait (OpenZFS `zpool iostat -vlp`), beside the byte
counters' rule (guards/members.py).

On OpenZFS the byte counters cannot show a slow member: a write is done only when every
child's is, and the pool keeps a bounded number of writes in flight, so every member is busy
in the same sampling intervals and moves the same bytes (study/builtin/slow_guard.py). What
differs is how long each write waits at its disk: `disk_wait`, from the I/O's issue to the
disk until it completes. Under the same queue a disk at half its peers' speed holds each
write twice as long (measured in the guest, loop disks capped at 4 MiB/s with one at 2: the
slow one's write disk_wait was 1.43 to 2.24 x its peers' median over the streaming writes
of mirror:2 and raidz1:3 in three runs, 1.32 to 2.22 x on draid1:2d:3c, where a peer that
also waited long can lift the median; a healthy vdev's members differed by at most 1.24 x).
So a leaf is named when its write disk_wait is more than WAIT_RATIO (1 / 0.75, the byte
rule's 25% tolerance: a member at 75% of its peers' speed waits 1.33 x) times the median of
its peers' in the same top-level vdev.

Reads are recorded, not judged, and so is a read-only workload's span (its writes are only
the pool's own few: NOT_JUDGED). A read's wait follows the queue the pool gives each member,
not only its speed. A mirror read follows its stream's side (that side's queue is deeper:
healthy 2-way mirror, 198 against 60 ms); raidz reads skip parity, so members get different
I/O sizes and depths (healthy raidz1:3: 108 ms against 40 and 41 ms, 2.7 x). No ratio
separates a slow member's reads from a healthy one's there.

The figure is what `zpool iostat -Hvlp` reports after the workload (engine/pool_hooks.py
`after`): each latency is the average over every I/O since the pool's import (the mean of
power-of-two histogram buckets, each counted at its midpoint), and operations are per second
over that time. A trial's pool is created or imported just before its workload (a cold read
exports and imports it), so that span is the workload and the import's own few I/Os; a pool
used by several workloads without an import between them mixes them, and the record says the
span it covers. A leaf whose write operations were under MIN_OPS_SHARE of its vdev's busiest
leaf's (or none) served too few writes to judge.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.zfs.parse import IostatRow

WAIT_RATIO = 1 / 0.75  # over the peers' median disk_wait by more than this: named
MIN_OPS_SHARE = 0.25  # a leaf with under this share of its busiest peer's writes: not judged
# The top-level vdevs whose members hold the same work: a mirror, raidz or dRAID (a plain disk
# is its own top-level vdev, with no peers).
REDUNDANT = re.compile(r"(mirror|raidz\d|draid\d\S*)-\d+")
RULE = (
    f"write disk_wait > {WAIT_RATIO:.2f} x the median of its peers' in its top-level vdev; "
    f"leaves with under {MIN_OPS_SHARE:.0%} of the busiest peer's writes not judged; reads "
    "recorded, not judged (their wait follows the queue each member is given)"
)
# A read-only workload's span holds only the pool's own writes (labels and uberblocks at
# import, atime): measured in the guest, a healthy mirror side's were 1.41 x its peer's in
# one cold read's span (streaming writes: at most 1.24 x over two runs).
NOT_JUDGED = "a read-only workload: the writes in its span are only the pool's own few"
SPAN = (
    "`zpool iostat -Hvlp` after the workload: averages over every I/O since the pool's "
    "import or creation (histogram midpoints)"
)


@dataclass(frozen=True)
class Leaf:
    name: str
    position: int  # among every leaf of the pool, in its order
    top: str  # its top-level vdev
    read_ms: float | None
    write_ms: float | None
    write_ops: int  # per second since import (only compared between peers)


def _ms(v: object) -> float | None:
    return v / 1e6 if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _space(r: IostatRow) -> bool:
    """A pool or a top-level vdev: only they report capacity (a leaf shows 0 with -p)."""
    return any(isinstance(r.get(c), int) and r.get(c) for c in ("alloc", "free"))


def leaves(rows: Sequence[IostatRow]) -> list[Leaf]:
    """Every leaf under a redundant top-level vdev, in the pool's order. Rows come as
    `zpool iostat -v` prints them: the pool, then each top-level vdev followed by its leaves."""
    out: list[Leaf] = []
    top: str | None = None
    position = 0
    for r in rows[1:]:  # rows[0] is the pool itself
        name = str(r.get("name"))
        if _space(r):
            top = name if REDUNDANT.fullmatch(name) else None
            if top is None:
                position += 1  # a plain disk: a leaf of the pool's order, without peers
            continue
        if top is not None:
            ops = r.get("write_ops")
            out.append(Leaf(name, position, top, _ms(r.get("disk_wait_read_ns")),
                            _ms(r.get("disk_wait_write_ns")),
                            ops if isinstance(ops, int) else 0))  # fmt: skip
        position += 1
    return out


def _judged(group: Sequence[Leaf]) -> list[Leaf]:
    top = max((x.write_ops for x in group), default=0)
    return [
        x for x in group if x.write_ms and top and x.write_ops >= MIN_OPS_SHARE * top
    ]  # fmt: skip


def slow(rows: Sequence[IostatRow]) -> list[tuple[Leaf, float]]:
    """(leaf, its peers' median write disk_wait in ms) for each leaf over WAIT_RATIO x it."""
    by_top: dict[str, list[Leaf]] = {}
    for x in leaves(rows):
        by_top.setdefault(x.top, []).append(x)
    out = []
    for group in by_top.values():
        judged = _judged(group)
        for x in judged if len(judged) >= 2 else []:
            peers = statistics.median(p.write_ms or 0.0 for p in judged if p is not x)
            if x.write_ms and peers > 0 and x.write_ms > WAIT_RATIO * peers:
                out.append((x, peers))
    return out


def evidence(rows: Sequence[IostatRow], writes: bool = True) -> dict[str, object] | None:
    """The `latency` part of the slow-member record (guards `members_slow`): the rule, every
    judged leaf's disk_wait, and which leaves it names; None when no vdev has two leaves
    that served enough writes to compare (zfs-fuse has no latency columns at all).
    `writes` False (a workload that only reads): the figures are recorded and nothing is
    judged, since the writes in its span are only the pool's own few (NOT_JUDGED)."""
    all_leaves = leaves(rows)
    by_top: dict[str, list[Leaf]] = {}
    for x in all_leaves:
        by_top.setdefault(x.top, []).append(x)
    if not any(len(_judged(g)) >= 2 for g in by_top.values()):
        return None
    waits = {
        x.name: {"read": _round(x.read_ms), "write": _round(x.write_ms),
                 "write_ops_s": x.write_ops, "position": x.position}
        for x in all_leaves
    }  # fmt: skip
    out: dict[str, object] = {"rule": RULE, "span": SPAN, "disk_wait_ms": waits}
    if not writes:
        return out | {"not_judged": NOT_JUDGED}
    return out | {"slow": {
        x.name: {"position": x.position, "write_ms": _round(x.write_ms),
                 "peers_ms": _round(peers), "ratio": round((x.write_ms or 0) / peers, 2)}
        for x, peers in slow(rows)
    }}  # fmt: skip


def _round(v: float | None) -> float | None:
    return round(v, 2) if v is not None else None
