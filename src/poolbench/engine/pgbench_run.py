"""One pgbench measurement: a fresh PostgreSQL cluster in the measured filesystem, loaded at
the scale the working set asks for, a timed `pgbench -T` window, and the cluster stopped and
removed again, also on error and Ctrl-C (and after a kill -9 by `poolbench cleanup`: the
server is journaled before `initdb`).

The figure is pgbench's TPS; latency (average, p50/p95/p99) comes from its per-transaction
log. The device window spans the run and a CHECKPOINT after it, so the data pages the
transactions dirtied are written (and counted) inside it: device bytes written per
transaction are what each transaction cost the disks, WAL and data together.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from poolbench.engine.device_window import DeviceWindow
from poolbench.engine.hooks import OpResult
from poolbench.errors import PoolbenchError
from poolbench.factors import registry as factors
from poolbench.guards.devices import Target
from poolbench.guards.workingset import COLD_FACTOR, WorkingSet
from poolbench.records.findings import Findings
from poolbench.records.latency import Latency
from poolbench.safety.journal import Journal
from poolbench.system import pgserver, watchdog
from poolbench.system.runner import Runner
from poolbench.workloads import pgbench
from poolbench.workloads.workload import Workload

MiB = 1 << 20
DRY_SOCKDIR = Path("/tmp/pb-pg-DRYRUN")


# The `pgbench` section of a measurement's findings (store/facts.py reads it back).
LatencyMs = TypedDict("LatencyMs", {"avg": float, "p50": float, "p95": float, "p99": float,
                                    "from": str})  # fmt: skip


class CacheLabel(TypedDict):
    label: str  # cold | warm: the database against what RAM caches
    data_to_cache: float
    cache_bytes: int


class PgSection(TypedDict):
    mode: str
    scale: int
    clients: int
    settings: dict[str, str]
    data_bytes: int
    load_seconds: float
    window_seconds: int
    checkpoint_seconds: float
    transactions: int
    failed: int
    tps: float
    latency_ms: LatencyMs | None
    device_bytes_per_txn: NotRequired[float]
    cache: NotRequired[CacheLabel]


@dataclass(frozen=True)
class PgRequest:
    """What one pgbench measurement needs from the session."""

    workdir: Path  # the session's directory in the measured filesystem
    target: Target
    working_set: WorkingSet
    clients: int
    runtime_s: int
    levels: dict[str, str]  # the configuration's factor levels (the PostgreSQL settings)
    journals: Path  # where the server's journal goes (engine/cleanup.py finds it)
    # the filesystem is destroyed after the trial: its data directory is left to go with it
    disposable: bool = False


def load_limit(scale: int) -> float:
    """`pgbench -i`'s time limit: its tables written twice (the rows, then the vacuum and
    the keys' indexes) at the watchdog's floor rate."""
    return watchdog.work_limit(moved=2 * scale * pgbench.BYTES_PER_SCALE)


class Pgbench:
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def measure(self, w: Workload, req: PgRequest, findings: Findings) -> OpResult:
        """Create, load, measure and remove one cluster; fills the pgbench and device
        findings and returns TPS."""
        bindir = pgserver.bindir()
        pgserver.check_reachable(req.workdir)
        dry = self.runner.dry_run
        sockdir = DRY_SOCKDIR if dry else pgserver.new_sockdir()
        cluster = pgserver.Cluster(bindir, req.workdir / "pgdata", sockdir)
        if not dry:
            req.journals.mkdir(parents=True, exist_ok=True)
        name = f"pgbench-pid{os.getpid()}.jsonl"  # engine/cleanup.py knows the name
        journal = Journal(self.runner, None if dry else req.journals / name)
        journal.postgres_intent(str(cluster.datadir), str(sockdir), str(bindir),
                                keep_datadir=req.disposable)  # fmt: skip
        try:
            pgserver.init(self.runner, cluster, factors.postgres_settings(req.levels))
            pgserver.start(self.runner, cluster)
            return self._loaded_and_run(w, req, cluster, findings)
        finally:
            journal.teardown_or_raise(
                "The PostgreSQL server could not be stopped or its cluster removed: ",
                "Run 'poolbench cleanup', which retries.",
            )

    def _loaded_and_run(
        self, w: Workload, req: PgRequest, c: pgserver.Cluster, findings: Findings
    ) -> OpResult:
        scale = pgbench.scale_for(req.working_set.size_bytes)
        before = pgserver.data_bytes(c.datadir)
        t0 = time.monotonic()
        self.runner.run(pgserver.client(c, "pgbench", "-i", "-q", "-s", str(scale), pgserver.DB),
                        timeout=load_limit(scale))  # fmt: skip
        load_s = time.monotonic() - t0
        loaded = pgserver.data_bytes(c.datadir) - before
        self._checkpoint(c)  # the load's dirty pages are written before the window opens
        argv = run_argv(self.runner, w, req.clients, req.runtime_s, c)
        window = DeviceWindow(req.target)
        try:
            out = self.runner.run(argv, timeout=watchdog.work_limit(req.runtime_s)).stdout
            t1 = time.monotonic()
            self._checkpoint(c)
            checkpoint_s = time.monotonic() - t1
        except BaseException:
            window.abandon()
            raise
        dev = window.close("meta", 0, req.runtime_s + checkpoint_s, compressibility=0)
        findings.device = dev.finding
        findings.durability = (
            "synchronous_commit=on (each commit fsyncs the WAL); a CHECKPOINT after the "
            "window writes its dirty pages inside the device window"
        )
        if self.runner.dry_run:
            return OpResult(0.0, 0, float(req.runtime_s))
        summary, log = self._results(out, c)
        warnings = list(dev.warnings)
        section = _section(w, req, scale, loaded, load_s, checkpoint_s, summary, log)
        written = dev.finding.write_bytes
        if written is not None and summary.transactions:
            section["device_bytes_per_txn"] = round(written / summary.transactions, 1)
        warnings += _warm(section, loaded, req.working_set)
        warnings += _mismatch(summary, log)
        findings.other["pgbench"] = dict(section)
        return OpResult(summary.tps, 0, float(req.runtime_s), summary.transactions,
                        written, sections={}, warnings=warnings,
                        latency=log.latency())  # fmt: skip

    def _checkpoint(self, c: pgserver.Cluster) -> None:
        self.runner.run(pgserver.client(c, "psql", "-X", "-q", "-c", "CHECKPOINT", pgserver.DB))

    def _results(self, out: str, c: pgserver.Cluster) -> tuple[pgbench.Summary, pgbench.TxLog]:
        try:
            return pgbench.parse_summary(out), pgbench.parse_logs(list(c.sockdir.glob("txlog.*")))
        except (ValueError, OSError) as exc:
            raise PoolbenchError(
                f"pgbench's output could not be read ({exc}).",
                "Check the PostgreSQL version (13 or later) and that pgbench ran to its end.",
            ) from None


def run_argv(
    runner: Runner, w: Workload, clients: int, runtime_s: int, c: pgserver.Cluster
) -> list[str]:
    """The timed `pgbench -T`, logging every transaction (-l) into the socket directory."""
    mode = pgbench.mode_of(w)
    how = ["-b", pgbench.MODES[mode]] if mode in pgbench.MODES else ["-n", "-f"]
    script = pgbench.script_of(w)
    if script is not None:  # a copy the server's user can read, outside the pool
        copy = c.sockdir / "script.sql"
        if not runner.dry_run:
            shutil.copyfile(script, copy)
            os.chmod(copy, 0o644)
        how.append(str(copy))
    threads = min(clients, os.cpu_count() or 1)
    return pgserver.client(c, "pgbench", *how, "-c", str(clients), "-j", str(threads),
                           "-T", str(runtime_s), "-l", "--log-prefix", str(c.sockdir / "txlog"),
                           pgserver.DB)  # fmt: skip


def _section(
    w: Workload, req: PgRequest, scale: int, loaded: int, load_s: float, checkpoint_s: float,
    summary: pgbench.Summary, log: pgbench.TxLog,
) -> PgSection:  # fmt: skip
    lat = log.latency()
    return {
        "mode": pgbench.mode_of(w),
        "scale": scale,
        "clients": req.clients,
        "settings": factors.postgres_settings(req.levels) | {"synchronous_commit": "on"},
        "data_bytes": loaded,
        "load_seconds": round(load_s, 2),
        "window_seconds": req.runtime_s,
        "checkpoint_seconds": round(checkpoint_s, 2),
        "transactions": summary.transactions,
        "failed": summary.failed + log.failed,
        "tps": summary.tps,
        "latency_ms": _latency_ms(lat) if lat else None,
    }  # fmt: skip


def _latency_ms(lat: Latency) -> LatencyMs:
    p = lat.percentiles
    return {"avg": round(lat.mean_ns / 1e6, 3), "p50": round(p["50"] / 1e6, 3),
            "p95": round(p["95"] / 1e6, 3), "p99": round(p["99"] / 1e6, 3),
            "from": "pgbench's per-transaction log (-l)"}  # fmt: skip


def _warm(section: PgSection, loaded: int, ws: WorkingSet) -> list[str]:
    """The cold/warm rule for a database: its data must exceed what RAM would cache."""
    cache = max(ws.ram_bytes, ws.arc_max_bytes or 0)
    ratio = loaded / cache if cache else 0.0
    label = "cold" if ratio >= COLD_FACTOR else "warm"
    section["cache"] = CacheLabel(label=label, data_to_cache=round(ratio, 4), cache_bytes=cache)
    if label == "cold":
        return []
    need = pgbench.scale_for(int(COLD_FACTOR * cache)) + 1
    return [
        f"warm: the database ({loaded / MiB:.0f} MiB, scale {section['scale']}) is "
        f"{ratio:.2f}× what RAM can cache, so its reads come from memory and the figure "
        f"measures commits and writes, not reads from the disks; scale {need} or more "
        "(a larger working set, --size) would be cold"
    ]


def _mismatch(summary: pgbench.Summary, log: pgbench.TxLog) -> list[str]:
    """pgbench's own count and its log's must agree, or the latencies are of other runs."""
    logged = len(log.latencies_us)
    if logged == summary.transactions:
        return []
    return [
        f"pgbench counted {summary.transactions} transactions but its log holds {logged}: "
        "the latency percentiles may not describe this window"
    ]


def check_installed(workloads: list[Workload], scratch: Path | None = None) -> None:
    """Refused before anything is created: pgbench workloads on a machine without
    PostgreSQL (exit 7), or a scratch directory its server's user cannot reach."""
    if not any(w.kind == "pgbench" for w in workloads):
        return
    pgserver.bindir()
    pgserver.as_owner()
    if scratch is not None:
        pgserver.check_reachable(scratch)
