"""Steady state by the SNIA rule (SNIA Solid State Storage Performance Test Specification,
PTS 2.0, "Steady State"): over a measurement window of rounds, the data excursion (largest
minus smallest round) is within 20% of the window's mean, and the excursion of the
least-squares line across the window (its slope times the window's span) is within 10% of
it. Pure.

The data are fio's one-second samples of the bytes the application moved (its steady-state
ring, workloads/fiojob.py). In PTS every round is a whole measurement; a one-second sample is
not one where the filesystem admits writes in quanta: zfs-fuse takes a stream half its ARC
at a time, so a second holds 0, 1 or 2 quanta of a steady stream (measured: 52, 49, 50, 50,
0, 49, 50, 49, 0, ... MiB), and a rule on such seconds judges where the quanta fell, not the
stream. So a round is `round_s` consecutive samples, long enough to hold QUANTA_PER_ROUND of
the filesystem's quanta (engine/quanta.py says what a quantum is; one second where the
writer is paced write by write), and the rule judges the window's last WINDOW_ROUNDS rounds.

A write's closing fsync is part of its figure (DESIGN.md rule 4) but not of its rounds: in
it the application moves nothing, and a round holding it would show a drop the stream never
had. Its seconds — from the one in which the job's running total reached all it moved — are
left out when they number at most one round: a flush that short wrote out at most what the
filesystem keeps in flight. A longer one means a cache had taken writes the disks had not
made, a transient the rule must see, so it stays in the rounds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_RANGE = 0.20  # largest minus smallest round, as a share of the window's mean
MAX_SLOPE = 0.10  # the fitted line's rise across the window, as a share of the mean
MIN_ROUNDS = 3  # fewer rounds cannot show a trend from noise: not judged
WINDOW_ROUNDS = 5  # the measurement window: the last this many rounds (PTS: five)
# Two rounds of a steady stream admitted in quanta hold counts of quanta that differ by one
# at most; with this many quanta a round, that one is at most 10% of the round, half of what
# the range allows, leaving the other half to the stream's own variation.
QUANTA_PER_ROUND = round(2 / MAX_RANGE)
# fio's samples are rates over intervals of about 1000 ms, so their running sum is the bytes
# moved to within a small part of a second's worth (recorded: 0.03% of 3 s); the job's
# total counts as reached within this share of the mean sample.
REACHED_SLACK = 0.25


def round_seconds(quantum_bytes: float | None, rate: float) -> int:
    """Seconds a round lasts: one, or enough for QUANTA_PER_ROUND quanta at `rate` (bytes/s)."""
    if not quantum_bytes or rate <= 0:
        return 1
    return max(1, math.ceil(QUANTA_PER_ROUND * quantum_bytes / rate - 1e-9))


def closing_seconds(samples: Sequence[float], moved_bytes: float | None) -> int:
    """How many of the last samples began before, and ended after, the job's last I/O or
    came after it: from the sample in which the running total reached `moved_bytes` on (for
    a write, the seconds of its closing fsync). 0 when the total is unknown or never
    reached in a sampled second (the job ended in the unsampled part of its last second)."""
    if not moved_bytes or not samples:
        return 0
    slack = REACHED_SLACK * sum(samples) / len(samples)
    total = 0.0
    for i, s in enumerate(samples):
        total += s
        if total >= moved_bytes - slack:
            return len(samples) - i
    return 0


def rounds(samples: Sequence[float], round_s: int) -> list[float]:
    """The samples in rounds of `round_s`, counted back from the last (a partial round at
    the start, the oldest seconds, is dropped), each the mean of its samples."""
    n = len(samples) // round_s
    start = len(samples) - n * round_s
    return [
        sum(samples[start + j * round_s : start + (j + 1) * round_s]) / round_s for j in range(n)
    ]


@dataclass(frozen=True)
class Steady:
    rounds: int  # rounds judged (the last WINDOW_ROUNDS of those the samples make)
    mean: float
    range_share: float | None  # (max - min) / mean
    slope_share: float | None  # |slope| x (rounds - 1) / mean
    steady: bool | None  # None: too few rounds to judge
    round_s: int = 1  # seconds a round lasts
    closing_left_out: int = 0  # last samples left out of the rounds (the closing fsync's)
    closing_kept: int = 0  # ... kept in instead: a flush longer than a round

    @property
    def rule(self) -> str:
        return (
            f"SNIA PTS over the last {self.rounds} rounds of {self.round_s} s: range <= "
            f"{MAX_RANGE:.0%} of the mean and least-squares slope across the window <= "
            f"{MAX_SLOPE:.0%} of it (at least {MIN_ROUNDS} rounds)"
        )

    def as_dict(self) -> dict[str, object]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        out: dict[str, object] = {
            "rule": self.rule, "rounds": self.rounds, "round_s": self.round_s,
            "mean": round(self.mean, 1), "range_share": r(self.range_share),
            "slope_share": r(self.slope_share), "steady": self.steady,
        }  # fmt: skip
        if self.closing_left_out:
            out["closing_left_out_s"] = self.closing_left_out
        if self.closing_kept:
            out["closing_kept_s"] = self.closing_kept
        if self.steady is None:
            out["not_judged"] = self.not_judged()
        return out

    def why_not(self) -> str:
        """What broke the rule, for a warning ("" when steady or not judged)."""
        bad = []
        if self.range_share is not None and self.range_share > MAX_RANGE:
            bad.append(f"range {self.range_share:.0%} of the mean > {MAX_RANGE:.0%}")
        if self.slope_share is not None and self.slope_share > MAX_SLOPE:
            bad.append(f"slope {self.slope_share:.0%} of the mean > {MAX_SLOPE:.0%}")
        if self.closing_kept:
            bad.append(
                f"{self.closing_kept} sampled second(s) at or after the last write (its "
                f"closing fsync), more than a round of {self.round_s} s: a cache took the "
                "writes faster than the disks made them"
            )
        return " and ".join(bad)

    def not_judged(self) -> str:
        """Why the rule could not judge the window ("" when it did)."""
        if self.steady is not None:
            return ""
        if self.rounds >= MIN_ROUNDS:
            return "nothing moved"
        return (
            f"the window holds {self.rounds} round(s) of {self.round_s} s; the rule needs "
            f"{MIN_ROUNDS}"
        )


def judge(
    samples: Sequence[float],
    window: int = WINDOW_ROUNDS,
    *,
    quantum_bytes: float | None = None,
    moved_bytes: float | None = None,
) -> Steady:
    """The rule over the last `window` rounds of the samples (bytes/s, one a second).
    `quantum_bytes`: what the filesystem admits a writer at a time (rounds then hold
    QUANTA_PER_ROUND of them); `moved_bytes`: what the job moved, to find its closing
    seconds."""
    ys = [float(y) for y in samples]
    closing = closing_seconds(ys, moved_bytes)
    body = ys[: len(ys) - closing] if closing < len(ys) else []
    rate = sum(body) / len(body) if body else 0.0
    round_s = round_seconds(quantum_bytes, rate)
    left_out, kept = (closing, 0) if closing <= round_s else (0, closing)
    judged = rounds(ys[: len(ys) - left_out], round_s)[-window:] if window > 0 else []
    n = len(judged)
    mean = sum(judged) / n if n else 0.0
    if kept:  # the writes went to a cache faster than to the disks: never steady
        rng, slp = _shares(judged, mean) if n >= 2 and mean > 0 else (None, None)
        return Steady(n, mean, rng, slp, False, round_s, left_out, kept)
    if n < MIN_ROUNDS or mean <= 0:
        return Steady(n, mean, None, None, None, round_s, left_out, kept)
    range_share, slope_share = _shares(judged, mean)
    ok = range_share <= MAX_RANGE and slope_share <= MAX_SLOPE
    return Steady(n, mean, range_share, slope_share, ok, round_s, left_out, kept)


def _shares(ys: Sequence[float], mean: float) -> tuple[float, float]:
    """The range and the least-squares line's rise across the rounds, as shares of `mean`."""
    n = len(ys)
    xbar = (n - 1) / 2
    sxx = sum((x - xbar) ** 2 for x in range(n))
    slope = sum((x - xbar) * (y - mean) for x, y in enumerate(ys)) / sxx
    return (max(ys) - min(ys)) / mean, abs(slope) * (n - 1) / mean
