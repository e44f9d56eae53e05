"""A FUSE mount whose daemon has ended, as a crashed zfs-fuse leaves /zfs-kstat: the kernel's
FUSE connection is opened, mounted and closed before it is ever served, so every look under
the mount point answers 'Transport endpoint is not connected' (ENOTCONN), exactly as the
real leftover does. Needs root and /dev/fuse."""

from __future__ import annotations

import contextlib
import ctypes
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

FUSE_DEVICE = Path("/dev/fuse")


def unavailable() -> str:
    """Why a dead FUSE mount cannot be made here ("" where it can)."""
    if os.geteuid() != 0:
        return "mounting FUSE by hand needs root"
    if not FUSE_DEVICE.exists():
        return f"{FUSE_DEVICE} is absent (modprobe fuse)"
    return ""


@contextlib.contextmanager
def dead_fuse_mount(target: Path, source: str = "poolbench-test") -> Iterator[Path]:
    """`target` (made if absent) covered by a dead FUSE mount for the block; lazily unmounted
    after it, whatever happened, and removed again if it was made here."""
    made = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(FUSE_DEVICE, os.O_RDWR)
    try:
        options = f"fd={fd},rootmode=40000,user_id=0,group_id=0".encode()
        if libc.mount(source.encode(), str(target).encode(), b"fuse.deadtest", 0, options):
            err = ctypes.get_errno()
            raise OSError(err, f"mount of a FUSE file system on {target}: {os.strerror(err)}")
    except BaseException:
        if made:
            target.rmdir()
        raise
    finally:
        os.close(fd)  # the connection ends unserved: the mount is dead from here on
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30, check=False)
        if made:
            target.rmdir()
