"""Verify at the device: which block devices hold a path, and what they really transferred.

For each measurement poolbench reads the byte counters of every device that holds the target
(`/sys/class/block/NAME/stat`, sectors of 512 bytes) before and after, and compares device
bytes with the bytes fio moved. A read the devices did not serve came from RAM (or from an
unwritten, sparse range); a write the devices did not absorb by the end of the window was not
durable (or was compressed away). Where no block device holds the target (tmpfs, FUSE without
a known pool), the figure is marked unverified.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from poolbench.guards import amplification, blockdev, reread
from poolbench.guards.amplification import WriteModel
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import ops

SYS_BLOCK = Path("/sys/class/block")
SECTOR = 512
# Device bytes may fall short of application bytes by this much before a figure is flagged
# (metadata and readahead move the other way; a cache hit or lost fsync moves far more).
SHORTFALL_TOLERANCE = 0.10

NO_DEVICE_FS = {"tmpfs", "ramfs", "proc", "sysfs", "devtmpfs", "overlay", "nfs", "nfs4", "cifs"}


@dataclass(frozen=True)
class MountInfo:
    mountpoint: str
    fstype: str
    source: str
    major_minor: str
    options: str = ""  # the mount's options, then the filesystem's own (mountinfo fields 6, 11)

    @property
    def is_zfs(self) -> bool:
        """A ZFS dataset: OpenZFS mounts as "zfs"; zfs-fuse as a FUSE mount ("fuse.zfs", or
        plain "fuse") whose source is the dataset name, not a path."""
        return self.fstype in ("zfs", "fuse.zfs") or (
            self.fstype == "fuse" and not self.source.startswith("/")
        )

    @property
    def zfs_pool(self) -> str:
        """The pool of a ZFS mount's dataset ('tank/a/b' → 'tank')."""
        return self.source.split("/")[0]


@dataclass
class Target:
    """Where a path lives and which block devices carry its I/O."""

    path: str
    mount: MountInfo
    devices: list[str] = field(default_factory=list)  # kernel names, e.g. loop3, sda1
    how: str = ""  # how the devices were found
    unverified_reason: str = ""

    @property
    def verifiable(self) -> bool:
        return bool(self.devices)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _unescape(field_text: str) -> str:
    return field_text.encode().decode("unicode_escape") if "\\" in field_text else field_text


def mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[MountInfo]:
    result = []
    for line in mountinfo.read_text().splitlines():
        left, _, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 2:
            continue
        options = lf[5] + ("," + rf[2] if len(rf) > 2 else "")
        result.append(MountInfo(_unescape(lf[4]), rf[0], _unescape(rf[1]), lf[2], options))
    return result


def mount_of(path: Path, table: Sequence[MountInfo] | None = None) -> MountInfo:
    real = os.path.realpath(path)
    best: MountInfo | None = None
    for m in table if table is not None else mounts():
        mp = m.mountpoint
        if (real == mp or real.startswith(mp.rstrip("/") + "/")) and (
            best is None or len(mp) >= len(best.mountpoint)
        ):
            best = m  # later entries in mountinfo shadow earlier ones at the same point
    if best is None:
        raise RuntimeError(f"no mount found for {real}")
    return best


def block_name_of(dev_path: str) -> str | None:
    """/dev/mapper/x or /dev/loop0 → kernel name (dm-0, loop0), if it is a block device."""
    return blockdev.kernel_name(dev_path)


def _btrfs_devices(mount: MountInfo) -> list[str]:
    """All member devices of the btrfs filesystem whose source device is `mount.source`."""
    src = block_name_of(mount.source)
    root = Path("/sys/fs/btrfs")
    if not src or not root.is_dir():
        return blockdev.underlying(src) if src else []
    for fs in root.iterdir():
        devs = fs / "devices"
        if devs.is_dir():
            names = sorted(p.name for p in devs.iterdir())
            if src in names:  # members may be dm or md devices: count the disks beneath
                return [u for n in names for u in blockdev.underlying(n)]
    return blockdev.underlying(src)


def _zfs_devices(runner: Runner, pool: str) -> tuple[list[str], str]:
    """Underlying block devices of a ZFS pool's leaf vdevs, from `zpool status`."""
    try:
        status = ops.status_with_paths(runner, pool)
    except (CommandError, OSError) as exc:
        return [], f"could not read the pool's vdevs ({exc})"
    devs: list[str] = []
    unresolved: list[str] = []
    for word in status.leaves:
        path = blockdev.leaf_word_path(word)
        found = blockdev.counter_devices([path]) if path else []
        devs.extend(d for d in found if d not in devs)
        if not found:
            unresolved.append(word)
    if unresolved and not devs:
        return [], (
            f"the pool's vdevs ({', '.join(unresolved)}) are plain files or names that "
            "resolve to no block device"
        )
    return devs, ""


def resolve(path: Path, runner: Runner) -> Target:
    m = mount_of(path)
    t = Target(str(path), m)
    if m.is_zfs:
        pool = m.zfs_pool
        t.devices, reason = _zfs_devices(runner, pool)
        t.how = f"members of ZFS pool {pool}"
        t.unverified_reason = reason
    elif m.fstype == "btrfs":
        t.devices = _btrfs_devices(m)
        t.how = "btrfs member devices (/sys/fs/btrfs)"
    elif m.fstype in NO_DEVICE_FS or m.fstype.startswith("fuse"):
        t.unverified_reason = f"{m.fstype} has no block device to count bytes on"
    else:
        name = block_name_of(m.source)
        if name:
            t.devices = blockdev.underlying(name)  # dm/md: the disks beneath
            t.how = f"the filesystem's source device {m.source}"
        else:
            t.unverified_reason = (
                f"source '{m.source}' of the {m.fstype} mount is not a block device"
            )
    if not t.devices and not t.unverified_reason:
        t.unverified_reason = "no block device found"
    return t


@dataclass(frozen=True)
class Counters:
    read_bytes: int
    write_bytes: int
    # Requests completed: a random-read figure below its model is explained by how many
    # device reads each application read cost (metadata, read-ahead), not by bytes.
    read_ios: int = 0
    write_ios: int = 0


def read_counters(devices: Sequence[str], sys_block: Path = SYS_BLOCK) -> dict[str, Counters]:
    result = {}
    for name in devices:
        fields = (sys_block / name / "stat").read_text().split()
        # Documentation/block/stat.rst: fields 1 and 5 = reads and writes completed,
        # 3 and 7 = sectors read and written.
        result[name] = Counters(int(fields[2]) * SECTOR, int(fields[6]) * SECTOR,
                                int(fields[0]), int(fields[4]))  # fmt: skip
    return result


def delta(before: dict[str, Counters], after: dict[str, Counters]) -> Counters:
    r = sum(after[n].read_bytes - before[n].read_bytes for n in before)
    w = sum(after[n].write_bytes - before[n].write_bytes for n in before)
    return Counters(r, w)


@dataclass(frozen=True)
class DeviceCheck:
    device_bytes: int
    app_bytes: int
    device_mib_s: float
    ratio: float  # device bytes / application bytes
    warning: str  # empty when the devices account for the application's bytes
    note: str = ""  # a write that cost much more than its layout's model
    amplification: dict[str, object] | None = None  # writes: measured vs modelled (stored)


def check(
    direction: str,
    app_bytes: int,
    io: Counters,
    seconds: float,
    *,
    cached_by_design: bool = False,
    compressibility: int = 0,
    model: WriteModel | None = None,
    unmodelled: str = "",
    io_size: int | None = None,
    excess_why: str = "",
    short_why: str = "",
) -> DeviceCheck:
    """Device bytes against the application's. A write is judged against what its layout must
    write (`model`, guards/amplification); without one (`unmodelled` says why), against one
    copy, which a redundant layout passes even when much of the data never reached a disk."""
    if direction == "mixed":  # a random read/write mix: both halves reach the devices
        dev = io.read_bytes + io.write_bytes
    else:
        dev = io.read_bytes if direction == "read" else io.write_bytes
    ratio = dev / app_bytes if app_bytes else 0.0
    mib_s = dev / seconds / (1024 * 1024) if seconds > 0 else 0.0
    if direction == "write":
        return _check_write(
            dev, app_bytes, mib_s, model, unmodelled, compressibility, io_size,
            (excess_why, short_why),
        )  # fmt: skip
    if cached_by_design and direction == "read":  # labelled by who served it (guards/reread)
        return DeviceCheck(dev, app_bytes, mib_s, ratio, reread.served(app_bytes, dev).warning)
    if direction == "meta" or ratio >= 1 - SHORTFALL_TOLERANCE:
        return DeviceCheck(dev, app_bytes, mib_s, ratio, "")
    pct = f"{ratio:.0%}"
    stored = 1 - compressibility / 100  # the share of the bytes a compressing pool keeps
    if compressibility and ratio >= stored * (1 - SHORTFALL_TOLERANCE):
        # Not a cache: the data was stored compressed, so the disks hold (and serve) less.
        warning = (
            f"the devices served only {pct} of the bytes read, as the declared "
            f"{compressibility}% compressibility lets a compressing filesystem store "
            f"{stored:.0%} of them: the figure counts decompressed bytes and is faster "
            "than the disks."
        )
        return DeviceCheck(dev, app_bytes, mib_s, ratio, warning)
    warning = (
        f"the devices served only {pct} of the bytes read: the rest came from a cache "
        "or from never-written ranges, so this figure measures RAM, not the disks. Use a "
        "working set ≥ 2× RAM (drop --size) and check the cache drop; on ZFS the ARC "
        "survives drop_caches (a study via `poolbench run` exports and imports the pool)."
    )
    return DeviceCheck(dev, app_bytes, mib_s, ratio, warning)


def _check_write(
    dev: int,
    app_bytes: int,
    mib_s: float,
    model: WriteModel | None,
    unmodelled: str,
    compressibility: int,
    io_size: int | None,
    why: tuple[str, str] = ("", ""),
) -> DeviceCheck:
    """`why`: the workload's own reasons for writing more and for writing less (see judge)."""
    used = model or amplification.single_device("an unmodelled layout")
    v = amplification.judge(used, app_bytes, dev, compressibility=compressibility,
                            io_size=io_size, excess_why=why[0], short_why=why[1])  # fmt: skip
    record: dict[str, object] = v.as_dict()
    if model is not None:
        record["model"] = model.as_dict()
        record["expected_bytes"] = model.expected_bytes(app_bytes)
    else:
        record["model"] = None
        record["unmodelled"] = unmodelled or "the layout was not read"
    return DeviceCheck(dev, app_bytes, mib_s, v.amplification, v.warning, v.note, record)
