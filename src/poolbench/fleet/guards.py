"""The guards of one host's measurement, as far as a fio server allows (DESIGN.md section 3).

Applied remotely because they live in the job file: data pattern (fresh random buffers, never
zeros), durable writes (end_fsync), fio's own cache invalidation before each job
(invalidate=1, posix_fadvise). Partly applied: the device check, from fio's per-server
`disk_util` (I/O counts and busy time of the disks fio maps the target to; no byte counts,
nothing for tmpfs, network or FUSE filesystems). Not applied, and recorded and shown as such
for each host: a verified cache drop (no fincore or drop_caches remotely, and ZFS's ARC
ignores fadvise), and the working set against the host's RAM (fio does not report RAM; --size
is required and taken as given). Pure: functions of what fio reported.
"""

from __future__ import annotations

from dataclasses import dataclass

from poolbench.engine.measure_checks import durability
from poolbench.fleet.clientout import DiskUtil, HostFigures
from poolbench.records.findings import (
    CacheFinding,
    DataFinding,
    DeviceFinding,
    Findings,
    FioFinding,
)
from poolbench.workloads.workload import Workload

CACHE_NOTE = (
    "cache drop not verified: fio's invalidate=1 (posix_fadvise) is all that runs on a fio "
    "server; poolbench cannot run fincore or drop_caches there, and ZFS's ARC ignores fadvise"
)
RAM_NOTE = (
    "working set vs RAM not checked: fio does not report the host's RAM; --size is taken as "
    "given, so reads may be served from that host's cache if --size is below 2x its RAM"
)
NO_DISKS_NOTE = (
    "device check not applied: fio reported no disk statistics for the target (tmpfs, a "
    "network or FUSE filesystem, or a device fio cannot map)"
)
DISK_COUNTS_NOTE = (
    "device bytes not verifiable: fio's disk_util gives I/O counts and busy time, not bytes; "
    "only 'the disks saw no I/O at all' is detected"
)
ALWAYS_NOT_APPLIED = (CACHE_NOTE, RAM_NOTE)  # on every host, from the start


@dataclass(frozen=True)
class DeviceCheck:
    finding: DeviceFinding
    warning: str  # "" when the disks saw what the figure needs
    not_applied: str  # the host's note on what this check cannot do there


def device_check(w: Workload, label: str, figs: HostFigures, disks: list[DiskUtil]) -> DeviceCheck:
    """What fio's disk_util on the host says: nothing at all (tmpfs, FUSE, ...), or I/O
    counts that can show the disks saw no I/O, which a figure served by a cache gives away."""
    if not disks:
        finding = DeviceFinding(more={"not_applied": NO_DISKS_NOTE, "disk_util": []})
        return DeviceCheck(finding, f"host {label}: {NO_DISKS_NOTE}", NO_DISKS_NOTE)
    reads = sum(d.read_ios for d in disks)
    writes = sum(d.write_ios for d in disks)
    finding = DeviceFinding(
        more={"disk_util": [d.as_dict() for d in disks], "bytes": DISK_COUNTS_NOTE}
    )
    names = ", ".join(d.name for d in disks)
    warning = ""
    if w.direction == "read" and figs.io_bytes and reads == 0:
        warning = (
            f"host {label}: its disks ({names}) served no read at all: this figure measures "
            "that host's cache, not its disks"
        )
        if w.cached_by_design:
            warning += ", as this cached test intends"
    elif w.direction == "write" and figs.io_bytes and writes == 0:
        warning = (
            f"host {label}: its disks ({names}) absorbed no write at all: the figure is "
            "faster than the disks"
        )
    return DeviceCheck(finding, warning, DISK_COUNTS_NOTE)


def cache_check(w: Workload, label: str) -> tuple[CacheFinding, str]:
    """A fio server can only be asked to fadvise: a cold read's cache drop is unverified.
    Returns the finding and its warning ("" for none)."""
    if w.cached_by_design:
        return CacheFinding("kept on purpose (cached test)", None), ""
    if w.cold:
        finding = CacheFinding(
            "fio invalidate=1 on the server", False, more={"not_applied": CACHE_NOTE}
        )
        return finding, f"host {label}: {CACHE_NOTE}"
    return CacheFinding("n/a", None), ""


@dataclass(frozen=True)
class HostContext:
    """What one host's findings say beside its figures: the run's settings and the fios."""

    compressibility: int
    size: int
    fio_version: str | None  # the host's server
    controller_version: str
    hosts_together: int  # the hosts started in the same controller run


def findings(
    w: Workload, label: str, figs: HostFigures, ctx: HostContext, device: DeviceFinding,
    cache: CacheFinding,
) -> Findings:  # fmt: skip
    """One host's measurement record of its guards (the same durability rule as bench)."""
    return Findings(
        data=DataFinding(ctx.compressibility),
        durability=durability(w),
        cache=cache,
        device=device,
        fio=FioFinding(
            ctx.fio_version,
            figs.within_run_bw_dev,
            figs.lat_mean_ns,
            controller_version=ctx.controller_version,
        ),
        other={
            "working_set": {"bytes": ctx.size, "not_applied": RAM_NOTE},
            "fleet": {"host": label, "hosts_started_together": ctx.hosts_together},
        },
    )
