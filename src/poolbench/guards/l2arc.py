"""What the ARC and the L2ARC did during each interval of a read (pure).

OpenZFS counts, in /proc/spl/kstat/zfs/arcstats, every ARC lookup as a hit or a miss, and
every ARC miss that could go to a cache device as an L2ARC hit (`l2_hits`: the block was
on the cache device and was read from there) or an L2ARC miss (`l2_misses`: it was not, so
the pool's data vdevs served it). With no cache device in the system neither L2 counter
moves. The counters are system-wide: the l2arc study runs with its pool the only one
imported, so their deltas over an interval are what that interval's reads did.

`interval` turns two snapshots into one interval's figures; `steady` keeps the second half
of the intervals (the first half is the warm-up: the L2ARC fills at `l2arc_write_max` per
second, plus `l2arc_write_boost` until it is warm), which the study's figure and verdict use.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

COUNTERS = ("hits", "misses", "l2_hits", "l2_misses")
STEADY_SHARE = 0.5  # the last half of the intervals is "steady"


class IntervalJson(TypedDict):
    """An interval as the guards' `l2arc` section keeps it (Interval.from_json reads it)."""

    index: int
    seconds: float
    iops: float
    p99_ms: float | None
    hits: int
    misses: int
    l2_hits: int
    l2_misses: int
    l2_size: int
    arc_hit_rate: float | None
    l2_hit_rate: float | None


class SteadyJson(TypedDict):
    """The steady figures as the guards' `l2arc` section keeps them."""

    intervals: int
    iops: float
    l2_hits: int
    l2_misses: int
    l2_hit_rate: float | None
    arc_hit_rate: float | None
    p99_ms: float | None


@dataclass(frozen=True)
class Interval:
    """One interval of reads: the application's rate and tail, and the caches' counters."""

    index: int
    seconds: float  # fio's runtime of the interval
    iops: float
    p99_ms: float | None  # fio's completion-latency p99 of the interval
    hits: int  # ARC hits (arcstats deltas)
    misses: int
    l2_hits: int
    l2_misses: int
    l2_size: int  # bytes the cache devices hold at the interval's end (arcstats l2_size)

    @property
    def arc_hit_rate(self) -> float | None:
        return _rate(self.hits, self.misses)

    @property
    def l2_hit_rate(self) -> float | None:
        """Share of the ARC's misses the cache device served (None: no L2 lookups)."""
        return _rate(self.l2_hits, self.l2_misses)

    def as_dict(self) -> IntervalJson:
        return {
            "index": self.index,
            "seconds": self.seconds,
            "iops": self.iops,
            "p99_ms": self.p99_ms,
            "hits": self.hits,
            "misses": self.misses,
            "l2_hits": self.l2_hits,
            "l2_misses": self.l2_misses,
            "l2_size": self.l2_size,
            "arc_hit_rate": _rounded(self.arc_hit_rate),
            "l2_hit_rate": _rounded(self.l2_hit_rate),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Interval:
        p99 = d.get("p99_ms")
        n = [int(_num(d.get(k))) for k in (*COUNTERS, "l2_size")]
        return cls(
            int(_num(d.get("index"))), float(_num(d.get("seconds"))), float(_num(d.get("iops"))),
            float(p99) if isinstance(p99, int | float) else None, n[0], n[1], n[2], n[3], n[4],
        )  # fmt: skip


def _num(v: object) -> float:
    return float(v) if isinstance(v, int | float) else 0.0


def _rate(hit: int, miss: int) -> float | None:
    return hit / (hit + miss) if hit + miss > 0 else None


def _rounded(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def interval(
    index: int,
    before: Mapping[str, int],
    after: Mapping[str, int],
    seconds: float,
    iops: float,
    p99_ms: float | None,
) -> Interval:
    """The interval between two arcstats snapshots. A counter that went down (the module
    was reloaded) counts as 0, never as a negative number of reads."""

    def d(key: str) -> int:
        return max(0, after.get(key, 0) - before.get(key, 0))

    return Interval(index, seconds, iops, p99_ms, d("hits"), d("misses"), d("l2_hits"),
                    d("l2_misses"), after.get("l2_size", 0))  # fmt: skip


def steady(intervals: Sequence[Interval]) -> list[Interval]:
    """The steady intervals: the last half (at least one)."""
    n = len(intervals)
    return list(intervals[min(n - 1, int(n * STEADY_SHARE)) :]) if n else []


@dataclass(frozen=True)
class Steady:
    """The steady intervals together: the rate, the L2ARC's share and the tail."""

    intervals: int
    iops: float  # completed reads ÷ seconds over the steady intervals
    l2_hits: int
    l2_misses: int
    l2_hit_rate: float | None
    arc_hit_rate: float | None
    p99_ms: float | None  # the median of the steady intervals' p99s

    def as_dict(self) -> SteadyJson:
        return {
            "intervals": self.intervals,
            "iops": self.iops,
            "l2_hits": self.l2_hits,
            "l2_misses": self.l2_misses,
            "l2_hit_rate": self.l2_hit_rate,
            "arc_hit_rate": self.arc_hit_rate,
            "p99_ms": self.p99_ms,
        }


def summarize(intervals: Sequence[Interval]) -> Steady:
    got = steady(intervals)
    seconds = sum(i.seconds for i in got)
    reads = sum(i.iops * i.seconds for i in got)
    l2h, l2m = sum(i.l2_hits for i in got), sum(i.l2_misses for i in got)
    tails = sorted(i.p99_ms for i in got if i.p99_ms is not None)
    return Steady(
        len(got),
        reads / seconds if seconds > 0 else 0.0,
        l2h,
        l2m,
        _rounded(_rate(l2h, l2m)),
        _rounded(_rate(sum(i.hits for i in got), sum(i.misses for i in got))),
        statistics.median(tails) if tails else None,
    )
