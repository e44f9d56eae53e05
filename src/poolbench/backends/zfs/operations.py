"""What the resilver, expansion and accounting studies do to a built pool: take a member
offline, replace it and wait for the resilver (and the scrub after a sequential rebuild),
attach a disk to a raidz vdev, and read the pool's own accounting after a measurement."""

from __future__ import annotations

import time

from poolbench import is_digits
from poolbench.backends.base import Pool
from poolbench.errors import PoolbenchError
from poolbench.system import watchdog
from poolbench.system.runner import Runner
from poolbench.zfs import ops
from poolbench.zfs.dialect import OPENZFS
from poolbench.zfs.parse import IostatRow, ResilverStatus, ScrubStatus, TopVdev


def expansion_supported(version: str) -> bool:
    """Whether the ZFS that reported `version` (`zpool version`'s first line, or zfs-fuse's)
    can attach a disk to a raidz vdev: OpenZFS >= 2.3."""
    from poolbench.planner.rules import raidz_expansion_supported, reported_release

    return raidz_expansion_supported(reported_release(version))


def data_vdevs(runner: Runner, pool: Pool) -> list[TopVdev]:
    """The data vdevs with their members as `zpool status` names them now (after an
    export/import through the member links, that is the link's path)."""
    return ops.status(runner, pool.spec.name).tops


def attach(runner: Runner, pool: Pool, vdev: str, new: str) -> float:
    """Attach `new` to the raidz vdev `vdev`; the seconds `zpool attach -w` took (it returns
    when the reflow is done)."""
    allocated = None if runner.dry_run else ops.pool_prop(runner, pool.spec.name, "allocated",
                                                          OPENZFS)  # fmt: skip
    moved = int(allocated) if allocated is not None and is_digits(allocated) else 0
    t0 = time.monotonic()
    ops.attach_wait(runner, pool.spec.name, vdev, new, watchdog.work_limit(moved=moved))
    return max(time.monotonic() - t0, 1e-3)


def settle_expansion(runner: Runner, pool: Pool) -> None:
    """After `zpool attach -w` the new metaslabs arrive in a later transaction group (seen on
    2.3.2: SIZE still the old width's until then): two `zpool sync` before reading it back."""
    for _ in range(2):
        ops.sync(runner, pool.spec.name)


def usable_now(runner: Runner, pool: Pool) -> int | None:
    """USED + AVAIL of the root dataset as ZFS reports it now."""
    got = [ops.dataset_value(runner, pool.spec.name, p) for p in ("used", "available")]
    if all(v is not None and is_digits(v) for v in got):
        return sum(int(v) for v in got if v is not None)
    return None


def wait_resilver(runner: Runner, pool: Pool, timeout: float = 3600.0) -> ResilverStatus:
    """Poll `zpool status` until the resilver is reported finished."""
    deadline = time.monotonic() + timeout
    while True:
        st = ops.resilver_status(runner, pool.spec.name)
        if st.done or runner.dry_run:
            return st
        if time.monotonic() > deadline:
            raise PoolbenchError(
                f"The resilver of {pool.spec.name} did not finish within {timeout:.0f} s.",
                "Use a smaller working set, or check the pool with `zpool status`.",
            )
        time.sleep(0.1)


def wait_scrub(runner: Runner, pool: Pool, timeout: float = 3600.0,
               start: float = 30.0) -> ScrubStatus:  # fmt: skip
    """Poll `zpool status` until the scrub that follows a sequential rebuild finishes;
    one not seen within `start` seconds is reported as not seen."""
    t0 = time.monotonic()
    while True:
        st = ops.scrub_status(runner, pool.spec.name)
        if st.done or runner.dry_run:
            return st
        waited = time.monotonic() - t0
        if not st.seen and waited > start:
            return st
        if waited > timeout:
            raise PoolbenchError(
                f"The scrub of {pool.spec.name} did not finish within {timeout:.0f} s.",
                "Use a smaller working set, or check the pool with `zpool status`.",
            )
        time.sleep(0.1)


def sync_txg(runner: Runner, pool: Pool, dialect: str) -> None:
    """OpenZFS: write the open transaction group (`zpool sync`). What a workload wrote
    is in the ZIL after its fsync and syncfs, but in the pool's allocation (iostat's
    alloc, a zvol's referenced, compressratio) only once its txg is written; zfs-fuse
    (pool v23) has no `zpool sync`."""
    if dialect == OPENZFS:
        ops.sync_if_possible(runner, pool.spec.name)


def iostat_snapshot(runner: Runner, pool: Pool, dialect: str) -> list[IostatRow] | None:
    """OpenZFS: every vdev's `zpool iostat -vlp` figures since import, or None (zfs-fuse
    has no latency columns; a failed read is not a failed trial)."""
    if dialect != OPENZFS:
        return None
    return ops.iostat_members(runner, pool.spec.name)
