"""One stored measurement as the facts read it (FactRow), and the facts of the newer
studies taken from a configuration's rows: pgbench's device bytes per transaction and warm
label, each trial's age and the member throttled on purpose (their typed sections,
records/sections.py), the guard's flags (slow-disk), and the l2arc reads' intervals and
steady figures. store/facts.py gathers them into its ConfigFacts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import LatencyJson
from poolbench.records.sections import Age, L2arcReads, MembersSlow, Pgbench, SlowMember


class FactRow(TypedDict):
    """What the facts read of one stored measurement, its JSON columns decoded."""

    config: str
    workload: str
    replicate: int
    value: float
    guards: JsonObject  # the `guards` column: each guard's section under its own key
    clat: NotRequired[LatencyJson | None]  # the `clat` column (0005_latency); None: none


class StudyExtras(TypedDict):
    """ConfigFacts' fields for the newer studies (see its comments)."""

    bytes_per_txn: Mapping[str, tuple[float, ...]]
    warm: frozenset[str]
    l2arc: tuple[L2arcReads, ...]
    ages: tuple[Age, ...]
    slow_member: SlowMember | None
    slow_flags: Mapping[str, tuple[tuple[int, ...], ...]]
    latency_flags: Mapping[str, tuple[tuple[int, ...], ...]]


def study_extras(rows: list[FactRow]) -> StudyExtras:
    """The newer studies' facts of one configuration's rows, as ConfigFacts' fields."""
    per_txn: dict[str, list[float]] = {}
    warm: set[str] = set()
    ages: dict[int, Age | None] = {}
    slow: SlowMember | None = None
    l2arc: list[L2arcReads] = []
    for r in rows:
        g = r["guards"]
        pg = Pgbench.decode(g)
        if pg is not None and pg.device_bytes_per_txn is not None:
            per_txn.setdefault(str(r["workload"]), []).append(pg.device_bytes_per_txn)
        if pg is not None and pg.warm:
            warm.add(str(r["workload"]))
        got = Age.decode(g, int(r["replicate"]))
        ages[got.replicate if got else -1] = got
        slow = slow or SlowMember.decode(g)
        reads = L2arcReads.decode(g, int(r["replicate"]))
        l2arc += [reads] if reads else []
    return StudyExtras(
        bytes_per_txn={w: tuple(v) for w, v in per_txn.items()},
        warm=frozenset(warm),
        l2arc=tuple(sorted(l2arc, key=lambda x: x.replicate)),
        ages=tuple(a for _r, a in sorted(ages.items()) if a is not None),
        slow_member=slow,
        slow_flags=_slow_flags(rows),
        latency_flags=_slow_flags(rows, latency=True),
    )


def section(guards: Mapping[str, Any], key: str) -> JsonObject:
    """One guard's record, {} when absent (a workload that did not produce it)."""
    value = guards.get(key)
    return value if isinstance(value, dict) else {}


def _slow_flags(
    rows: list[FactRow], latency: bool = False
) -> dict[str, tuple[tuple[int, ...], ...]]:
    """Per workload, each judged replicate's slow members by place (engine/slow_members.py
    applies the naming rule to the same evidence); `latency`: by the record's disk_wait part
    (OpenZFS) instead of the byte counters'."""
    out: dict[str, list[tuple[int, tuple[int, ...]]]] = {}
    for r in rows:
        ev = MembersSlow.decode(r["guards"])
        slow = None if ev is None else ev.by_wait if latency else ev.by_bytes
        if slow is None:
            continue
        places = tuple(sorted(m.position for m in slow if m.position is not None))
        out.setdefault(str(r["workload"]), []).append((int(r["replicate"]), places))
    return {w: tuple(p for _r, p in sorted(v)) for w, v in out.items()}
