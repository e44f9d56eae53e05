"""Device resolution: any name a pool member goes by -> the block devices whose counters move.

Pools are built from many kinds of names: /dev/sdb, /dev/disk/by-id/ata-..., by-path,
by-partuuid, a symlink of the user's own, a partition, a device-mapper device (LUKS,
dm-linear) or an md array. The device guard needs the kernel names whose
`/sys/class/block/NAME/stat` counters carry the I/O, and for the per-disk breakdown those are
the *underlying* devices: a dm or md device is followed through `slaves/` down to the disks or
partitions beneath it (an md array's own counters show the application's bytes, its members
show parity too). A partition stays a partition: the whole disk's counters would also count
the other partitions' traffic.

`zpool status` (OpenZFS without -P) prints only the last component of a leaf's path, and
strips the partition suffix of a whole-disk vdev ("ata-X" for /dev/disk/by-id/ata-X-part1);
`leaf_word_path` finds such a bare name again under /dev and /dev/disk/by-*.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

SYS_CLASS_BLOCK = Path("/sys/class/block")
SYS_DEV_BLOCK = Path("/sys/dev/block")
DEV = Path("/dev")
# Where udev puts persistent names; a bare word from `zpool status` is looked up here in order.
BY_DIRS = ("by-id", "by-path", "by-partuuid", "by-uuid", "by-partlabel", "by-label", "by-vdev")


def kernel_name(dev_path: str, sys_dev: Path = SYS_DEV_BLOCK) -> str | None:
    """/dev/mapper/x, /dev/disk/by-id/y, a symlink of one's own -> kernel name (dm-0, sdb1),
    if the path (after every symlink) is a block device."""
    try:
        st = os.stat(os.path.realpath(dev_path))
    except OSError:
        return None
    if not stat.S_ISBLK(st.st_mode):
        return None
    link = sys_dev / f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    try:
        return link.resolve(strict=True).name
    except OSError:
        return None


def underlying(name: str, sys_block: Path = SYS_CLASS_BLOCK) -> list[str]:
    """The devices at the bottom of `name`'s stack (dm and md followed through `slaves/`),
    in a stable order; `name` itself when nothing lies beneath it."""
    out: list[str] = []
    seen: set[str] = set()

    def walk(n: str) -> None:
        if n in seen:  # a device shared by two branches is counted once
            return
        seen.add(n)
        slaves = sys_block / n / "slaves"
        below = sorted(p.name for p in slaves.iterdir()) if slaves.is_dir() else []
        if not below:
            out.append(n)
        for s in below:
            walk(s)

    walk(name)
    return out


def counter_devices(
    paths: Iterable[str], sys_block: Path = SYS_CLASS_BLOCK, sys_dev: Path = SYS_DEV_BLOCK
) -> list[str]:
    """Kernel names of the underlying block devices of `paths` (plain files are skipped),
    each once, in the order the paths name them."""
    names: list[str] = []
    for p in paths:
        top = kernel_name(p, sys_dev)
        for n in underlying(top, sys_block) if top else []:
            if n not in names:
                names.append(n)
    return names


def leaf_word_path(word: str, dev: Path = DEV) -> str | None:
    """A leaf as `zpool status` prints it -> an existing path, or None.

    An absolute word is the path. A bare word is tried as /dev/WORD, /dev/mapper/WORD and
    /dev/disk/by-*/WORD, then (a whole-disk vdev whose partition suffix was stripped) with
    the suffixes OpenZFS gives the partition it made: WORD-part1 (udev names), WORD1, WORDp1.
    """
    if word.startswith("/"):
        return word if os.path.exists(word) else None
    dirs = [dev, dev / "mapper", *(dev / "disk" / d for d in BY_DIRS)]
    for suffix in ("", "-part1", "1", "p1"):
        for d in dirs:
            cand = d / f"{word}{suffix}"
            if os.path.exists(cand):
                return str(cand)
    return None
