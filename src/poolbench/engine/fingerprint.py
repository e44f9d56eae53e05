"""Take the fingerprint of what a run measures (records/fingerprint.py): read-only probes of
the machine, the pool behind the measured path and its disks.

Everything is read back, never taken from what was asked: the pool behind a `bench PATH` is
found from the mount that holds PATH (a ZFS dataset's pool, a btrfs filesystem, a device);
its layout from `zpool status` (or `btrfs filesystem df`), its properties from `zpool get
all` and `zfs get all` (the settable ones: read-only statistics such as `free` or `used`
change with every run and are kept apart, as fill and fragmentation), each disk from
/sys/class/block. What cannot be read is None with the reason in `notes`. No probe here
writes anything; each goes through the Runner with its time limit, and a failed probe is a
note, never a failed run.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from poolbench import __version__
from poolbench.backends import fragmentation
from poolbench.backends.btrfs import parse_df
from poolbench.backends.zfs.readback import shape_text
from poolbench.guards.devices import MountInfo, Target, mount_of
from poolbench.records.fingerprint import Disk, Fingerprint, Pool
from poolbench.system import probes, throttle
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import ops, parse
from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE

SYS_MODULE_ZFS = Path("/sys/module/zfs/version")
# A settable property's source; read-only statistics (free, used, guid, …) have "-".
_SETTABLE = ("default", "local", "inherited", "temporary", "received")
# Identities, not settings (zfs-fuse gives `guid` the source "default"): another pool, not a
# change of the same pool's configuration.
_IDENTITY = {"guid", "load_guid", "createtxg", "objsetid", "creation"}


def take(
    runner: Runner, target: Path, devices: Target | None, fio_version: str,
    mount: MountInfo | None = None,
) -> Fingerprint:  # fmt: skip
    """The fingerprint of `target` now (module doc); `devices` as the session resolved them,
    `mount` the mount that holds `target` (None: looked up)."""
    notes: list[str] = []
    mount = mount or mount_of(target)
    pool, zfs = _pool(runner, target, mount, notes)
    uname = os.uname()
    arc_max = arc_size = None
    if mount.is_zfs:
        arc_max, arc_size = probes.arcstat("c_max"), probes.arcstat("size")
        if arc_max is None:
            notes.append("ARC: no arcstats to read (zfs-fuse keeps its ARC to itself)")
    return Fingerprint(
        path=str(target),
        poolbench=__version__,
        kernel=f"{uname.sysname} {uname.release}",
        hostname=platform.node(),
        pool=pool,
        disks=_disks(devices, notes),
        zfs=zfs,
        fio=fio_version or None,
        ram_bytes=probes.ram_bytes(),
        arc_max_bytes=arc_max,
        arc_size_bytes=arc_size,
        notes=tuple(notes),
    )


def _space(target: Path) -> tuple[int | None, int | None]:
    """(size, used) in bytes of the filesystem holding `target`, as `df` counts them."""
    try:
        st = os.statvfs(target)
    except OSError:
        return None, None
    return st.f_blocks * st.f_frsize, (st.f_blocks - st.f_bfree) * st.f_frsize


def _pool(runner: Runner, target: Path, m: MountInfo, notes: list[str]) -> tuple[Pool, str | None]:
    size, used = _space(target)
    if m.is_zfs:
        return _zfs_pool(runner, m, size, used, notes)
    layout = ""
    if m.fstype == "btrfs":
        layout = _btrfs_layout(runner, m, notes)
        notes.append(f"fragmentation: {fragmentation.BTRFS_NONE}")
    else:
        notes.append(f"fragmentation: not read for {m.fstype}")
    options = dict(_option(o) for o in m.options.split(",") if o)
    return Pool(m.fstype, m.source, None, layout, {}, options, size, used), None


def _option(word: str) -> tuple[str, str]:
    key, _, value = word.partition("=")
    return key, value or "on"


def _btrfs_layout(runner: Runner, m: MountInfo, notes: list[str]) -> str:
    try:
        df = runner.run(["btrfs", "filesystem", "df", "-b", m.mountpoint], mutates=False)
    except (CommandError, OSError) as exc:
        notes.append(f"layout: `btrfs filesystem df` failed ({exc})")
        return ""
    return ", ".join(f"{k.lower()} {v}" for k, v in sorted(parse_df(df.stdout).items()))


def _zfs_version(runner: Runner, dialect: str) -> str | None:
    if dialect == OPENZFS:
        userland = ops.openzfs_version(runner)
        try:
            module = SYS_MODULE_ZFS.read_text().strip()
        except OSError:
            module = ""
        return f"{userland or '?'}" + (f" (module {module})" if module else "")
    pool_version = ops.fuse_pool_version(runner)
    return f"zfs-fuse (pool version {pool_version})" if pool_version else "zfs-fuse"


def _zfs_pool(
    runner: Runner, m: MountInfo, size: int | None, used: int | None, notes: list[str]
) -> tuple[Pool, str | None]:
    dialect = OPENZFS if m.fstype == "zfs" else ZFS_FUSE
    name = m.zfs_pool
    pool_props = ops.pool_props_all(runner, name, dialect)
    if not pool_props:
        notes.append(f"pool properties: `zpool get all {name}` could not be read")
    try:
        ds_props = ops.dataset_props(runner, m.source, ["all"])
    except (CommandError, OSError) as exc:
        ds_props = {}
        notes.append(f"dataset properties: `zfs get all {m.source}` could not be read ({exc})")
    frag = fragmentation.zfs_percent(pool_props.get("fragmentation", {}).get("value"))
    if frag is None:
        notes.append(
            f"fragmentation: {fragmentation.ZFS_FUSE_NONE}" if dialect == ZFS_FUSE
            else "fragmentation: the pool reports none yet ('-')"
        )  # fmt: skip
    pool = Pool(
        "zfs", name, m.source, _zfs_layout(runner, name, dialect, notes),
        _settable(pool_props), _settable(ds_props), size, used, frag,
    )  # fmt: skip
    return pool, _zfs_version(runner, dialect)


def _settable(props: dict[str, dict[str, str]]) -> dict[str, str]:
    return {k: v["value"] for k, v in sorted(props.items())
            if v.get("source") in _SETTABLE and k not in _IDENTITY}  # fmt: skip


def _zfs_layout(runner: Runner, pool: str, dialect: str, notes: list[str]) -> str:
    st = ops.status_or_none(runner, pool, dialect)
    if st is None:
        notes.append(f"layout: `zpool status {pool}` could not be read")
        return ""
    parts = [shape_text([(t.kind, t.width) for t in st.tops])]
    for section, leaves in sorted(st.class_leaves.items()):
        # "special mirror:2", "logs disk:1": the kind of each class vdev, never a device name
        # (names move between boots; a history must not see that as a change)
        kinds = [parse.top_kind(t) or "disk" for t in st.class_tops.get(section, [])]
        if leaves:
            parts.append(f"{section} {'+'.join(dict.fromkeys(kinds)) or 'disk'}:{len(leaves)}")
    return " + ".join(p for p in parts if p)


def _disks(devices: Target | None, notes: list[str]) -> tuple[Disk, ...]:
    if devices is None or not devices.devices:
        why = devices.unverified_reason if devices is not None else "not resolved"
        notes.append(f"disks: no block device under the target ({why})")
        return ()
    out = []
    caps = _caps(notes)
    for name in devices.devices:
        info = probes.device_info(name)
        note = ""
        backing = info.get("loop_backing_file")
        if backing:
            note = f"loop device backed by {backing}: no serial or firmware"
        elif not info["serial"]:
            note = "the device reports no serial"
        try:
            cap = caps.get(throttle.device_number(name))
        except OSError:
            cap = None
        out.append(Disk(name, info["model"], info["serial"], probes.firmware(name),
                        info["size_bytes"], note, *(cap or (None, None))))  # fmt: skip
    return tuple(out)


def _caps(notes: list[str]) -> dict[str, tuple[int | None, int | None]]:
    """The blkio throttle rules in force, MAJ:MIN → (read, write) bytes/s (0: no rule)."""
    if not throttle.BLKIO.is_dir():
        return {}
    try:
        found = throttle.caps()
    except OSError as exc:
        notes.append(f"blkio caps: could not be read ({exc})")
        return {}
    return {k: (r or None, w or None) for k, (r, w) in found.items()}
