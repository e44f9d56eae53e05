"""What `detect` answers: segments, steps, a drift, outlier points, and why (pure, typed).

Every ratio is after/before (or per unit of the drift's x) with its interval at
`History.confidence`; indexes are positions in the points given to `detect`, labels their
labels. `as_dict` is the JSON form (nan as None).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


def _pct(r: float) -> str:
    return f"{(r - 1) * 100:+.1f}%"


@dataclass(frozen=True)
class Segment:
    """Points start…end (inclusive) at one level: the geometric level and its interval."""

    start: int
    end: int
    points: int  # used: outliers inside the span are not
    level: float
    low: float
    high: float


@dataclass(frozen=True)
class Step:
    """A step before point `index` (the first point of the new level)."""

    index: int
    label: str
    before_label: str  # the label of the last point before the step
    ratio: float  # after / before
    low: float
    high: float
    p_value: float
    df: float

    def text(self) -> str:
        where = self.label or f"point {self.index + 1}"
        return f"{_pct(self.ratio)} [{_pct(self.low)}, {_pct(self.high)}] from {where}"


@dataclass(frozen=True)
class Drift:
    """A gradual change: the ratio per unit of x (the covariate, or one point)."""

    per_unit: float
    low: float
    high: float
    per: str  # "point" or "covariate unit"
    span_ratio: float  # over the series' whole span of x
    span_low: float
    span_high: float
    p_value: float

    def text(self) -> str:
        return (
            f"drift {_pct(self.per_unit)} per {self.per} [{_pct(self.low)}, {_pct(self.high)}]"
            f", {_pct(self.span_ratio)} over the series"
        )


@dataclass(frozen=True)
class Outlier:
    """A point that agrees with neither its neighbours before nor after it."""

    index: int
    label: str
    ratio: float  # the point / the geometric level of the segment it lies in
    score: float  # its r (excursions) against the threshold the series drew
    limit: float


@dataclass(frozen=True)
class History:
    """The answer for one series (module doc); `reason` says why no step is reported."""

    points: int
    segments: tuple[Segment, ...]
    steps: tuple[Step, ...]
    drift: Drift | None
    outliers: tuple[Outlier, ...]
    between_run_cv: float  # τ̂: the run-to-run variation beyond each point's own interval
    confidence: float
    reason: str  # empty when a step is reported
    notes: tuple[str, ...]  # candidates dropped, choices made

    def summary(self) -> str:
        parts = [s.text() for s in self.steps]
        if self.drift:
            parts.append(self.drift.text())
        parts += [f"outlier at {o.label or f'point {o.index + 1}'} ({_pct(o.ratio)})"
                  for o in self.outliers]  # fmt: skip
        if not self.steps:
            parts.append(f"no step: {self.reason}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        def clean(value: object) -> object:
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list | tuple):
                return [clean(v) for v in value]
            return value

        out = clean(asdict(self))
        assert isinstance(out, dict)
        return out
