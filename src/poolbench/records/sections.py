"""The typed sections trial factors write into every measurement of a trial (Findings.other,
under the section's name), and their decoding, once, from the stored JSON. A factor writes its
`...Record` (the JSON shape, a TypedDict); the store reads it back as the dataclass beside it
(`decode`), which takes what old stores hold too: a field missing there is its default.
The sections of other writers that the studies' notes read (a resilver and its load, the
l2arc reads, pgbench's) are decoded here the same way. Readers call fields, never keys."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict

AGING = "aging"
ARC_LIMIT = "arc_limit"
FILL = "fill"
RESILVER = "resilver"
SLOW_MEMBER = "slow_member"


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class FillRecord(TypedDict, total=False):
    """The `fill` section of every measurement of a filled pool (factors/fill.py)."""

    asked_percent: int
    usable_bytes: int
    filler_bytes: int
    used_bytes_after: int
    achieved_percent: float | None
    data: str  # what the filler was
    seconds: float


@dataclass(frozen=True)
class Fill:
    """How full the pool was made before the workloads (the fill factor)."""

    asked_percent: float
    achieved_percent: float
    filler_bytes: int

    @classmethod
    def decode(cls, other: Mapping[str, object]) -> Fill | None:
        """The section in one measurement's findings, or None: the pool was not filled."""
        f = other.get(FILL)
        if not isinstance(f, dict):
            return None
        return cls(
            float(f.get("asked_percent") or 0),
            float(f.get("achieved_percent") or 0),
            int(f.get("filler_bytes") or 0),
        )


class SlowRecord(TypedDict):
    """The `slow_member` section of every measurement of the trial (factors/slow_member.py)."""

    device: str
    position: int
    percent: int
    peer_mib_s: float
    cap_mib_s: float
    how: str


@dataclass(frozen=True)
class SlowMember:
    """The member throttled on purpose (factors/slow_member.py): its place, its cap and its
    peers'."""

    position: int
    percent: int
    cap_mib_s: float
    peer_mib_s: float

    @classmethod
    def decode(cls, other: Mapping[str, object]) -> SlowMember | None:
        """The section in one measurement's findings, or None: no member was slowed."""
        s = other.get(SLOW_MEMBER)
        if not isinstance(s, dict):
            return None
        cap = _num(s.get("cap_mib_s"))
        if cap is None:
            return None
        return cls(int(s.get("position") or 0), int(s.get("percent") or 0), cap,
                   float(s.get("peer_mib_s") or 0))  # fmt: skip


class AgeRecord(TypedDict, total=False):
    """The `aging` section of every measurement of an aged pool (factors/aging.py)."""

    seed: int
    rounds_asked: int
    rounds: int  # rounds done (beyond the first fill)
    fill_percent_asked: int
    usable_bytes: int  # the room for files when aging began (statfs f_bavail)
    live_bytes: int  # what the recipe left, by its own count
    files: int
    achieved_percent: float | None  # statfs: the room the files took, of usable_bytes
    frag_target: int | None
    frag_percent: float | None  # the stack's own figure after the last round (None: none)
    frag_how: str  # how it was read, or why there is none
    frag_reached: bool | None
    bytes_written: int
    operations: dict[str, int]  # per kind
    seconds: float
    data: str


@dataclass(frozen=True)
class Age:
    """How one trial's pool was aged (factors/aging.py): rounds done of those asked, the fill
    asked and reached (statfs), and the stack's own free-space fragmentation."""

    replicate: int
    rounds: int
    rounds_asked: int
    fill_asked: float
    fill_achieved: float | None
    frag_percent: float | None
    frag_how: str
    frag_target: float | None = None

    @classmethod
    def decode(cls, other: Mapping[str, object], replicate: int) -> Age | None:
        """The section in one measurement of trial `replicate`, or None: not aged."""
        a = other.get(AGING)
        if not isinstance(a, dict) or not isinstance(a.get("rounds"), int):
            return None
        return cls(
            replicate,
            int(a["rounds"]),
            int(a.get("rounds_asked") or 0),
            float(a.get("fill_percent_asked") or 0),
            _num(a.get("achieved_percent")),
            _num(a.get("frag_percent")),
            str(a.get("frag_how") or ""),
            _num(a.get("frag_target")),
        )


class ArcLimitRecord(TypedDict, total=False):
    """The `arc_limit` section of every measurement of a trial under an `arc_max` level
    (factors/arc_max.py): the ceiling asked, the ARC's before, the floor lowered with it
    (only when it had to be) and the ceiling read back. Written, not read back by the store."""

    asked: int
    c_max_before: int
    c_min_before: int
    zfs_arc_min_set: int
    c_max: int | None
    restored: str


class DedupSetRecord(TypedDict):
    """The `dedup` section of every measurement of a trial under a `dedup` level
    (factors/dedup.py): the level asked for and how it was set."""

    level: str
    set: str


class DedupReadingRecord(TypedDict):
    """The `dedup` part of a measurement's `pool` section (factors/dedup.py, DedupReading)."""

    level: str
    ratio: float | None
    entries: int
    disk_bytes: int
    core_bytes: int
    referenced_blocks: int
    referenced_bytes: int
    unread: str


class PrefetchSetRecord(TypedDict):
    """The `prefetch` section of every measurement of a trial under a `prefetch` level
    (factors/prefetch.py): the level, zfs_prefetch_disable as read back, the host's own value
    (not in a dry run) and whether it is put back."""

    level: str
    disable: int | None
    host_had: NotRequired[int]
    set: str


class PrefetchReadingRecord(TypedDict):
    """The `prefetch` part of a measurement's `pool` section (factors/prefetch.py)."""

    level: str
    disable: int | None


# Every section a trial factor writes: into Findings.other before the workloads
# (before_pool, after_pool), into a measurement's `pool` section after it
# (after_measurement). Each factor returns its own TypedDict, its exact stored shape (the
# ones above, or one in a new factor's own module: a new factor is its module alone); the
# trial passes them on whole into the guards JSON and reads none of their keys, so it asks
# no more of them than a JSON object does. Their readers decode them (the records here).
FactorSection = Mapping[str, object]


def _str(value: object) -> str:
    return str(value) if value is not None else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class LoadPhase:
    """One phase of a resilver's foreground load (engine/resilver_load.py): `during` the
    resilver (over its window, from fio's histogram log) or `alone` on the healthy pool
    after it. `value` is MiB/s or IOPS (`unit`); None: no figure, `why` says why."""

    value: float | None
    unit: str = ""
    p99_ms: float | None = None
    why: str = ""
    seconds: float | None = None  # what fio's log (or run) covered
    window_s: float | None = None  # `during`: the resilver's window
    intervals: int | None = None  # `during`: fio's log intervals inside it
    interval_ms: int | None = None

    @classmethod
    def decode(cls, d: object) -> LoadPhase:
        if not isinstance(d, Mapping):
            return cls(None)
        return cls(_num(d.get("value")), _str(d.get("unit")), _num(d.get("p99_ms")),
                   _str(d.get("why")), _num(d.get("seconds")), _num(d.get("window_s")),
                   _int(d.get("intervals")), _int(d.get("interval_ms")))  # fmt: skip


@dataclass(frozen=True)
class ResilverLoad:
    """A resilver's foreground workload (the `load` factor): its name, its rate, and its
    figures during the resilver and alone after it."""

    workload: str
    rate: str
    during: LoadPhase
    alone: LoadPhase

    @classmethod
    def decode(cls, d: object) -> ResilverLoad | None:
        if not isinstance(d, Mapping):
            return None
        return cls(_str(d.get("workload")), _str(d.get("rate")),
                   LoadPhase.decode(d.get("during")), LoadPhase.decode(d.get("alone")))  # fmt: skip


@dataclass(frozen=True)
class Resilver:
    """One resilver (the resilver workload, engine/pool_hooks.py): the trial's replicate, bytes
    resilvered and the seconds it took, its kind, the verifying scrub after a sequential
    rebuild, and the foreground load that ran during it (None: an idle resilver)."""

    replicate: int
    resilvered_bytes: int
    seconds: float | None
    kind: str = ""  # "healing resilver" | "sequential rebuild to a distributed spare"
    scrub_seconds: float | None = None
    load: ResilverLoad | None = None

    @classmethod
    def decode(cls, other: Mapping[str, object], replicate: int) -> Resilver | None:
        """The section in one measurement of trial `replicate`, or None: no resilver."""
        rs = other.get(RESILVER)
        if not isinstance(rs, dict):
            return None
        scrub = rs.get("verify_scrub")
        return cls(
            replicate,
            int(rs.get("resilvered_bytes") or 0),
            _num(rs.get("seconds")),
            str(rs.get("kind") or ""),
            _num(scrub.get("seconds")) if isinstance(scrub, dict) else None,
            ResilverLoad.decode(rs.get("load")),
        )


# -- a pgbench workload's section (engine/pgbench_run.py) --------------------------------------
PGBENCH = "pgbench"


@dataclass(frozen=True)
class Pgbench:
    """What the facts read of a pgbench measurement: the device bytes it wrote per
    transaction (None: not counted) and whether RAM could cache its database (`warm`)."""

    device_bytes_per_txn: float | None
    warm: bool

    @classmethod
    def decode(cls, other: Mapping[str, object]) -> Pgbench | None:
        """The section in one measurement's guards, or None: not a pgbench workload."""
        pg = other.get(PGBENCH)
        if not isinstance(pg, dict):
            return None
        return cls(_num(pg.get("device_bytes_per_txn")), _part(pg.get("cache"), "label") == "warm")


# -- the l2arc reads (a pool operation's section: engine/l2arc_reads.py) ----------------------
L2ARC = "l2arc"


@dataclass(frozen=True)
class L2arcInterval:
    """One interval of the l2arc reads, as the notes read it (a counter not recorded: 0)."""

    iops: float
    p99_ms: float | None
    l2_hits: float
    l2_misses: float
    l2_size: float  # bytes the cache device held

    @classmethod
    def decode(cls, d: Mapping[object, object]) -> L2arcInterval:
        return cls(_num(d.get("iops")) or 0.0, _num(d.get("p99_ms")),
                   _num(d.get("l2_hits")) or 0.0, _num(d.get("l2_misses")) or 0.0,
                   _num(d.get("l2_size")) or 0.0)  # fmt: skip


@dataclass(frozen=True)
class L2arcSteady:
    """The steady intervals' figures (the last half), None where not recorded."""

    p99_ms: float | None
    l2_hits: float | None
    l2_hit_rate: float | None


@dataclass(frozen=True)
class L2arcReads:
    """One replicate's l2arc reads: its intervals (None: not recorded), their length, and
    the steady figures."""

    replicate: int
    intervals: tuple[L2arcInterval, ...] | None
    interval_s: float | None
    steady: L2arcSteady

    @classmethod
    def decode(cls, other: Mapping[str, object], replicate: int) -> L2arcReads | None:
        """The section in one measurement of trial `replicate`, or None: no l2arc reads."""
        s = other.get(L2ARC)
        if not isinstance(s, dict) or not s:
            return None
        got = s.get("intervals")
        intervals = (
            tuple(L2arcInterval.decode(i) for i in got if isinstance(i, dict))
            if isinstance(got, list)
            else None
        )
        st = s.get("steady")
        steady = L2arcSteady(_num(_part(st, "p99_ms")), _num(_part(st, "l2_hits")),
                             _num(_part(st, "l2_hit_rate")))  # fmt: skip
        return cls(replicate, intervals, _num(s.get("interval_s")), steady)


# -- the slow-member guard's window evidence (not a factor's: guards/members.py writes it) -----
MEMBERS_SLOW = "members_slow"


def _part(d: object, key: str) -> object:
    return d.get(key) if isinstance(d, Mapping) else None


def _position(d: object) -> int | None:
    pos = _part(d, "position")
    return pos if isinstance(pos, int) and not isinstance(pos, bool) else None


@dataclass(frozen=True)
class SlowByBytes:
    """A member the byte counters found slower than its peers in one window."""

    name: str
    position: int | None  # its place among the pool's members; None where not recorded
    slower: float  # how much slower than its peers' median while busy (0 where not recorded)


@dataclass(frozen=True)
class SlowByWait:
    """A member ZFS's write disk_wait found slower than its peers in one window (OpenZFS)."""

    name: str
    position: int | None
    write_ms: float | None
    peers_ms: float | None


@dataclass(frozen=True)
class MembersSlow:
    """One measurement's window evidence of slow members (`members_slow`): by the byte
    counters (guards/members.py) and by the write disk_wait, its `latency` part
    (guards/member_latency.py). A part that judged nothing (no `slow` object) is None;
    engine/slow_members.py names a member from the replicates together."""

    by_bytes: tuple[SlowByBytes, ...] | None
    by_wait: tuple[SlowByWait, ...] | None

    @classmethod
    def decode(cls, other: Mapping[str, object]) -> MembersSlow | None:
        """The evidence in one measurement's guards, or None where none was recorded."""
        ev = other.get(MEMBERS_SLOW)
        if not isinstance(ev, Mapping):
            return None
        part = ev.get("latency")
        slow = part.get("slow") if isinstance(part, Mapping) else None
        by_wait = None
        if isinstance(slow, Mapping):
            by_wait = tuple(
                SlowByWait(
                    str(n), _position(d), _num(_part(d, "write_ms")), _num(_part(d, "peers_ms"))
                )
                for n, d in slow.items()
            )
        slow = ev.get("slow")
        by_bytes = None
        if isinstance(slow, Mapping):
            by_bytes = tuple(
                SlowByBytes(str(n), _position(d), _num(_part(d, "slower")) or 0.0)
                for n, d in slow.items()
            )
        return cls(by_bytes, by_wait)
