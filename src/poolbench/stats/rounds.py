"""The order replicates run in: rounds (pure). The one scheduler of bench, a fleet
(`bench --hosts`), a study's stage one (study/matrix.py) and its extra rounds
(engine/trial_loop.py).

Replicates run in rounds: every item still owed a replicate runs once per round, in a seeded
random order that is new each round and depends only on (seed, round), so a resume or
`--seed N` replays it. An item never runs twice in a row across a round boundary (A B | B A
would put B's two replicates back to back; the round is rotated instead). Slow drift on the
devices is so spread over all items instead of masquerading as a difference between them.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")


def round_order(items: Sequence[T], seed: int, round_no: int, last: T | None = None) -> list[T]:
    """The order of one round: a shuffle that depends only on (seed, round); when it would
    start with `last` (the item that ended the previous round) and there is another item,
    it is rotated by one so no item runs twice in a row."""
    order = list(items)
    random.Random(f"{seed}:{round_no}").shuffle(order)
    if last is not None and len(order) > 1 and order[0] == last:
        order = order[1:] + order[:1]
    return order


def rounds(
    owed: Callable[[int], Sequence[T]],
    seed: int,
    first: int = 0,
    end: int | None = None,
    last: T | None = None,
) -> Iterator[tuple[int, list[T]]]:
    """Each round's number and order, from round `first` up to (not including) `end`, until
    a round owes nothing. `owed(r)` is asked only when round r is next, after the caller ran
    the round before (a generator: what a round owes may depend on the figures so far);
    `last` is the item that ended the round before `first`."""
    round_no = first
    while end is None or round_no < end:
        pending = list(owed(round_no))
        if not pending:
            return
        order = round_order(pending, seed, round_no, last)
        yield round_no, order
        last = order[-1]
        round_no += 1
