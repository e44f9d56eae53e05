"""Parse fio's JSON output (pure).

fio sometimes prints warnings to stdout before (or after) its JSON ("fio: ...", "note: ...",
"Starting 1 process"), so the parser looks for the JSON object instead of trusting the whole
text. A job that failed has a non-zero "error" field: that becomes a FioJobFailed, never a
figure.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from poolbench.errors import PoolbenchError


class FioOutputError(PoolbenchError):
    """fio's output could not be read as a result."""


class FioJobFailed(PoolbenchError):
    """fio ran, but a job reported an error."""


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
    # fio's iodepth_level of the first job: % of I/Os submitted at each depth (fiodepth.py).
    depth_levels: dict[str, float] = field(default_factory=dict)

    @property
    def mib_s(self) -> float:
        return self.io_bytes / self.runtime_s / (1024 * 1024) if self.runtime_s else 0.0


def extract_json(text: str) -> dict[str, Any]:
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
    jobs = data.get("jobs") or []
    if not jobs:
        raise FioOutputError("fio's JSON result has no jobs.", "Check the job file.")
    for job in jobs:
        err = int(job.get("error", 0) or 0)
        if err:
            reason = os.strerror(err) if 0 < err < 200 else f"error {err}"
            raise FioJobFailed(
                f"fio job '{job.get('jobname', '?')}' failed: {reason} (errno {err}).",
                "Check free space and permissions on the target; the job file is stored "
                "with the run for inspection.",
            )
    section = "read" if direction in ("read", "meta") else "write"
    io_bytes = sum(int(j[section]["io_bytes"]) for j in jobs)
    total_ios = sum(int(j[section]["total_ios"]) for j in jobs)
    # With group_reporting there is one entry; otherwise jobs ran concurrently, so the
    # elapsed time is the longest job's.
    runtime_ms = max(float(j[section]["runtime"]) for j in jobs)
    runtime_s = runtime_ms / 1000.0
    bw = sum(float(j[section]["bw_bytes"]) for j in jobs)
    iops = sum(float(j[section]["iops"]) for j in jobs)
    dev_kib = max(float(j[section].get("bw_dev", 0.0)) for j in jobs)
    lat = jobs[0][section].get("lat_ns", {}).get("mean", 0.0)
    return FioResult(
        direction=section,
        io_bytes=io_bytes,
        total_ios=total_ios,
        runtime_s=runtime_s,
        bw_bytes=bw,
        iops=iops,
        within_run_bw_dev=dev_kib * 1024.0,
        lat_mean_ns=float(lat),
        fio_version=str(data.get("fio version", "unknown")),
        jobs=int(jobs[0].get("job options", {}).get("numjobs", 1) or 1)
        if len(jobs) == 1
        else len(jobs),
        depth_levels={str(k): float(v) for k, v in (jobs[0].get("iodepth_level") or {}).items()},
    )
