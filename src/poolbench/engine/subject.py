"""What a measurement session takes and gives: its options, the subject it measures (a
mounted filesystem, and for a study's trial the pool under it), and each workload's results.
Plain records, shared by the session (engine/session.py), bench, studies and the fleet."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.engine import replicates
from poolbench.engine.device_window import DeviceWindow
from poolbench.engine.hooks import TrialHooks
from poolbench.guards import cache, cpu, geometry, reread
from poolbench.guards.devices import Target
from poolbench.records.cache_drop import CacheDropRecord
from poolbench.records.findings import Findings
from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import Latency
from poolbench.records.run_metadata import BenchOptionsJson, StopJson
from poolbench.stats.policy import MeanCI, ReplicatePolicy
from poolbench.workloads.fioparse import FioResult
from poolbench.workloads.workload import Workload


@dataclass(frozen=True)
class Options:
    workloads: list[Workload]
    size: int | None = None  # bytes; None = the ≥ 2× RAM rule
    compressibility: int = 0
    runtime_s: int = 30
    iodepth: int = 1
    numjobs: int = 1
    metadata_files: int = 20000
    # The shortest timed window (engine/window.py); 0 = measure each workload as it comes.
    min_window_s: float = 3.0
    stop: ReplicatePolicy = field(default_factory=replicates.policy)
    tarball: Path | None = None  # the plain tar the `untar` workload extracts
    # Seeds the workload order of each round and fio's random offsets (randseed), so a run
    # with the same seed replays the same offsets; None = drawn at random (and recorded).
    seed: int | None = None

    def as_json(self, seed: int | None) -> BenchOptionsJson:
        """The options as the run's metadata records them (workloads by name; the seed
        drawn when none was given)."""
        return {
            "workloads": [w.name for w in self.workloads],
            "size": self.size,
            "compressibility": self.compressibility,
            "runtime_s": self.runtime_s,
            "iodepth": self.iodepth,
            "numjobs": self.numjobs,
            "metadata_files": self.metadata_files,
            "min_window_s": self.min_window_s,
            "stop": stop_json(self.stop),
            "tarball": str(self.tarball) if self.tarball is not None else None,
            "seed": seed,
        }


def stop_json(policy: ReplicatePolicy) -> StopJson:
    """A stopping rule as a run's metadata records it (its fields, in order)."""
    return {"ci_target": policy.ci_target, "min_runs": policy.min_runs,
            "max_runs": policy.max_runs, "confidence": policy.confidence,
            "power": policy.power}  # fmt: skip


@dataclass
class WorkloadResult:
    workload: Workload
    values: list[float] = field(default_factory=list)
    device_mib_s: list[float] = field(default_factory=list)
    cpu_s_per_gib: list[float] = field(default_factory=list)  # guards/cpu.py, per replicate
    amplification: list[float] = field(default_factory=list)  # writes: device ÷ app bytes
    amplification_model: float | None = None  # what the layout must write per byte
    served_by: list[str] = field(default_factory=list)  # cached tests: guards/reread labels
    warnings: list[str] = field(default_factory=list)
    policy: ReplicatePolicy = field(default_factory=ReplicatePolicy)
    clats: list[Latency | None] = field(default_factory=list)  # per replicate; None: none
    guards: list[JsonObject] = field(default_factory=list)  # per replicate, as stored

    @property
    def summary(self) -> MeanCI:
        """Stein's interval of the replicates (the policy's first-stage sd and df)."""
        return self.policy.summarize(self.values)

    @property
    def served_label(self) -> str:
        """A cached test's note: who served its replicates, by the device bytes."""
        kinds = set(self.served_by)
        if len(kinds) == 1:
            return reread.Served(kinds.pop(), None, "").label
        return "cached by design, unverified" if not kinds else "cache and disks varied"

    def add_warning(self, text: str) -> None:
        if text and text not in self.warnings:
            self.warnings.append(text)


@dataclass
class Timed:
    """One timed fio run and the windows opened around it (closed by the caller)."""

    result: FioResult
    seconds: float
    window: DeviceWindow
    arc: cache.ArcWindow
    clock: cpu.CpuWindow
    warnings: list[str] = field(default_factory=list)  # the window's own (engine/window.py)


@dataclass(frozen=True)
class BlockDevice:
    """A block device measured in place of files: a zvol of a study's pool."""

    path: Path  # its stable name (/dev/zvol/POOL/VOL): an import re-creates the node under it
    size_bytes: int
    block_size: int  # ZFS's block for it (volblocksize): the ARC guard's unit


# Called before a cold read with the data files; returns what it did (for the record).
CacheDefeat = Callable[[list[Path]], CacheDropRecord]


@dataclass(frozen=True)
class Subject:
    """What a session measures: a mounted filesystem, and for a study's trial the pool under
    it (engine/trial.py `subject_for`)."""

    path: Path
    config: str  # stored as the measurement's configuration (bench: the path)
    # The configuration's factor levels as data, stored beside `config` ({}: a bench target).
    levels: Mapping[str, str] = field(default_factory=dict)
    devices: Target | None = None  # None: found from the mount at preflight
    cache_defeat: CacheDefeat | None = None  # None: the page cache drop (guards/cache.py)
    hooks: TrialHooks | None = None  # pool state and pool operations (studies only)
    findings: Findings = field(default_factory=Findings)  # trial-wide, in every measurement
    # What the layout must write per application byte (guards/geometry), or None and why;
    # None here: read from the stack at preflight.
    write_model: geometry.Found | None = None
    # Measured instead of files under `path` (which still holds the job files); None: files.
    block_device: BlockDevice | None = None
    # The filesystem is destroyed with its pool after the session (a study's trial): what
    # the session wrote there is not removed file by file, which on a pool that stopped
    # answering would hang the teardown in unlink() (issue 39).
    disposable: bool = False

    @classmethod
    def directory(cls, path: Path) -> Subject:
        return cls(path, str(path))
