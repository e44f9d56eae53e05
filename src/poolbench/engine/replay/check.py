"""After a trace's replay: read fio's per-I/O log, compare it with the recording, record
the fidelity in the measurement's findings and return its warnings (workloads/fidelity.py).

The log is removed once read: the next replicate's replay writes its own.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from poolbench.errors import ToolMissingError
from poolbench.records.findings import Findings
from poolbench.system.runner import Runner
from poolbench.workloads import fidelity, fio, replay, tracefile
from poolbench.workloads.tracestats import summarize
from poolbench.workloads.workload import Workload

LOG_SUFFIX = "_lat.1.log"  # fio's name for the first job's total-latency log
MIN_FIO = (3, 31)  # the first fio that reads a v3 iolog (timestamps on every line)


def fio_version(runner: Runner, workloads: Sequence[Workload], known: str | None = None) -> str:
    """`fio --version` (fio.fio_version; `known`: as already read), refused when a trace
    replay needs a newer fio. `known` "": a dry run on a machine without fio, which shows
    the plan and has no fio to judge."""
    if known == "":
        return ""
    version = fio.fio_version(runner) if known is None else known
    found = fio.parse_version(version)
    if any(w.trace for w in workloads) and (found is None or found < MIN_FIO):
        raise ToolMissingError(
            f"Replaying a trace needs fio 3.31 or newer (the v3 iolog, with each I/O's "
            f"time); `fio --version` says '{version}'.",
            "Install a newer fio (Debian 12: 3.33), or leave the trace workloads out.",
        )
    return version


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
        text = path.read_text()
        # psync at depth 1: the log's order is the issue order
        achieved = summarize(replay.parse_lat_log(text), in_order=True)
        busy = replay.busy_share(text, achieved.span_s)
    finally:
        prefix = path.name.removesuffix(LOG_SUFFIX)
        for log in path.parent.glob(f"{prefix}_*.log"):
            log.unlink(missing_ok=True)
    recorded = tracefile.load_summary(Path(w.trace)).summary
    iolog = (Path(w.trace) / "trace.iolog").read_text()
    late = replay.target_late_share(text, iolog, achieved.span_s - recorded.span_s)
    result = fidelity.compare(recorded, achieved, replay.mode_of(w.name), busy, late)
    findings.other["replay"] = result.to_json(recorded, achieved)
    return result.warnings


def report_lines(config: str, workload: str, docs: Sequence[Mapping[str, object]]) -> list[str]:
    """A cell's replays for the report: how many were faithful, and the table of the first
    unfaithful one (else of the last), with its note."""
    known = [fidelity.from_json(d) for d in docs if d.get("checks")]
    mode = known[0].mode if known else "?"
    faithful = sum(1 for f in known if f.faithful)
    out = [f"{workload} on {config}:", f"  {faithful} of {len(docs)} replays faithful ({mode})"]
    shown = next((f for f in known if not f.faithful), known[-1] if known else None)
    if shown is not None:
        out += ["  " + line for line in fidelity.lines(shown)]
        out += ["  " + line for line in textwrap.wrap(shown.note, 76)]
    return out
