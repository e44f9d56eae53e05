"""Positive, skewed figures (latency percentiles) summarised on the log scale (pure).

A replicate's p99 latency is one number per run; across runs it varies multiplicatively (a
run with a slow moment has its tail 2× longer, not 200 µs longer), and the higher the
percentile the more skewed its run-to-run distribution: simulated lognormal replicates at a
run-to-run CV of 50% (p99.9 on a busy disk is often noisier) put the arithmetic-scale
t-interval's coverage at 92%, at 100% CV at 86–87% (docs/statistics.md §7). On the log scale such
replicates are normal, so the project's own rules apply to log(value) unchanged and keep
their promise exactly:

- the interval is Stein's (`ReplicatePolicy.summarize` on the logs: the stage-one sd with its
  n₀ − 1 df, the mean of all n), mapped back with exp: the **geometric mean** of the
  replicates with an asymmetric interval [gm / f, gm · f]. The replicate count was fixed by
  the throughput figure's stage one, which depends on stage one only, so the pivot is still
  Student-t with n₀ − 1 df;
- a comparison is the ratio of geometric means, exp(mean log B − mean log A), with the
  t-interval of the difference of the mean logs: the same stage-one variances, the same
  Welch/Hsu df under the null and the same Holm family as `poolbench.stats.compare` (whose
  Fieller interval is for a ratio of arithmetic means and does not apply to logs).

A bootstrap was considered and rejected: with 3–10 replicates it has 10–10⁵ distinct
resamples and its percentile interval covers well under 95% (simulated 64–73% at n = 3,
83–90% at n = 10).

Values ≤ 0 or not finite have no logarithm: the summary and the comparison refuse them with
the reason, never a number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.stats import safemath, tdist
from poolbench.stats.compare import Ratio, holm
from poolbench.stats.policy import ReplicatePolicy
from poolbench.stats.power import upper_detectable
from poolbench.stats.replicates import stage
from poolbench.stats.welch import null_df


@dataclass(frozen=True)
class GeoMeanCI:
    """The geometric mean of one figure's replicates with its interval, or why there is none."""

    n: int
    gmean: float  # nan when refused
    ci_low: float  # nan when undetermined
    ci_high: float
    confidence: float
    df: int
    log_sd: float  # stage-one sd of log(value): ~ the run-to-run CV for small values
    outliers: tuple[int, ...]  # indexes into the values, flagged on the log scale
    reason: str = ""

    @property
    def determined(self) -> bool:
        return not self.reason

    @property
    def factor(self) -> float:
        """The interval is [gmean / factor, gmean · factor]; nan when undetermined."""
        return self.ci_high / self.gmean if self.determined else math.nan

    def as_dict(self) -> dict[str, object]:
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "n": self.n,
            "geomean": num(self.gmean),
            "ci_low": num(self.ci_low),
            "ci_high": num(self.ci_high),
            "confidence": self.confidence,
            "df": self.df,
            "scale": "log",
            "outliers": list(self.outliers),
            "reason": self.reason or None,
        }


def _refused(values: Sequence[float]) -> str:
    bad = [i + 1 for i, v in enumerate(values) if not (math.isfinite(v) and v > 0)]
    if not bad:
        return ""
    return (
        f"refused: replicate(s) {', '.join(map(str, bad))} are not positive finite numbers, "
        "which a latency must be (a failed parse?); remove or re-measure them"
    )


def summarize(policy: ReplicatePolicy, values: Sequence[float]) -> GeoMeanCI:
    """Stein's interval on log(values), mapped back: geometric mean [low, high]."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("no values to summarize")
    why = _refused(xs)
    if why:
        return GeoMeanCI(len(xs), math.nan, math.nan, math.nan, policy.confidence, 0, math.nan,
                         (), why)  # fmt: skip
    s = policy.summarize([math.log(v) for v in xs])
    low, high = (
        (safemath.exp(s.ci_low), safemath.exp(s.ci_high)) if s.determined else (math.nan,) * 2
    )
    return GeoMeanCI(
        s.n, safemath.exp(s.mean), low, high, s.confidence, s.df, s.first_stage_sd, s.outliers,
        s.reason,
    )  # fmt: skip


@dataclass(frozen=True)
class _LogMoments:
    n: int
    mean: float  # of the logs
    var_mean: float  # s₀²/n of the logs
    df: int


def _moments(values: Sequence[float], first_stage: int) -> _LogMoments:
    logs = [math.log(v) for v in values]
    st = stage(logs, first_stage)
    return _LogMoments(len(logs), sum(logs) / len(logs), st.sd * st.sd / len(logs), st.df)


def _ratio(a: Sequence[float], b: Sequence[float], confidence: float, n0: int) -> Ratio:
    """exp(mean log b − mean log a) with its t-interval (df under the null, as compare)."""
    why = _refused(list(a)) or _refused(list(b))
    if not why and (len(a) < 2 or len(b) < 2):
        why = f"too few runs ({len(a)} vs {len(b)}; 2 each needed)"
    if why:
        return Ratio(len(a), len(b), math.nan, math.nan, math.nan, math.nan, math.nan,
                     confidence, math.nan, math.nan, False, why)  # fmt: skip
    ma, mb = _moments(a, n0), _moments(b, n0)
    ga, gb, d = safemath.exp(ma.mean), safemath.exp(mb.mean), mb.mean - ma.mean
    va, vb = ma.var_mean, mb.var_mean
    if va == 0 and vb == 0:
        from poolbench.stats.compare import IDENTICAL

        return Ratio(ma.n, mb.n, ga, gb, safemath.exp(d), math.nan, math.nan, confidence,
                     math.nan, math.nan, False, IDENTICAL)  # fmt: skip
    df = null_df(va, ma.df, vb, mb.df)
    se = math.sqrt(va + vb)
    t = tdist.quantile((1 + confidence) / 2, df)
    low, high = safemath.exp(d - t * se), safemath.exp(d + t * se)
    p = tdist.two_sided_p(d / se, df)
    return Ratio(
        ma.n, mb.n, ga, gb, safemath.exp(d), low, high, confidence, df, p, not low <= 1.0 <= high,
        "", se, log_scale=True,
        stated_detectable=safemath.expm1(
            upper_detectable(va, ma.df, vb, mb.df, df, 1 - confidence, 0.8)
        ),
    )  # fmt: skip


def compare_family(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
    confidence: float = 0.95,
    first_stage: int = 3,
) -> list[Ratio]:
    """Each (A, B) pair as a ratio of geometric means, significance decided by Holm over the
    family and each interval at the level Holm tested it at (as `compare.compare_family`)."""
    first = [_ratio(a, b, confidence, first_stage) for a, b in pairs]
    out = []
    decisions = holm([r.p_value for r in first], 1 - confidence)
    for (a, b), r, (rejected, level) in zip(pairs, first, decisions, strict=True):
        if r.undetermined:
            out.append(r)
            continue
        adj = _ratio(a, b, 1 - level, first_stage)
        out.append(_with_significance(adj, r.p_value, rejected))
    return out


def _with_significance(r: Ratio, p: float, significant: bool) -> Ratio:
    return Ratio(
        r.n_a, r.n_b, r.mean_a, r.mean_b, r.ratio, r.low, r.high, r.confidence, r.df, p,
        significant, r.undetermined, r.se_rel, r.power, r.log_scale,
        stated_detectable=r.stated_detectable,
    )  # fmt: skip
