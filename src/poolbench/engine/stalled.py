"""A trial whose pool or file system stopped answering: named, with its devices and what ZFS
says, as the trial's failure (stored with it; the study then goes on or stops by the failure
rules of engine/trial_loop.py).

A command of the trial that ran past its time limit (system/watchdog.py), or failed, is
looked at with what its backend says of the pool (`stopped_answering`): for ZFS its health
(zfs/health.py: a pool suspended on I/O errors, one whose own row counts I/O errors, a ZFS
that does not answer `zpool status`); on another stack (btrfs, md) a time limit that ran out
names its file system. Either turns the failure into PoolStoppedAnswering, whose reason reads
"Pool NAME (on DEVICES) stopped answering: ...".
"""

from __future__ import annotations

from poolbench.backends.base import Backend, Pool
from poolbench.errors import PoolbenchError
from poolbench.system.runner import CommandError, Runner
from poolbench.system.watchdog import CommandTimedOut


class PoolStoppedAnswering(PoolbenchError):
    """The trial's pool (or file system) stopped answering while the trial used it."""


def explain(
    runner: Runner, backend: Backend, pool: Pool, failure: PoolbenchError
) -> PoolbenchError:
    """`failure` as PoolStoppedAnswering when the pool stopped answering, else itself."""
    if runner.dry_run or not isinstance(failure, CommandTimedOut | CommandError):
        return failure
    what = backend.stopped_answering(pool, failure)
    if what is None:
        return failure
    spec = pool.spec
    return PoolStoppedAnswering(
        f"Pool {spec.name} (on {', '.join(spec.devices)}) stopped answering: "
        f"{failure.problem.rstrip('.')}; {what}.",
        "The trial was failed and torn down as far as the pool allowed; check the disks "
        "(dmesg, smartctl) before measuring them again.",
    )
