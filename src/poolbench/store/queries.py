"""The store's read and write queries beyond a run's rows (store/db.py): what the trial loop,
the fleet, the CLI and the reports ask of the store. Every SQL statement lives in store/."""

from __future__ import annotations

import json
import time
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


def values_by_round(store: Store, run_id: int, config: str) -> dict[str, dict[int, float]]:
    """Each workload's stored figures for one configuration keyed by replicate (the round, or
    block, that measured it): a failed trial leaves a gap instead of shifting later values."""
    per: dict[str, dict[int, float]] = defaultdict(dict)
    rows = store.conn.execute(
        "SELECT workload, replicate, value FROM measurements WHERE run_id=? AND config=?",
        (run_id, config),
    )
    for r in rows:
        per[str(r["workload"])][int(r["replicate"])] = float(r["value"])
    return dict(per)


@dataclass(frozen=True)
class StoredFigure:
    """One stored measurement's figure and its guards' warnings (the fleet's answer)."""

    config: str
    workload: str
    unit: str
    value: float
    warnings: tuple[str, ...]


def stored_figures(store: Store, run_id: int) -> list[StoredFigure]:
    """Every measurement of a run, in the order stored."""
    rows = store.conn.execute(
        "SELECT config, workload, unit, value, warnings FROM measurements WHERE run_id = ? "
        "ORDER BY id",
        (run_id,),
    )
    return [
        StoredFigure(str(r["config"]), str(r["workload"]), str(r["unit"]), float(r["value"]),
                     tuple(str(w) for w in json.loads(r["warnings"] or "[]")))
        for r in rows
    ]  # fmt: skip


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


@dataclass(frozen=True)
class FailedTrial:
    """One trial that failed for good (after its retries), as `failed_trials` records it."""

    config: str
    replicate: int
    trial_index: int
    pool: str
    reason: str


def add_failed_trial(store: Store, run_id: int, trial: FailedTrial) -> None:
    """Commit one failed trial at once (a later crash keeps it)."""
    with store.transaction() as c:
        c.execute(
            "INSERT INTO failed_trials (run_id, config, replicate, trial_index, pool, reason, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                run_id,
                trial.config,
                trial.replicate,
                trial.trial_index,
                trial.pool,
                trial.reason,
                time.time(),
            ),
        )


def resolve_failed_trials(store: Store, run_id: int, config: str, replicate: int) -> None:
    """A later attempt measured this cell: its earlier failures are no longer outstanding."""
    with store.transaction() as c:
        c.execute(
            "UPDATE failed_trials SET resolved=1 WHERE run_id=? AND config=? AND replicate=?",
            (run_id, config, replicate),
        )


def failed_trials(store: Store, run_id: int) -> list[FailedTrial]:
    """The run's outstanding failed trials (not measured since), in the order they failed."""
    known = store.conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='failed_trials'"
    ).fetchone()
    if known is None:
        return []  # a store opened read-only before this migration: no failures recorded
    rows = store.conn.execute(
        "SELECT config, replicate, trial_index, pool, reason FROM failed_trials "
        "WHERE run_id=? AND resolved=0 ORDER BY id",
        (run_id,),
    )
    return [
        FailedTrial(
            str(r["config"]),
            int(r["replicate"]),
            int(r["trial_index"]),
            str(r["pool"]),
            str(r["reason"]),
        )
        for r in rows
    ]
