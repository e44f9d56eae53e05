"""A latency percentile of all I/Os of several runs, from fio's histograms, with its
interval (pure).

"The p99" of a figure measured in n runs is the 99th percentile of every completion of
every run: the runs' histograms (fio --output-format=json+, `clat_ns.bins`, stored per
measurement as `fioparse.Latency.bins`) are added bin by bin and the percentile is read
from the merged histogram as fio reads its own (`fioparse.percentile_from_bins`). That is
neither the mean nor the geometric mean of the runs' p99s (a run with a slow tail has more
of the slow I/Os, not one vote among n).

The interval is Woodruff's (R. S. Woodruff, "Confidence intervals for medians and other
position measures", J. Amer. Statist. Assoc. 47 (1952) 635–646): an interval for the
fraction F of I/Os at or below the estimated percentile, mapped back through the merged
histogram's quantile function. The runs are the independent units (the I/Os of one run
share its disturbances), so the variance of F̂ is the between-run (cluster) variance of a
ratio estimator (W. G. Cochran, *Sampling Techniques*, 3rd ed. 1977, §6.9, 11.8):

    F̂ = Σ cⱼ / Σ Nⱼ,   var(F̂) = Σ (cⱼ − F̂ Nⱼ)² / (n (n − 1) N̄²),

cⱼ the completions of run j at or below the percentile, Nⱼ its completions, with Student's
t at n − 1 df. The interval is [Q(q − t·se), Q(q + t·se)] of the merged histogram; when
q + t·se reaches 1 the upper end is the slowest completion seen (and says so). Simulated
coverage of the percentile of the runs' common latency distribution: docs/statistics.md §7.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WHAT = "of all I/Os"  # how a pooled percentile is labelled wherever it is printed


@dataclass(frozen=True)
class PooledPercentile:
    q: float  # 99 for the p99
    value: float  # ns, nan when refused
    low: float  # ns, nan when undetermined
    high: float
    runs: int
    ios: int
    confidence: float
    open_high: bool = False  # the upper end is the slowest completion seen, not a bound
    reason: str = ""

    @property
    def determined(self) -> bool:
        return not self.reason

    def text(self, scale: float = 1e6, unit: str = "ms", digits: int = 2) -> str:
        """'p99 of all I/Os 3.20 ms (95% CI 2.90–3.61 ms, 5 runs)'."""
        name = f"p{self.q:g} {WHAT}"
        if math.isnan(self.value):
            return f"{name}: {self.reason}"
        v = f"{self.value / scale:.{digits}f} {unit}"
        if self.reason:
            return f"{name} {v} ({self.reason})"
        hi = (
            f"≥ {self.high / scale:.{digits}f}"
            if self.open_high
            else f"{self.high / scale:.{digits}f}"
        )
        return (
            f"{name} {v} ({self.confidence:.0%} CI {self.low / scale:.{digits}f}–{hi} {unit}, "
            f"{self.runs} runs)"
        )

    def as_dict(self) -> dict[str, object]:
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "percentile": self.q, "value_ns": num(self.value), "ci_low_ns": num(self.low),
            "ci_high_ns": num(self.high), "runs": self.runs, "ios": self.ios,
            "confidence": self.confidence, "open_high": self.open_high,
            "scale": "pooled", "reason": self.reason or None,
        }  # fmt: skip


def merge(runs: Sequence[Mapping[int, int]]) -> dict[int, int]:
    """The histograms of several runs added bin by bin."""
    out: dict[int, int] = {}
    for bins in runs:
        for k, v in bins.items():
            out[k] = out.get(k, 0) + v
    return out


def _quantile(keys: Sequence[int], cum: Sequence[int], total: int, frac: float) -> float:
    """fio's percentile of the merged histogram at fraction `frac` (0 < frac ≤ 1)."""
    need = frac * total
    for k, c in zip(keys, cum, strict=True):
        if c >= need:
            return float(k)
    return float(keys[-1])


def pooled_percentile(
    runs: Sequence[Mapping[int, int]], q: float = 99.0, confidence: float = 0.95
) -> PooledPercentile:
    """The q-th percentile of every completion of `runs` (one histogram per run) with
    Woodruff's interval over the runs (module doc)."""
    from poolbench.stats import tdist

    counts = [sum(b.values()) for b in runs]
    if not runs or min(counts, default=0) <= 0:
        return PooledPercentile(q, math.nan, math.nan, math.nan, len(runs), sum(counts),
                                confidence, reason="a run without a latency histogram")  # fmt: skip
    merged = merge(runs)
    keys = sorted(merged)
    cum, running = [], 0
    for k in keys:
        running += merged[k]
        cum.append(running)
    total = running
    p = q / 100.0
    value = _quantile(keys, cum, total, p)
    n = len(runs)
    if n < 2:
        return PooledPercentile(q, value, math.nan, math.nan, n, total, confidence,
                                reason="one run: no interval")  # fmt: skip
    below = [sum(v for k, v in b.items() if k <= value) for b in runs]
    f_hat = sum(below) / total
    mean_n = total / n
    var = sum((c - f_hat * m) ** 2 for c, m in zip(below, counts, strict=True))
    se = math.sqrt(var / (n * (n - 1))) / mean_n
    t = tdist.quantile((1 + confidence) / 2, n - 1)
    lo_frac, hi_frac = p - t * se, p + t * se
    low = _quantile(keys, cum, total, lo_frac) if lo_frac > 0 else float(keys[0])
    open_high = hi_frac >= 1.0 - 0.5 / total
    high = float(keys[-1]) if open_high else _quantile(keys, cum, total, hi_frac)
    return PooledPercentile(q, value, low, high, n, total, confidence, open_high)
