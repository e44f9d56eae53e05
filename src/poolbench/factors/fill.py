"""The `fill` trial factor: the pool filled to a share of its usable space with
incompressible data (fio, fsync'd, untimed) after it is built and before the workloads run,
so a layout is measured as full as it will be used. A configuration with `aging` is aged to
its fill level instead (factors/aging.py), not filled in one pass."""

from __future__ import annotations

import os
import time
from pathlib import Path

from poolbench.backends.base import Pool
from poolbench.errors import UsageError
from poolbench.factors import specs
from poolbench.factors.base import AfterPool, Factor
from poolbench.factors.specs import Spec, int_in
from poolbench.records import sections
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import streaming

KEY = specs.FILL
MiB = 1 << 20
CHUNK = 1 << 30  # bytes per fill file


def usable_bytes(pool: Pool) -> int:
    """The pool's usable space as it reports it (ZFS: USED + AVAIL), else statvfs."""
    usable = pool.described.get("usable_bytes")
    if isinstance(usable, int) and usable > 0:
        return usable
    st = os.statvfs(pool.mountpoint)
    return st.f_blocks * st.f_frsize


def check_room(name: str, usable: int, percent: int, working_set: int) -> None:
    """Refuse (before writing) a fill level that leaves too little room for the working set."""
    filler = usable * percent // 100
    need = working_set * 3 // 2 + 16 * MiB  # the working set, rewritten copy-on-write
    if filler + need > usable * 98 // 100:
        raise UsageError(
            f"Filling {name} to {percent}% leaves {(usable - filler) >> 20} MiB, too "
            f"little for a {working_set >> 20} MiB working set.",
            "Use a smaller working set (--size) or larger disks.",
        )


def directory_of(pool: Pool) -> Path:
    """Where the fill's files (and their fio job files) go."""
    return pool.mountpoint / ".poolbench-fill"


def jobs(directory: Path, filler: int) -> list[tuple[Path, str]]:
    """The fill's fio jobs in order, (job file, job text): `filler` bytes (whole MiB) in one
    file per GiB, so no single huge file and fio's sizes stay exact."""
    out: list[tuple[Path, str]] = []
    left, i = filler - filler % MiB, 0
    while left > 0:
        size = min(CHUNK, left)
        params = fiojob.JobParams(str(directory), size, file_prefix=f"fill{i}")
        out.append((directory / f"fill{i}.fio", fiojob.render(streaming("write"), params)))
        left -= size
        i += 1
    return out


def prefill(
    runner: Runner, pool: Pool, percent: int, working_set: int, streams: int = 1
) -> sections.FillRecord | None:
    """Fill the pool to `percent` of its usable space with incompressible data (fio, fsync'd,
    untimed) before the workloads run; returns what was done, for every measurement's guards
    (a dry run, its fio commands printed: None, nothing was filled).

    Refuses (before writing) when the working set would not fit on top of the filler."""
    usable = usable_bytes(pool)  # a dry run's pool: its planned usable space
    filler = usable * percent // 100
    check_room(pool.spec.name, usable, percent, working_set)
    directory = directory_of(pool)
    record = sections.FillRecord(asked_percent=percent, usable_bytes=usable)
    if not runner.dry_run:
        directory.mkdir(exist_ok=True)
    t0 = time.monotonic()
    for path, job in jobs(directory, filler):
        fio.run_job(runner, job, path, "write")
    if runner.dry_run:
        return None
    st = os.statvfs(pool.mountpoint)
    used = usable - st.f_bavail * st.f_frsize
    record.update(
        {
            "filler_bytes": filler - filler % MiB,
            "used_bytes_after": used,
            "achieved_percent": round(100 * used / usable, 1) if usable else None,
            "data": "incompressible (fio refill_buffers), fsync'd, not timed",
            "seconds": round(time.monotonic() - t0, 2),
        }
    )
    return record


def prefill_mib(levels: specs.Levels, basis: specs.Basis) -> float:
    """The estimate's untimed work: the pool filled (a share of the raw space) before the
    workloads, once more in part for every aging round (aging fills through this)."""
    aged = levels.get(specs.AGING) is not None
    level = levels.get(KEY, specs.AGING_FILL if aged else None)
    if level is None:
        return 0.0
    rewrites = 1 + specs.AGING_REWRITE_PER_ROUND * int(str(levels.get(specs.AGING) or 0))
    return int(str(level)) / 100 * basis.raw_mib * rewrites


class Fill(Factor):
    """The pool filled before its workloads (unless a factor that `replaces` it is active)."""

    specs = (
        Spec(
            KEY,
            "percent of the pool's usable space filled (incompressible, untimed) "
            "before the workloads run: 1..95",
            int_in(1, 95),
            prefill_mib,
        ),
    )
    order = 40  # the pool's data laid down, after the ARC's ceiling and before any member slows
    section = sections.FILL

    def after_pool(self, at: AfterPool) -> sections.FillRecord | None:
        assert at.working_set is not None
        return prefill(at.runner, at.pool, int(at.levels[KEY]), at.working_set, at.streams)


FACTOR = Fill()
