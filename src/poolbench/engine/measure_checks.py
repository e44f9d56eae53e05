"""The checks and figures of one finished measurement, apart from running it: the workload's
figure in its unit, its durability and achieved depth, the device window's record, which
workloads a block device refuses. Functions of their arguments (engine/session.py calls
them; the fleet shares `figure`)."""

from __future__ import annotations

from dataclasses import replace

from poolbench import is_digits
from poolbench.engine import slow_members
from poolbench.engine.device_window import DeviceOutcome
from poolbench.engine.subject import Options
from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards import fsyncs, member_latency, reread
from poolbench.records.findings import CacheFinding, Findings
from poolbench.workloads import fiodepth
from poolbench.workloads.fioparse import FioResult
from poolbench.workloads.workload import Workload

MiB = 1024 * 1024


def workload_refusal(options: Options, *, in_study: bool) -> None:
    """Workloads the session cannot run: untar without its tarball, a pool operation
    outside a study (it needs the trial loop's hooks)."""
    if any(w.kind == "untar" for w in options.workloads):
        tb = options.tarball
        if tb is None or not tb.is_file():
            raise UsageError(
                "The untar workload needs a tarball" + (f"; {tb} is not a file." if tb else "."),
                "Set [workloads] tarball (Debian: apt install linux-source-6.1, then "
                "/usr/src/linux-source-6.1.tar.xz).",
            )
    if any(w.kind == "pool" for w in options.workloads) and not in_study:
        raise UsageError(
            "Pool operations (capacity, resilver, degraded-read) run only inside a study.",
            "Use them in a study file, not with `poolbench bench`.",
        )


def block_device_refusal(workloads: list[Workload]) -> tuple[str, str] | None:
    """(problem, fix) when a workload cannot run on a block device: one that works on files
    (metadata, small files, untar), several streams (each a file of its own), or a pool
    operation; None when all can."""
    bad = [
        w.name for w in workloads
        if w.kind != "fio" or w.is_metadata or w.streams > 1 or w.cached_by_design
    ]  # fmt: skip
    if not bad:
        return None
    return (
        f"{', '.join(bad)} cannot run on a block device (a zvol): metadata, small-file, "
        "untar, multi-stream, cached and pool-operation workloads work on files.",
        "Measure those on a dataset (target = dataset), and on a zvol only single-stream fio "
        "reads and writes (seq-read, seq-write, rand-read-4k, rand-write-16k, rand-mix70-16k, "
        "sync-write-*).",
    )


def device_findings(findings: Findings, dev: DeviceOutcome) -> None:
    """The device check's record, with the per-disk breakdown and what it shows of a slow
    member (a warning only comes from the replicates together: engine/slow_members.py)."""
    findings.device = dev.finding
    if dev.members:
        findings.other["members"] = {m.name: m.as_dict() for m in dev.members}
    if dev.slow_evidence is not None:
        findings.other[slow_members.KEY] = dev.slow_evidence


def latency_findings(findings: Findings, w: Workload) -> None:
    """On OpenZFS, the slow-member record's `latency` part: each leaf's disk_wait from the
    pool's iostat read after the workload (guards/member_latency.py), beside the byte
    counters' evidence in the same record, judged where the workload writes; nothing where
    the pool gave no latency columns."""
    rows = (findings.pool or {}).get("zpool_iostat")
    writes = w.direction in ("write", "mixed")
    ev = member_latency.evidence(rows, writes) if isinstance(rows, list) else None
    if ev is not None:
        record = findings.other.get(slow_members.KEY)
        findings.other[slow_members.KEY] = {**(record or {}), "latency": ev}


def random_io_size(w: Workload) -> int | None:
    """The size of a random write, which may rewrite a larger record (amplification's note)."""
    bs = str(w.fio.get("bs", ""))
    return int(bs) if "rand" in str(w.fio.get("rw", "")) and is_digits(bs) else None


def served_cache(kept: CacheFinding, app_bytes: int, device_read_bytes: int | None) -> CacheFinding:
    """A cached test's cache record with who really served it (guards/reread)."""
    who = reread.served(app_bytes, device_read_bytes)
    more = {**kept.more, "served_by": who.by, "device_share": who.device_share}
    return replace(kept, more=more)


def durability(w: Workload) -> str:
    if w.is_metadata:
        read = w.name.split("-")[1] in ("stat", "read")
        return "n/a" if read else "syncfs after the last operation, timed"
    if "fsync" in w.fio:
        return "fsync after every write, and end_fsync=1, inside the timed window"
    if w.fio.get("sync") == "dsync":
        return "O_DSYNC on every write, and end_fsync=1, inside the timed window"
    if w.direction in ("write", "mixed"):
        return "end_fsync=1 inside the timed window"
    return "n/a"


def figure(w: Workload, io_bytes: int, ios: int, seconds: float) -> float:
    """The workload's figure in its unit (MiB/s or operations/s); bench, study and fleet."""
    if seconds <= 0:
        raise PoolbenchError(
            f"fio reported a zero runtime for {w.name}.",
            "The working set is too small to time; raise --size.",
        )
    if w.unit == "MiB/s":
        return io_bytes / seconds / MiB
    return ios / seconds


def fsync_check(w: Workload, result: FioResult, findings: Findings) -> list[str]:
    """A workload with fsync=N: how many fsyncs fio made, and a warning if too few."""
    every = int(w.fio.get("fsync", 0) or 0)
    if every <= 0 or result.direction == "read":
        return []
    found, warnings = fsyncs.check(every, result.total_ios, result.fsyncs, result.jobs)
    findings.other["fsyncs"] = found
    return warnings


def depth_check(job: str, result: FioResult, findings: Findings) -> list[str]:
    """The queue depth fio achieved, recorded; a warning when it is well below the request.
    The depth asked is the job's own: a workload that names its load (rand-read-4k-qd8)
    overrides the study's."""
    asked = [int(ln.split("=", 1)[1]) for ln in job.splitlines() if ln.startswith("iodepth=")]
    requested = max(asked, default=1)
    if requested <= 1:
        return []
    depth = fiodepth.achieved(result.depth_levels, requested, result.submit_busy)
    if depth is not None:
        findings.other["queue_depth"] = depth.as_dict()
    engine = next((ln.split("=", 1)[1] for ln in job.splitlines() if ln.startswith("ioengine=")),
                  "?")  # fmt: skip
    msg = fiodepth.warning(depth, f"ioengine={engine}")
    return [msg] if msg else []
