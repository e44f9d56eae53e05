"""`umount` retried while the target is busy: btrfs and md filesystems answer "target is
busy" for a moment after a loaded machine's last write (the ZFS layer retries its own busy
answers in zfs/pools.py). Callers pass the limit (the same as ZFS's: zfs.pools.busy_seconds()),
so this lowest layer imports nothing above it."""

from __future__ import annotations

import logging
import re
import time

from poolbench.system.runner import CommandError, Runner

log = logging.getLogger(__name__)
_BUSY = re.compile(r"\bbusy\b")


def umount(runner: Runner, mountpoint: str, busy_seconds: float) -> None:
    """Unmount, retrying with a growing pause (0.2 s doubling to 2 s) while busy; the last
    busy answer is raised as the CommandError it is."""
    deadline = time.monotonic() + busy_seconds
    pause = 0.2
    while True:
        try:
            runner.run(["umount", mountpoint])
            return
        except CommandError as exc:
            if not _BUSY.search(exc.result.stderr) or time.monotonic() > deadline:
                raise
            log.info("umount %s: busy, retrying in %.1f s", mountpoint, pause)
        time.sleep(pause)
        pause = min(pause * 2, 2.0)
