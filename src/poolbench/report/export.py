"""`poolbench export RUN --csv|--json`: every measurement with its metadata.

The columns are a stable interface, documented in docs/export.md; add columns at the end,
never rename or remove one without raising EXPORT_VERSION.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any, TypedDict

from poolbench.records.latency import LatencyJson
from poolbench.report.data import RunData, cell_config
from poolbench.report.metrics import percentile_ns
from poolbench.store.timestamps import stored_time

# 2: `replicate` counts from 1 (as the report, the HTML page and a study's progress lines
# do), and the CSV's `job_file` is JSON text, one line (version 1: from 0, raw text).
EXPORT_VERSION = 2

# (column, what it holds) — the order of the CSV header. JSON columns hold JSON text in CSV.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "the run's id in the result store"),
    ("run_kind", "bench | study"),
    ("run_name", "the study name, or the bench target"),
    ("run_status", "running | finished | interrupted | failed"),
    ("run_started_at", "when the run started, ISO 8601 UTC"),
    ("config", "the configuration key (`backend=zfs layout=raidz1 ashift=9`; bench: the target)"),
    ("config_levels", "JSON object: factor → level parsed from `config` ({} for a bench run)"),
    ("workload", "workload name (see `poolbench workloads`)"),
    ("replicate", "replicate number, from 1 (as the report and the HTML page number them)"),
    ("value", "the measured figure"),
    ("unit", "MiB/s | IOPS | ops/s"),
    ("app_bytes", "bytes fio transferred"),
    ("ops", "operations fio completed"),
    ("seconds", "timed window in seconds (fsync / syncfs included)"),
    ("device_bytes", "bytes the member devices moved in the window (empty: unverified)"),
    ("device_mib_s", "device bytes per second in MiB/s (empty: unverified)"),
    (
        "write_amplification",
        "writes: device bytes ÷ application bytes (the layout's model is "
        "in guards.device.amplification; empty: a read, or unverified)",
    ),
    ("warnings", "JSON list of the guard warnings on this measurement"),
    ("compressibility_percent", "declared data compressibility"),
    ("working_set_bytes", "working set per configuration"),
    ("ram_bytes", "RAM of the machine"),
    ("hostname", "the machine's host name"),
    ("kernel", "kernel name and release"),
    ("poolbench_version", "poolbench version that measured"),
    ("fio_version", "fio version that measured"),
    ("cache_method", "how caches were emptied before a cold read (empty: not a cold read)"),
    ("cache_verified", "true | false | empty: whether the cache drop was verified"),
    ("cpu_s_per_gib", "CPU seconds per GiB moved: fio's user + system and the filesystem's own"),
    ("cpu_fs_scope", "whose CPU was the filesystem's: zfs-fuse daemon | whole machine kernel"),
    ("pool", "JSON object: the pool as read back from the stack (studies), else {}"),
    ("guards", "JSON object: everything each guard did and found"),
    ("workload_def", "JSON object: the workload definition"),
    ("job_file", "the exact fio job file run (in CSV: JSON text, so the row stays one line)"),
    ("measured_at", "when the measurement was stored, ISO 8601 UTC"),
    ("host", "the host that measured, for a run measured on many hosts (else empty)"),
    ("clat_p50_ns", "completion latency (fio clat) 50th percentile of this run, ns (empty: none)"),
    ("clat_p90_ns", "completion latency 90th percentile, ns"),
    ("clat_p99_ns", "completion latency 99th percentile, ns"),
    ("clat_p999_ns", "completion latency 99.9th percentile, ns"),
    (
        "clat",
        "JSON object: fio's completion latency of this run (samples, mean/min/max/stddev, "
        "every percentile, histogram bins {ns: count}), null when none",
    ),
)
# `job_file` is a string with line breaks: as JSON text the CSV keeps one row per line.
JSON_COLUMNS = {
    "config_levels",
    "warnings",
    "pool",
    "guards",
    "workload_def",
    "job_file",
    "clat",
}


class ExportRow(TypedDict):
    """One measurement as `export --json` gives it, its keys COLUMNS in order (the CSV's)."""

    run_id: int
    run_kind: str
    run_name: str
    run_status: str
    run_started_at: str | None
    config: str
    config_levels: dict[str, str]
    workload: str
    replicate: int
    value: float
    unit: str
    app_bytes: int
    ops: int
    seconds: float
    device_bytes: int | None
    device_mib_s: float | None
    write_amplification: float | None
    warnings: list[str]
    compressibility_percent: int | None
    working_set_bytes: int | None
    ram_bytes: int | None
    hostname: str | None
    kernel: str | None
    poolbench_version: str | None
    fio_version: str | None
    cache_method: str | None
    cache_verified: bool | None
    cpu_s_per_gib: object  # guards/cpu.py's figure as stored (any run's store)
    cpu_fs_scope: object
    pool: Mapping[str, object]  # the pool as its backend described it
    guards: Mapping[str, object]  # records/findings.Findings.to_json
    workload_def: Mapping[str, object]  # the workload's stored definition
    job_file: str
    measured_at: str | None
    host: str | None
    clat_p50_ns: float | None
    clat_p90_ns: float | None
    clat_p99_ns: float | None
    clat_p999_ns: float | None
    clat: LatencyJson | None


def iso_time(ts: float | None) -> str | None:
    """A stored time (seconds since the epoch) as every JSON output gives it: ISO 8601 in
    UTC with its offset, to the second ("2025-01-02T10:00:00+00:00")."""
    if ts is None:
        return None
    return stored_time(ts, "a start time").isoformat(timespec="seconds")


def rows(run: RunData) -> list[ExportRow]:
    machine = run.metadata.machine
    out: list[ExportRow] = []
    for m in run.measurements:
        f = m.findings
        stored_cpu = f.other.get("cpu")
        cpu = stored_cpu if isinstance(stored_cpu, dict) else {}
        data = f.data.compressibility_percent if f.data is not None else None
        g = f.to_json()
        out.append(
            {
                "run_id": run.id,
                "run_kind": run.kind,
                "run_name": run.name,
                "run_status": run.status,
                "run_started_at": iso_time(run.started_at),
                "config": m.config,
                "config_levels": run.levels(cell_config(m)),
                "workload": m.workload,
                # Stored from 0 (the engine's index); counted from 1 wherever it is shown.
                "replicate": m.replicate + 1,
                "value": m.value,
                "unit": m.unit,
                "app_bytes": m.app_bytes,
                "ops": m.ops,
                "seconds": m.seconds,
                "device_bytes": m.device_bytes,
                "device_mib_s": m.device_mib_s,
                "write_amplification": f.device.amplification if f.device else None,
                "warnings": m.warnings,
                "compressibility_percent": data if data is not None else run.compressibility(),
                "working_set_bytes": run.working_set_bytes(),
                "ram_bytes": run.ram_bytes(),
                "hostname": machine.hostname,
                "kernel": machine.kernel,
                "poolbench_version": machine.poolbench_version,
                "fio_version": (f.fio and f.fio.version) or run.metadata.fio_version,
                "cache_method": f.cache.method if f.cache is not None else None,
                "cache_verified": f.cache.verified if f.cache is not None else None,
                "cpu_s_per_gib": cpu.get("s_per_gib"),
                "cpu_fs_scope": cpu.get("fs_scope"),
                "pool": dict(f.pool) if f.pool is not None else {},
                "guards": g,
                "workload_def": m.workload_def,
                "job_file": m.job_file,
                "measured_at": iso_time(m.created_at),
                "host": m.host,
                "clat_p50_ns": percentile_ns(m.latency, "50"),
                "clat_p90_ns": percentile_ns(m.latency, "90"),
                "clat_p99_ns": percentile_ns(m.latency, "99"),
                "clat_p999_ns": percentile_ns(m.latency, "99.9"),
                "clat": m.latency.to_json() if m.latency is not None else None,
            }
        )
    return out


def to_json(run: RunData) -> str:
    doc = {
        "export_format": "poolbench-export",
        "export_version": EXPORT_VERSION,
        "columns": [c for c, _ in COLUMNS],
        "run": {
            "id": run.id,
            "kind": run.kind,
            "name": run.name,
            "status": run.status,
            "started_at": iso_time(run.started_at),
            "finished_at": iso_time(run.finished_at),
            "argv": run.argv,
            "metadata": run.metadata.stored,
            "error": run.error,
        },
        "commands": [
            {
                "argv": c.argv,
                "started_at": iso_time(c.started_at),
                "duration_s": c.duration_s,
                "returncode": c.returncode,
                "dry_run": c.dry_run,
            }
            for c in run.commands
        ],
        "measurements": rows(run),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _csv_value(column: str, value: Any) -> str:
    if column in JSON_COLUMNS:
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def to_csv(run: RunData) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = [c for c, _ in COLUMNS]
    w.writerow(names)
    for r in rows(run):
        by_column: Mapping[str, object] = r
        w.writerow([_csv_value(c, by_column[c]) for c in names])
    return buf.getvalue()
