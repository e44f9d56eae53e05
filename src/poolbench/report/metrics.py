"""Which figure of a measurement a table shows (pure): the workload's own figure (MiB/s,
IOPS, ops/s) or a completion-latency percentile (p50, p90, p99, p99.9), each summarised
across replicates and compared the way that is honest for it.

- `value`: the arithmetic mean with Stein's interval, ratios by Fieller
  (`ReplicatePolicy`, docs/statistics.md §1–3);
- a latency percentile: the percentile of all I/Os of the replicates, from their merged fio
  histograms, with its interval over the runs (`poolbench.stats.pooled`, docs/statistics.md
  §7a). A run stored without a histogram (older stores) leaves the cell with the old
  figure, labelled so wherever it is printed (`Figure.pooled`, `statistic_label`): the
  geometric mean of the runs' own percentiles with Stein's interval on the logs (§7b).
  Comparisons (the change column, `poolbench compare`) stay ratios of the geometric means of
  the runs' percentiles (`poolbench.stats.logscale`), and say so. Latencies are shown in
  µs; fio stores them in ns.

A percentile resting on few completions beyond it (p99.9 of 3,000 I/Os is the 3 slowest) is
flagged: `tail_warning`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from poolbench.errors import CommandLineError
from poolbench.records.latency import Latency
from poolbench.stats import logscale
from poolbench.stats.compare import Ratio, compare_family
from poolbench.stats.policy import ReplicatePolicy

# A tail percentile needs this many completions beyond it to be a figure about the tail
# rather than about a handful of I/Os.
MIN_BEYOND = 10
LATENCY_UNIT = "µs"


@dataclass(frozen=True)
class Figure:
    """One figure of one cell across its replicates: centre, interval, or why there is none."""

    center: float  # the mean (value) or the geometric mean (latency)
    low: float  # nan when undetermined
    high: float
    n: int
    reason: str  # why there is no interval ("" when there is one)
    outliers: tuple[int, ...]
    log_scale: bool
    pooled: bool = False  # a latency percentile of all I/Os (else of the runs' own figures)
    open_high: bool = False  # the upper end is the slowest completion seen, not a bound

    @property
    def determined(self) -> bool:
        return not self.reason

    @property
    def statistic(self) -> str:
        """What the centre is, as every export and legend names it."""
        if self.pooled:
            return POOLED_NAME
        return "geometric mean" if self.log_scale else "mean"

    def text(self) -> str:
        """'1,234 ± 56' (mean ± half-width) or '1,234 (1,100–1,390)' (asymmetric, latency)."""
        from poolbench.report.data import fmt_value

        if math.isnan(self.low):
            return fmt_value(self.center)
        if self.log_scale:
            high = ("≥ " if self.open_high else "") + fmt_value(self.high)
            return f"{fmt_value(self.center)} ({fmt_value(self.low)}–{high})"
        return f"{fmt_value(self.center)} ± {fmt_value((self.high - self.low) / 2)}"

    def as_dict(self) -> dict[str, object]:
        def num(x: float) -> float | None:
            return x if math.isfinite(x) else None

        return {
            "center": num(self.center),
            "statistic": self.statistic,
            "open_high": self.open_high,
            "ci_low": num(self.low),
            "ci_high": num(self.high),
            "n": self.n,
            "reason": self.reason or None,
        }


@dataclass(frozen=True)
class Metric:
    key: str  # as `--metric` names it: value, p50, p90, p99, p99.9
    percentile: str | None  # fio's percentile ("99.9"); None: the workload's own figure

    @property
    def is_latency(self) -> bool:
        return self.percentile is not None

    @property
    def title(self) -> str:
        return f"{self.key} completion latency" if self.is_latency else "figure"

    @property
    def statistic(self) -> str:
        return "geometric mean (95% CI)" if self.is_latency else "mean ± 95% CI"

    def unit(self, workload_unit: str) -> str:
        return LATENCY_UNIT if self.is_latency else workload_unit

    def values(self, values: Sequence[float], clats: Sequence[Latency | None]) -> list[float]:
        """Per replicate: the figures themselves, or each run's percentile in µs (replicates
        without one are left out; see `missing`)."""
        if not self.is_latency:
            return list(values)
        return [v / 1000.0 for v in (percentile_ns(c, self.percentile) for c in clats) if v]

    def figure(
        self,
        policy: ReplicatePolicy,
        values: Sequence[float],
        clats: Sequence[Latency | None],
    ) -> Figure:
        """The cell's figure: for a latency percentile, of all I/Os when every replicate
        stored its histogram, else the geometric mean of the runs' percentiles (module doc)."""
        runs = histograms(clats) if self.is_latency else None
        if runs is not None and len(runs) == len(values) and self.percentile is not None:
            from poolbench.stats.pooled import pooled_percentile

            pc = pooled_percentile(runs, float(self.percentile), policy.confidence)
            if math.isfinite(pc.value):
                low, high = (pc.low, pc.high) if pc.determined else (math.nan, math.nan)
                return Figure(pc.value / 1000.0, low / 1000.0, high / 1000.0, pc.runs,
                              pc.reason, (), True, pooled=True, open_high=pc.open_high)  # fmt: skip
        return self.summarize(policy, self.values(values, clats))

    def summarize(self, policy: ReplicatePolicy, xs: Sequence[float]) -> Figure:
        if self.is_latency:
            g = logscale.summarize(policy, xs)
            return Figure(g.gmean, g.ci_low, g.ci_high, g.n, g.reason, g.outliers, True)
        s = policy.summarize(xs)
        return Figure(s.mean, s.ci_low, s.ci_high, s.n, s.reason, s.outliers, False)

    def compare(
        self, pairs: Sequence[tuple[Sequence[float], Sequence[float]]], first_stage: int
    ) -> list[Ratio]:
        """A family of comparisons against baselines (Holm), on this metric's scale."""
        if self.is_latency:
            return logscale.compare_family(pairs, first_stage=first_stage)
        return compare_family(pairs, first_stage=first_stage)


VALUE = Metric("value", None)
LATENCY = {k: Metric(k, k[1:]) for k in ("p50", "p90", "p99", "p99.9")}
METRICS = {"value": VALUE, **LATENCY}
DEFAULT_LATENCY = LATENCY["p99"]  # shown beside the figure where latency matters


POOLED_NAME = "of all I/Os"  # stats.pooled.WHAT: a percentile of every completion
GEOMEAN_NAME = "geometric mean of the runs'"


def histograms(clats: Sequence[Latency | None]) -> list[dict[int, int]] | None:
    """Every replicate's stored clat histogram (ns bin → count), or None when one lacks it."""
    out = [dict(c.bins) for c in clats if c is not None and c.bins]
    return out if out and len(out) == len(clats) else None


def statistic_label(metric: Metric, figures: Sequence[Figure]) -> str:
    """A table's statistic header: 'mean ± 95% CI'; for a percentile 'of all I/Os (95% CI)'
    when any figure is one (the others carry a footnote: `fallback_note`), else the old
    'geometric mean (95% CI)'."""
    if not metric.is_latency:
        return metric.statistic
    return f"{POOLED_NAME} (95% CI)" if any(f.pooled for f in figures) else metric.statistic


def fallback_note(metric: Metric) -> str:
    """The footnote of a latency figure that could not be pooled."""
    return (
        f"{metric.key} here is the geometric mean of the runs' own {metric.key}s, not the "
        f"{metric.key} of all I/Os: a run of this cell was stored without its latency "
        "histogram (an older poolbench)"
    )


def parse_metrics(text: str | None) -> list[Metric]:
    """'p99' or 'value,p50,p99.9' → metrics, in the order given."""
    if text is None:
        return [VALUE]
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in METRICS]
    if bad or not names:
        raise CommandLineError(
            f"--metric '{text}' names no figure poolbench keeps"
            + (f" ({', '.join(bad)})." if bad else "."),
            f"Use one or more of {', '.join(METRICS)}, comma-separated (e.g. --metric p99).",
        )
    return [METRICS[n] for n in dict.fromkeys(names)]


def percentile_ns(clat: Latency | None, percentile: str | None) -> float | None:
    """One run's stored percentile in ns (store 0005_latency's `clat`), or None."""
    if clat is None or percentile is None:
        return None
    v = clat.p(float(percentile))
    return v if v is not None and v > 0 else None


def latency_matters(kind: str, fio: Mapping[str, str]) -> bool:
    """Random I/O and synchronous writes are chosen on their latency: their tables show p99
    by default. Synchronous = every write waits for stable storage (fio sync/dsync, or an
    fsync/fdatasync every N writes), the I/O of databases and of NFS/VM hosts. `kind` and
    `fio` are the workload's (workloads/workload.py)."""
    if kind == "pgbench":  # every commit waits for the WAL's fsync
        return True
    if fio.get("rw", "").startswith("rand"):
        return True
    return any(fio.get(k, "0") not in ("0", "") for k in ("sync", "fsync", "fdatasync"))


def tail_warning(metric: Metric, clats: Sequence[Latency | None]) -> str:
    """Why a tail percentile of these runs is a figure about a few I/Os, or ""."""
    if metric.percentile is None:
        return ""
    q = float(metric.percentile)
    few = []
    for i, c in enumerate(clats):
        # samples 0: a latency stored without fio's count of completions (nothing to judge)
        if c is not None and c.samples and c.beyond(q) < MIN_BEYOND:
            few.append((i + 1, c.samples))
    if not few:
        return ""
    runs = ", ".join(f"{i} ({n:,} I/Os)" for i, n in few)
    return (
        f"{metric.key}: run(s) {runs} timed too few I/Os for it — fewer than {MIN_BEYOND} "
        f"lie beyond the {metric.key}, so it is the slowest handful, not the tail; run "
        "longer (--runtime, [workloads] runtime) for a trustworthy figure"
    )
