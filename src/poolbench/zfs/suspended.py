"""Tearing down a pool that stopped answering, as far as it can go, every step bounded.

A plain `zpool destroy` of a suspended pool waits for I/O that never completes (and on
zfs-fuse holds the daemon's pool lock while it waits, so every later zpool command would
hang behind it). So a pool found suspended is released this way instead:

1. `zpool clear`: a pool whose devices are back resumes, and is then destroyed as usual;
2. on zfs-fuse, each of its file systems' FUSE connections is aborted (only this pool's own
   mounts): processes asleep in them (an abandoned fio, a PostgreSQL server) get an error
   and end, instead of waiting for ever;
3. each of its mounts is detached lazily (`umount -l`): nothing new can wait on them;
4. `zpool destroy -f`, else `zpool export -f`.

What still cannot be released raises PoolStuck, which names the pool, its devices, what ZFS
says, and what releases it: on zfs-fuse, restarting the daemon; on OpenZFS, the devices
back and `zpool clear`, or a reboot (OpenZFS cannot export a suspended pool).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poolbench.errors import PoolbenchError
from poolbench.system.runner import Runner
from poolbench.system.watchdog import CommandTimedOut, announce, scaled
from poolbench.zfs import commands, pools
from poolbench.zfs.health import PoolHealth, probe

CLEAR_S = 30.0
FORCE_S = 60.0  # destroy -f / export -f of a suspended pool: it answers at once or never
FUSE_CONNECTIONS = Path("/sys/fs/fuse/connections")


@dataclass(frozen=True)
class Mount:
    mountpoint: str
    fstype: str
    majmin: str  # "0:52": a FUSE mount's connection is /sys/fs/fuse/connections/52
    source: str  # a ZFS file system's dataset: the pool's name, or NAME/...


def destroy(runner: Runner, name: str, members: Sequence[str], dialect: str,
            table: Sequence[Mount], connections: Path = FUSE_CONNECTIONS) -> None:  # fmt: skip
    """`zpool destroy NAME`, or, for a pool that stopped answering (suspended on I/O errors,
    or a ZFS that does not answer), `release`."""
    found = probe(runner, name, dialect)
    if not found.stopped_answering:
        pools.destroy(runner, name)
        return
    mine = [m for m in table if m.source == name or m.source.startswith(name + "/")]
    release(runner, name, members, dialect, mine, found, connections)


class PoolStuck(PoolbenchError):
    """A pool that stopped answering could not be destroyed or exported."""


def _try(runner: Runner, argv: list[str], limit: float) -> bool | None:
    """True: it worked; False: it failed; None: it did not answer within `limit`."""
    try:
        return runner.run(argv, check=False, timeout=limit).returncode == 0
    except CommandTimedOut as exc:
        announce(f"teardown: {exc.problem}")
        return None


def abort_fuse(mounts: Sequence[Mount], connections: Path = FUSE_CONNECTIONS) -> list[str]:
    """Abort the FUSE connection of each zfs-fuse mount given (this pool's own); returns the
    connections aborted. Needs the fusectl file system (/sys/fs/fuse/connections)."""
    done = []
    for m in mounts:
        minor = m.majmin.partition(":")[2]
        abort = connections / minor / "abort"
        if m.fstype.startswith("fuse") and abort.exists():
            with contextlib.suppress(OSError):
                abort.write_text("1\n")
                done.append(str(abort))
    return done


def release(
    runner: Runner, name: str, members: Sequence[str], dialect: str, mounts: Sequence[Mount],
    health: PoolHealth, connections: Path = FUSE_CONNECTIONS,
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
    if dialect == commands.ZFS_FUSE:
        for path in abort_fuse(mounts, connections):
            announce(f"teardown: aborted the FUSE connection of a file system of {name} ({path})")
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
            "zfs-fuse holds it in its own process: stopping the zfs-fuse daemon (if nothing "
            "else of yours runs on it: `kill $(pidof zfs-fuse)`, then `kill -9` if it does not "
            "exit) releases the pool and its devices; start it again and run `poolbench "
            "cleanup`, which destroys the pool and detaches its devices. A FUSE mount left "
            "answering 'Transport endpoint is not connected' goes with `umount -l`."
        )
    return (
        f"OpenZFS keeps a suspended pool until its I/O can resume: bring its devices back "
        f"(reconnect the disk) and run `zpool clear {name}`, then `poolbench cleanup`. If the "
        "disks are gone for good, only a reboot releases it (OpenZFS cannot export a "
        "suspended pool), then `poolbench cleanup`."
    )
