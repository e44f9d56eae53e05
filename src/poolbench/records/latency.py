"""fio's completion latency of one measurement, as the store keeps it (`measurements.clat`).

fio's JSON parser (workloads/fioparse.py) fills it; the store and the reports read it back
with `from_json`. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict


def percentile_key(q: float | str) -> str:
    """fio's "99.900000" (or 99.9) as the key poolbench stores: "99.9", "50"."""
    return format(float(q), "g")


class LatencyJson(TypedDict):
    """A Latency as the `clat` column keeps it."""

    direction: str
    samples: int
    mean_ns: float
    min_ns: float
    max_ns: float
    stddev_ns: float
    percentiles: dict[str, float]
    bins: dict[str, int]  # JSON keys are strings: the bin's value in ns


@dataclass(frozen=True)
class Latency:
    """fio's completion latency (clat: submission to completion) of one run, in ns."""

    direction: str  # the section it came from: read | write
    samples: int  # completions fio timed (its N)
    mean_ns: float
    min_ns: float
    max_ns: float
    stddev_ns: float
    percentiles: Mapping[str, float]  # percentile_key → ns, every one fio reported
    bins: Mapping[int, int] = field(default_factory=dict)  # bin value (ns) → completions

    def p(self, q: float) -> float | None:
        """The q-th percentile in ns, or None when fio did not report it."""
        return self.percentiles.get(percentile_key(q))

    def beyond(self, q: float) -> float:
        """How many completions lie above the q-th percentile: a p99.9 resting on 3 slow
        completions is a fact about those 3, not about the tail."""
        return self.samples * (100.0 - q) / 100.0

    def to_json(self) -> LatencyJson:
        return {
            "direction": self.direction,
            "samples": self.samples,
            "mean_ns": self.mean_ns,
            "min_ns": self.min_ns,
            "max_ns": self.max_ns,
            "stddev_ns": self.stddev_ns,
            "percentiles": dict(self.percentiles),
            "bins": {str(k): v for k, v in sorted(self.bins.items())},
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Latency:
        pct = d.get("percentiles") or {}
        bins = d.get("bins") or {}
        return cls(
            direction=str(d.get("direction", "")),
            samples=int(d.get("samples") or 0),
            mean_ns=float(d.get("mean_ns") or 0.0),
            min_ns=float(d.get("min_ns") or 0.0),
            max_ns=float(d.get("max_ns") or 0.0),
            stddev_ns=float(d.get("stddev_ns") or 0.0),
            percentiles={percentile_key(k): float(v) for k, v in pct.items()},
            bins={int(k): int(v) for k, v in bins.items()},
        )
