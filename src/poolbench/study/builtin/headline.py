"""The headline figure of a latency-sensitive workload, for the notes of the sync-slog,
geometry and qd-curve studies (pure).

Latency percentiles are the figure these questions turn on (a SLOG is bought for its p99, not
its mean). When the run recorded them, a note uses the p99; otherwise it says IOPS, and where
a latency is still needed (the queue-depth curve) it uses the mean latency that Little's law
gives for a closed loop: with N I/Os always outstanding, mean latency = N / IOPS. That is
exact for fio's fixed-depth jobs, and is labelled as a mean, never as a p99.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts

# A workload name's load suffix: rand-read-4k-qd8-j4 → ("rand-read-4k", 8, 4).
_LOAD = re.compile(r"^(.*?)(?:-qd(\d+))?(?:-j(\d+))?$")


@dataclass(frozen=True)
class Figure:
    """One configuration's figure for one workload: mean IOPS and, if recorded, mean p99."""

    iops: float
    p99_ms: float | None

    def text(self) -> str:
        """`1,234 IOPS, p99 3.20 ms` (or IOPS alone when no percentile was recorded)."""
        out = f"{self.iops:,.0f} IOPS"
        return out + (f", p99 {self.p99_ms:.2f} ms" if self.p99_ms is not None else "")


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def p99_ms(c: ConfigFacts, workload: str) -> float | None:
    """The mean p99 completion latency of `workload` on `c` in ms, when fio recorded it for
    every replicate (ConfigFacts.latency, ns); None otherwise."""
    values = c.latency.get(workload, {}).get("99", ())
    if not values or len(values) < len(c.figures.get(workload, ())):
        return None
    m = sum(values) / len(values)
    return m / 1e6 if math.isfinite(m) else None


def figure(c: ConfigFacts, workload: str) -> Figure | None:
    """`workload`'s figure on `c`, or None when it was not measured there."""
    iops = mean(c.figures.get(workload, ()))
    return None if iops is None else Figure(iops, p99_ms(c, workload))


def load(workload: str) -> tuple[str, int, int]:
    """(base name, queue depth, jobs) of a workload name; 1 where the name gives none."""
    m = _LOAD.match(workload)
    assert m is not None  # the pattern matches every string
    return m.group(1), int(m.group(2) or 1), int(m.group(3) or 1)


def littles_law_ms(iops: float, outstanding: int) -> float | None:
    """Mean latency in ms of a closed loop keeping `outstanding` I/Os in flight."""
    return outstanding / iops * 1000.0 if iops > 0 else None


def ratio_text(a: float, b: float) -> str:
    """`a` against `b` as a factor: '2.40× faster' / '1.60× slower' / 'the same'."""
    if a <= 0 or b <= 0:
        return "not comparable (a zero figure)"
    r = a / b
    if 0.95 <= r <= 1.05:
        return f"within 5% ({r:.2f}×)"
    return f"{r:.2f}× faster" if r > 1 else f"{1 / r:.2f}× slower"


def compared(without: Sequence[float], with_: Sequence[float]) -> tuple[str, bool]:
    """mean(with_) against mean(without) as a factor with its 95% Fieller interval from the
    replicates ('3.00× faster (CI 2.40–4.00×)', or 'no significant difference (…; CI …)'),
    and whether the replicates show it is not noise."""
    from poolbench.stats.compare import ratio_ci  # scipy: imported when a note needs it

    a, b = mean(with_), mean(without)
    if a is None or b is None:
        return "not comparable (not measured on both)", False
    text = ratio_text(a, b)
    r = ratio_ci(without, with_)
    if r.undetermined:
        return f"{text}; {r.undetermined}", False
    ci = f"CI {r.low:.2f}–{r.high:.2f}×"
    if r.significant:
        return f"{text} ({ci})", True
    return f"no significant difference ({text}; {ci})", False
