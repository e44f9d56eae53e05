"""A trial whose pool or file system stopped answering: named, with its devices and what ZFS
says, as the trial's failure (stored with it; the study then goes on or stops by the failure
rules of engine/trial_loop.py).

A command of the trial that ran past its time limit (system/watchdog.py), or failed, is
looked at with the pool's health (zfs/health.py): a pool suspended on I/O errors, one whose
own row counts I/O errors, or a ZFS that does not answer `zpool status` turns the failure into
PoolStoppedAnswering, whose reason reads "Pool NAME (on DEVICES) stopped answering: ...". A
time limit that ran out on another stack (btrfs, md) names its file system and devices.
"""

from __future__ import annotations

from poolbench.backends.base import Pool
from poolbench.errors import PoolbenchError
from poolbench.system.runner import CommandError, Runner
from poolbench.system.watchdog import CommandTimedOut
from poolbench.zfs import health


class PoolStoppedAnswering(PoolbenchError):
    """The trial's pool (or file system) stopped answering while the trial used it."""


def explain(runner: Runner, pool: Pool, dialect: str, failure: PoolbenchError) -> PoolbenchError:
    """`failure` as PoolStoppedAnswering when the pool stopped answering, else itself."""
    if runner.dry_run or not isinstance(failure, CommandTimedOut | CommandError):
        return failure
    spec = pool.spec
    devices = ", ".join(spec.devices)
    if spec.backend == "zfs":
        found = health.probe(runner, spec.name, dialect)
        if not found.stopped_answering:
            return failure
        what = found.describe()
    elif isinstance(failure, CommandTimedOut):
        what = f"its file system at {pool.mountpoint} did not answer"
    else:
        return failure
    return PoolStoppedAnswering(
        f"Pool {spec.name} (on {devices}) stopped answering: {failure.problem.rstrip('.')}; "
        f"{what}.",
        "The trial was failed and torn down as far as the pool allowed; check the disks "
        "(dmesg, smartctl) before measuring them again.",
    )
