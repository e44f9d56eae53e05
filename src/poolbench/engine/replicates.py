"""How many times each figure is measured, and in which order: the one place the engine asks
the replicate policy (stats.ReplicatePolicy) anything.

Under Stein's rule the total per figure is fixed once its first stage (min_runs replicates) is
measured, so what remains is an order. Replicates run in rounds: every item still owed a
replicate runs once per round, in a seeded random order that is new each round (recorded by
the caller), and an item never runs twice in a row across a round boundary (A B | B A would put
B's two replicates back to back; the round is rotated instead). Slow drift on the devices is so
spread over all items instead of masquerading as a difference between them. `bench`, a fleet
(`bench --hosts`) and a study's extra rounds all use this module.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import TypeVar

from poolbench.stats.policy import ReplicatePolicy

__all__ = ["interleave", "policy", "round_order"]

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # (description, done, total)


def policy(min_runs: int = 3, max_runs: int = 10, target: float = 0.05) -> ReplicatePolicy:
    """At least `min_runs`, then the total Stein's rule plans from them for a CI within
    ±`target` (a fraction), at most `max_runs` replicates."""
    return ReplicatePolicy(ci_target=target, min_runs=min_runs, max_runs=max_runs)


def round_order(items: Sequence[T], seed: int, round_no: int, last: T | None = None) -> list[T]:
    """The order of one round: a shuffle that depends only on (seed, round); when it would
    start with `last` (the item that ended the previous round) and there is another item,
    it is rotated by one so no item runs twice in a row."""
    order = list(items)
    random.Random(f"{seed}:{round_no}").shuffle(order)
    if last is not None and len(order) > 1 and order[0] == last:
        order = order[1:] + order[:1]
    return order


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
    last: T | None = None
    round_no = 0
    while True:
        pending = [i for i in items if rule.more(values(i)) > 0]
        if not pending:
            return done
        order = round_order(pending, seed, round_no, last)
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
        last = order[-1]
        round_no += 1
