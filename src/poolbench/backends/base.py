"""The backend protocol: what every storage stack offers the trial loop.

check availability → validate(spec) → create(spec) → verify(pool) → [measure] → destroy(pool).
A backend receives devices only as paths the caller made (sparse files, loop devices) or
claimed through the safety layer; it never picks devices itself. Everything it creates is
recorded in the journal *before* it is created, so that teardown after an error, Ctrl-C or a
crash removes it and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, cast, runtime_checkable

from poolbench import capabilities
from poolbench.errors import PoolbenchError, Unsupported, UsageError
from poolbench.guards.geometry import Found
from poolbench.records.cache_drop import CacheDropRecord
from poolbench.records.jsontypes import JsonObject
from poolbench.safety.journal import Journal
from poolbench.system.watchdog import CommandTimedOut
from poolbench.zfs.parse import (
    IostatRow,
    TopVdev,  # the vdev record capabilities speak of
)

if TYPE_CHECKING:
    from poolbench.backends.zvol import VolumeMade
    from poolbench.planner.layout import VdevSpec
    from poolbench.zfs.parse import ResilverStatus, ScrubStatus


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, and how to fix it
    version: str = ""
    dialect: str = ""  # zfs: "openzfs" | "zfs-fuse"


def unavailable(backend: str, reason: str, fix: str = "") -> Unsupported:
    """A backend this machine cannot run (its programs or kernel driver missing), refused
    with the capability `poolbench doctor` lists it as (zfs, btrfs, md)."""
    return capabilities.unsupported(
        backend, f"The {backend} backend is not available: {reason}", fix
    )


@dataclass(frozen=True)
class Vdev:
    """One ZFS top-level vdev of a study layout."""

    kind: str  # stripe | mirror | raidz1 | raidz2 | raidz3 | draid1..3
    width: int
    draid_data: int | None = None
    draid_spares: int = 0

    @property
    def parity(self) -> int:
        if self.kind.startswith("raidz") or self.kind.startswith("draid"):
            return int(self.kind[-1])
        if self.kind == "mirror":
            return self.width - 1
        return 0

    def zpool_words(self) -> list[str]:
        """The vdev keyword for `zpool create` (stripe members take none)."""
        if self.kind == "stripe":
            return []
        if self.kind.startswith("draid"):
            return [f"{self.kind}:{self.draid_data}d:{self.width}c:{self.draid_spares}s"]
        return [self.kind]


def parse_topology(text: str, n_disks: int) -> tuple[Vdev, ...]:
    """A study's ZFS layout ('raidz2', 'raidz1:3+mirror:2', 'draid2:4d:1s:7') on n disks.

    The grammar is the planner's (poolbench.planner.layout), so `plan --layout` and a study
    read a layout alike; sizes come from the study's disks, so a layout here gives widths.
    Errors name the layout and the fix.
    """
    from poolbench.planner.layout import parse_layout

    layout = parse_layout(text, (1,) * n_disks, what="the study")
    return _vdevs(layout.vdevs)


def parse_classes(text: str, n_disks: int) -> tuple[tuple[str, Vdev], ...]:
    """The class vdevs of a study's layout ('raidz2:6 + log mirror:2 + spare 1'), as
    (class word, vdev) in the order written; their disks follow the data vdevs' in
    `PoolSpec.devices`, in that order."""
    from poolbench.planner.layout import parse_layout

    layout = parse_layout(text, (1,) * n_disks, what="the study")
    out: list[tuple[str, Vdev]] = []
    for c in layout.classes:
        (v,) = _vdevs((c.vdev,))
        if out and out[-1][0] == c.cls and v.kind == "stripe" == out[-1][1].kind:
            out[-1] = (c.cls, Vdev("stripe", out[-1][1].width + 1))
        else:
            out.append((c.cls, v))
    return tuple(out)


def _vdevs(specs: tuple[VdevSpec, ...]) -> tuple[Vdev, ...]:
    vdevs: list[Vdev] = []
    for v in specs:
        if v.kind == "disk":  # consecutive stripe members are one stripe group
            if vdevs and vdevs[-1].kind == "stripe":
                vdevs[-1] = Vdev("stripe", vdevs[-1].width + 1)
            else:
                vdevs.append(Vdev("stripe", 1))
        elif v.kind == "mirror":
            vdevs.append(Vdev("mirror", v.width))
        elif v.kind == "raidz":
            vdevs.append(Vdev(f"raidz{v.parity}", v.width))
        else:
            vdevs.append(Vdev(f"draid{v.parity}", v.width, v.draid_data, v.draid_spares))
    return tuple(vdevs)


@dataclass(frozen=True)
class PoolSpec:
    """What to build: which backend, which layout, on which devices, with which properties."""

    backend: str  # zfs | btrfs | md | directory
    layout: str  # zfs topology, btrfs profile (raid1, ...), md level (raid5, ...)
    devices: tuple[str, ...]
    name: str  # pool / filesystem label, unique per trial (pb-<run>-<n>)
    mount_root: Path  # where mountpoints are made
    pool_options: Mapping[str, str] = field(default_factory=dict)  # zfs: ashift
    fs_options: Mapping[str, str] = field(default_factory=dict)  # dataset props, mount opts, fs
    # zfs: what the workloads run on, `target` (dataset | zvol) and the zvol's `volblocksize`
    volume: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Pool:
    spec: PoolSpec
    mountpoint: Path
    # Kernel names of the block devices that carry the pool's I/O (for the device guard);
    # empty when the members are plain files.
    block_devices: list[str]
    described: JsonObject = field(default_factory=dict)  # read back from the stack


class Backend(Protocol):
    name: str

    def check(self) -> Availability: ...

    def validate(self, spec: PoolSpec) -> None:
        """Refuse an impossible or unsupported spec with a UsageError, before anything exists."""

    def create(self, spec: PoolSpec, journal: Journal) -> Pool: ...

    def verify(self, pool: Pool) -> list[str]:
        """Differences between what was asked and what the stack reports; empty if none."""

    def drop_cache(self, pool: Pool) -> CacheDropRecord:
        """Empty every cache of the pool before a cold read; returns what it did and whether
        that was verified (its `verified`; records/cache_drop.py)."""

    def write_model(self, pool: Pool, block: int | None) -> Found:
        """What one application write costs the devices the pool's measurements count
        (guards/geometry), from what the stack read back; `block`: a zvol's volblocksize,
        written in place of the dataset's recordsize."""

    def stopped_answering(self, pool: Pool, failure: PoolbenchError) -> str | None:
        """`failure`, a command of the trial that failed or ran past its time limit, read
        with what the stack says of the pool: why the pool stopped answering, or None when
        it still answers (the failure is then the trial's own)."""

    def destroy(self, pool: Pool, journal: Journal) -> None: ...


# -- optional capabilities ---------------------------------------------------------------------
# What only some stacks can do, each a small protocol named for the job; the trial loop asks
# `capability(backend, SupportsX)` instead of testing for a concrete backend class, so a stack
# that learns the job (md's replace, btrfs's compression read-back) needs no change there.


@runtime_checkable
class SupportsVolumes(Protocol):
    """A block device made in the pool (a ZFS zvol) for the workloads to measure."""

    def create_volume(self, pool: Pool, working_set: int) -> VolumeMade: ...

    def volume_space(self, pool: Pool) -> dict[str, int]: ...


@runtime_checkable
class SupportsDiskReplace(Protocol):
    """A member taken offline and replaced, the resilver (and a verifying scrub) waited for."""

    def data_vdevs(self, pool: Pool) -> list[TopVdev]: ...

    def offline(self, pool: Pool, leaf: str) -> None: ...

    def replace(self, pool: Pool, old: str, new: str) -> None: ...

    def wait_resilver(self, pool: Pool, timeout: float = ...) -> ResilverStatus: ...

    def wait_scrub(self, pool: Pool, timeout: float = ..., start: float = ...) -> ScrubStatus: ...


@runtime_checkable
class SupportsExpansion(Protocol):
    """A disk attached to a parity vdev while the pool is in use (RAIDZ expansion)."""

    def data_vdevs(self, pool: Pool) -> list[TopVdev]: ...

    def usable_now(self, pool: Pool) -> int | None: ...

    def allocated(self, pool: Pool) -> int | None: ...

    def expand(self, pool: Pool, vdev: str, new: str) -> tuple[float, int | None]: ...


@runtime_checkable
class SupportsAccounting(Protocol):
    """The pool's own accounting read after a measurement: compression achieved, per-vdev
    I/O, what each allocation class holds, what a volume is charged."""

    def sync_txg(self, pool: Pool) -> None: ...

    def compressratio(self, pool: Pool) -> str | None: ...

    def volume_space(self, pool: Pool) -> dict[str, int]: ...

    def iostat_snapshot(self, pool: Pool) -> list[IostatRow] | None: ...

    def class_alloc(
        self, pool: Pool, iostat: list[IostatRow]
    ) -> tuple[dict[str, int], dict[str, int]]: ...


@runtime_checkable
class SupportsCompressionReadBack(Protocol):
    """The compression the stack applies, as it reports it (not as it was asked)."""

    def compression_setting(self, pool: Pool) -> str | None: ...


@runtime_checkable
class SupportsFragmentation(Protocol):
    """The stack's own free-space fragmentation figure, a percent (backends/fragmentation.py),
    with how it was read, or None and why there is none."""

    def free_fragmentation(self, pool: Pool) -> tuple[float | None, str]: ...


C = TypeVar("C")


def file_system_silent(pool: Pool, failure: PoolbenchError) -> str | None:
    """A stack with no health of its own to ask (btrfs, md, a directory): a command that
    ran past its time limit on it means its file system did not answer."""
    if isinstance(failure, CommandTimedOut):
        return f"its file system at {pool.mountpoint} did not answer"
    return None


def capability(backend: Backend, kind: Callable[..., C]) -> C | None:
    """`backend` as `kind` (one of the Supports* protocols above) if it offers that, else None.

    `kind` is typed as a callable because mypy refuses a protocol where `type[C]` is asked."""
    return cast(C, backend) if isinstance(backend, cast(type, kind)) else None


def require(backend: Backend, kind: Callable[..., C], cannot: str, fix: str) -> C:
    """`backend` as `kind`, or a UsageError: "The md backend cannot `cannot`." and `fix`."""
    found = capability(backend, kind)
    if found is None:
        raise UsageError(f"The {backend.name} backend cannot {cannot}.", fix)
    return found
