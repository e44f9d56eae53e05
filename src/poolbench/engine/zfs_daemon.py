"""zfs-fuse for the length of a command: started if it is not running, stopped after.

Used by `poolbench demo`, so the CLI does not speak to the ZFS layer itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from poolbench.engine import quanta
from poolbench.guards.cache import FUSE_ARCSTATS
from poolbench.system.runner import Runner
from poolbench.zfs import fusedaemon

MiB = 1 << 20


@contextmanager
def zfs_available(runner: Runner, max_arc_mib: int | None = None) -> Iterator[bool]:
    """Yield whether ZFS answers; a zfs-fuse daemon started here (with an ARC of
    `max_arc_mib`, where given) is stopped on the way out."""
    started = fusedaemon.ensure_running(runner, max_arc_mib)
    try:
        yield fusedaemon.answers(runner)
    finally:
        if started is not None:
            fusedaemon.stop(started)


def larger_arc(max_arc_mib: int, fuse_arcstats: Path = FUSE_ARCSTATS) -> str:
    """What to say when the zfs-fuse that answers has a larger ARC than `max_arc_mib`, the
    one a daemon started here would have had (someone else's daemon, used as it is): its
    write quanta are larger, and the steady-state rule needs more data to judge; "" else."""
    if fusedaemon.OPENZFS_MODULE.exists():
        return ""
    half = quanta.of("zfs-fuse", fuse_arcstats).write
    if half is None or 2 * half <= max_arc_mib * MiB:
        return ""
    return (
        f"zfs-fuse was already running, with an ARC of {2 * half / MiB:g} MiB (the demo "
        f"starts its own with {max_arc_mib} MiB where none runs): it admits writes "
        f"{half / MiB:g} MiB at a time, so windows sized for {max_arc_mib // 2} MiB quanta "
        "may be too short for the steady-state rule to judge, and say so."
    )
