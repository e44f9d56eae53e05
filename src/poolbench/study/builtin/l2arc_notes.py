"""The l2arc study's notes (pure): the warm-up interval by interval, the steady hit rate, and
the verdict, from the `l2arc` sections the reads stored (engine/l2arc_reads.py), as the
store decoded them (records/sections.py: L2arcReads)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from poolbench.study.builtin.headline import compared, mean

if TYPE_CHECKING:
    from poolbench.records.sections import L2arcInterval, L2arcSteady
    from poolbench.store.facts import ConfigFacts, StudyFacts
    from poolbench.study.builtin.context import Context

PAYS = 1.10  # the cache device pays when steady reads are at least this much faster with it
SAME_DEVICES = (
    "The cache device here is the same kind of device as the pool's members: on real "
    "hardware an L2ARC pays when it reads much faster than the pool (an SSD in front of "
    "disks), and it costs RAM for its headers (about 70-100 bytes per cached block)."
)


def has_cache(c: ConfigFacts) -> bool:
    return "+ cache" in c.level("layout")


def _intervals(c: ConfigFacts) -> list[tuple[L2arcInterval, ...]]:
    """Each replicate's intervals, where recorded."""
    return [r.intervals for r in c.l2arc if r.intervals is not None]


def steady_of(c: ConfigFacts, figure: Callable[[L2arcSteady], float | None]) -> list[float]:
    """One steady figure (its p99, L2 hits, ...) per replicate, where recorded."""
    return [v for r in c.l2arc if (v := figure(r.steady)) is not None]


@dataclass(frozen=True)
class Row:
    index: int
    iops: float
    p99_ms: float | None
    l2_rate: float | None
    l2_mib: float


def warmup(c: ConfigFacts) -> list[Row]:
    """Per interval, over the replicates: mean IOPS, median p99, the L2ARC's hit rate of
    all their lookups, and the cache device's mean fill."""
    reps = _intervals(c)
    rows = []
    for i in range(min((len(r) for r in reps), default=0)):
        at = [r[i] for r in reps]
        iops = [x.iops for x in at]
        tails = [x.p99_ms for x in at if x.p99_ms is not None]
        hits = sum(x.l2_hits for x in at)
        looked = hits + sum(x.l2_misses for x in at)
        size = [x.l2_size for x in at]
        rows.append(Row(i + 1, statistics.fmean(iops),
                        statistics.median(tails) if tails else None,
                        hits / looked if looked else None,
                        statistics.fmean(size) / (1 << 20)))  # fmt: skip
    return rows


def _table(c: ConfigFacts) -> list[str]:
    rows = warmup(c)
    if not rows:
        return []
    n = len(_intervals(c))
    length = c.l2arc[0].interval_s
    each = f" of {length:g} s" if length else ""
    head = f"  {c.level('layout')}: per interval{each}, mean of {n} replicate(s)"
    lines = [head, "    int     IOPS   p99 ms  L2 hit rate  L2 held MiB"]
    for r in rows:
        p99 = "-" if r.p99_ms is None else f"{r.p99_ms:.2f}"
        rate = "-" if r.l2_rate is None else f"{r.l2_rate:.0%}"
        lines.append(f"    {r.index:>3} {r.iops:>8,.0f} {p99:>8} {rate:>12} {r.l2_mib:>12.1f}")
    return lines + _still_rising(rows)


RISING = 0.10  # the hit rate climbing more than this over the steady intervals: not steady


def _still_rising(rows: list[Row]) -> list[str]:
    """A warning when the L2ARC hit rate still climbed over the steady half."""
    rates = [r.l2_rate for r in rows[len(rows) // 2 :] if r.l2_rate is not None]
    if len(rates) < 2 or rates[-1] - rates[0] <= RISING:
        return []
    return [
        f"    warning: the L2ARC hit rate still rose from {rates[0]:.0%} to {rates[-1]:.0%} "
        "over the steady half: the cache device was not warm yet, so its steady figures "
        "understate it; run longer (--runtime)"
    ]


def _p99_text(without: Sequence[float], with_: Sequence[float]) -> tuple[str, bool | None]:
    """The steady p99 with the cache device against without (ratio of the geometric means
    over the replicates, 95% log-scale interval); whether it is lower (None: unknown)."""
    if not without or not with_ or min(*without, *with_) <= 0:
        return "p99 not recorded on both", None
    from poolbench.stats import logscale  # scipy: imported when a note needs it

    r = logscale.compare_family([(without, with_)])[0]
    if r.undetermined or not math.isfinite(r.ratio):
        return f"p99 {r.undetermined or 'undetermined'}", None
    if not r.significant:
        return f"p99 not told apart ({r.ratio:.2f}×, 95% CI {r.low:.2f}–{r.high:.2f}×)", None
    side = "lower" if r.ratio < 1 else "higher"
    return f"p99 {r.ratio:.2f}× ({side}, 95% CI {r.low:.2f}–{r.high:.2f}×)", r.ratio < 1


def verdict(without: ConfigFacts, with_: ConfigFacts, workload: str) -> list[str]:
    """Whether the L2ARC pays: steady IOPS ≥ PAYS× without it beyond the replicates' noise,
    the cache device served reads in the steady intervals, and its p99 is not higher."""
    a, b = with_.figures.get(workload, ()), without.figures.get(workload, ())
    ma, mb = mean(a), mean(b)
    if ma is None or mb is None:
        return ["verdict: not measured on both pools"]
    text, significant = compared(b, a)
    p99, lower = _p99_text(
        steady_of(without, lambda s: s.p99_ms), steady_of(with_, lambda s: s.p99_ms)
    )
    hits = sum(steady_of(with_, lambda s: s.l2_hits))
    rate = steady_of(with_, lambda s: s.l2_hit_rate)
    served = f"{statistics.fmean(rate):.0%}" if rate else "no L2 lookups"
    facts = (
        f"steady IOPS {ma:,.0f} with the cache device vs {mb:,.0f} without: {text}; {p99}; "
        f"L2ARC hit rate in the steady intervals {served} ({hits:,.0f} hits)"
    )
    if hits <= 0:
        say = "it does not pay: the cache device served no steady reads (not warm yet?)"
    elif ma / mb >= PAYS and significant and lower is not False:
        say = "L2ARC pays for this working set"
    else:
        say = "L2ARC does not pay for this working set"
    return [f"  {facts}", f"  verdict: {say}"]


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    configs = [c for c in facts.configs if c.l2arc]
    if not configs:
        return []
    workload = next(iter(configs[0].figures), "")
    out = ["l2arc: the warm-up (random reads in consecutive intervals; arcstats deltas)"]
    for c in configs:
        out += _table(c)
    without = next((c for c in configs if not has_cache(c)), None)
    with_ = next((c for c in configs if has_cache(c)), None)
    if without is not None and with_ is not None:
        out += ["does L2ARC pay? (steady = the last half of the intervals; 95% Fieller CI)"]
        out += verdict(without, with_, workload)
        out.append(SAME_DEVICES)
    return out
