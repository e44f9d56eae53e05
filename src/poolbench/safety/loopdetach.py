"""Detaching a loop device the safety journal recorded, only while it still backs the file
recorded with it (safety/journal.py)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from poolbench.system.runner import CommandError, Runner

# How long a held loop device may take to run down after a detach before we call it stuck.
LOOP_RUNDOWN_SECONDS = 10.0


def still_backs(sys_block: Path, name: str, backing: str) -> bool:
    """Whether loop device `name` backs the file `backing` (also if the file was deleted)."""
    try:
        now = (sys_block / name / "loop" / "backing_file").read_text().strip()
    except OSError:
        return False
    return os.path.realpath(now.removesuffix(" (deleted)")) == os.path.realpath(backing)


def loops_backing(sys_block: Path, backing: str) -> list[str]:
    """Loop devices (kernel names) whose backing file is `backing` (also if deleted since)."""
    return [
        n.name for n in sorted(sys_block.glob("loop*")) if still_backs(sys_block, n.name, backing)
    ]


def detach(runner: Runner, sys_block: Path, name: str, backing: str) -> None:
    """Detach loop device `name` from `backing`. A device still held open (by zfs-fuse, an
    orphaned `zpool`) is detached lazily by the kernel when its last user closes it, and while
    it runs down a second detach answers ENXIO although sysfs still names the file: that
    failure is success as soon as the device no longer backs the file."""
    result = runner.run(["losetup", "--detach", f"/dev/{name}"], check=False)
    if result.returncode == 0:
        return
    deadline = time.monotonic() + LOOP_RUNDOWN_SECONDS
    while still_backs(sys_block, name, backing):
        if time.monotonic() > deadline:
            raise CommandError(
                result, "Close whatever still holds the device and run cleanup again."
            )
        time.sleep(0.1)
