"""The fleet's answer (pure): per configuration and workload, every host's figure side by
side with its 95% interval; a host slower than its peers named; and the layouts compared
over the fleet with the host as a block.

* **A slow host** by the slow-member rule one level up (guards/members.py SLOW_FRACTION, as
  the disk screen names a slow disk): its whole 95% interval below 0.75 x the median of the
  other hosts' means (its mean when it ran once). It is named, never averaged in silently.
  It stays in the verdict below: there each host is compared only with itself, so a host
  slower in everything moves neither the ratio nor its interval, and a host slow in one
  configuration only is exactly what widens the interval, as it should.
* **The verdict over the fleet**: each configuration against the best one, per workload, in
  blocks of hosts. On each host the two configurations ran on the same machine with its own
  disks, so per host d = log(mean of the configuration) - log(mean of the best), and the
  change is exp(mean d) over the hosts with Student's t interval on n - 1 df (the paired
  analysis of a randomized complete block design, hosts the blocks): a host twice as fast
  as another in everything moves neither the ratio nor its interval. With one host there
  is no fleet interval; that host's own answer is its run's report. The best is picked
  from the same figures it is then compared with, so a difference whose interval only just
  misses 1 is weaker evidence than it looks (the winner's curse); with several layouts
  close together, read the intervals, not only the word "significant".
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from poolbench.guards.members import SLOW_FRACTION
from poolbench.stats import tdist
from poolbench.stats.summary import summarize

SLOW_HOST_RULE = (
    f"a host slower than its peers: its whole 95% interval below {1 - SLOW_FRACTION:.2f} x "
    "the median of the other hosts' means (the slow-member rule, one level up)"
)
BLOCK_RULE = (
    "each configuration against the best, hosts as blocks: per host the log ratio of the two "
    "means, Student's t over the hosts (n - 1 df), 95%; the best is picked from these same "
    "figures, so an interval that only just misses 1 is weak evidence"
)


@dataclass(frozen=True)
class HostFigure:
    host: str
    n: int
    mean: float
    low: float  # the 95% interval; nan with one replicate
    high: float


@dataclass(frozen=True)
class Row:
    config: str
    workload: str
    unit: str
    hosts: tuple[HostFigure, ...]
    slow: tuple[str, ...]  # hosts named by SLOW_HOST_RULE


@dataclass(frozen=True)
class Change:
    workload: str
    config: str
    best: str
    ratio: float  # config / best, over the hosts
    low: float
    high: float
    hosts: int

    @property
    def significant(self) -> bool:
        return not math.isnan(self.low) and (self.high < 1 or self.low > 1)


Measured = Mapping[str, Mapping[tuple[str, str], tuple[str, Sequence[float]]]]
"""host -> (configuration, workload) -> (unit, replicate values)."""


def rows(measured: Measured) -> list[Row]:
    keys = sorted({k for per_host in measured.values() for k in per_host})
    out = []
    for config, workload in keys:
        figs, unit = [], ""
        for host, per_host in measured.items():
            if (config, workload) not in per_host:
                continue
            unit, values = per_host[(config, workload)]
            s = summarize(values)
            figs.append(HostFigure(host, s.n, s.mean, s.ci_low, s.ci_high))
        out.append(Row(config, workload, unit, tuple(figs), _slow(figs)))
    return out


def _slow(figs: Sequence[HostFigure]) -> tuple[str, ...]:
    slow = []
    for f in figs:
        peers = [g.mean for g in figs if g.host != f.host]
        if not peers:
            continue
        line = (1 - SLOW_FRACTION) * statistics.median(peers)
        top = f.mean if f.n < 2 or math.isnan(f.high) else f.high
        if top < line:
            slow.append(f.host)
    return tuple(slow)


def verdict(table: Sequence[Row]) -> list[Change]:
    """Per workload, each configuration against the one with the highest geometric mean
    over the hosts that measured every configuration of that workload (higher is better:
    poolbench's figures here are rates)."""
    out: list[Change] = []
    for workload in sorted({r.workload for r in table}):
        mine = [r for r in table if r.workload == workload]
        common = set.intersection(*({f.host for f in r.hosts} for r in mine))
        if not common or len(mine) < 2:
            continue
        means = {r.config: {f.host: f.mean for f in r.hosts if f.host in common} for r in mine}
        if any(v <= 0 for m in means.values() for v in m.values()):
            continue  # a log ratio needs positive figures
        geo = {c: sum(math.log(v) for v in m.values()) / len(m) for c, m in means.items()}
        best = max(geo, key=lambda c: geo[c])
        for config in sorted(means, key=lambda c: -geo[c]):
            if config == best:
                continue
            d = [math.log(means[config][h]) - math.log(means[best][h]) for h in sorted(common)]
            out.append(_change(workload, config, best, d))
    return out


def _change(workload: str, config: str, best: str, d: Sequence[float]) -> Change:
    mean = statistics.fmean(d)
    if len(d) < 2:
        return Change(workload, config, best, math.exp(mean), math.nan, math.nan, len(d))
    half = tdist.quantile(0.975, len(d) - 1) * statistics.stdev(d) / math.sqrt(len(d))
    return Change(workload, config, best, math.exp(mean), math.exp(mean - half),
                  math.exp(mean + half), len(d))  # fmt: skip
