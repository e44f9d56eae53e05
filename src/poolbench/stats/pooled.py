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

cⱼ the completions of run j at or below the percentile, Nⱼ its completions. When runs differ
in their whole latency scale (a run's p99 ±30%) the cⱼ are skewed and Woodruff's interval
alone covered 89–94% (issue 28), missing on both sides. So the interval is the union of two:

- Woodruff's, [Q(q − t·se), Q(q + t·se)] of the merged histogram;
- a delete-one-run jackknife on the log scale (B. Efron and C. Stein, Ann. Statist. 9 (1981)
  586–596; for clustered samples J. N. K. Rao and C. F. J. Wu, J. Amer. Statist. Assoc. 80
  (1985) 620–630): θ̂₍ⱼ₎ the log of the pooled percentile without run j,
  se_J² = (n − 1)/n · Σ (θ̂₍ⱼ₎ − θ̄)², and exp(log x̂ ± t·se_J). It sees how much the
  estimate moves with each run, which is what the skewed cⱼ understate.

Both with Student's t at n − 1 df at the nominal level NOMINAL_SHARE · α (3% for a 95%
interval): chosen by simulation so that the union covers ≥ 95% when runs' latency scales
vary by up to ±30% and ≥ 93.5% up to ±50%, at the price of over-covering (97–98.5%) quiet
runs. When q + t·se reaches 1 the upper end is the slowest completion seen (and says so).
Simulated coverage of the percentile of the runs' common latency distribution:
docs/statistics.md §7 (bench/stats_calibration.py p99).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

WHAT = "of all I/Os"  # how a pooled percentile is labelled wherever it is printed
# The share of α each interval of the union is computed at (module doc): calibrated by
# bench/stats_calibration.py p99, not derived.
NOMINAL_SHARE = 0.6


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
    """The q-th percentile of every completion of `runs` (one histogram per run) with its
    interval over the runs: Woodruff's and the log jackknife's, united (module doc)."""
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
    t = tdist.quantile(1 - NOMINAL_SHARE * (1 - confidence) / 2, n - 1)
    low, high, open_high = _woodruff(runs, counts, keys, cum, value, p, t)
    jack = _jackknife_log_se(runs, merged, p)
    if math.isfinite(jack) and jack > 0:
        low = min(low, value * math.exp(-t * jack))
        if not open_high:
            high = max(high, value * math.exp(t * jack))
    return PooledPercentile(q, value, low, high, n, total, confidence, open_high)


def _woodruff(
    runs: Sequence[Mapping[int, int]],
    counts: Sequence[int],
    keys: Sequence[int],
    cum: Sequence[int],
    value: float,
    p: float,
    t: float,
) -> tuple[float, float, bool]:
    """Woodruff's interval with the runs as clusters (module doc): (low, high, open_high)."""
    n, total = len(runs), cum[-1]
    below = [sum(v for k, v in b.items() if k <= value) for b in runs]
    f_hat = sum(below) / total
    var = sum((c - f_hat * m) ** 2 for c, m in zip(below, counts, strict=True))
    se = math.sqrt(var / (n * (n - 1))) / (total / n)
    lo_frac, hi_frac = p - t * se, p + t * se
    low = _quantile(keys, cum, total, lo_frac) if lo_frac > 0 else float(keys[0])
    open_high = hi_frac >= 1.0 - 0.5 / total
    high = float(keys[-1]) if open_high else _quantile(keys, cum, total, hi_frac)
    return low, high, open_high


def _jackknife_log_se(
    runs: Sequence[Mapping[int, int]], merged: Mapping[int, int], p: float
) -> float:
    """The delete-one-run jackknife standard error of log(pooled percentile)."""
    n = len(runs)
    thetas = []
    for b in runs:
        rest = {k: c - b.get(k, 0) for k, c in merged.items() if c - b.get(k, 0) > 0}
        keys = sorted(rest)
        cum, running = [], 0
        for k in keys:
            running += rest[k]
            cum.append(running)
        thetas.append(math.log(max(_quantile(keys, cum, running, p), 1.0)))
    mean = sum(thetas) / n
    return math.sqrt((n - 1) / n * sum((x - mean) ** 2 for x in thetas))


@dataclass(frozen=True)
class PooledDifference:
    """One set of runs' pooled percentile against another's: each with its interval at
    1 − α/2, so that 'lower' (a's interval wholly below b's) is wrong at most α of the time
    when the two are equal (Bonferroni over the two intervals, each covering ≥ 1 − α/2)."""

    a: PooledPercentile
    b: PooledPercentile
    confidence: float  # of the decision: 1 − α

    @property
    def ratio(self) -> float:
        return self.a.value / self.b.value if self.b.value > 0 else math.nan

    @property
    def a_lower(self) -> bool:
        return self.a.determined and self.b.determined and self.a.high < self.b.low

    @property
    def a_higher(self) -> bool:
        return self.a.determined and self.b.determined and self.b.high < self.a.low

    def text(self) -> str:
        """'p99 of all I/Os 0.62× (lower beyond the noise)' and the like."""
        name = f"p{self.a.q:g} {WHAT}"
        if not (self.a.determined and self.b.determined):
            return f"{name}: {self.a.reason or self.b.reason}"
        side = "lower" if self.a_lower else "higher" if self.a_higher else ""
        how = f"{(1 + self.confidence) / 2:.1%} intervals"
        said = f"{side} beyond the noise, {how} apart" if side else f"not told apart, {how} overlap"
        return f"{name} {self.ratio:.2f}× ({said})"


def difference(
    a: Sequence[Mapping[int, int]],
    b: Sequence[Mapping[int, int]],
    q: float = 99.0,
    confidence: float = 0.95,
) -> PooledDifference:
    """Whether the q-th percentile of all I/Os of runs `a` is lower (or higher) than that of
    runs `b` beyond the run-to-run noise, at level 1 − `confidence` (PooledDifference)."""
    each = 1 - (1 - confidence) / 2
    return PooledDifference(
        pooled_percentile(a, q, each), pooled_percentile(b, q, each), confidence
    )
