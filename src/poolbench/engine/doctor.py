"""`poolbench doctor`: every capability of poolbench/capabilities.py, found on this machine or
not, with what provides it, what its absence disables and the one command that adds it here.

Read-only: programs on PATH and their `--version`, files under /sys, /proc and /dev, dpkg's
status, the backends' own checks (a dry-run runner, so nothing that changes the machine
runs). A command is suggested only where one package install adds the part, always with
`apt-get install --no-remove` (apt refuses rather than remove a package), and zfs-fuse is
never suggested where OpenZFS is loaded or installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from poolbench import capabilities
from poolbench.backends.base import Availability
from poolbench.backends.btrfs import BtrfsBackend
from poolbench.backends.md import MdBackend
from poolbench.backends.zfs import features
from poolbench.capabilities import Capability
from poolbench.errors import PoolbenchError
from poolbench.study.builtin.fs_compare import DEFAULT_TARBALL
from poolbench.system import distro, modparams, pgserver, throttle
from poolbench.system.runner import Runner
from poolbench.system.watchdog import CommandTimedOut
from poolbench.workloads import fio


@dataclass(frozen=True)
class Where:
    """The machine's files doctor reads (tests point them at a made-up machine)."""

    sys_module: Path = Path("/sys/module")
    dpkg_status: Path = distro.DPKG_STATUS
    os_release: Path = distro.OS_RELEASE
    arcstats: Path | None = None  # None: where the ZFS in use publishes them
    parameters: Path = modparams.PARAMETERS
    blkio: Path = throttle.BLKIO
    pg_lib: Path = pgserver.PG_LIB
    tarball: Path = Path(DEFAULT_TARBALL)
    loop_control: Path = Path("/dev/loop-control")
    scratch: Path = Path("/var/tmp/poolbench")
    proc_mdstat: Path = Path("/proc/mdstat")
    euid: int = field(default_factory=os.geteuid)


@dataclass(frozen=True)
class Finding:
    id: str
    found: bool
    detail: str  # the version or place found, or why it is missing
    # the one command that adds it here: None = its packages' install, "" = no one command
    # adds it (a kernel driver, a ZFS release: `detail` says what would); always "" if found
    add: str | None = None

    @property
    def capability(self) -> Capability:
        return capabilities.get(self.id)


@dataclass(frozen=True)
class Checkup:
    findings: list[Finding]
    zfs: features.ZfsCheck
    distribution: str
    apt: bool
    root: bool

    def get(self, cap_id: str) -> Finding:
        return next(f for f in self.findings if f.id == cap_id)

    @property
    def zfs_in_use(self) -> str:
        """openzfs | zfs-fuse | none: the ZFS poolbench would build pools with."""
        a = self.zfs.avail
        return a.dialect if a.dialect and self.get("zfs").found else "none"

    @property
    def core_missing(self) -> list[str]:
        """fio, and a ZFS or at least a directory to bench: what doctor's exit code is about."""
        out = [] if self.get("fio").found else ["fio"]
        if not self.get("zfs").found and not self.get("directory").found:
            out.append("zfs")
        return out


def _programs(cap_id: str) -> Callable[[Runner, Where], Finding]:
    """A capability that is its programs (the list's `programs`), all on PATH."""
    programs = capabilities.get(cap_id).programs

    def probe(runner: Runner, where: Where) -> Finding:
        missing = [p for p in programs if runner.which(p) is None]
        if missing:
            return Finding(cap_id, False, f"{', '.join(missing)} not on PATH")
        return Finding(cap_id, True, ", ".join(programs))

    return probe


def _fio(runner: Runner, where: Where) -> Finding:
    if runner.which("fio") is None:
        return Finding("fio", False, "fio is not on PATH")
    try:
        return Finding("fio", True, fio.fio_version(runner))
    except PoolbenchError as exc:
        return Finding("fio", False, exc.problem)


def _directory(runner: Runner, where: Where) -> Finding:
    d = where.scratch
    while not d.exists() and d != d.parent:
        d = d.parent
    if os.access(d, os.W_OK | os.X_OK):
        return Finding("directory", True, f"{where.scratch} can be written (the default "
                       "--scratch-dir; `bench PATH` takes any mounted directory)")  # fmt: skip
    return Finding("directory", False, f"{d} cannot be written by this user")


def _root(runner: Runner, where: Where) -> Finding:
    if where.euid == 0:
        return Finding("root", True, "running as root")
    return Finding(
        "root",
        False,
        "not running as root",
        "sudo poolbench ... (plan, disks, report and --dry-run work without)",
    )


def _loops(runner: Runner, where: Where) -> Finding:
    if runner.which("losetup") is None:
        return Finding("loop-devices", False, "losetup is not on PATH")
    if not where.loop_control.exists():
        return Finding("loop-devices", False, f"{where.loop_control} is absent: the kernel's "
                       "loop driver is not loaded", "modprobe loop")  # fmt: skip
    return Finding("loop-devices", True, f"losetup, {where.loop_control}")


def _throttle(runner: Runner, where: Where) -> Finding:
    why = throttle.unavailable(where.blkio)
    if why:
        return Finding("blkio-throttle", False, why + ". Boot with the v1 blkio hierarchy "
                       "(systemd.unified_cgroup_hierarchy=0, systemd 255 and older), or where "
                       "no cgroup hierarchy is mounted, mount -t cgroup -o blkio blkio "
                       f"{where.blkio}", "")  # fmt: skip
    return Finding("blkio-throttle", True, str(where.blkio))


def _postgresql(runner: Runner, where: Where) -> Finding:
    try:
        return Finding("postgresql", True, str(pgserver.bindir(where.pg_lib)))
    except PoolbenchError as exc:
        return Finding("postgresql", False, exc.problem.replace("; nothing was created.", ""))


def _backend(
    cap_id: str, check: Callable[[Runner, Where], Availability], program: str
) -> Callable[[Runner, Where], Finding]:
    """A stack the backend checks: its program missing is added by its package; a kernel
    without the driver is not (the reason says what would: `modprobe`, another kernel)."""

    def probe(runner: Runner, where: Where) -> Finding:
        a = check(runner, where)
        if a.ok:
            return Finding(cap_id, True, a.version)
        if runner.which(program) is None:
            return Finding(cap_id, False, a.reason)
        return Finding(cap_id, False, a.reason, "")

    return probe


def _tarball(runner: Runner, where: Where) -> Finding:
    if where.tarball.is_file() and os.access(where.tarball, os.R_OK):
        return Finding("untar-tarball", True, str(where.tarball))
    return Finding("untar-tarball", False, f"{where.tarball} is not there (fs-compare's "
                   "default --tarball)")  # fmt: skip


PROBES: dict[str, Callable[[Runner, Where], Finding]] = {
    "fio": _fio,
    "directory": _directory,
    "root": _root,
    "loop-devices": _loops,
    "block-tools": _programs("block-tools"),
    "partitions": _programs("partitions"),
    "blkio-throttle": _throttle,
    "block-tracing": _programs("block-tracing"),
    "postgresql": _postgresql,
    "btrfs": _backend("btrfs", lambda r, w: BtrfsBackend(r).check(), "mkfs.btrfs"),
    "xfs": _programs("xfs"),
    "ext4": _programs("ext4"),
    "md": _backend("md", lambda r, w: MdBackend(r, proc_mdstat=w.proc_mdstat).check(), "mdadm"),
    "untar-tarball": _tarball,
}


def add_command(packages: tuple[str, ...], apt: bool, root: bool) -> str:
    """The one command that installs `packages` here, never removing one."""
    if not packages:
        return ""
    if not apt:
        return f"install {', '.join(packages)} (Debian's names) with this system's package manager"
    return ("" if root else "sudo ") + "apt-get install --no-remove " + " ".join(packages)


def _distribution(where: Where) -> tuple[str, bool]:
    info = distro.os_release(where.os_release)
    family = {info.get("ID", ""), *info.get("ID_LIKE", "").split()}
    return info.get("PRETTY_NAME", "unknown"), bool(family & {"debian", "ubuntu"})


def examine(runner: Runner, where: Where | None = None) -> Checkup:
    """Every capability, probed read-only (give a dry-run runner: nothing mutating runs)."""
    where = where or Where()
    distribution, apt = _distribution(where)
    root = where.euid == 0
    zfs = features.examine(runner, where.sys_module, where.dpkg_status, where.arcstats,
                           where.parameters)  # fmt: skip
    found = {f.id: Finding(f.id, f.found, f.detail) for f in zfs.features}
    found["zfs"] = _zfs(zfs, apt, root)
    for cap_id, probe in PROBES.items():
        try:
            found[cap_id] = probe(runner, where)
        except CommandTimedOut as exc:  # a program that hangs is reported, never fatal here
            found[cap_id] = Finding(cap_id, False, exc.problem, "")
    findings = []
    for cap in capabilities.CAPABILITIES:
        f = found[cap.id]
        if f.found or f.add is None:
            f = replace(f, add="" if f.found else add_command(cap.packages, apt, root))
        findings.append(f)
    return Checkup(findings, zfs, distribution, apt, root)


def _zfs(zfs: features.ZfsCheck, apt: bool, root: bool) -> Finding:
    """The core ZFS: the one that answers (zfs-fuse counts while its daemon is down: a run
    starts it), else how to get the host's own; zfs-fuse only where no OpenZFS is found."""
    a, host = zfs.avail, zfs.host
    if zfs.silent:
        return Finding("zfs", False, a.reason, "")
    if a.ok or (a.dialect == "zfs-fuse" and host.fuse):
        daemon = "" if a.ok else " (its daemon is not running: each run starts and stops it)"
        return Finding("zfs", True, f"{a.version}{daemon}")
    sudo = "" if root else "sudo "
    if host.openzfs:
        traces = "; ".join(host.traces())
        if host.packages and not host.module:
            return Finding("zfs", False, f"{a.reason} Found: {traces}.", f"{sudo}modprobe zfs")
        return Finding(
            "zfs",
            False,
            f"{a.reason} Found: {traces}.",
            add_command(("zfsutils-linux",), apt, root) if not a.version else "",
        )
    return Finding("zfs", False, f"{a.reason} This machine has no ZFS: install its OpenZFS "
                   "(Debian: zfsutils-linux and zfs-dkms from contrib; Ubuntu: zfsutils-linux). "
                   "zfs-fuse (pool version 23, user space) is the fallback for a kernel that "
                   "cannot load OpenZFS: scripts/install.sh --zfs-fuse.",
                   add_command(("zfsutils-linux", "zfs-dkms"), apt, root))  # fmt: skip
