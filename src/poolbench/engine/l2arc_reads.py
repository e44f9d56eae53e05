"""The `l2arc-read-SIZE` pool operation: random reads over the working set in consecutive
intervals, with the ARC's and the L2ARC's counters read between them, so the warm-up of a
cache device shows interval by interval (guards/l2arc.py).

The study's run time is split into INTERVALS fio runs of equal length, each a time-based
random read of the data the session laid out (buffered: the reads go through the ARC, as an
application's do). Each interval has its own seed, derived from the measurement's, so a
replicate replays the same offsets. The figure is the steady IOPS: the reads of the last
half of the intervals over their seconds.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from poolbench.engine.hooks import OpResult
from poolbench.engine.op_sections import L2arcRecord
from poolbench.errors import PoolbenchError
from poolbench.guards import l2arc
from poolbench.guards.cache import ARCSTATS, read_arcstats
from poolbench.system import modparams
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import L2ARC_INTERVALS as INTERVALS
from poolbench.workloads.library import l2arc_interval_s, random_io
from poolbench.workloads.workload import Workload

TUNABLES = ("l2arc_write_max", "l2arc_write_boost", "l2arc_noprefetch", "l2arc_headroom")


def measure(
    runner: Runner,
    w: Workload,
    params: fiojob.JobParams,
    arcstats: Path = ARCSTATS,
    parameters: Path = modparams.PARAMETERS,
) -> OpResult:
    reads = random_io("read", int(w.fio["bs"]))
    length = l2arc_interval_s(params.runtime_s)
    p = replace(params, runtime_s=length, min_window_s=0.0)
    seed = params.randseed or 0
    jobs = Path(params.directory) / "jobs"

    # A dry run reads no counters (nothing ran; on a machine without OpenZFS there are
    # none): its intervals count nothing.
    def snapshot() -> dict[str, int]:
        return {} if runner.dry_run else _snapshot(arcstats)

    before = snapshot()
    out: list[l2arc.Interval] = []
    for i in range(INTERVALS):
        job = fiojob.render(reads, replace(p, randseed=(seed + i) & 0x7FFFFFFF))
        r = fio.run_job(runner, job, jobs / f"{w.name}.{i}.fio", "read")
        after = snapshot()
        p99 = r.latency.p(99.0) if r.latency is not None else None
        ms = None if p99 is None else p99 / 1e6
        out.append(l2arc.interval(i, before, after, r.runtime_s, r.iops, ms))
        before = after
    steady = l2arc.summarize(out)
    section = L2arcRecord(
        intervals=[x.as_dict() for x in out],
        steady=steady.as_dict(),
        interval_s=length,
        how=f"{INTERVALS} consecutive {length} s fio random {reads.fio['bs']}-byte "
        "buffered reads of the working set, arcstats read between them; steady = the last "
        f"{len(l2arc.steady(out))} intervals",
        tunables={k: modparams.read(k, parameters) for k in TUNABLES},
    )
    total_s = sum(x.seconds for x in out)
    app = int(sum(x.iops * x.seconds for x in out)) * int(w.fio["bs"])
    return OpResult(steady.iops, app, total_s, ops=app // int(w.fio["bs"]),
                    sections={"l2arc": section}, warnings=_warnings(steady))  # fmt: skip


def _snapshot(arcstats: Path) -> dict[str, int]:
    got = read_arcstats(arcstats)
    if got is None:
        raise PoolbenchError(
            f"The l2arc reads need the ARC's counters, but {arcstats} cannot be read.",
            "Run the l2arc study on OpenZFS (zfs-fuse publishes no L2ARC counters).",
        )
    return got


def _warnings(steady: l2arc.Steady) -> list[str]:
    if steady.arc_hit_rate is not None and steady.arc_hit_rate > 0.9:
        return [
            f"the ARC served {steady.arc_hit_rate:.0%} of the steady reads: the working set "
            "is not larger than the ARC, so this measures RAM, not the cache device"
        ]
    return []
