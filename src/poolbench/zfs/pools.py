"""zpool commands run through the Runner, their failures raised as typed errors.

`run` is the only way this package starts a zpool/zfs process that may fail: a non-zero exit
becomes the `errors` type its stderr names, so callers write `except PoolBusy` and never match
words in a message themselves.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence

from poolbench.errors import PoolbenchError
from poolbench.system.runner import CommandResult, Runner
from poolbench.zfs import commands, parse
from poolbench.zfs.dialect import ZFS_FUSE
from poolbench.zfs.errors import TRANSIENT, error_for, error_type

log = logging.getLogger(__name__)

# zfs-fuse answers "pool is busy" for a while after an unmount, longer on a loaded machine.
# The limit (docs/studies.md, "Transient errors") may be changed with POOLBENCH_BUSY_SECONDS.
BUSY_SECONDS = 30.0


def busy_seconds() -> float:
    """How long a busy pool step is retried: POOLBENCH_BUSY_SECONDS, else BUSY_SECONDS."""
    text = os.environ.get("POOLBENCH_BUSY_SECONDS", "")
    try:
        value = float(text)
    except ValueError:
        return BUSY_SECONDS
    return value if 0 <= value <= 3600 else BUSY_SECONDS


def run(
    runner: Runner, argv: Sequence[str], *, mutates: bool = True, fix: str = "",
    timeout: float | None = None,
) -> CommandResult:  # fmt: skip
    """Run argv; a failure raises the typed error (a CommandError) its stderr names.
    `timeout`: its limit, when its program's default (system/watchdog.py) is not it."""
    res = runner.run(argv, check=False, mutates=mutates, timeout=timeout)
    if res.returncode != 0:
        raise error_for(res, fix)
    return res


def read(runner: Runner, argv: Sequence[str]) -> CommandResult:
    """A read-only command (it also runs in a dry run)."""
    return run(runner, argv, mutates=False)


def answers(runner: Runner) -> bool:
    """Whether a ZFS answers here (the kernel module, or the zfs-fuse daemon)."""
    if runner.which("zpool") is None:
        return False
    return runner.run(commands.list_pools(), check=False, mutates=False).returncode == 0


def imported(runner: Runner, tries: int = 3) -> dict[str, int]:
    """Name -> GUID of every imported pool. Works with OpenZFS and zfs-fuse."""
    for attempt in range(tries):  # the daemon may be busy or restarting: try again
        res = runner.run(commands.list_guids(), check=False, mutates=False)
        if res.returncode == 0:
            return parse.parse_pool_list(res.stdout)
        if attempt + 1 < tries:
            time.sleep(0.2 * (attempt + 1))
    raise PoolbenchError(
        f"Cannot list ZFS pools: {res.stderr.strip() or res.returncode}.",
        "Is the ZFS service (zfs-fuse daemon or the zfs module) running?",
    )


def pool_guid(runner: Runner, name: str) -> int | None:
    """GUID of the imported pool `name`, or None."""
    return imported(runner).get(name)


def status_text(runner: Runner, name: str, dialect: str = ZFS_FUSE,
                full_paths: bool = False) -> str:  # fmt: skip
    """`zpool status POOL` output; NoSuchPool if no such pool is imported."""
    return read(runner, commands.status(name, dialect, full_paths)).stdout


def members(runner: Runner, name: str) -> list[str] | None:
    """Real paths of every leaf device of the imported pool `name`, or None if no such pool
    is imported. A leaf shown without a path is a name under /dev."""
    res = runner.run(commands.status(name), check=False, mutates=False)
    if res.returncode != 0:
        return None
    return parse.member_paths(res.stdout, name)


def retry_busy(
    runner: Runner, argv: list[str], fix: str = "", *, fix_transient_only: bool = False
) -> None:
    """Run a zpool command, retried while its answer is transient: busy (destroy, export),
    or a just-labelled device still settling (create).

    zfs-fuse can answer "busy" for seconds after its last unmount, more so on a loaded
    machine; OpenZFS's `zpool create` on a whole disk can find the partition it has just
    written not yet there or held by udev. Retry with a growing pause (0.2 s doubling to
    2 s), for up to busy_seconds(); the last transient answer is raised (a trial failure:
    trial_loop.py). `fix` goes with the raised error (only a transient one if asked).
    """
    fix = fix or "Is a process still using the pool's mountpoint?"
    deadline = time.monotonic() + busy_seconds()
    pause = 0.2
    while True:
        res = runner.run(argv, check=False, mutates=True)
        if res.returncode == 0:
            return
        kind = error_type(res.stderr)
        transient = kind in TRANSIENT
        if not transient or time.monotonic() > deadline:
            raise kind(res, fix if transient or not fix_transient_only else "")
        log.info("%s: %s, retrying in %.1f s", " ".join(argv), kind.__name__, pause)
        time.sleep(pause)
        pause = min(pause * 2, 2.0)


def create(runner: Runner, argv: list[str]) -> None:
    """`zpool create` (argv from commands.create), retried while a device is settling."""
    fix = (
        "Check that udev runs (`udevadm settle` returns) and that no other program holds the "
        "disks (mdadm, LVM, a mount); POOLBENCH_BUSY_SECONDS waits longer."
    )
    retry_busy(runner, argv, fix, fix_transient_only=True)


def destroy(runner: Runner, name: str) -> None:
    retry_busy(runner, commands.destroy(name))


def export(runner: Runner, name: str) -> None:
    retry_busy(runner, commands.export(name))
