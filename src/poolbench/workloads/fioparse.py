"""Parse fio's JSON output (pure).

fio sometimes prints warnings to stdout before (or after) its JSON ("fio: ...", "note: ...",
"Starting 1 process"), so the parser looks for the JSON object instead of trusting the whole
text. A job that failed has a non-zero "error" field: that becomes a FioJobFailed, never a
figure.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from poolbench.errors import PoolbenchError
from poolbench.records.jsontypes import JsonObject

# The latency record is the stored measurement's (records/); fio's parser fills it.
from poolbench.records.latency import Latency
from poolbench.workloads.fioentry import FioJob, FioSide


class FioOutputError(PoolbenchError):
    """fio's output could not be read as a result."""


class FioJobFailed(PoolbenchError):
    """fio ran, but a job reported an error."""


def percentile_from_bins(bins: Mapping[int, int], q: float) -> float | None:
    """The q-th percentile of a fio histogram as fio computes it (stat.c,
    calc_clat_percentiles): the value of the first bin at which the running count reaches
    q% of all completions."""
    total = sum(bins.values())
    if total <= 0:
        return None
    need = q / 100.0 * total
    running = 0
    for value in sorted(bins):
        running += bins[value]
        if running >= need:
            return float(value)
    return float(max(bins))


def latency(jobs: Sequence[FioJob], direction: str) -> Latency | None:
    """The completion latency of a run. One job entry (group_reporting): fio's own figures.
    Several entries (jobs reported apart): their histograms merged and the percentiles
    computed from the merged bins as fio would; without bins nothing honest can be merged
    (a percentile of percentiles is not a percentile), so None."""
    # A read/write mix: both halves' completions, merged by their histograms like jobs.
    sections = ("read", "write") if direction == "mixed" else (direction,)
    found = [side.clat for j in jobs for s in sections if (side := j.sides.get(s)) and side.clat]
    if len(found) <= 1:
        return found[0] if found else None
    if not all(lat.bins for lat in found):
        return None
    bins: dict[int, int] = {}
    for lat in found:
        for k, v in lat.bins.items():
            bins[k] = bins.get(k, 0) + v
    n = sum(lat.samples for lat in found)
    mean = sum(lat.mean_ns * lat.samples for lat in found) / n
    var = sum(lat.samples * (lat.stddev_ns**2 + (lat.mean_ns - mean) ** 2) for lat in found) / n
    keys = {k for lat in found for k in lat.percentiles}
    pct = {k: percentile_from_bins(bins, float(k)) for k in keys}
    return Latency(
        direction, n, mean, min(lat.min_ns for lat in found), max(lat.max_ns for lat in found),
        math.sqrt(var), {k: v for k, v in pct.items() if v is not None}, bins,
    )  # fmt: skip


@dataclass(frozen=True)
class FioResult:
    """What one fio run measured, summed over its jobs (group_reporting)."""

    direction: str  # "read" or "write" (metadata engines report in "read")
    io_bytes: int
    total_ios: int
    runtime_s: float  # the job's runtime, including end_fsync for writes
    bw_bytes: float  # bytes per second as fio computed it
    iops: float
    # Spread of fio's own bandwidth samples inside this one run. Never used as a confidence
    # interval: within-run spread says nothing about run-to-run variation.
    within_run_bw_dev: float
    lat_mean_ns: float
    fio_version: str
    jobs: int
    latency: Latency | None = None  # completion latency; None when fio reported none
    cpu_usr_s: float = 0.0  # fio's own CPU seconds, summed over its jobs (guards/cpu.py)
    cpu_sys_s: float = 0.0
    # fio's iodepth_level of the first job: % of I/Os submitted at each depth (fiodepth.py).
    depth_levels: dict[str, float] = field(default_factory=dict)
    fsyncs: int = 0  # fsync calls fio made (its "sync" section), summed over its jobs
    # Share of each job's run time spent inside the engine's submit call (mean submission
    # latency × I/Os ÷ (run time × jobs)); None where fio reports no submission latency
    # (the sync engines). Near 1, the submit call did each I/O itself (fiodepth.py).
    submit_busy: float | None = None
    # fio's one-second bandwidth samples (bytes/s) of its steady-state check, oldest first,
    # the last `steadystate_duration` of the run (fiojob.STEADY_OPTIONS); () without them.
    steady_bw: tuple[float, ...] = ()
    steady_criterion: str | None = None  # fio's own figure for its criterion (slope % of mean)

    @property
    def mib_s(self) -> float:
        return self.io_bytes / self.runtime_s / (1024 * 1024) if self.runtime_s else 0.0


def extract_json(text: str) -> JsonObject:
    """Find fio's JSON object in `text`, ignoring junk lines around it."""
    decoder = json.JSONDecoder()
    start = 0
    while True:
        idx = text.find("{", start)
        if idx < 0:
            break
        # Only a '{' at the start of a line can begin fio's top-level object.
        if idx == 0 or text[idx - 1] == "\n":
            try:
                obj, _end = decoder.raw_decode(text, idx)
            except json.JSONDecodeError:
                start = idx + 1
                continue
            if isinstance(obj, dict) and "jobs" in obj:
                return obj
        start = idx + 1
    snippet = text.strip()[:300] or "(empty)"
    raise FioOutputError(
        f"fio printed no JSON result. Its output began: {snippet}",
        "Check that fio ≥ 3.x is installed (`fio --version`) and that the job file is valid.",
    )


def parse(text: str, direction: str) -> FioResult:
    data = extract_json(text)
    return parse_jobs(
        [FioJob.from_json(j) for j in data.get("jobs") or []],
        str(data.get("fio version", "unknown")),
        direction,
    )


def parse_jobs(jobs: Sequence[FioJob], version: str, direction: str) -> FioResult:
    """The figure of fio's decoded job entries: a failed job is an error, never a figure."""
    if not jobs:
        raise FioOutputError("fio's JSON result has no jobs.", "Check the job file.")
    for job in jobs:
        if job.error:
            err = job.error
            reason = os.strerror(err) if 0 < err < 200 else f"error {err}"
            raise FioJobFailed(
                f"fio job '{job.name}' failed: {reason} (errno {err}).",
                "Check free space and permissions on the target; the job file is stored "
                "with the run for inspection.",
            )
    section = "read" if direction in ("read", "meta") else "write"
    # A read/write mix (randrw) reports each half in its own section: the figure is both.
    sections = ("read", "write") if direction == "mixed" else (section,)
    parts = [j.side(s) for j in jobs for s in sections]
    # With group_reporting there is one entry; otherwise jobs ran concurrently, so the
    # elapsed time is the longest job's.
    runtime_ms = max(p.runtime_ms for p in parts)
    numjobs = len(jobs) if len(jobs) > 1 else jobs[0].numjobs
    return FioResult(
        direction="mixed" if direction == "mixed" else section,
        io_bytes=sum(p.io_bytes for p in parts),
        total_ios=sum(p.total_ios for p in parts),
        runtime_s=runtime_ms / 1000.0,
        bw_bytes=sum(p.bw_bytes for p in parts),
        iops=sum(p.iops for p in parts),
        within_run_bw_dev=max(p.bw_dev_kib for p in parts) * 1024.0,
        lat_mean_ns=_mean_latency(jobs[0], sections),
        fio_version=version,
        jobs=numjobs,
        latency=latency(jobs, "mixed" if direction == "mixed" else section),
        cpu_usr_s=sum(j.usr_cpu_percent / 100.0 * j.job_runtime_ms / 1000.0 for j in jobs),
        cpu_sys_s=sum(j.sys_cpu_percent / 100.0 * j.job_runtime_ms / 1000.0 for j in jobs),
        depth_levels=dict(jobs[0].depth_levels),
        fsyncs=sum(j.fsyncs for j in jobs),
        submit_busy=_submit_busy(parts, runtime_ms, numjobs),
        steady_bw=steady_samples(jobs[0], runtime_ms),
        steady_criterion=jobs[0].steady_criterion,
    )


def steady_samples(job: FioJob, runtime_ms: float) -> tuple[float, ...]:
    """fio's steady-state bandwidth samples that it really took, oldest first. fio prints its
    whole ring of `duration` slots; a run shorter than that filled only as many as it ran
    whole seconds (recorded: 3.85 s gave three samples, then zeros), and a zero among those
    is a real second without I/O (an fsync's flush). The group's run time, not job_runtime:
    with group_reporting that sums the jobs (two streams for 3.06 s: 6120 ms)."""
    taken = int(runtime_ms // 1000)
    return job.steady_bw[: min(len(job.steady_bw), taken)]


def _submit_busy(parts: list[FioSide], runtime_ms: float, jobs: int) -> float | None:
    """Time in submit calls ÷ (run time × jobs): each job submits one call at a time, so
    this is the share of its run it spent blocked there."""
    total = sum(p.slat_mean_ns * p.total_ios for p in parts if p.slat_samples)
    if total <= 0 or runtime_ms <= 0:
        return None
    return total / (runtime_ms * 1e6 * max(1, jobs))


def _mean_latency(job: FioJob, sections: tuple[str, ...]) -> float:
    """Mean completion latency over the sections, weighted by their I/O counts."""
    pairs = [(job.side(s).lat_mean_ns, job.side(s).total_ios) for s in sections]
    if len(pairs) == 1:
        return pairs[0][0]
    n = sum(c for _m, c in pairs)
    return sum(m * c for m, c in pairs) / n if n else 0.0
