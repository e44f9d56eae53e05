"""The sections a trial's pool operations write into their measurement's guards
(Findings.other, under the section's name): the pool state a workload ran in, the usable
space (capacity), a RAIDZ expansion, a resilver and the l2arc reads. Each is the JSON shape
as stored, typed; the store decodes what it reads back (records/sections.py: Resilver;
store/facts.py: Expansion)."""

from __future__ import annotations

from typing import TYPE_CHECKING, NotRequired, TypedDict

if TYPE_CHECKING:
    from poolbench.engine.resilver_load import LoadJson
    from poolbench.guards.l2arc import IntervalJson, SteadyJson


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


# `with` is a keyword: this record is spelled in the functional form.
ResilverRecord = TypedDict(
    "ResilverRecord",
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
        "load": NotRequired["LoadJson"],  # the foreground workload (factors/load.py)
    },
)


class L2arcRecord(TypedDict):
    """`l2arc`: the l2arc reads' intervals, the steady ones summed up, and the tunables."""

    intervals: list[IntervalJson]
    steady: SteadyJson
    interval_s: float
    how: str
    tunables: dict[str, int | None]


# Every section a pool operation returns in its OpResult.
OpSection = CapacityRecord | ExpandRecord | ResilverRecord | L2arcRecord
