"""The headline figure of a latency-sensitive workload, for the notes of the sync-slog,
geometry and qd-curve studies (pure).

Latency percentiles are the figure these questions turn on (a SLOG is bought for its p99, not
its mean). When the run recorded them, a note uses the p99 of all I/Os of all replicates, from
their merged fio histograms, with its interval (stats.pooled); a run stored without
histograms gets the geometric mean of its replicates' p99s with the log-scale interval
(stats.logscale), labelled so. Otherwise a note says IOPS, and where
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
class P99:
    """A p99 completion latency in ms with its interval and what it is."""

    ms: float
    low_ms: float  # nan when there is no interval
    high_ms: float
    label: str  # what the figure is: "of all I/Os" or the geometric mean of the runs' p99s
    runs: int
    open_high: bool = False

    def text(self) -> str:
        """'p99 of all I/Os 3.20 ms (95% CI 2.90–3.61 ms, 5 runs)'."""
        head = f"p99 {self.label} {self.ms:.2f} ms" if self.label else f"p99 {self.ms:.2f} ms"
        if not (math.isfinite(self.low_ms) and math.isfinite(self.high_ms)):
            return f"{head} ({self.runs} run(s), no interval)"
        hi = f"≥ {self.high_ms:.2f}" if self.open_high else f"{self.high_ms:.2f}"
        return f"{head} (95% CI {self.low_ms:.2f}–{hi} ms, {self.runs} runs)"


@dataclass(frozen=True)
class Figure:
    """One configuration's figure for one workload: mean IOPS and, if recorded, its p99."""

    iops: float
    p99: P99 | None

    @property
    def p99_ms(self) -> float | None:
        return self.p99.ms if self.p99 is not None else None

    def text(self) -> str:
        """`1,234 IOPS, p99 of all I/Os 3.20 ms (95% CI …)` (or IOPS alone)."""
        out = f"{self.iops:,.0f} IOPS"
        return out + (f", {self.p99.text()}" if self.p99 is not None else "")


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def p99(c: ConfigFacts, workload: str) -> P99 | None:
    """The p99 completion latency of `workload` on `c`: of all I/Os from the replicates'
    merged histograms when every replicate stored one, else the geometric mean of the
    replicates' p99s when fio recorded one for each (ConfigFacts.latency, ns); None
    otherwise."""
    from poolbench.stats import logscale, pooled  # scipy: imported when a note needs it
    from poolbench.stats.policy import ReplicatePolicy

    n = len(c.figures.get(workload, ()))
    bins = c.latency_bins.get(workload, ())
    if bins and len(bins) >= n:
        pc = pooled.pooled_percentile(bins, 99.0)
        if math.isfinite(pc.value):
            return P99(pc.value / 1e6, pc.low / 1e6, pc.high / 1e6, pooled.WHAT, pc.runs,
                       pc.open_high)  # fmt: skip
    values = c.latency.get(workload, {}).get("99", ())
    if not values or len(values) < n or not all(math.isfinite(v) and v > 0 for v in values):
        return None
    g = logscale.summarize(ReplicatePolicy(), values)
    label = "(geometric mean of the runs' p99s; no histograms to pool)"
    return P99(g.gmean / 1e6, g.ci_low / 1e6, g.ci_high / 1e6, label, len(values))


def p99_compared(a: ConfigFacts, b: ConfigFacts, workload: str) -> tuple[str, bool] | None:
    """a's p99 of `workload` against b's, beyond the run-to-run noise: (what to print, whether
    a's is lower). From the merged histograms (stats.pooled.difference: the two intervals at
    97.5% apart); for runs stored without histograms, the ratio of the geometric means of
    the runs' p99s with its 95% log-scale t-interval, labelled so. None when either side
    has no p99 recorded."""
    from poolbench.stats import logscale, pooled  # scipy: imported when a note needs it

    na, nb = len(a.figures.get(workload, ())), len(b.figures.get(workload, ()))
    ba, bb = a.latency_bins.get(workload, ()), b.latency_bins.get(workload, ())
    if ba and bb and len(ba) >= na and len(bb) >= nb:
        d = pooled.difference(ba, bb)
        if d.a.determined and d.b.determined:
            return d.text(), d.a_lower
    va = a.latency.get(workload, {}).get("99", ())
    vb = b.latency.get(workload, {}).get("99", ())
    if not va or not vb or len(va) < na or len(vb) < nb:
        return None
    r = logscale.compare_family([(vb, va)])[0]
    head = "p99 (geometric mean of the runs' p99s; no histograms to pool)"
    if r.undetermined:
        return f"{head}: {r.undetermined}", False
    side = ("lower" if r.ratio < 1 else "higher") if r.significant else "not told apart"
    return f"{head} {r.ratio:.2f}× ({side}, 95% CI {r.low:.2f}–{r.high:.2f}×)", (
        r.significant and r.ratio < 1
    )


def p99_ms(c: ConfigFacts, workload: str) -> float | None:
    """The p99 of `p99` in ms, or None."""
    got = p99(c, workload)
    return got.ms if got is not None else None


def figure(c: ConfigFacts, workload: str) -> Figure | None:
    """`workload`'s figure on `c`, or None when it was not measured there."""
    iops = mean(c.figures.get(workload, ()))
    return None if iops is None else Figure(iops, p99(c, workload))


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
