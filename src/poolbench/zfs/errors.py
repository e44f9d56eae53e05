"""Known `zpool`/`zfs` failures as typed errors, recognised from their stderr.

Callers catch a type (`except PoolBusy`) instead of matching words in a message. Every error
here is still a `CommandError` (argv, exit code and stderr tail in its message), so code that
catches `CommandError` keeps working. The messages are those of OpenZFS 2.x
(`lib/libzfs/libzfs_util.c`, `cmd/zpool/zpool_vdev.c`) and zfs-fuse 0.7 (pool version 23):

* busy: "cannot export 'p': pool is busy", "cannot destroy 'p': pool is busy",
  "umount: /mnt: target is busy" (zfs-fuse unmounts with umount(8));
* no such pool: "cannot open 'p': no such pool";
* exists: "cannot create 'p': pool already exists";
* device settling (OpenZFS `zpool create` on a whole disk it has just partitioned, while udev
  is still probing it): "cannot label 'sdb': failed to detect device partitions on
  '/dev/sdb1': 19", "freshly written EFI label on '/dev/sdb1' is damaged", and the kernel's
  EBUSY on opening the new partition, "one or more vdevs refer to the same device, or one of
  the devices is part of an active md or lvm device";
* device in use: "/dev/sdb is part of active pool 'p'", "... is reserved as a hot spare for
  pool p", "/dev/sdb1 is part of potentially active pool 'p'" (a label that says active on a
  disk no imported pool holds: what a replaced-out member of poolbench's own pool carries).
"""

from __future__ import annotations

import re

from poolbench.system.runner import CommandError, CommandResult


class ZfsCommandError(CommandError):
    """A zpool/zfs command failed for a reason none of the types below names."""


class PoolBusy(ZfsCommandError):
    """The pool (or a dataset of it) is busy: often transient, worth retrying."""


class DeviceSettling(ZfsCommandError):
    """A device `zpool create` has just labelled is not ready yet (udev still probing it, its
    partitions not yet shown): transient, retried like busy."""


# Worth retrying with a pause: the same command often succeeds a moment later.
TRANSIENT: tuple[type[ZfsCommandError], ...] = (PoolBusy, DeviceSettling)


class NoSuchPool(ZfsCommandError):
    """No imported pool has that name."""


class PoolExists(ZfsCommandError):
    """A pool of that name is already imported."""


class DeviceInUse(ZfsCommandError):
    """A device given to zpool belongs to a pool (or is a hot spare of one)."""


class ActivePoolMember(DeviceInUse):
    """A device carries the label of a pool that says it is active but is not imported."""


# Checked in order: the first pattern found in stderr names the type.
_PATTERNS: tuple[tuple[re.Pattern[str], type[ZfsCommandError]], ...] = (
    (
        re.compile(
            r"failed to detect device partitions|freshly written EFI label"
            r"|one or more vdevs refer to the same device"
        ),
        DeviceSettling,
    ),
    (re.compile(r"part of potentially active pool"), ActivePoolMember),
    (re.compile(r"part of (active|exported) pool|reserved as a hot spare|is in use"), DeviceInUse),
    (re.compile(r"pool already exists"), PoolExists),
    (re.compile(r"no such pool"), NoSuchPool),
    (re.compile(r"\bbusy\b"), PoolBusy),
)


def error_type(stderr: str) -> type[ZfsCommandError]:
    """The typed error for a failed command's stderr (ZfsCommandError if none fits)."""
    for pattern, kind in _PATTERNS:
        if pattern.search(stderr):
            return kind
    return ZfsCommandError


def error_for(result: CommandResult, fix: str = "") -> ZfsCommandError:
    """The error to raise for `result` (a failed command)."""
    return error_type(result.stderr)(result, fix)
