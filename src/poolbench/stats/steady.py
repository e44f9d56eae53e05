"""Steady state by the SNIA rule (SNIA Solid State Storage Performance Test Specification):
over a window of rounds, the data excursion (largest minus smallest round) is within 20% of
the window's mean, and the excursion of the least-squares line across the window (its slope
times the window's span) is within 10% of it. A round here is one of fio's one-second
samples of the group's bandwidth (fio's `steadystate` data, workloads/fiojob.py). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_RANGE = 0.20  # largest minus smallest round, as a share of the window's mean
MAX_SLOPE = 0.10  # the fitted line's rise across the window, as a share of the mean
MIN_ROUNDS = 3  # fewer rounds cannot show a trend from noise: not judged


@dataclass(frozen=True)
class Steady:
    rounds: int  # rounds judged (the last `window` of those sampled)
    mean: float
    range_share: float | None  # (max - min) / mean
    slope_share: float | None  # |slope| x (rounds - 1) / mean
    steady: bool | None  # None: too few rounds to judge

    @property
    def rule(self) -> str:
        return (
            f"SNIA PTS over the last {self.rounds} one-second rounds: range <= "
            f"{MAX_RANGE:.0%} of the mean and least-squares slope across the window <= "
            f"{MAX_SLOPE:.0%} of it (at least {MIN_ROUNDS} rounds)"
        )

    def as_dict(self) -> dict[str, object]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 4)

        return {"rule": self.rule, "rounds": self.rounds, "mean": round(self.mean, 1),
                "range_share": r(self.range_share), "slope_share": r(self.slope_share),
                "steady": self.steady}  # fmt: skip

    def why_not(self) -> str:
        """What broke the rule, for a warning ("" when steady or not judged)."""
        bad = []
        if self.range_share is not None and self.range_share > MAX_RANGE:
            bad.append(f"range {self.range_share:.0%} of the mean > {MAX_RANGE:.0%}")
        if self.slope_share is not None and self.slope_share > MAX_SLOPE:
            bad.append(f"slope {self.slope_share:.0%} of the mean > {MAX_SLOPE:.0%}")
        return " and ".join(bad)


def judge(samples: Sequence[float], window: int = 5) -> Steady:
    """The rule over the last `window` samples."""
    ys = [float(y) for y in samples][-window:] if window > 0 else []
    n = len(ys)
    mean = sum(ys) / n if n else 0.0
    if n < MIN_ROUNDS or mean <= 0:
        return Steady(n, mean, None, None, None)
    range_share = (max(ys) - min(ys)) / mean
    xbar = (n - 1) / 2
    sxx = sum((x - xbar) ** 2 for x in range(n))
    slope = sum((x - xbar) * (y - mean) for x, y in enumerate(ys)) / sxx
    slope_share = abs(slope) * (n - 1) / mean
    return Steady(
        n, mean, range_share, slope_share, range_share <= MAX_RANGE and slope_share <= MAX_SLOPE
    )
