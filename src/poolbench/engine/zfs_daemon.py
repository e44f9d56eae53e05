"""zfs-fuse for the length of a command: started if it is not running, stopped after.

Used by `poolbench demo`, so the CLI does not speak to the ZFS layer itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from poolbench.system.runner import Runner
from poolbench.zfs import fusedaemon


@contextmanager
def zfs_available(runner: Runner) -> Iterator[bool]:
    """Yield whether ZFS answers; a zfs-fuse daemon started here is stopped on the way out."""
    started = fusedaemon.ensure_running(runner)
    try:
        yield fusedaemon.answers(runner)
    finally:
        if started is not None:
            fusedaemon.stop(started)
