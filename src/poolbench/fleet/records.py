"""A fleet run's typed records: what it was asked (`FleetOptions`), what each workload gave
(`FleetWorkloadResult`: the engine's `WorkloadResult` per host, and for the aggregate of
the simultaneous runs, so a host's figures are kept and summarised as a bench's are), and the
failure that makes it partial (`FleetHostFailed`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from poolbench.engine import replicates
from poolbench.engine.subject import WorkloadResult
from poolbench.errors import PoolbenchError, UsageError
from poolbench.stats.policy import ReplicatePolicy
from poolbench.workloads.workload import Workload


class FleetHostFailed(PoolbenchError):
    """One or more hosts failed mid-run; the others' results are kept."""


@dataclass(frozen=True)
class FleetOptions:
    workloads: list[Workload]
    size: int
    compressibility: int = 0
    runtime_s: int = 30
    iodepth: int = 1
    numjobs: int = 1
    stop: ReplicatePolicy = field(default_factory=replicates.policy)
    # Seeds the workload order of each round (as `bench --seed`); None = drawn and recorded.
    seed: int | None = None


def check_workloads(workloads: list[Workload]) -> None:
    meta = [w.name for w in workloads if w.is_metadata]
    if meta:
        raise UsageError(
            f"Metadata workloads ({', '.join(meta)}) are not supported with --hosts.",
            "Measure them on each host with `poolbench bench PATH`, or drop them from --workloads.",
        )


@dataclass
class FleetWorkloadResult:
    """One workload on the fleet. `total` holds the sum over the hosts of each complete
    replicate: the figure the stop rule reads (the fleet is measured until its sum is
    trusted); `slowest` the slowest host's figure of the same replicates, `slowest_host`
    which host that was. A replicate some host missed is stored, but counts in neither."""

    workload: Workload
    policy: ReplicatePolicy
    per_host: dict[str, WorkloadResult] = field(default_factory=dict)  # in measuring order
    total: WorkloadResult = field(init=False)
    slowest: WorkloadResult = field(init=False)
    slowest_host: list[str] = field(default_factory=list)
    partial: bool = False

    def __post_init__(self) -> None:
        self.total = WorkloadResult(self.workload, policy=self.policy)
        self.slowest = WorkloadResult(self.workload, policy=self.policy)

    def host(self, label: str) -> WorkloadResult:
        """The host's own result, made when it first reports."""
        if label not in self.per_host:
            self.per_host[label] = WorkloadResult(self.workload, policy=self.policy)
        return self.per_host[label]

    @property
    def warnings(self) -> list[str]:
        """Every distinct warning: the hosts' (in host order), then the aggregates'."""
        out: list[str] = []
        for res in [*self.per_host.values(), self.total, self.slowest]:
            out += [w for w in res.warnings if w not in out]
        return out
