"""Tearing down a pool that stopped answering, as far as it can go, every step bounded.

A plain `zpool destroy` of a suspended pool waits for I/O that never completes (and on
zfs-fuse holds the daemon's pool lock while it waits, so every later zpool command would
hang behind it). So a pool found suspended is released this way instead:

1. `zpool clear`: a pool whose devices are back resumes, and is then destroyed as usual;
2. each of its mounts is detached lazily (`umount -l`): nothing new can wait on them;
3. `zpool destroy -f`, else `zpool export -f`.

What still cannot be released raises PoolStuck, which names the pool, its devices, what ZFS
says, and what releases it: its devices back (room, a disk reconnected), then `poolbench
cleanup`; failing that, on zfs-fuse, stopping the daemon; on OpenZFS a reboot (it cannot
export a suspended pool).

The FUSE connections of a zfs-fuse pool are never aborted (through fusectl), although that
would wake a process asleep in them at once: measured here, a connection aborted while one
of its requests waited inside the pool left zfs-fuse unable to destroy the pool once its
disks were back ("pool is busy", with -f too) and to answer any file system mounted after it
(a new pool's first stat() hung), so one stuck trial would hang every later one. Without the
abort, the stuck process ends when its I/O returns and the same daemon measures on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.errors import PoolbenchError
from poolbench.system.runner import Runner
from poolbench.system.watchdog import CommandTimedOut, announce, scaled
from poolbench.zfs import commands, pools
from poolbench.zfs.health import PoolHealth, probe

CLEAR_S = 30.0
FORCE_S = 60.0  # destroy -f / export -f of a suspended pool: it answers at once or never


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    source: str  # a ZFS file system's dataset: the pool's name, or NAME/...


def destroy(runner: Runner, name: str, members: Sequence[str], dialect: str,
            table: Sequence[Mount]) -> None:  # fmt: skip
    """`zpool destroy NAME`, or, for a pool that stopped answering (suspended on I/O errors,
    or a ZFS that does not answer), `release`."""
    found = probe(runner, name, dialect)
    if not found.stopped_answering:
        pools.destroy(runner, name)
        return
    mine = [m for m in table if m.source == name or m.source.startswith(name + "/")]
    release(runner, name, members, dialect, mine, found)


class PoolStuck(PoolbenchError):
    """A pool that stopped answering could not be destroyed or exported."""


def guid(runner: Runner, name: str, members: Sequence[str], dialect: str) -> int | None:
    """The imported pool's GUID (None: not imported), as the teardown asks it before
    anything; a ZFS that does not answer even that raises PoolStuck, with what releases it."""
    try:
        return pools.pool_guid(runner, name)
    except CommandTimedOut as exc:
        raise PoolStuck(
            f"Pool {name} (on {', '.join(members)}) could not be destroyed: ZFS itself did not "
            f"answer ({exc.problem.rstrip('.')}).",
            release_hint(name, dialect),
        ) from exc


def _try(runner: Runner, argv: list[str], limit: float) -> bool | None:
    """True: it worked; False: it failed; None: it did not answer within `limit`."""
    try:
        return runner.run(argv, check=False, timeout=limit).returncode == 0
    except CommandTimedOut as exc:
        announce(f"teardown: {exc.problem}")
        return None


def release(
    runner: Runner, name: str, members: Sequence[str], dialect: str, mounts: Sequence[Mount],
    health: PoolHealth,
) -> None:  # fmt: skip
    """Destroy the pool `name` found suspended (or not answering) as far as it can go; raises
    PoolStuck when it is still imported."""
    announce(f"teardown: {health.describe()}; releasing it")
    if health.answered and _try(runner, ["zpool", "clear", name], scaled(CLEAR_S)) is not None:
        after = probe(runner, name, dialect)
        if after.answered and not after.suspended:
            announce(f"teardown: pool {name} resumed after `zpool clear`")
            pools.destroy(runner, name)
            return
    for m in mounts:
        _try(runner, ["umount", "-l", m.mountpoint], scaled(FORCE_S))
    if health.answered:
        for argv in (["zpool", "destroy", "-f", name], ["zpool", "export", "-f", name]):
            done = _try(runner, argv, scaled(FORCE_S))
            if done and pools.members(runner, name) is None:
                return
            if done is None:
                break  # it waits for the same I/O as the other would
    raise PoolStuck(
        f"Pool {name} (on {', '.join(members)}) stopped answering and could not be "
        f"destroyed: {health.describe()}.",
        release_hint(name, dialect),
    )


def release_hint(name: str, dialect: str) -> str:
    if dialect == commands.ZFS_FUSE:
        return (
            "Make its disks take writes again (free the space their files sit on, reconnect "
            "the disk): the pool resumes, a process asleep in it ends, and `poolbench "
            "cleanup` destroys the pool and detaches its devices. If the disks are gone for "
            "good, or cleanup still answers 'pool is busy', zfs-fuse holds the pool in its "
            "own process: stopping the zfs-fuse daemon "
            "(if nothing else of yours runs on it: `kill $(pidof zfs-fuse)`, then `kill -9` "
            "if it does not exit) releases the pool and its devices; start it again and run "
            "`poolbench cleanup`. A FUSE mount left answering 'Transport endpoint is not "
            "connected' goes with `umount -l`."
        )
    return (
        f"OpenZFS keeps a suspended pool until its I/O can resume: bring its devices back "
        f"(reconnect the disk) and run `zpool clear {name}`, then `poolbench cleanup`. If the "
        "disks are gone for good, only a reboot releases it (OpenZFS cannot export a "
        "suspended pool), then `poolbench cleanup`."
    )
