"""How many times each figure is measured, and in which order: the one place the engine asks
the replicate policy (stats.ReplicatePolicy) anything.

Under Stein's rule the total per figure is fixed once its first stage (min_runs replicates) is
measured, so what remains is an order: rounds (stats/rounds.py, the one scheduler of bench, a
fleet and a study), each round holding every item still owed a replicate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from poolbench.stats.policy import ReplicatePolicy
from poolbench.stats.rounds import rounds

__all__ = ["interleave", "policy"]

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # (description, done, total)


def policy(min_runs: int = 3, max_runs: int = 10, target: float = 0.05) -> ReplicatePolicy:
    """At least `min_runs`, then the total Stein's rule plans from them for a CI within
    ±`target` (a fraction), at most `max_runs` replicates."""
    return ReplicatePolicy(ci_target=target, min_runs=min_runs, max_runs=max_runs)


def interleave(
    items: Sequence[T],
    rule: ReplicatePolicy,
    values: Callable[[T], Sequence[float]],
    measure: Callable[[T, int], None],
    describe: Callable[[T, int], str],
    progress: Progress | None = None,
    *,
    seed: int = 0,
    name: Callable[[T], str] = str,
    record: Callable[[int, list[str]], None] | None = None,
) -> int:
    """Measure every item round by round until the policy owes none of them a replicate;
    returns how many measurements were made. `measure(item, replicate)` must add the figure
    that `values(item)` then returns. `record(round, names)` receives each round's order."""
    total = len(items) * rule.min_runs
    done = 0
    for round_no, order in rounds(lambda _r: [i for i in items if rule.more(values(i)) > 0],
                                  seed):  # fmt: skip
        if record:
            record(round_no, [name(i) for i in order])
        for item in order:
            replicate = len(values(item))
            if replicate == rule.min_runs:
                total += rule.more(values(item))  # stage one done: Stein's total is known
            if progress:
                progress(describe(item, replicate), done, total)
            measure(item, replicate)
            done += 1
    return done
