"""After a trace's replay: read fio's per-I/O log, compare it with the recording, record
the fidelity in the measurement's findings and return its warnings (workloads/fidelity.py).

The log is removed once read: the next replicate's replay writes its own.
"""

from __future__ import annotations

from pathlib import Path

from poolbench.engine.records import Findings
from poolbench.workloads import fidelity, replay, tracefile
from poolbench.workloads.library import Workload
from poolbench.workloads.tracestats import summarize

LOG_SUFFIX = "_lat.1.log"  # fio's name for the first job's total-latency log


def lat_log(job: str) -> Path | None:
    """The per-I/O log the job writes (its `write_lat_log=` prefix), or None."""
    for line in job.splitlines():
        if line.startswith("write_lat_log="):
            return Path(line.split("=", 1)[1] + LOG_SUFFIX)
    return None


def check(w: Workload, job: str, findings: Findings) -> list[str]:
    """The replay's fidelity as `findings.other["replay"]`; its warnings."""
    if not w.trace:
        return []
    path = lat_log(job)
    if path is None or not path.is_file():
        findings.other["replay"] = {"mode": replay.mode_of(w.name), "faithful": None}
        return [f"replay fidelity unknown: fio wrote no per-I/O log ({path})"]
    try:
        achieved = summarize(replay.parse_lat_log(path.read_text()))
    finally:
        for log in path.parent.glob(f"{replay.LAT_LOG}_*.log"):
            log.unlink(missing_ok=True)
    recorded, _doc = tracefile.load_summary(Path(w.trace))
    result = fidelity.compare(recorded, achieved, replay.mode_of(w.name))
    findings.other["replay"] = result.to_json(recorded, achieved)
    return result.warnings
