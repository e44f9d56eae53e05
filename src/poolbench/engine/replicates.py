"""How many times each figure is measured, and in which order: the one place the engine asks
the replicate policy (today stats.summary.StopRule) anything.

Replicates are interleaved across workloads (A B C A B C ..., never A A A B B B) so slow drift
on the devices is spread over all workloads instead of masquerading as a difference between
them. `bench`, a fleet (`bench --hosts`) and a study's extra rounds all use this loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from poolbench.stats.summary import StopRule

__all__ = ["StopRule", "interleave", "stop_rule"]

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # (description, done, total)


def stop_rule(min_runs: int = 3, max_runs: int = 10, target: float = 0.05) -> StopRule:
    """At least `min_runs`, then until the CI is within ±`target` (a fraction), at most
    `max_runs` replicates."""
    return StopRule(min_runs, max_runs, target)


def interleave(
    items: Sequence[T],
    stop: StopRule,
    values: Callable[[T], Sequence[float]],
    measure: Callable[[T, int], None],
    describe: Callable[[T, int], str],
    progress: Progress | None = None,
) -> int:
    """Measure every item round by round until the stop rule is satisfied for all of them;
    returns how many measurements were made. `measure(item, replicate)` must add the figure
    that `values(item)` then returns."""
    total = len(items) * stop.min_runs
    done = 0
    while True:
        pending = [i for i in items if stop.needs_more(values(i))]
        if not pending:
            return done
        for item in pending:
            replicate = len(values(item))
            if replicate >= stop.min_runs:
                total += 1  # a run beyond the planned minimum: the CI is still too wide
            if progress:
                progress(describe(item, replicate), done, total)
            measure(item, replicate)
            done += 1
