"""One stored measurement as the facts read it (FactRow), and the facts of the newer
studies taken from a configuration's rows: pgbench's device bytes per transaction and warm
label, each trial's age and the member throttled on purpose (their typed sections,
records/sections.py), the guard's flags (slow-disk), and the pool operations' own sections
(l2arc, resilver). store/facts.py gathers them into its ConfigFacts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import LatencyJson
from poolbench.records.sections import Age, MembersSlow, SlowMember


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
    sections: Mapping[str, tuple[JsonObject, ...]]
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
    for r in rows:
        g = r["guards"]
        _pgbench(section(g, "pgbench"), str(r["workload"]), per_txn, warm)
        got = Age.decode(g, int(r["replicate"]))
        ages[got.replicate if got else -1] = got
        slow = slow or SlowMember.decode(g)
    return StudyExtras(
        bytes_per_txn={w: tuple(v) for w, v in per_txn.items()},
        warm=frozenset(warm),
        sections=_op_sections(rows),
        ages=tuple(a for _r, a in sorted(ages.items()) if a is not None),
        slow_member=slow,
        slow_flags=_slow_flags(rows),
        latency_flags=_slow_flags(rows, latency=True),
    )


def _pgbench(
    pg: JsonObject, workload: str, per_txn: dict[str, list[float]], warm: set[str]
) -> None:
    """A pgbench measurement's device bytes per transaction and cache label."""
    value = pg.get("device_bytes_per_txn")
    if isinstance(value, int | float) and not isinstance(value, bool):
        per_txn.setdefault(workload, []).append(float(value))
    cache = pg.get("cache")
    if isinstance(cache, dict) and cache.get("label") == "warm":
        warm.add(workload)


OP_SECTIONS = ("l2arc", "resilver")


def _op_sections(rows: list[FactRow]) -> dict[str, tuple[JsonObject, ...]]:
    out: dict[str, list[tuple[int, JsonObject]]] = {}
    for r in rows:
        for key in OP_SECTIONS:
            found = section(r["guards"], key)
            if found:
                out.setdefault(key, []).append((int(r["replicate"]), found))
    return {k: tuple(s for _r, s in sorted(v, key=lambda x: x[0])) for k, v in out.items()}


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
