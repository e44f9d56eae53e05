"""The sections a trial's pool operations write into their measurement's guards
(Findings.other, under the section's name): the pool state a workload ran in, the usable
space (capacity), a RAIDZ expansion, a resilver and the l2arc reads; and what the pool says
after a measurement (PoolSaid). Each is the JSON shape as stored, typed; the store decodes
what it reads back (records/sections.py: Resilver; store/facts.py: Expansion)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:
    from poolbench.engine.resilver_load import LoadJson
    from poolbench.guards.l2arc import IntervalJson, SteadyJson
    from poolbench.records.sections import FactorSection
    from poolbench.zfs.parse import IostatRow


class PoolStateRecord(TypedDict, total=False):
    """`pool_state`: the state a workload ran in ({} when healthy, not written)."""

    state: str
    offline: str  # the member taken offline


class CapacityRecord(TypedDict):
    """`capacity`: the pool's usable space and how it was read."""

    usable_bytes: int
    how: str


class ExpandRecord(TypedDict):
    """`expand`: one RAIDZ expansion (a disk attached to a raidz vdev, its reflow timed)."""

    vdev: str
    width_before: int
    disk: str
    allocated_bytes: int
    usable_before: int | None
    usable_after: int | None
    seconds: float
    timing: str


class ScrubRecord(TypedDict):
    """The scrub OpenZFS starts after a sequential rebuild (`verify_scrub`)."""

    seen: bool
    seconds: NotRequired[float]
    status_line: NotRequired[str]


# `with` is a keyword: this part is spelled in the functional form.
_Replaced = TypedDict(
    "_Replaced",
    {
        "replaced": str,
        "with": str,
        "kind": str,
        "resilvered_bytes": int | None,
        "seconds": float,
        "status_line": str,
        "timing": str,
        "rebuilt_vdev": NotRequired[str],  # a sequential rebuild's top-level vdev
        "verify_scrub": NotRequired[ScrubRecord],
    },
)


class ResilverRecord(_Replaced, total=False):
    """`resilver`: one member replaced and the resilver timed; under the load factor, its
    foreground workload's figures during the resilver and alone after it."""

    load: LoadJson  # the key is the load factor's (factors/load.py KEY)


class L2arcRecord(TypedDict):
    """`l2arc`: the l2arc reads' intervals, the steady ones summed up, and the tunables."""

    intervals: list[IntervalJson]
    steady: SteadyJson
    interval_s: float
    how: str
    tunables: dict[str, int | None]


# Every section a pool operation returns in its OpResult.
OpSection = CapacityRecord | ExpandRecord | ResilverRecord | L2arcRecord


@dataclass
class PoolSaid:
    """What the pool says after a measurement (TrialHooks.after), merged into the guards'
    `pool` section: each active factor's reading under its section name (the dedup table,
    prefetch), then the pool's own accounting where the backend keeps one (ZFS)."""

    factors: dict[str, FactorSection] = field(default_factory=dict)
    compressratio: str | None = None
    zvol: dict[str, int] | None = None  # a zvol target: what it is charged
    zpool_iostat: list[IostatRow] | None = None  # OpenZFS: per-vdev I/O and latency
    class_alloc: dict[str, int] | None = None  # bytes on the data vdevs and special classes
    class_free: dict[str, int] | None = None  # the same, free

    def to_json(self) -> dict[str, object]:
        """The keys it adds to the `pool` section, in the order they were always written; a
        part that was not read (or read empty) is left out."""
        out: dict[str, object] = dict(self.factors)
        parts = (("compressratio", self.compressratio), ("zvol", self.zvol),
                 ("zpool_iostat", self.zpool_iostat), ("class_alloc", self.class_alloc),
                 ("class_free", self.class_free))  # fmt: skip
        out.update((k, v) for k, v in parts if v)
        return out
