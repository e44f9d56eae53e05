"""The zfs-fuse daemon: ZFS in user space, the ZFS this kind of machine can run.

poolbench starts it when a command needs ZFS and no daemon answers, and stops it afterwards
only if it started it (someone else's daemon is never stopped). Where OpenZFS is (its
kernel module loaded, /sys/module/zfs), zfs-fuse is never started, even when the module does
not answer: two ZFS implementations on one machine would fight over the same pools.
"""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

from poolbench import is_digits
from poolbench.errors import PoolbenchError
from poolbench.system import stopping
from poolbench.system.runner import Runner
from poolbench.zfs import commands


def answers(runner: Runner) -> bool:
    if runner.which("zpool") is None:
        return False
    return runner.run(commands.list_pools(), check=False, mutates=False).returncode == 0


OPENZFS_MODULE = Path("/sys/module/zfs")


def ensure_running(runner: Runner, max_arc_mib: int | None = None) -> int | None:
    """Start zfs-fuse if no ZFS answers; returns the pid we started, or None.
    `max_arc_mib`: the ARC's size for a daemon started here (zfs-fuse's --max-arc-size,
    which overrides /etc/zfs/zfsrc); a daemon that already answers is used as it is."""
    if runner.dry_run or OPENZFS_MODULE.exists() or runner.which("zfs-fuse") is None:
        return None
    if answers(runner):
        return None
    piddir = Path(tempfile.mkdtemp(prefix="poolbench-zfsfuse-"))
    pidfile = piddir / "pid"
    # zfs-fuse daemonizes itself: keep it out of the runner's process-group cleanup.
    arc = [] if max_arc_mib is None else ["--max-arc-size", str(max_arc_mib)]
    runner.run(["zfs-fuse", "--pidfile", str(pidfile), *arc], reap_group=False)
    try:
        return _await(runner, pidfile)
    except BaseException:
        # Ctrl-C or SIGTERM while it starts (or it never answered): the daemon started here
        # is stopped here, since no caller has its pid yet.
        pid = _await_pid(pidfile, 5.0)
        if pid is not None:
            stop(pid)
        raise


def _await_pid(pidfile: Path, seconds: float) -> int | None:
    """The daemon's pid once it wrote its pid file (it does so after it forked)."""
    deadline = time.monotonic() + seconds
    while True:
        text = pidfile.read_text().strip() if pidfile.exists() else ""
        if is_digits(text):
            return int(text)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


def _await(runner: Runner, pidfile: Path) -> int:
    deadline = time.monotonic() + 30
    pid: int | None = None
    while time.monotonic() < deadline:
        if pid is None:
            pid = _await_pid(pidfile, 0)
        if pid is not None and answers(runner):
            return pid
        time.sleep(0.2)
    raise PoolbenchError(
        "Started the zfs-fuse daemon but it did not answer within 30 s.",
        'Check `zfs-fuse --no-daemon` by hand, or use btrfs (backend = "btrfs").',
    )


def stop(pid: int) -> None:
    """Stop the daemon poolbench started; a stop signal waits until it has ended."""
    with stopping.deferred("stopping the zfs-fuse daemon poolbench started"):
        _stop(pid)


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, IndexError):
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.2)
