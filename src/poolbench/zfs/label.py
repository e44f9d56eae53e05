"""Read the ZFS labels of a device ourselves, read-only, without zdb or a running zpool.

A ZFS vdev carries four 256 KiB labels: two at the start (offsets 0 and 256 KiB) and two at
the end of the device (rounded down to 256 KiB). Each label holds, at 16 KiB, an XDR-encoded
nvlist with the pool's name, GUID and state (OpenZFS `vdev_label.c`, `nvpair.c`). A pool that
was exported, destroyed or belongs to another host is still visible here, where `zpool status`
shows nothing — which is why the inventory reads labels, not just the list of imported pools.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

LABEL_SIZE = 256 * 1024
NVLIST_OFFSET = 16 * 1024
NVLIST_SIZE = 112 * 1024

# pool_state_t (include/sys/fs/zfs.h)
POOL_STATES = {
    0: "active",
    1: "exported",
    2: "destroyed",
    3: "spare",
    4: "l2cache",
    5: "uninitialized",
    6: "unavailable",
    7: "potentially active",
}

# data_type_t values used in labels (include/sys/nvpair.h)
_UINT64 = 8
_STRING = 9


@dataclass(frozen=True)
class ZfsLabel:
    pool_name: str | None  # absent on spare and l2cache labels
    pool_guid: int | None
    state: str
    vdev_guid: int | None
    hostname: str | None
    labels_found: int  # of 4

    def describe(self) -> str:
        name = f"'{self.pool_name}'" if self.pool_name else "(no pool name)"
        guid = f" guid {self.pool_guid}" if self.pool_guid else ""
        return f"ZFS pool {name}{guid}"


def _xdr_string(buf: bytes, pos: int) -> tuple[str, int]:
    (length,) = struct.unpack_from(">I", buf, pos)
    pos += 4
    text = buf[pos : pos + length].decode("utf-8", "replace")
    return text, pos + ((length + 3) & ~3)


def parse_nvlist(buf: bytes) -> dict[str, int | str]:
    """Top-level uint64 and string pairs of an XDR-packed nvlist (nested lists skipped)."""
    if len(buf) < 12 or buf[0] != 1:  # NV_ENCODE_XDR
        raise ValueError("not an XDR nvlist")
    pos = 4 + 8  # encoding header, then nvl_version and nvl_nvflag
    out: dict[str, int | str] = {}
    while pos + 8 <= len(buf):
        encoded_size, decoded_size = struct.unpack_from(">II", buf, pos)
        if encoded_size == 0 and decoded_size == 0:
            return out  # end of list
        if encoded_size < 8 or pos + encoded_size > len(buf):
            raise ValueError("corrupt nvpair")
        name, p = _xdr_string(buf, pos + 8)
        dtype, nelem = struct.unpack_from(">iI", buf, p)
        p += 8
        if dtype == _UINT64 and nelem == 1:
            (out[name],) = struct.unpack_from(">Q", buf, p)
        elif dtype == _STRING and nelem == 1:
            out[name], _ = _xdr_string(buf, p)
        pos += encoded_size
    raise ValueError("unterminated nvlist")


def label_offsets(size: int) -> list[int]:
    aligned = size - size % LABEL_SIZE
    if aligned < 4 * LABEL_SIZE:
        return []
    return [0, LABEL_SIZE, aligned - 2 * LABEL_SIZE, aligned - LABEL_SIZE]


def read_labels(device: Path, size: int | None = None) -> ZfsLabel | None:
    """The ZFS label of `device` (a block device or an image file), or None if it has none.

    Opens the device read-only; a missing or unreadable device raises OSError.
    """
    fd = os.open(device, os.O_RDONLY | os.O_CLOEXEC)
    try:
        if size is None:
            size = os.lseek(fd, 0, os.SEEK_END)
        found: list[dict[str, int | str]] = []
        for offset in label_offsets(size):
            buf = os.pread(fd, NVLIST_SIZE, offset + NVLIST_OFFSET)
            try:
                pairs = parse_nvlist(buf)
            except (ValueError, struct.error):
                continue
            if "state" in pairs or "pool_guid" in pairs or "guid" in pairs:
                found.append(pairs)
    finally:
        os.close(fd)
    if not found:
        return None
    # The labels are written in turn; prefer the one with the newest txg.
    best = max(found, key=lambda p: p.get("txg", 0) if isinstance(p.get("txg"), int) else 0)
    state = best.get("state")
    name = best.get("name")
    guid = best.get("pool_guid")
    vdev = best.get("guid")
    host = best.get("hostname")
    return ZfsLabel(
        pool_name=name if isinstance(name, str) else None,
        pool_guid=guid if isinstance(guid, int) else None,
        state=POOL_STATES.get(state, f"state {state}") if isinstance(state, int) else "unknown",
        vdev_guid=vdev if isinstance(vdev, int) else None,
        hostname=host if isinstance(host, str) else None,
        labels_found=len(found),
    )
