"""The knee of a sustained write: where its rate falls to a lower plateau. Pure.

A drive-managed SMR disk (and an SSD whose fast cache runs out) takes random writes at full
speed into a cache, then collapses to the rate at which it can rewrite its shingled bands;
the kernel cannot see this (queue/zoned reads "none"), the rate over time can. The series is
the device's own written-byte counter read every interval (engine/screen/run.py).

The rule (RULE, printed with every knee): drop the intervals before the first write and the
first one that wrote (fio starting) and the last (fio ending part-way); fit two plateaus by
least squares over every split with at least MIN_SIDE intervals on each side; report a knee
when the later plateau's median is at most FALL × the earlier one's and most intervals of each
side lie on their own side of the midpoint between the two. Its position is the bytes written
when the rate fell: the split's start, moved into the interval that straddles it in
proportion to that interval's rate between the two plateaus (a cache that fills mid-interval
leaves that interval half fast, half slow).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_SIDE = 3
FALL = 0.6  # the later plateau at most 60% of the earlier: a fall of at least 40%
AGREE = 0.8  # share of each side's intervals on its side of the midpoint
RULE = (
    f"two plateaus fitted by least squares (at least {MIN_SIDE} intervals each); a knee when "
    f"the later median is at most {FALL:.0%} of the earlier and {AGREE:.0%} of each side's "
    "intervals lie on its side of their midpoint"
)


@dataclass(frozen=True)
class Interval:
    start_s: float  # seconds since the write began
    seconds: float
    start_bytes: int  # bytes written before this interval
    bytes: int

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class Knee:
    at_bytes: float  # bytes written when the rate fell
    at_s: float
    before_bps: float  # the two plateaus' means, bytes/s
    after_bps: float

    @property
    def fall(self) -> float:
        return 1 - self.after_bps / self.before_bps if self.before_bps else 0.0


def intervals(samples: Sequence[tuple[float, int]]) -> list[Interval]:
    """(time, cumulative bytes written) samples → intervals, timed from the first sample."""
    if not samples:
        return []
    t0, b0 = samples[0]
    return [
        Interval(ta - t0, tb - ta, ba - b0, bb - ba)
        for (ta, ba), (tb, bb) in zip(samples, samples[1:], strict=False)
        if tb > ta
    ]


def steady_part(series: Sequence[Interval]) -> list[Interval]:
    """The intervals the rule looks at: from the second that wrote to the last but one."""
    first = next((i for i, x in enumerate(series) if x.bytes > 0), None)
    return [] if first is None else list(series[first + 1 : -1])


def _sse(xs: Sequence[float]) -> float:
    m = statistics.fmean(xs)
    return sum((x - m) ** 2 for x in xs)


def _best_split(rates: Sequence[float]) -> int | None:
    splits = range(MIN_SIDE, len(rates) - MIN_SIDE + 1)
    return min(splits, key=lambda k: _sse(rates[:k]) + _sse(rates[k:]), default=None)


def find_knee(series: Sequence[Interval]) -> Knee | None:
    """The knee by RULE, or None when the rate held (or the series is too short to say)."""
    part = steady_part(series)
    rates = [x.rate for x in part]
    k = _best_split(rates)
    if k is None:
        return None
    # Each plateau's level is its median: the interval that straddles the fall sits on one
    # side and must not pull that side's level toward the other.
    hi, lo = statistics.median(rates[:k]), statistics.median(rates[k:])
    mid = (hi + lo) / 2
    agree = sum(r > mid for r in rates[:k]) >= AGREE * k and sum(
        r < mid for r in rates[k:]
    ) >= AGREE * (len(rates) - k)
    if hi <= 0 or lo > FALL * hi or not agree:
        return None
    at_bytes, at_s = float(part[k].start_bytes), part[k].start_s
    for j in (k - 1, k):  # the interval that straddles the fall, if one does
        x = part[j]
        share = (x.rate - lo) / (hi - lo)  # of this interval at the earlier rate
        if 0.1 < share < 0.9:
            at_s = x.start_s + share * x.seconds
            at_bytes = x.start_bytes + share * x.seconds * hi
            break
    return Knee(at_bytes, at_s, hi, lo)
