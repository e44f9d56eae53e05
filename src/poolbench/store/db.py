"""SQLite result store.

Each finished measurement is committed in its own transaction as soon as it completes, so an
interrupted or crashed run keeps everything it finished. The schema evolves through named
migrations recorded in the database (sqlite-utils' approach); a database written by a newer
poolbench is refused rather than misread.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import platformdirs

from poolbench.errors import PoolbenchError
from poolbench.system.runner import CallRecord

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_initial",
        """
        CREATE TABLE runs (
            id INTEGER PRIMARY KEY,
            kind TEXT NOT NULL,               -- bench | study
            name TEXT,                        -- study name, or the bench target
            status TEXT NOT NULL,             -- running | finished | interrupted | failed
            started_at REAL NOT NULL,
            finished_at REAL,
            argv TEXT NOT NULL,               -- JSON list: the command line
            metadata TEXT NOT NULL,           -- JSON: versions, RAM, target, devices, options
            error TEXT
        );
        CREATE TABLE measurements (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            config TEXT NOT NULL,             -- the configuration measured (bench: the target)
            workload TEXT NOT NULL,
            replicate INTEGER NOT NULL,
            value REAL NOT NULL,
            unit TEXT NOT NULL,
            app_bytes INTEGER NOT NULL,
            ops INTEGER NOT NULL,
            seconds REAL NOT NULL,
            device_bytes INTEGER,             -- NULL when no block device could be counted
            device_mib_s REAL,
            warnings TEXT NOT NULL,           -- JSON list of strings
            guards TEXT NOT NULL,             -- JSON: what each guard did and found
            workload_def TEXT NOT NULL,       -- JSON: the workload definition
            job_file TEXT NOT NULL,           -- the exact fio job run
            created_at REAL NOT NULL,
            UNIQUE (run_id, config, workload, replicate)
        );
        CREATE TABLE commands (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            argv TEXT NOT NULL,
            started_at REAL NOT NULL,
            duration_s REAL NOT NULL,
            returncode INTEGER,
            dry_run INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX measurements_run ON measurements(run_id);
        CREATE INDEX commands_run ON commands(run_id);
        """,
    ),
    (
        "0002_device_overrides",
        """
        CREATE TABLE device_overrides (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            device TEXT NOT NULL,             -- /dev path at claim time
            ident TEXT NOT NULL,              -- the --destroy-data-on value the user gave
            serial TEXT,
            model TEXT,
            size_bytes INTEGER NOT NULL,
            reasons TEXT NOT NULL,            -- JSON list: what was on it, as shown to the user
            confirmed_by TEXT NOT NULL,       -- --yes | interactive
            created_at REAL NOT NULL
        );
        CREATE INDEX device_overrides_run ON device_overrides(run_id);
        """,
    ),
    (
        # Runs measured on many hosts (fleet/), and runs brought in from other stores
        # (store/merge.py). `uid` identifies a run across stores; runs made before it existed
        # get a deterministic one from their start time, so importing the same old store twice
        # is still detected.
        "0003_fleet_hosts",
        """
        ALTER TABLE runs ADD COLUMN uid TEXT;
        UPDATE runs SET uid = 'legacy:' || CAST(started_at * 1000000 AS INTEGER) || ':' || kind
            || ':' || coalesce(name, '') WHERE uid IS NULL;
        CREATE UNIQUE INDEX runs_uid ON runs(uid);
        ALTER TABLE runs ADD COLUMN origin TEXT;  -- JSON: where an imported run came from
        ALTER TABLE measurements ADD COLUMN host TEXT;  -- fleet runs: the host label, else NULL
        CREATE TABLE run_hosts (
            id INTEGER PRIMARY KEY,
            run_id INTEGER NOT NULL REFERENCES runs(id),
            label TEXT NOT NULL,              -- host[:port] as poolbench names it
            address TEXT NOT NULL,
            port INTEGER NOT NULL,
            path TEXT,                        -- the target directory on that host
            server_hostname TEXT,             -- as the fio server reported it
            os TEXT,
            arch TEXT,
            fio_version TEXT,
            clock_skew_s REAL,
            status TEXT NOT NULL,             -- ok | failed
            error TEXT,
            not_applied TEXT NOT NULL,        -- JSON list: guards that could not run there
            UNIQUE (run_id, label)
        );
        CREATE INDEX run_hosts_run ON run_hosts(run_id);
        """,
    ),
]


class StoreError(PoolbenchError):
    pass


def default_path() -> Path:
    """$POOLBENCH_DB, else the XDG data directory (~/.local/share/poolbench/results.db)."""
    env = os.environ.get("POOLBENCH_DB")
    if env:
        return Path(env)
    return Path(platformdirs.user_data_dir("poolbench")) / "results.db"


def _uid() -> str:
    """A run's identity across stores (duplicate detection when importing)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Measurement:
    config: str
    workload: str
    replicate: int
    value: float
    unit: str
    app_bytes: int
    ops: int
    seconds: float
    device_bytes: int | None
    device_mib_s: float | None
    warnings: list[str]
    guards: dict[str, Any]
    workload_def: dict[str, Any]
    job_file: str
    host: str | None = None  # fleet runs: the host measured (fleet/); None on one machine


class Store:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, isolation_level=None)  # explicit transactions
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(
                f"Cannot open the result store {path}: {exc}.",
                "Pass a writable location with --db or POOLBENCH_DB.",
            ) from exc
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA busy_timeout = 10000")
        self._migrate()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def _migrate(self) -> None:
        with self.transaction() as c:
            c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
            )
            done = {r[0] for r in c.execute("SELECT name FROM schema_migrations")}
            known = {name for name, _ in MIGRATIONS}
            if done - known:
                raise StoreError(
                    f"The result store {self.path} was written by a newer poolbench "
                    f"(migrations {sorted(done - known)}).",
                    "Upgrade poolbench, or use another store with --db.",
                )
            for name, sql in MIGRATIONS:
                if name not in done:
                    for stmt in sql.split(";"):
                        if stmt.strip():
                            c.execute(stmt)
                    c.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))

    def migrations(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    def close(self) -> None:
        self.conn.close()

    # runs -----------------------------------------------------------------------------------
    def start_run(self, kind: str, name: str, argv: Sequence[str], metadata: dict[str, Any]) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO runs (kind, name, status, started_at, argv, metadata, uid) "
                "VALUES (?, ?, 'running', ?, ?, ?, ?)",
                (kind, name, time.time(), json.dumps(list(argv)), json.dumps(metadata), _uid()),
            )
            return int(cur.lastrowid or 0)

    def update_metadata(self, run_id: int, metadata: dict[str, Any]) -> None:
        with self.transaction() as c:
            c.execute("UPDATE runs SET metadata = ? WHERE id = ?", (json.dumps(metadata), run_id))

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        with self.transaction() as c:
            c.execute(
                "UPDATE runs SET status = ?, finished_at = ?, error = ? WHERE id = ?",
                (status, time.time(), error, run_id),
            )

    def run(self, run_id: int) -> sqlite3.Row:
        row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise StoreError(f"No run {run_id} in {self.path}.", "List runs with 'poolbench runs'.")
        return row  # type: ignore[no-any-return]

    def runs(self) -> list[sqlite3.Row]:
        return list(self.conn.execute("SELECT * FROM runs ORDER BY id"))

    # measurements ---------------------------------------------------------------------------
    def add_measurement(self, run_id: int, m: Measurement) -> int:
        """Commit one finished measurement at once: whatever happens next, it is kept."""
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO measurements (run_id, config, workload, replicate, value, unit, "
                "app_bytes, ops, seconds, device_bytes, device_mib_s, warnings, guards, "
                "workload_def, job_file, created_at, host) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    m.config,
                    m.workload,
                    m.replicate,
                    m.value,
                    m.unit,
                    m.app_bytes,
                    m.ops,
                    m.seconds,
                    m.device_bytes,
                    m.device_mib_s,
                    json.dumps(m.warnings),
                    json.dumps(m.guards),
                    json.dumps(m.workload_def),
                    m.job_file,
                    time.time(),
                    m.host,
                ),
            )
            return int(cur.lastrowid or 0)

    def measurements(self, run_id: int) -> list[sqlite3.Row]:
        return list(
            self.conn.execute("SELECT * FROM measurements WHERE run_id = ? ORDER BY id", (run_id,))
        )

    # device overrides (--destroy-data-on) -----------------------------------------------------
    def add_device_override(
        self,
        run_id: int,
        *,
        device: str,
        ident: str,
        serial: str | None,
        model: str | None,
        size_bytes: int,
        reasons: Sequence[str],
        confirmed_by: str,
    ) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO device_overrides (run_id, device, ident, serial, model, size_bytes,"
                " reasons, confirmed_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    device,
                    ident,
                    serial,
                    model,
                    size_bytes,
                    json.dumps(list(reasons)),
                    confirmed_by,
                    time.time(),
                ),
            )
            return int(cur.lastrowid or 0)

    def device_overrides(self, run_id: int) -> list[sqlite3.Row]:
        return list(
            self.conn.execute(
                "SELECT * FROM device_overrides WHERE run_id = ? ORDER BY id", (run_id,)
            )
        )

    # commands -------------------------------------------------------------------------------
    def add_commands(self, run_id: int, calls: Sequence[CallRecord]) -> None:
        with self.transaction() as c:
            c.executemany(
                "INSERT INTO commands (run_id, argv, started_at, duration_s, returncode, dry_run)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        run_id,
                        json.dumps(list(r.argv)),
                        r.started_at,
                        r.duration_s,
                        r.returncode,
                        int(r.dry_run),
                    )
                    for r in calls
                ],
            )

    def commands(self, run_id: int) -> list[sqlite3.Row]:
        return list(
            self.conn.execute("SELECT * FROM commands WHERE run_id = ? ORDER BY id", (run_id,))
        )
