"""What a screen says about its disks: the slow one(s) against their peers, and each disk's
advice (zoned, a write-rate collapse, 512e sectors, the write cache). Pure.

A disk is slow by the slow-member guard's rule (guards/members.py SLOW_FRACTION): its figure
more than 25% below the median of its peers' figures, and here, every disk measured at
once with replicates, its whole 95% interval below that line (its mean when it ran once),
so run to run noise does not name a disk.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.engine.screen.jobs import SUSTAIN
from poolbench.engine.screen.knee import RULE
from poolbench.engine.screen.records import DiskScreen
from poolbench.guards.members import SLOW_FRACTION
from poolbench.safety.blockdevice import ASHIFT_ADVICE
from poolbench.system.diskqueue import ZONED_MEANING

MiB = 1024 * 1024
SLOW_RULE = (
    f"slower than its peers: the whole 95% interval below {1 - SLOW_FRACTION:.2f} x the "
    "median of the other disks' means (the slow-member guard's rule)"
)


@dataclass(frozen=True)
class Slow:
    device: str
    serial: str | None
    test: str
    mean: float
    peers: float  # the median of the other disks' means
    unit: str

    @property
    def slower(self) -> float:
        return 1 - self.mean / self.peers if self.peers else 0.0

    def text(self) -> str:
        who = self.device + (f" (serial {self.serial})" if self.serial else "")
        return (
            f"{who} is slow on {self.test}: {self.mean:.1f} {self.unit} against its peers' "
            f"median {self.peers:.1f} ({self.slower:.0%} slower)"
        )


def slow_disks(screens: Sequence[DiskScreen]) -> list[Slow]:
    """Every (disk, test) where the disk is slower than its peers by SLOW_RULE."""
    out: list[Slow] = []
    tests = dict.fromkeys(t for s in screens for t in s.figures if t != SUSTAIN)
    for test in tests:
        have = [s for s in screens if test in s.figures and s.figures[test].values]
        if len(have) < 2:
            continue
        for s in have:
            fig = s.figures[test]
            peers = statistics.median(p.figures[test].mean for p in have if p is not s)
            summ = fig.summary
            top = summ.ci_high if summ.n >= 2 else summ.mean
            if top < (1 - SLOW_FRACTION) * peers:
                out.append(Slow(s.device, s.serial, test, summ.mean, peers, fig.unit))
    return out


def advice(s: DiskScreen) -> list[str]:
    """What this disk's facts and figures mean for building a pool on it."""
    out: list[str] = []
    if s.zoned in ("host-aware", "host-managed"):
        out.append(
            f"zoned: {ZONED_MEANING[s.zoned]} (queue/zoned); ZFS, md and btrfs RAID expect "
            "conventional disks: rebuilds and random writes suffer"
        )
    out += _knee_advice(s)
    if s.logical_sector == 512 and (s.physical_sector or 0) >= 4096:
        out.append(ASHIFT_ADVICE)
    elif s.logical_sector and s.physical_sector:
        shift = max(s.physical_sector, 512).bit_length() - 1
        out.append(f"sectors {s.logical_sector}/{s.physical_sector} bytes: ashift={shift} "
                   "matches the physical sector")  # fmt: skip
    if s.write_cache == "write back":
        out.append(
            "write cache on (write back): writes are acknowledged from the disk's cache; the "
            "write tests end with a cache flush, counted in their time"
        )
    elif s.write_cache == "write through":
        out.append("write cache off (write through): every write waits for the media")
    return out


def _knee_advice(s: DiskScreen) -> list[str]:
    if SUSTAIN not in s.figures:
        return []
    k = s.knee
    if k is None:
        written = sum(x.bytes for x in s.series) / MiB
        return [
            f"no write-rate collapse in the sustained write ({written:.0f} MiB written): not "
            "proof of a conventional disk, a drive-managed SMR cache larger than that would "
            "not have filled"
        ]
    what = (
        "suspected drive-managed SMR (its cache filled; the kernel cannot see its zones)"
        if s.rotational
        else "a write cliff (the drive's fast write cache ran out)"
    )
    return [
        f"{what}: the sustained write fell from {k.before_bps / MiB:.1f} to "
        f"{k.after_bps / MiB:.1f} MiB/s ({k.fall:.0%}) after {k.at_bytes / MiB:.0f} MiB, "
        f"{k.at_s:.1f} s (knee: {RULE})"
    ]
