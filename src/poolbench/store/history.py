"""The series of a history (`poolbench history`), read from the store.

A series is one measurement repeated over time: the same bench target (its path, or the name
given with `bench --record-as`) and workload, or the same study, configuration and workload,
on one host. The host is the one the run's fingerprint names (else its metadata's machine),
so a store merged with `import` holds one series per host. A point is one run: its
replicates' values, its start time, its fingerprint (a study's: the configuration's first
trial's). Fleet runs (many hosts in one run) are not series.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from dataclasses import dataclass, field

from poolbench.records.fingerprint import Fingerprint
from poolbench.store import fingerprints, opening
from poolbench.store.db import Store

UNKNOWN_HOST = "(unknown host)"


@dataclass(frozen=True, order=True)
class SeriesKey:
    name: str  # the bench target or its --record-as name; the study's name
    workload: str
    config: str  # a study's configuration; "" for bench
    host: str
    kind: str = "bench"  # bench | study

    def text(self) -> str:
        what = self.name if self.kind == "bench" else f"{self.name} {self.config}"
        return f"{what} · {self.workload} · {self.host}"


@dataclass(frozen=True)
class RunPoint:
    run_id: int
    started_at: float
    status: str
    unit: str
    values: tuple[float, ...]
    fingerprint: Fingerprint | None


@dataclass
class _Run:
    kind: str
    name: str
    started_at: float
    status: str
    host: str
    values: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    units: dict[tuple[str, str], str] = field(default_factory=dict)


def _metadata_host(text: str) -> str | None:
    try:
        meta = json.loads(text)
    except (TypeError, ValueError):
        return None
    machine = meta.get("machine") if isinstance(meta, dict) else None
    host = machine.get("hostname") if isinstance(machine, dict) else None
    return host if isinstance(host, str) and host else None


def _runs(store: Store) -> dict[int, _Run]:
    try:
        rows = list(store.conn.execute(
            "SELECT r.id, r.kind, coalesce(r.series, r.name), r.started_at, r.status, "
            "r.metadata, m.config, m.workload, m.value, m.unit "
            "FROM runs r JOIN measurements m ON m.run_id = r.id "
            "WHERE r.kind IN ('bench', 'study') AND m.host IS NULL "
            "AND r.name NOT LIKE 'fleet:%' ORDER BY r.started_at, r.id, m.id"
        ))  # fmt: skip
    except sqlite3.Error as exc:
        raise opening.from_sqlite(store.path, exc) from exc
    runs: dict[int, _Run] = {}
    for rid, kind, name, started, status, meta, config, workload, value, unit in rows:
        run = runs.get(rid)
        if run is None:
            run = runs[rid] = _Run(kind, str(name or ""), float(started), str(status),
                                   _metadata_host(meta) or UNKNOWN_HOST)  # fmt: skip
        cell = ("" if kind == "bench" else str(config), str(workload))
        run.values.setdefault(cell, []).append(float(value))
        run.units[cell] = str(unit)
    return runs


def set_series(store: Store, run_id: int, name: str) -> None:
    """The run belongs to the series `name` (`bench --record-as NAME`)."""
    with store.transaction() as c:
        c.execute("UPDATE runs SET series = ? WHERE id = ?", (name, run_id))


def _fingerprint(store: Store, run_id: int, config: str) -> Fingerprint | None:
    found = fingerprints.of_run(store, run_id)
    for f in found:
        if not config or f.config == config:
            return f.fingerprint
    return None


def load(store: Store) -> dict[SeriesKey, list[RunPoint]]:
    """Every series in the store, each point a run, oldest first."""
    out: dict[SeriesKey, list[RunPoint]] = defaultdict(list)
    for rid, run in _runs(store).items():
        for (config, workload), values in run.values.items():
            fp = _fingerprint(store, rid, config)
            host = fp.hostname if fp is not None and fp.hostname != "?" else run.host
            key = SeriesKey(run.name, workload, config, host, run.kind)
            out[key].append(RunPoint(rid, run.started_at, run.status, run.units[(config, workload)],
                                     tuple(values), fp))  # fmt: skip
    return dict(out)
