"""The two ZFS dialects poolbench speaks: OpenZFS 2.x and zfs-fuse (pool version 23).

A name of its own so callers outside zfs/ can say which dialect they mean without importing
the command builders (`commands`), which only zfs/ may use."""

from __future__ import annotations

OPENZFS = "openzfs"
ZFS_FUSE = "zfs-fuse"
