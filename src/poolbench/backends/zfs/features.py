"""What the ZFS in use can do: each feature of the capability list's `zfs` group, judged from
the flavour and release the backend found (`ZfsBackend.check()`) and, where the kernel shows
it, from the module's own files (arcstats, the ARC's ceiling). `poolbench doctor` prints
these; the refusals name the same ids."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from poolbench import capabilities
from poolbench.backends.base import Availability
from poolbench.guards import devices
from poolbench.guards.cache import arcstats_path
from poolbench.planner.rules import reported_release
from poolbench.system import modparams
from poolbench.system.distro import DPKG_STATUS
from poolbench.system.runner import Runner
from poolbench.system.watchdog import CommandTimedOut
from poolbench.zfs import host
from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE
from poolbench.zfs.host import SYS_MODULE, HostZfs


@dataclass(frozen=True)
class Feature:
    id: str
    found: bool
    detail: str  # where it was seen, or why it is missing


def release(version: str) -> tuple[int, ...] | None:
    """(2, 3, 2) from 'zfs-2.3.2-2~bpo12+2'; None for zfs-fuse or text without a release."""
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", reported_release(version))
    return tuple(int(g or 0) for g in m.groups()) if m else None


def _since(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def judge(
    avail: Availability,
    arcstats: Path | None = None,
    parameters: Path = modparams.PARAMETERS,
) -> list[Feature]:
    """Every `zfs` capability, found or not, for the ZFS `avail` describes. `arcstats`
    defaults to where this flavour publishes its counters."""
    zfs_caps = [c for c in capabilities.CAPABILITIES if c.group == capabilities.ZFS]
    if avail.dialect == ZFS_FUSE:  # known by the flavour, its daemon running or not
        counters = arcstats if arcstats is not None else arcstats_path(ZFS_FUSE)
        out = [Feature(c.id, False, f"zfs-fuse (pool version 23) lacks {c.name}")
               for c in zfs_caps if c.id != "arcstats"]  # fmt: skip
        missing = _missing(counters)
        if missing.endswith("is not there"):
            missing += (" (zfs-fuse publishes it only while its daemon runs with /zfs-kstat "
                        "mounted)")  # fmt: skip
        out.append(
            Feature("arcstats", not missing, missing or f"{counters} (while the daemon runs)")
        )
        return out
    if not avail.ok:
        why = "no ZFS answers here (the [zfs] line says why and what adds it)"
        return [Feature(c.id, False, why) for c in zfs_caps]
    return [_openzfs(c, avail.version, arcstats, parameters) for c in zfs_caps]


def _openzfs(
    cap: capabilities.Capability, version: str, arcstats: Path | None, parameters: Path
) -> Feature:
    have = release(version)
    if cap.since and (have is None or have < _since(cap.since)):
        return Feature(cap.id, False, f"needs OpenZFS {cap.since} or newer; this is {version}")
    if cap.id == "arcstats":
        path = arcstats if arcstats is not None else arcstats_path(OPENZFS)
        missing = _missing(path)
        return Feature(cap.id, not missing, missing or str(path))
    if cap.id == "arc-limit":
        value = modparams.read(modparams.ARC_MAX, parameters)
        where = parameters / modparams.ARC_MAX
        return Feature(
            cap.id,
            value is not None,
            f"{where} = {value}" if value is not None else f"{where} is not there",
        )
    return Feature(cap.id, True, f"{version}" + (f" (since {cap.since})" if cap.since else ""))


def _missing(path: Path | None) -> str:
    """Empty where `path` is there, else what stands in the way. A FUSE mount whose daemon
    died (zfs-fuse's /zfs-kstat after a crash) answers every look with an error, where
    Path.exists() raises: that is a missing counter file, said as such, never a crash."""
    if path is None:
        return "no ZFS publishes counters here"
    try:
        return "" if path.exists() else f"{path} is not there"
    except OSError as exc:
        return (
            f"{path} cannot be read ({exc.strerror}): a FUSE mount left by a daemon that has "
            f"ended; `umount -l {_mount_root(path)}` clears it"
        )


def _mount_root(path: Path) -> str:
    """The mount point holding `path` (/zfs-kstat for zfs-fuse's counters)."""
    try:
        return devices.mount_of(path).mountpoint
    except (OSError, RuntimeError):
        return str(path.parent)


@dataclass(frozen=True)
class ZfsCheck:
    """The ZFS this machine has: what answers (the backend's check), every trace of OpenZFS
    (loaded or installed, answering or not), and each feature of the one in use. `silent`:
    a zpool command that did not return within its limit (then `avail` is not ok and says
    so): no package would add what is there and hung."""

    avail: Availability
    host: HostZfs
    features: list[Feature]
    silent: bool = False


def examine(
    runner: Runner,
    sys_module: Path = SYS_MODULE,
    dpkg_status: Path = DPKG_STATUS,
    arcstats: Path | None = None,
    parameters: Path = modparams.PARAMETERS,
) -> ZfsCheck:
    """Read-only: `zpool version`, dpkg's status, /sys and /proc. A ZFS that does not answer
    within the read's limit is a finding, not an error: a pool that hangs is exactly when
    the user asks what this machine has."""
    from poolbench.backends.zfs.backend import ZfsBackend

    try:
        avail, silent = ZfsBackend(runner).check(), False
    except CommandTimedOut as exc:
        avail, silent = Availability(False, _no_answer(exc)), True
    # the host probe's `zpool version` is the one the check asked, where it asked it
    userland: str | None = None  # not asked (zpool and zfs not both on PATH): it asks
    if avail.dialect == OPENZFS:
        userland = avail.version
    elif silent or avail.dialect:
        userland = ""  # asked: not OpenZFS's answer, or no answer in time
    return ZfsCheck(avail, host.probe(runner, sys_module, dpkg_status, userland),
                    judge(avail, arcstats, parameters), silent)  # fmt: skip


def _no_answer(exc: CommandTimedOut) -> str:
    return (
        f"{exc.problem} A pool may be suspended, or stuck on a disk that stopped answering: "
        "`zpool status -x` names it, `dmesg` shows the disk's errors. poolbench creates "
        "nothing until ZFS answers."
    )
