"""Whether a `zpool create` of a pool is running now, and waiting for it to end: a crashed
run's journal may hold a pool whose create an orphaned `zpool` is still finishing, which
teardown must wait for before it can destroy what that create makes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from poolbench import is_digits

CREATE_WAIT_S = 120.0  # a `zpool create` of whole disks under load takes seconds, not minutes


def zpool_creating(name: str, proc: Path = Path("/proc")) -> bool:
    """Whether a `zpool create` of pool `name` is running now (from /proc/*/cmdline: zpool
    itself, or a script named zpool that runs it)."""
    for p in proc.iterdir() if proc.is_dir() else []:
        if not is_digits(p.name):
            continue
        try:
            args = [a.decode(errors="replace") for a in (p / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if (
            "create" in args
            and name in args
            and any(os.path.basename(a) == "zpool" for a in args[:2])
        ):
            return True
    return False


def await_create(name: str, proc: Path = Path("/proc"), timeout: float = CREATE_WAIT_S) -> bool:
    """Wait for a running `zpool create` of `name` to end; True if one was running."""
    if not zpool_creating(name, proc):
        return False
    deadline = time.monotonic() + timeout
    while zpool_creating(name, proc) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True
