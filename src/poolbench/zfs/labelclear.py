"""Give back the devices of a destroyed pool as poolbench found them.

`zpool destroy` leaves the four ZFS labels on every member (marked destroyed; a member that
was replaced out keeps a label that still says *active*, which makes the next `zpool create`
on it fail with "part of potentially active pool"). OpenZFS `zpool create` on a whole disk
also writes a GPT first (partition 1 for the pool, partition 9 reserved) that stays behind.
Either makes the next study on the same disks refuse them as in use.

Everything here is GUID-checked: a label is cleared only if it names the pool GUID poolbench
recorded when it created the pool, and a partition table only if one of its partitions held
such a label, i.e. it is the table `zpool create` wrote on a disk poolbench gave it whole.
OpenZFS clears labels with `zpool labelclear -f`; zfs-fuse has no such command (and never
partitions), so there the four 256 KiB label areas are zeroed with dd, as OpenZFS would.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.system.runner import Runner
from poolbench.zfs import commands
from poolbench.zfs.dialect import OPENZFS
from poolbench.zfs.label import LABEL_SIZE, label_offsets, read_labels
from poolbench.zfs.pools import run

SYS_BLOCK = Path("/sys/class/block")


@dataclass
class Cleared:
    """What `clear_member` did to one recorded member."""

    labels: list[str] = field(default_factory=list)  # devices whose labels were cleared
    partition_table: bool = False  # the GPT zpool wrote on the whole disk was wiped


def partitions_of(device: str, sys_block: Path = SYS_BLOCK) -> list[str]:
    """/dev paths of the partitions the kernel knows on `device` (none for a partition)."""
    name = os.path.basename(os.path.realpath(device))
    node = sys_block / name
    try:
        subs = sorted(p.name for p in node.iterdir() if (p / "partition").is_file())
    except OSError:
        return []
    # A partition node sits beside its disk (/dev/sdb1 next to /dev/sdb).
    return [os.path.join(os.path.dirname(os.path.realpath(device)), s) for s in subs]


def _device_size(dev: str) -> int:
    fd = os.open(dev, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def _holds_label_of(dev: str, guid: int) -> bool:
    try:
        label = read_labels(Path(dev))
    except OSError:
        return False
    return label is not None and label.pool_guid == guid


def zero_labels(runner: Runner, dev: str) -> None:
    """Zero the four ZFS label areas of `dev` (zfs-fuse has no `zpool labelclear`)."""
    size = os.stat(dev).st_size or _device_size(dev)
    for offset in label_offsets(size):
        runner.run(
            ["dd", "if=/dev/zero", f"of={dev}", f"bs={LABEL_SIZE}", "count=1",
             f"seek={offset // LABEL_SIZE}", "conv=notrunc,fsync", "status=none"]
        )  # fmt: skip


def clear_labels(runner: Runner, dev: str, dialect: str) -> None:
    """Remove the ZFS labels of `dev`, the way its dialect can."""
    if dialect == OPENZFS:
        run(runner, commands.labelclear(dev))
    else:
        zero_labels(runner, dev)


def wipe_partition_table(runner: Runner, disk: str, parts: list[str]) -> None:
    """Erase what is left in each partition, then the disk's partition table (wipefs also
    erases the backup GPT at the end and asks the kernel to drop the partitions)."""
    for part in parts:
        runner.run(["wipefs", "--all", "--quiet", part])
    runner.run(["wipefs", "--all", "--quiet", disk])
    # A loop device attached without partition scanning refuses the re-read (EINVAL) and
    # keeps its partition nodes: drop them by hand (a no-op where the re-read worked).
    runner.run(["partx", "--delete", disk], check=False)


def clear_member(
    runner: Runner, device: str, guid: int, dialect: str, sys_block: Path = SYS_BLOCK
) -> Cleared:
    """Clear the labels of pool `guid` from a recorded member and, if `zpool create`
    partitioned it, the partition table it wrote. Anything else is left as it is."""
    done = Cleared()
    parts = partitions_of(device, sys_block)
    for dev in [device, *parts]:
        if _holds_label_of(dev, guid):
            clear_labels(runner, dev, dialect)
            done.labels.append(dev)
    if parts and any(p in done.labels for p in parts):
        wipe_partition_table(runner, device, parts)
        done.partition_table = True
    return done
