"""What a study's trial does around its workloads, as the session sees it: bring the pool into
a state, run a pool operation as a workload, read back what the pool says afterwards."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from poolbench.records.latency import Latency
from poolbench.workloads.fiojob import JobParams
from poolbench.workloads.workload import Workload

if TYPE_CHECKING:
    from poolbench.engine.op_sections import OpSection, PoolSaid, PoolStateRecord


@dataclass
class OpResult:
    """The outcome of a workload that is not a fio job (untar, pgbench, capacity, resilver)."""

    value: float
    app_bytes: int
    seconds: float
    ops: int = 0
    device_bytes: int | None = None
    # Findings sections of their own, by their stored name ("capacity", "resilver").
    sections: dict[str, OpSection] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    latency: Latency | None = None  # per operation (pgbench: per transaction)


class TrialHooks(Protocol):
    """What the trial loop does around a study's workloads (pool state, pool operations)."""

    def before(self, w: Workload) -> PoolStateRecord:
        """Bring the pool into the state `w` runs in (`w.pool_state`); returns what it did."""

    def operate(self, w: Workload, params: JobParams) -> OpResult:
        """Run a `pool` workload (kind "pool") and return its figure; `params` place a fio
        job over the data the session laid out (the l2arc reads, a resilver's load)."""

    def after(self, w: Workload) -> PoolSaid:
        """Read back what the pool says after the measurement (merged into the pool
        findings)."""

    def compression(self) -> str | None:
        """The compression the pool applies to what is written, as "compression=lz4" (ZFS:
        the root dataset's property; "on" is OpenZFS's default), None when it stores data
        as written, or a "not read (why)" when poolbench cannot know."""
