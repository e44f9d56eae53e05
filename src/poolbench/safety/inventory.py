"""Which block devices exist, and which of them hold something: the facts behind every claim.

Everything here is read-only: /sys, /proc, `wipefs --no-act`, and the ZFS labels read straight
from the device. A device is *free* only when no reason to call it in use was found; a probe
that fails is itself a reason (when in doubt, a device is in use). Reasons that nothing may
override — the root filesystem, poolbench's own store and scratch directory — are marked so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from poolbench import storepath
from poolbench.guards.devices import MountInfo, mount_of, mounts

# The records live in blockdevice.py; callers have always imported them from here.
from poolbench.safety.blockdevice import (
    ASHIFT_ADVICE,
    PROTECTED,
    BlockDevice,
    Inventory,
    Reason,
    Signature,
    natural_order,
)
from poolbench.system import probes
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import ops
from poolbench.zfs.errors import ZfsCommandError
from poolbench.zfs.label import ZfsLabel, read_labels

FS_TYPES = {
    "ext2", "ext3", "ext4", "xfs", "btrfs", "vfat", "exfat", "ntfs", "f2fs", "jfs", "reiserfs",
    "hfsplus", "apfs", "iso9660", "udf", "squashfs", "nilfs2", "bcachefs", "ocfs2", "gfs2",
}  # fmt: skip
PARTITION_TABLES = {"gpt", "dos", "PMBR", "atari", "bsd", "sun", "sgi", "mac"}
SIGNATURE_WORDS = {
    "swap": "a swap signature",
    "LVM2_member": "an LVM physical volume (LVM2_member) signature",
    "linux_raid_member": "an md RAID member signature",
    "crypto_LUKS": "a LUKS encryption header",
    "zfs_member": "a ZFS label",
    "bcache": "a bcache signature",
    "ceph": "a Ceph signature",
    "drbd": "a DRBD signature",
    "isw_raid_member": "an Intel RAID member signature",
    "ddf_raid_member": "a DDF RAID member signature",
}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _listdir(path: Path) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _kind(name: str, is_partition: bool) -> str:
    if is_partition:
        return "part"
    for prefix, kind in (("loop", "loop"), ("dm-", "dm"), ("md", "md"), ("zram", "ram"),
                         ("ram", "ram"), ("sr", "rom")):  # fmt: skip
        if name.startswith(prefix):
            return kind
    return "disk"


@dataclass(frozen=True)
class Paths:
    """Where the facts come from; tests point these at a fake tree."""

    sys_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    mountinfo: Path = Path("/proc/self/mountinfo")
    swaps: Path = Path("/proc/swaps")


def protected_paths(db: Path | None, scratch_dir: Path | None) -> dict[str, Path]:
    """What no override may touch, by what it is: the store's and the scratch directory."""
    out = {"holds poolbench's result store": (db or storepath.default_store())}
    out["holds poolbench's scratch directory"] = scratch_dir or Path("/var/tmp")
    return out


def scan(
    runner: Runner,
    *,
    protect: Mapping[str, Path] | None = None,
    paths: Paths | None = None,
) -> Inventory:
    """Every block device on the machine with every reason it is in use. Read-only."""
    paths = paths or Paths()
    inv = Inventory(_enumerate(paths))
    _by_id(inv, paths)
    table = mounts(paths.mountinfo)
    _zfs_labels(inv, runner, paths)  # before mounts: a ZFS mount names the pool, not a device
    _mounted(inv, table, paths)
    _swaps(inv, paths)
    _signatures(inv, runner)
    _holders(inv, paths)
    _loop_backing(inv)
    _protected(inv, table, paths, {"backs the root filesystem": Path("/"), **(protect or {})})
    _partitions(inv)
    for d in inv.devices.values():
        if d.read_only and d.size_bytes:
            d.add(Reason("read-only", "is read-only", overridable=False))
        if d.logical_sector == 512 and (d.physical_sector or 0) >= 4096:
            d.advice.append(ASHIFT_ADVICE)
    return inv


def _enumerate(paths: Paths) -> dict[str, BlockDevice]:
    sys_block = paths.sys_root / "class" / "block"
    devices: dict[str, BlockDevice] = {}
    for name in _listdir(sys_block):
        node = sys_block / name
        info = probes.device_info(name, sys_block)
        is_part = bool(info.get("partition"))
        devices[name] = BlockDevice(
            name=name,
            path=str(paths.dev_root / name),
            dev=_read(node / "dev") or "",
            kind=_kind(name, is_part),
            parent=node.resolve().parent.name if is_part else None,
            model=info.get("model"),
            # A partition reports its disk's serial; it must not answer to it in an override.
            serial=None if is_part else info.get("serial"),
            size_bytes=info.get("size_bytes") or 0,
            logical_sector=info.get("logical_sector"),
            physical_sector=info.get("physical_sector"),
            rotational=bool(info.get("rotational")),
            read_only=_read(node / "ro") == "1",
            loop_backing_file=info.get("loop_backing_file"),
            holders=_listdir(node / "holders"),
            slaves=_listdir(node / "slaves"),
        )
    for d in devices.values():
        if d.parent in devices:
            devices[d.parent].partitions.append(d)
    for d in devices.values():
        d.partitions.sort(key=lambda p: natural_order(p.name))
    return devices


def _by_id(inv: Inventory, paths: Paths) -> None:
    base = paths.dev_root / "disk" / "by-id"
    for link in _listdir(base):
        target = os.path.basename(os.path.realpath(base / link))
        dev = inv.get(target)
        if dev is not None:
            dev.by_id.append(str(base / link))


def _name_of_source(inv: Inventory, source: str) -> str | None:
    if not source.startswith("/"):
        return None
    name = os.path.basename(os.path.realpath(source))
    return name if name in inv.devices else None


def _mount_devices(inv: Inventory, m: MountInfo, paths: Paths) -> list[str]:
    """Kernel names of every device under mount `m` (btrfs and ZFS members included)."""
    dev = inv.by_dev(m.major_minor)
    names = [dev.name] if dev is not None else []
    src = _name_of_source(inv, m.source)
    if src and src not in names:
        names.append(src)
    if m.fstype == "btrfs" and src:
        for fs in _listdir(paths.sys_root / "fs" / "btrfs"):
            members = _listdir(paths.sys_root / "fs" / "btrfs" / fs / "devices")
            if src in members:
                names += [n for n in members if n not in names and n in inv.devices]
    if m.is_zfs:
        pool = m.zfs_pool
        names += [
            d.name
            for d in inv.devices.values()
            if d.zfs and d.zfs.pool_name == pool and d.zfs.state == "active"
            and d.name not in names
        ]  # fmt: skip
    return names


def _mounted(inv: Inventory, table: Iterable[MountInfo], paths: Paths) -> None:
    where: dict[str, list[str]] = {}
    for m in table:
        for name in _mount_devices(inv, m, paths):
            where.setdefault(name, []).append(f"{m.mountpoint} ({m.fstype})")
    for name, points in where.items():
        shown = ", ".join(points[:3]) + (f" and {len(points) - 3} more" if len(points) > 3 else "")
        inv.devices[name].add(Reason("mounted", f"mounted at {shown}", overridable=False))


def _swaps(inv: Inventory, paths: Paths) -> None:
    text = _read(paths.swaps) or ""
    for line in text.splitlines()[1:]:
        parts = line.split()
        name = _name_of_source(inv, parts[0]) if parts else None
        if name:
            inv.devices[name].add(Reason("swap", "is active swap", overridable=False))


def _signatures(inv: Inventory, runner: Runner) -> None:
    have_wipefs = runner.which("wipefs") is not None
    if not have_wipefs:
        inv.warnings.append(
            "wipefs is not installed (Debian: util-linux): filesystem, RAID, LVM and swap "
            "signatures were not checked, so every device counts as in use."
        )
    for d in inv.devices.values():
        if d.size_bytes == 0:
            continue
        if not have_wipefs:
            d.add(Reason("unchecked", "signatures not checked (wipefs missing)"))
            continue
        try:
            res = runner.run(["wipefs", "--no-act", "--json", d.path], check=False, mutates=False)
        except (CommandError, OSError) as exc:
            d.add(Reason("unchecked", f"signatures could not be read ({exc})"))
            continue
        if res.returncode != 0:
            err = res.stderr.strip().splitlines()[-1:] or [f"exit code {res.returncode}"]
            d.add(Reason("unchecked", f"signatures could not be read: {err[0]}"))
            continue
        try:
            sigs = json.loads(res.stdout)["signatures"] if res.stdout.strip() else []
        except (ValueError, KeyError, TypeError):
            d.add(Reason("unchecked", "signatures could not be parsed (wipefs output)"))
            continue
        d.signatures = [sig for s in sigs if (sig := Signature.from_json(s)) is not None]
        for reason in _signature_reasons(d):
            d.add(reason)


def _signature_reasons(d: BlockDevice) -> list[Reason]:
    out: list[Reason] = []
    seen: set[str] = set()
    for sig in d.signatures:
        t = sig.type or "unknown"
        if t in seen:
            continue
        seen.add(t)
        label = f" labelled '{sig.label}'" if sig.label else ""
        if t in PARTITION_TABLES:
            continue  # described with the partitions, below
        if t == "zfs_member" and d.zfs is not None:
            continue  # the label itself says more
        if t in FS_TYPES:
            out.append(Reason("filesystem", f"holds {_article(t)} {t} filesystem{label}"))
        else:
            what = SIGNATURE_WORDS.get(t, f"a {t} signature")
            out.append(Reason("signature", f"holds {what}{label}"))
    return out


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiox" else "a"


def _imported_pools(runner: Runner, inv: Inventory) -> dict[int, str] | None:
    if not ops.installed(runner):
        return {}
    try:
        guids = ops.pool_guids(runner)
    except ZfsCommandError as exc:  # zpool answered, with a failure
        said = exc.result.stderr.strip() or exc.result.returncode
        inv.warnings.append(
            f"could not list imported ZFS pools (`zpool list` failed: {said}); labels were "
            "still read from the devices."
        )
        return None
    except (CommandError, OSError) as exc:
        inv.warnings.append(f"could not list imported ZFS pools ({exc}).")
        return None
    return {guid: name for name, guid in guids.items()}


def _zfs_labels(inv: Inventory, runner: Runner, paths: Paths) -> None:
    imported = _imported_pools(runner, inv)
    denied = False
    for d in inv.devices.values():
        if d.size_bytes < 4 * 256 * 1024:
            continue
        try:
            d.zfs = read_labels(paths.dev_root / d.name, d.size_bytes)
        except PermissionError:
            denied = True
            d.add(Reason("unchecked", "ZFS labels could not be read (permission denied)"))
            continue
        except OSError as exc:
            d.add(Reason("unchecked", f"ZFS labels could not be read ({exc.strerror or exc})"))
            continue
        if d.zfs is not None:
            d.add(_zfs_reason(d.zfs, imported))
    if denied:
        inv.warnings.append(
            "Some devices could not be read: run 'poolbench disks' as root."
            if os.geteuid() != 0
            else "Some devices could not be read even as root (a sandbox or security policy "
            "forbids it); they count as in use."
        )


def _zfs_reason(z: ZfsLabel, imported: dict[int, str] | None) -> Reason:
    what = z.describe()
    if z.pool_guid is not None and imported and z.pool_guid in imported:
        return Reason("zfs", f"member of imported {what}", overridable=False)
    if z.state == "exported":
        return Reason("zfs", f"member of exported {what} ('zpool import' brings it back)")
    if z.state == "destroyed":
        return Reason("zfs", f"holds a label of destroyed {what} ('zpool import -D' recovers it)")
    if z.state == "active":
        host = f" on host '{z.hostname}'" if z.hostname else ""
        if imported is None:  # it may well be imported here: never overridable then
            return Reason(
                "zfs",
                f"member of {what}, active{host}; imported pools could not be listed",
                overridable=False,
            )
        return Reason("zfs", f"member of {what}, active{host} but not imported here")
    return Reason("zfs", f"ZFS {z.state} device of {what}")


def _holders(inv: Inventory, paths: Paths) -> None:
    sys_block = paths.sys_root / "class" / "block"
    for d in inv.devices.values():
        for h in d.holders:
            if h.startswith("dm-"):
                dm_name = _read(sys_block / h / "dm" / "name") or h
                uuid = _read(sys_block / h / "dm" / "uuid") or ""
                what = "LVM logical volume" if uuid.startswith("LVM-") else "device-mapper device"
                d.add(Reason("holder", f"held by {what} {dm_name} ({h})", overridable=False))
            elif h.startswith("md"):
                d.add(Reason("holder", f"member of running md RAID {h}", overridable=False))
            else:
                d.add(Reason("holder", f"held by {h}", overridable=False))


def _loop_backing(inv: Inventory) -> None:
    for d in list(inv.devices.values()):
        backing = d.loop_backing_file
        if backing and backing.startswith("/dev/"):
            name = _name_of_source(inv, backing)
            if name and name != d.name:
                inv.devices[name].add(
                    Reason("holder", f"backs loop device {d.name}", overridable=False)
                )


def _below(inv: Inventory, name: str) -> list[tuple[str, str, str]]:
    """Devices that carry `name`, with how: slaves (dm, md) and a partition's disk."""
    out: list[tuple[str, str, str]] = []
    todo = [name]
    seen = {name}
    while todo:
        cur = inv.devices.get(todo.pop())
        if cur is None:
            continue
        nxt = [(s, f"underlies {cur.name}", "protected-via") for s in cur.slaves]
        if cur.parent:
            nxt.append((cur.parent, f"holds partition {cur.name}", "protected-disk"))
        for n, how, kind in nxt:
            if n not in seen and n in inv.devices:
                seen.add(n)
                out.append((n, how, kind))
                todo.append(n)
    return out


def _protected(
    inv: Inventory, table: list[MountInfo], paths: Paths, protect: Mapping[str, Path]
) -> None:
    for what, path in protect.items():
        existing = Path(os.path.abspath(path))
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        try:
            m = mount_of(existing, table)
        except RuntimeError:
            continue
        for name in _mount_devices(inv, m, paths):
            inv.devices[name].add(Reason("protected", f"{what}: {path}", overridable=False))
            for other, how, kind in _below(inv, name):
                inv.devices[other].add(Reason(kind, f"{how}, which {what}", overridable=False))


def _partitions(inv: Inventory) -> None:
    for disk in inv.devices.values():
        pttype = next(
            (s.type for s in disk.signatures if s.type in PARTITION_TABLES and s.type != "PMBR"),
            None,
        )  # fmt: skip
        if not disk.partitions and not pttype:
            continue
        parts = ", ".join(
            f"{p.name} ({'; '.join(r.detail for r in p.reasons) or 'free'})"
            for p in disk.partitions
        )
        table = f"a {pttype} partition table" if pttype else "partitions"
        detail = f"has {table}" + (f": {parts}" if parts else " (no partitions)")
        locked = any(not r.overridable for p in disk.partitions for r in p.reasons)
        # Reasons of the disk itself, not those it has because of one of its partitions.
        disk_reasons = [r for r in disk.reasons if r.kind != "protected-disk"]
        disk.add(Reason("partition-table", detail, overridable=not locked))
        own = {p.name: list(p.reasons) for p in disk.partitions}
        # A partition of an in-use disk is in use too: a slip of one digit must not cost the
        # neighbouring partition, and it would share the disk's bandwidth with it anyway.
        for p in disk.partitions:
            for other in disk.partitions:
                if other is not p and own[other.name]:
                    p.add(
                        Reason(
                            "sibling",
                            f"shares disk {disk.name} with {other.name}, which is in use "
                            f"({'; '.join(r.detail for r in own[other.name])})",
                            overridable=not any(r.kind in PROTECTED for r in own[other.name]),
                        )
                    )
            if disk_reasons:
                p.add(
                    Reason(
                        "sibling",
                        f"is on disk {disk.name}, which is in use "
                        f"({'; '.join(r.detail for r in disk_reasons)})",
                        overridable=not any(r.kind in PROTECTED for r in disk_reasons),
                    )
                )
