"""Whether a `zpool create` (or `destroy`) of a pool is running now, and waiting for it to
end: a crashed run's journal may hold a pool whose create an orphaned `zpool` is still
finishing, which teardown must wait for before it can destroy what that create makes; or one
that an orphaned destroy is still destroying, which teardown must let finish rather than race."""

from __future__ import annotations

import os
import time
from pathlib import Path

from poolbench import is_digits

CREATE_WAIT_S = 120.0  # a `zpool create` of whole disks under load takes seconds, not minutes


def zpool_creating(name: str, proc: Path = Path("/proc"), verb: str = "create") -> bool:
    """Whether a `zpool create` (or `zpool VERB`) of pool `name` is running now (from
    /proc/*/cmdline: zpool itself, or a script named zpool that runs it)."""
    for p in proc.iterdir() if proc.is_dir() else []:
        if not is_digits(p.name):
            continue
        try:
            args = [a.decode(errors="replace") for a in (p / "cmdline").read_bytes().split(b"\0")]
        except OSError:
            continue
        if verb in args and name in args and any(os.path.basename(a) == "zpool" for a in args[:2]):
            return True
    return False


def await_create(
    name: str, proc: Path = Path("/proc"), timeout: float = CREATE_WAIT_S, verb: str = "create"
) -> bool:
    """Wait for a running `zpool create` (or `zpool VERB`) of `name` to end; True if one was
    running."""
    if not zpool_creating(name, proc, verb):
        return False
    deadline = time.monotonic() + timeout
    while zpool_creating(name, proc, verb) and time.monotonic() < deadline:
        time.sleep(0.1)
    return True
