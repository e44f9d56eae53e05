"""The aggregate of one simultaneous run over the hosts (pure): the sum of the hosts' figures,
and the slowest host's (a fleet is as fast as its slowest member). Each is stored as a
measurement of its own, configuration `fleet:sum` or `fleet:slowest`, no host."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TypedDict

from poolbench.fleet.clientout import HostFigures
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.workloads.workload import Workload

MiB = 1024 * 1024
SUM = "fleet:sum"
SLOWEST = "fleet:slowest"


class AggregateSection(TypedDict):
    """The `aggregate` section of an aggregate row's findings, as stored."""

    hosts: list[str]
    values: dict[str, float]
    slowest_host: str
    partial: bool
    missing_hosts: list[str]
    bytes_over_longest_runtime_mib_s: float | None
    kind: str


@dataclass(frozen=True)
class Aggregate:
    """One replicate over the hosts that reported: each host's figure and fio's figures,
    and the hosts that did not (then the aggregate is partial: not the fleet's)."""

    values: dict[str, float]  # by host label, in the workload's unit
    figures: dict[str, HostFigures]  # the same hosts
    missing: list[str]

    @property
    def partial(self) -> bool:
        return bool(self.missing)

    @property
    def total(self) -> float:
        return sum(self.values.values())

    @property
    def slowest_host(self) -> str:
        return min(self.values, key=lambda k: self.values[k])

    @property
    def longest_s(self) -> float:
        return max(f.runtime_s for f in self.figures.values())

    def section(self, kind: str) -> AggregateSection:
        io_bytes = sum(f.io_bytes for f in self.figures.values())
        longest = self.longest_s
        return {
            "hosts": sorted(self.values),
            "values": dict(self.values),
            "slowest_host": self.slowest_host,
            "partial": self.partial,
            "missing_hosts": sorted(self.missing),
            # Hosts that finish early stop adding throughput: total bytes over the longest
            # host's runtime is the rate the fleet sustained while all of it was busy or done.
            "bytes_over_longest_runtime_mib_s": io_bytes / longest / MiB if longest else None,
            "kind": kind,
        }

    def warnings(self) -> list[str]:
        if not self.partial:
            return []
        reported, missing = len(self.values), ", ".join(sorted(self.missing))
        return [
            f"partial: {reported} of {reported + len(self.missing)} hosts reported "
            f"(missing: {missing}); this sum is not the fleet's"
        ]

    def measurements(self, w: Workload, replicate: int) -> tuple[Measurement, Measurement]:
        """The sum row and the slowest host's row of this replicate."""
        figs = self.figures.values()
        slow = self.figures[self.slowest_host]
        total = self._row(w, replicate, SUM, self.total, sum(f.io_bytes for f in figs),
                          sum(f.total_ios for f in figs), self.longest_s)  # fmt: skip
        slowest = self._row(w, replicate, SLOWEST, self.values[self.slowest_host],
                            slow.io_bytes, slow.total_ios, slow.runtime_s)  # fmt: skip
        return total, slowest

    def _row(
        self, w: Workload, replicate: int, kind: str, value: float, app_bytes: int, ops: int,
        seconds: float,
    ) -> Measurement:  # fmt: skip
        return Measurement(
            config=kind, workload=w.name, replicate=replicate, value=value, unit=w.unit,
            app_bytes=app_bytes, ops=ops, seconds=seconds, device_bytes=None,
            device_mib_s=None, warnings=self.warnings(),
            findings=Findings(other={"aggregate": self.section(kind)}),
            workload_def=asdict(w), job_file="", host=None,
        )  # fmt: skip
