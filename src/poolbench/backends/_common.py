"""Small helpers the backends share: mounts, file lists for cache checks, sizes."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from poolbench.guards import cache
from poolbench.guards.blockdev import counter_devices
from poolbench.guards.devices import MountInfo, block_name_of, mounts
from poolbench.records.cache_drop import PageCacheDrop, RemountDrop, StripeCacheFlush
from poolbench.system.probes import resident_bytes
from poolbench.system.runner import Runner
from poolbench.system.umount import umount
from poolbench.zfs import pools

MAX_CHECKED_FILES = 2000  # fincore checks at most this many files of a pool


def mount_at(mountpoint: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> MountInfo | None:
    """The mount at exactly `mountpoint` (the last one, which shadows earlier ones), or None."""
    want = os.path.realpath(mountpoint)
    found = None
    for m in mounts(mountinfo):
        if m.mountpoint == want:
            found = m
    return found


def wait_for(predicate: Callable[[], bool], seconds: float = 5.0, step: float = 0.05) -> bool:
    """Poll `predicate` until it holds or `seconds` pass; returns its last value."""
    deadline = time.monotonic() + seconds
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(step)


def files_under(root: Path, limit: int = MAX_CHECKED_FILES) -> list[Path]:
    """Regular files below `root` (not crossing into other mounts), at most `limit`."""
    found: list[Path] = []
    try:
        dev = root.stat().st_dev
    except OSError:
        return found
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if _same_dev(Path(dirpath, d), dev)]
        for name in filenames:
            p = Path(dirpath, name)
            try:
                if stat.S_ISREG(p.lstat().st_mode):
                    found.append(p)
            except OSError:
                continue
            if len(found) >= limit:
                return found
    return found


def _same_dev(p: Path, dev: int) -> bool:
    try:
        return p.lstat().st_dev == dev
    except OSError:
        return False


def size_of(path: str) -> int | None:
    """Size in bytes of a file or block device, None if it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def block_names(paths: list[str]) -> list[str]:
    """Kernel names of the block devices under `paths` (files are skipped): symlinks,
    by-id/by-path names, partitions, and dm/md devices down to the disks beneath them."""
    return counter_devices(paths)


def is_block(path: str) -> bool:
    try:
        return stat.S_ISBLK(os.stat(path).st_mode)
    except OSError:
        return False


def same_or_partition_of(
    member: str, leaf: str, sys_block: Path = Path("/sys/class/block")
) -> bool:
    """Is `leaf` the member itself, or a partition of it (OpenZFS partitions whole disks)?"""
    a, b = os.path.realpath(member), os.path.realpath(leaf)
    if a == b:
        return True
    m, lf = block_name_of(a), block_name_of(b)
    if not m or not lf:
        return False
    node = sys_block / lf
    return (node / "partition").exists() and node.resolve().parent.name == m


def _umount_drop_mount(
    runner: Runner,
    mountpoint: Path,
    mount_argv: list[str],
    mountinfo: Path,
    while_unmounted: Callable[[], StripeCacheFlush] | None,
) -> tuple[bool, str, StripeCacheFlush | None, bool]:
    """One cycle: unmount, drop the page cache (and the cache below, if any), mount again.
    Returns (was unmounted, the drop's method, what the cache below said, is mounted)."""
    umount(runner, str(mountpoint), pools.busy_seconds())
    unmounted = wait_for(lambda: mount_at(mountpoint, mountinfo) is None)
    page = cache.drop(runner, [])  # nothing of the filesystem is reachable while unmounted
    below = while_unmounted() if while_unmounted is not None else None
    runner.run(mount_argv)
    mounted = wait_for(lambda: mount_at(mountpoint, mountinfo) is not None)
    return unmounted, page.method, below, mounted


def page_record(drop: cache.CacheDrop) -> PageCacheDrop:
    """The page cache drop's record, as the guards' JSON holds it (CacheDrop's fields)."""
    return {"method": drop.method, "resident_before": drop.resident_before,
            "resident_after": drop.resident_after, "file_bytes": drop.file_bytes,
            "verified": drop.verified, "detail": drop.detail}  # fmt: skip


def remount_cold(
    runner: Runner,
    mountpoint: Path,
    mount_argv: list[str],
    mountinfo: Path = Path("/proc/self/mountinfo"),
    while_unmounted: Callable[[], StripeCacheFlush] | None = None,
) -> RemountDrop:
    """Empty every cache of a mounted filesystem: unmount (which evicts its inodes, pages and
    metadata), drop the page cache of the devices under it, mount again with the same
    options; verify each step, and that none of its files' pages are resident afterwards.
    `while_unmounted`: a cache below the filesystem to empty too (md's stripe cache); what
    it returns is recorded under "below", and its "verified" counts."""
    if runner.dry_run:
        runner.run(["umount", str(mountpoint)])
        runner.run(mount_argv)
        return {"method": "umount-mount", "verified": False, "detail": "dry run"}
    t0 = time.monotonic()
    files = files_under(mountpoint)
    before = resident_bytes(runner, files)
    cycle = (runner, mountpoint, mount_argv, mountinfo, while_unmounted)
    unmounted, page, below, mounted = _umount_drop_mount(*cycle)
    after = resident_bytes(runner, files)
    total = sum(f.stat().st_size for f in files if f.exists())
    # That check opened and stat'ed every file, loading its inode and dentry (and on btrfs the
    # metadata leaves that hold them), which a cold metadata read (stat, open) would then find
    # in RAM. drop_caches does not always undo it: on Linux 6.1 btrfs's extent buffers hold
    # their pages and the drop skips them (OpenZFS guest: a stat of 200 files read 0 bytes
    # after it, 48 KiB after a remount). An unmount frees everything a filesystem caches on
    # every kernel: the same cycle once more, with nothing checked after it.
    unmounted2, _, below2, mounted2 = _umount_drop_mount(*cycle)
    cold = after is not None and (total == 0 or after <= cache.MAX_RESIDENT_FRACTION * total)
    detail = []
    if not (unmounted and unmounted2):
        detail.append(f"{mountpoint} was still mounted after umount")
    if not (mounted and mounted2):
        detail.append(f"{mountpoint} is not mounted again")
    if not cold:
        detail.append(f"{after} of {total} bytes of its files still resident after the remount")
    failed = [b for b in (below, below2) if b is not None and not b["verified"]]
    if failed:
        detail.append(failed[0]["detail"] or "the cache below the filesystem was not emptied")
    below_ok = not failed
    out: RemountDrop = {
        "method": "umount-mount",
        "unmounted": unmounted and unmounted2,
        "mounted": mounted and mounted2,
        "page_cache_drop": page,
        "after_check": "umount-mount again (the check loaded inodes and metadata)",
        "files_checked": len(files),
        "resident_before": before,
        "resident_after": after,
        "file_bytes": total,
        "seconds": round(time.monotonic() - t0, 3),
        "verified": bool(unmounted and unmounted2 and mounted and mounted2 and cold and below_ok),
        "detail": "; ".join(detail),
    }
    if below is not None:
        out["below"] = below
    return out
