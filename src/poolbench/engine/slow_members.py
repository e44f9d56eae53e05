"""A member is named slow only when it was slow in most replicates of a configuration.

One window is evidence, not a verdict: each measurement records what its window showed
(`members_slow` in the guards JSON, guards/members.py `evidence`), and this rule, applied
where the replicates of one workload on one configuration come together (bench's result, the
reports), names a member only when that window evidence holds in a majority of the replicates
that could judge it, and in at least two. A disk that is really slower is slow every time; one
scheduler hiccup is not. Pure: reads stored guards only.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from poolbench.records.sections import MEMBERS_SLOW, MembersSlow, SlowByWait

KEY = MEMBERS_SLOW  # the per-measurement evidence in the guards JSON
MIN_REPLICATES = 2


def needed(judged: int) -> int:
    """Replicates a member must be slow in: a strict majority of those judged, at least 2."""
    return max(MIN_REPLICATES, judged // 2 + 1)


def _member(name: str, position: int | None) -> tuple[str, str]:
    """(what identifies the member across replicates, how to call it): its place in the
    pool where recorded (loop device names change between a study's trials), else its name."""
    if position is not None:
        return f"#{position}", f"{name} (disk {position + 1} in the pool's order)"
    return name, name


def _evidence(guards: Sequence[Mapping[str, object]]) -> list[MembersSlow]:
    return [ev for g in guards if (ev := MembersSlow.decode(g)) is not None]


def named(guards: Sequence[Mapping[str, object]]) -> list[str]:
    """One warning per member slow in enough of these replicates' windows, by the byte
    counters' rule, then by ZFS's disk_wait (OpenZFS: the record's `latency` part)."""
    return _by_bytes(guards) + _by_latency(guards)


def _by_bytes(guards: Sequence[Mapping[str, object]]) -> list[str]:
    judged = [ev.by_bytes for ev in _evidence(guards) if ev.by_bytes is not None]
    hits: dict[str, list[float]] = {}
    called: dict[str, str] = {}
    for slow in judged:
        for m in slow:
            key, called[key] = _member(m.name, m.position)
            hits.setdefault(key, []).append(m.slower)
    return [
        f"member {called[key]} was slower than its peers in {len(got)} of {len(judged)} "
        f"replicates (median {statistics.median(got):.0%} slower while busy): the pool waits "
        "for its slowest member, so this disk limits the figure"
        for key, got in sorted(hits.items())
        if len(got) >= needed(len(judged))
    ]


def latency_parts(guards: Sequence[Mapping[str, object]]) -> list[tuple[SlowByWait, ...]]:
    """The replicates' `latency` parts (guards/member_latency.py) that judged a vdev (a
    read-only workload's part records the waits and judges nothing)."""
    return [ev.by_wait for ev in _evidence(guards) if ev.by_wait is not None]


def _by_latency(guards: Sequence[Mapping[str, object]]) -> list[str]:
    judged = latency_parts(guards)
    hits: dict[str, list[tuple[float, float]]] = {}
    called: dict[str, str] = {}
    for slow in judged:
        for m in slow:
            key, called[key] = _member(m.name, m.position)
            if m.write_ms is not None and m.peers_ms is not None:
                hits.setdefault(key, []).append((m.write_ms, m.peers_ms))
    out = []
    for key, got in sorted(hits.items()):
        if len(got) < needed(len(judged)):
            continue
        mine, peers = (statistics.median(v[i] for v in got) for i in (0, 1))
        out.append(
            f"member {called[key]} waited longer per write than its peers in {len(got)} of "
            f"{len(judged)} replicates (write disk_wait, median {mine:.0f} ms against "
            f"{peers:.0f} ms for its peers, `zpool iostat -l` since the pool's import): the "
            "pool waits for its slowest member"
        )
    return out
