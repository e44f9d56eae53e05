"""Per-member breakdown of one measurement window, and the member slower than its peers.

Total device bytes cannot show a slow disk: a mirror or raidz write puts the same bytes on
every member however slow one of them is, and the pool waits for it. What differs is how long
each member was busy moving its bytes. A sampler reads every member's counters every
`interval` seconds during the window; a member's rate is its bytes divided by the time of the
intervals in which its counters moved (bytes/s while busy). A member whose rate is more than
25% below the median of its peers' is named, if it was also busy longer than they were: a
slow disk keeps working while the pool waits for it and its peers idle. A member that was
given less to do moves fewer bytes in the same busy time, at a lower rate, and is not slow:
in the demo's streaming read of raidz1:4 at ashift 12 (zfs-fuse), two members read 25.4 MiB
and two 37-41 MiB, all four busy for 0.573 s, and the first two were named "35% slower"
before this rule, though they only had less to read (where raidz puts parity and the short
data column varies with the block's offset).
Members that moved (almost) nothing are left out of the comparison: a raid1 read may
legitimately use one side only.

Busy time is counted in whole sampling intervals, so two equal members can differ by one
interval by chance: in the demo, members that wrote the same 31.8-32.7 MiB were busy 0.284 and
0.384 s and the second was named "26% slower". A gap of a few intervals is no evidence
(RESOLUTION_SAMPLES); and one window is only evidence, never the verdict: `evidence` records
what this window showed, and a member is named only when it was slow in most replicates
(engine/slow_members.py).
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poolbench.guards.devices import SYS_BLOCK, Counters, read_counters

SLOW_FRACTION = 0.25  # slower than its peers' median by more than this: flagged
MIN_SHARE = 0.05  # a member moving < 5% of the busiest member's bytes is not compared
# A slow member is busy at least this much longer than its peers' median (they wait for it).
LONGER_BUSY = 0.10
# ... and longer by more than this many sampling intervals: busy time is counted in whole
# intervals, so a gap of one or two is what equal disks show by chance. /proc/diskstats
# counts in milliseconds (io_ticks in jiffies), far finer than the 0.1 s interval.
RESOLUTION_SAMPLES = 3
SAMPLE_INTERVAL = 0.1  # seconds between the Sampler's reads


@dataclass(frozen=True)
class MemberRate:
    name: str
    read_bytes: int
    write_bytes: int
    busy_s: float  # seconds of sampling intervals in which this member's counters moved
    read_ios: int = 0  # read requests completed

    @property
    def moved(self) -> int:
        return self.read_bytes + self.write_bytes

    @property
    def mib_s(self) -> float:
        return self.moved / self.busy_s / 2**20 if self.busy_s > 0 else 0.0

    def as_dict(self) -> dict[str, object]:
        return {"read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
                "read_ios": self.read_ios, "busy_s": round(self.busy_s, 3),
                "mib_s": round(self.mib_s, 2)}  # fmt: skip


class Sampler:
    """Samples the members' counters in a background thread between start() and stop()."""

    def __init__(self, devices: Sequence[str], interval: float = SAMPLE_INTERVAL,
                 sys_block: Path = SYS_BLOCK) -> None:  # fmt: skip
        self.devices = list(devices)
        self.interval = interval
        self.sys_block = sys_block
        self.samples: list[tuple[float, dict[str, Counters]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), read_counters(self.devices, self.sys_block)))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except (OSError, ValueError, IndexError):
                return  # a member went away mid-window: keep what was sampled

    def _final(self) -> None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            self._sample()

    def start(self) -> None:
        self._sample()
        self._thread.start()

    def stop(self) -> list[MemberRate]:
        self._stop.set()
        self._thread.join()
        self._final()
        return rates(self.samples)


def rates(samples: Sequence[tuple[float, dict[str, Counters]]]) -> list[MemberRate]:
    """Per member: bytes moved over the window and the time of the intervals they moved in."""
    if len(samples) < 2:
        return []
    out = []
    for name in samples[0][1]:
        busy = 0.0
        for (t0, a), (t1, b) in zip(samples, samples[1:], strict=False):
            if b[name] != a[name]:  # Counters compare by value
                busy += t1 - t0
        first, last = samples[0][1][name], samples[-1][1][name]
        out.append(MemberRate(name, last.read_bytes - first.read_bytes,
                              last.write_bytes - first.write_bytes, busy,
                              last.read_ios - first.read_ios))  # fmt: skip
    return out


def _slow(members: Sequence[MemberRate], interval: float) -> list[tuple[MemberRate, float, float]]:
    """(member, its peers' median rate, their median busy time) for each slow member."""
    top = max((m.moved for m in members), default=0)
    active = [m for m in members if top and m.moved >= MIN_SHARE * top and m.busy_s > 0]
    if len(active) < 2:
        return []
    out = []
    for m in active:
        peers = statistics.median(p.mib_s for p in active if p is not m)
        peers_busy = statistics.median(p.busy_s for p in active if p is not m)
        longer = m.busy_s - peers_busy
        if (
            m.mib_s < (1 - SLOW_FRACTION) * peers
            and longer > LONGER_BUSY * peers_busy
            and longer > RESOLUTION_SAMPLES * interval
        ):
            out.append((m, peers, peers_busy))
    return out


def slow_members(members: Sequence[MemberRate], interval: float = SAMPLE_INTERVAL) -> list[str]:
    """What this window shows of each member more than SLOW_FRACTION slower than the median
    of its peers and busy longer than they were by more than the counters' resolution."""
    return [
        f"member {m.name} moved data at {m.mib_s:.1f} MiB/s while busy, "
        f"{1 - m.mib_s / peers:.0%} slower than its peers' median {peers:.1f} MiB/s "
        f"(busy {m.busy_s:.2f} s against their {busy:.2f} s)"
        for m, peers, busy in _slow(members, interval)
    ]


def evidence(
    members: Sequence[MemberRate], interval: float = SAMPLE_INTERVAL
) -> dict[str, object] | None:
    """The per-measurement finding (`members_slow` in the guards JSON): the rule, and which
    members it caught in this window; None when fewer than two members can be compared."""
    top = max((m.moved for m in members), default=0)
    if sum(1 for m in members if top and m.moved >= MIN_SHARE * top and m.busy_s > 0) < 2:
        return None
    found = _slow(members, interval)
    order = [m.name for m in members]
    return {
        "rule": f"rate while busy < {1 - SLOW_FRACTION:.2f} x peers' median, and busy longer "
        f"than their median by > {LONGER_BUSY:.0%} and > {RESOLUTION_SAMPLES} sampling "
        "intervals",
        "interval_s": interval,
        # The members in the pool's order: a study's trials rebuild the pool on loop devices
        # whose names may differ from one trial to the next, its place in the pool does not.
        "order": order,
        "slow": {
            m.name: {
                "slower": round(1 - m.mib_s / peers, 3),
                "longer_s": round(m.busy_s - busy, 3),
                "position": order.index(m.name),
            }
            for m, peers, busy in found
        },  # fmt: skip
    }
