"""The store's read and write queries beyond a run's rows (store/db.py): what the trial loop,
the fleet, the CLI and the reports ask of the store. Every SQL statement lives in store/."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from poolbench.store.db import Store


def measured_workloads(store: Store, run_id: int, config: str, replicate: int) -> set[str]:
    """The workloads already stored for one (configuration, replicate) cell of a run."""
    rows = store.conn.execute(
        "SELECT workload FROM measurements WHERE run_id=? AND config=? AND replicate=?",
        (run_id, config, replicate),
    )
    return {str(r["workload"]) for r in rows}


def values_by_workload(store: Store, run_id: int, config: str) -> dict[str, list[float]]:
    """Each workload's stored figures for one configuration, in replicate order."""
    per: dict[str, list[float]] = defaultdict(list)
    rows = store.conn.execute(
        "SELECT workload, value FROM measurements WHERE run_id=? AND config=? ORDER BY replicate",
        (run_id, config),
    )
    for r in rows:
        per[str(r["workload"])].append(float(r["value"]))
    return dict(per)


def measurement_count(store: Store, run_id: int) -> int:
    row = store.conn.execute(
        "SELECT count(*) FROM measurements WHERE run_id=?", (run_id,)
    ).fetchone()
    return int(row[0])


def latest_run_id(store: Store) -> int | None:
    """The highest run id, or None in an empty store."""
    row = store.conn.execute("SELECT max(id) FROM runs").fetchone()
    return None if row is None or row[0] is None else int(row[0])


@dataclass(frozen=True)
class RunHost:
    """One host of a fleet run, as `run_hosts` records it."""

    label: str
    address: str
    port: int
    path: str | None
    server_hostname: str | None
    os: str | None
    arch: str | None
    fio_version: str | None
    clock_skew_s: float | None
    status: str  # ok | failed
    error: str | None
    not_applied: Sequence[str]


def record_run_hosts(store: Store, run_id: int, hosts: Sequence[RunHost]) -> None:
    """Insert the hosts of a fleet run, or update their status, error and unapplied guards."""
    with store.transaction() as c:
        for h in hosts:
            c.execute(
                "INSERT INTO run_hosts (run_id, label, address, port, path, server_hostname,"
                " os, arch, fio_version, clock_skew_s, status, error, not_applied)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (run_id, label) DO UPDATE SET status = excluded.status,"
                " error = excluded.error, not_applied = excluded.not_applied",
                (
                    run_id,
                    h.label,
                    h.address,
                    h.port,
                    h.path,
                    h.server_hostname,
                    h.os,
                    h.arch,
                    h.fio_version,
                    h.clock_skew_s,
                    h.status,
                    h.error,
                    json.dumps(list(h.not_applied)),
                ),
            )
