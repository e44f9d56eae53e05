"""SQLite result store.

Each finished measurement is committed in its own transaction as soon as it completes, so an
interrupted or crashed run keeps everything it finished. The schema evolves through named
migrations recorded in the database (sqlite-utils' approach); a database written by a newer
poolbench is refused rather than misread.
"""

from __future__ import annotations

import contextlib
import json
import math
import shlex
import sqlite3
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from poolbench import storepath
from poolbench.records.latency import Latency
from poolbench.records.measurement import Measurement
from poolbench.records.run_metadata import RunMetadataJson, stamped
from poolbench.store import opening
from poolbench.store.migrations import CLAT_COLUMNS, MIGRATIONS
from poolbench.store.opening import Mode, StoreError
from poolbench.system import stopping
from poolbench.system.runner import CallRecord


def default_path() -> Path:
    """The store a command opens without --db (`storepath.default_store`: $POOLBENCH_DB, else
    the XDG data directory; a set but empty POOLBENCH_DB is refused)."""
    return storepath.default_store()


def db_option(path: Path) -> str:
    """The `--db PATH` a command in a message needs (with its leading space), or nothing
    when PATH is the store that command opens anyway: a hint copied as printed must reach
    this store."""
    try:
        if path.resolve() == default_path().resolve():
            return ""
    except storepath.EmptyStorePath:  # POOLBENCH_DB set but empty: the command needs --db
        pass
    return f" --db {shlex.quote(str(path))}"


def resume_command(path: Path, run_id: int, command: str = "run") -> str:
    """The command that finishes (or re-measures the failed trials of) a stored run:
    `poolbench run --resume RUN` resumes any study; `command` may name the one the user
    started it with ("study parity", "demo"), which resumes it the same way."""
    return f"poolbench {command} --resume {run_id}{db_option(path)}"


def _uid() -> str:
    """A run's identity across stores (duplicate detection when importing)."""
    return uuid.uuid4().hex


# Columns that must hold numbers (SQLite stores whatever it is given): a row with text there
# was not written by poolbench, and is reported as damage instead of failing deep in a report.
_NUMERIC = {
    "runs": ("id", "started_at"),
    "measurements": ("id", "run_id", "replicate", "value", "app_bytes", "ops", "seconds"),
    "commands": ("id", "run_id", "started_at", "duration_s"),
}
# The measurement's plain columns in the order add_measurement writes them.
_PLAIN = (
    "config", "workload", "replicate", "value", "unit", "app_bytes", "ops", "seconds",
    "device_bytes", "device_mib_s",
)  # fmt: skip
_JSON = {"runs": ("argv", "metadata"), "measurements": ("warnings", "guards", "workload_def")}


def checked_rows(path: Path, table: str, rows: list[sqlite3.Row]) -> list[sqlite3.Row]:
    """Refuse rows poolbench cannot have written (text in a number column, broken JSON)."""
    for row in rows:
        keys = row.keys()
        for col in _NUMERIC.get(table, ()):
            v = row[col] if col in keys else 0
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise opening.damaged(
                    path, f"{table} row {row[0]!r} has {col} = {v!r}, not a finite number"
                )
        for col in _JSON.get(table, ()):
            try:
                if col in keys:
                    json.loads(row[col])
            except (TypeError, ValueError, RecursionError):
                raise opening.damaged(
                    path, f"{table} row {row[0]!r} has {col} that is not valid JSON"
                ) from None
    return rows


def _add_clat(c: sqlite3.Connection, measurement_id: int, latency: Latency) -> None:
    """The latency columns of one measurement, in the transaction that inserted it."""
    values = [latency.percentiles.get(q) for q in CLAT_COLUMNS.values()]
    sets = ", ".join(f"{col} = ?" for col in CLAT_COLUMNS)
    c.execute(
        f"UPDATE measurements SET {sets}, clat = ? WHERE id = ?",
        (*values, json.dumps(latency.to_json()), measurement_id),
    )


class Store:
    """The result store. `mode` is "write" (create or migrate as needed), "read" (SQLite's
    mode=ro: never creates or changes anything) or "dry" (read, or an empty in-memory store
    when the file does not exist: dry runs never create it)."""

    def __init__(self, path: Path, mode: Mode = "write") -> None:
        self.path = path
        self.mode = mode
        exists = opening.check_path(path, mode)
        if mode == "write":
            self.conn = self._open_write(exists)
        elif exists:
            self.conn = self._open_read()
        else:  # a dry run without a store: nothing to read, nothing to create
            self.conn = sqlite3.connect(":memory:", isolation_level=None)
            self._migrate(set())
        self.conn.row_factory = sqlite3.Row

    def _open_write(self, exists: bool) -> sqlite3.Connection:
        done: set[str] = set()
        if exists:
            probe = opening.connect_readonly(self.path)
            try:
                done = opening.check_schema(self.path, probe, {n for n, _ in MIGRATIONS})
            finally:
                probe.close()
        try:
            if not exists:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, isolation_level=None)  # explicit transactions
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.execute(f"PRAGMA busy_timeout = {opening.BUSY_TIMEOUT_MS}")
            self._migrate(done)
        except (OSError, sqlite3.Error) as exc:
            if not exists:  # leave nothing behind: a half-made store is not a store
                with contextlib.suppress(OSError):
                    self.path.unlink()
            if isinstance(exc, sqlite3.Error):
                raise opening.from_sqlite(self.path, exc) from exc
            raise StoreError(
                f"Cannot create the result store {self.path}: {exc.strerror or exc}.",
                "Pass a writable location with --db or POOLBENCH_DB.",
            ) from exc
        return self.conn

    def _open_read(self) -> sqlite3.Connection:
        known = {name for name, _ in MIGRATIONS}
        conn = opening.connect_readonly(self.path)
        try:
            done = opening.check_schema(self.path, conn, known)
        except BaseException:
            conn.close()
            raise
        if done == known:
            return conn
        # An older store: bring a copy up to date in memory; the file stays as it is.
        try:
            data = conn.serialize()
            conn.close()
            self.conn = sqlite3.connect(":memory:", isolation_level=None)
            self.conn.deserialize(data)
            self._migrate(done)
        except sqlite3.Error as exc:
            raise opening.from_sqlite(self.path, exc) from exc
        return self.conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, which a stop signal does not cut in two: a measurement that
        is being stored when SIGTERM comes is stored, then poolbench stops."""
        with stopping.deferred("storing a result"):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            self.conn.execute("COMMIT")

    def _migrate(self, done: set[str]) -> None:
        if done >= {name for name, _ in MIGRATIONS}:
            return  # up to date: opening a store writes nothing
        with self.transaction() as c:
            c.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
            )
            c.execute(f"PRAGMA application_id = {opening.APPLICATION_ID}")
            for name, sql in MIGRATIONS:
                if name not in done:
                    for stmt in sql.split(";"):
                        if stmt.strip():
                            c.execute(stmt)
                    c.execute("INSERT INTO schema_migrations VALUES (?, ?)", (name, time.time()))

    def _select(self, table: str, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        try:
            rows = list(self.conn.execute(sql, args))
        except sqlite3.Error as exc:
            raise opening.from_sqlite(self.path, exc) from exc
        return checked_rows(self.path, table, rows)

    def migrations(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT name FROM schema_migrations ORDER BY name")]

    def close(self) -> None:
        self.conn.close()

    # runs -----------------------------------------------------------------------------------
    def start_run(
        self, kind: str, name: str, argv: Sequence[str], metadata: RunMetadataJson
    ) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO runs (kind, name, status, started_at, argv, metadata, uid) "
                "VALUES (?, ?, 'running', ?, ?, ?, ?)",
                (
                    kind,
                    name,
                    time.time(),
                    json.dumps(list(argv)),
                    json.dumps(stamped(metadata)),
                    _uid(),
                ),
            )
            return int(cur.lastrowid or 0)

    def update_metadata(self, run_id: int, metadata: RunMetadataJson) -> None:
        with self.transaction() as c:
            c.execute(
                "UPDATE runs SET metadata = ? WHERE id = ?", (json.dumps(stamped(metadata)), run_id)
            )

    def finish_run(
        self, run_id: int, status: str, error: str | None = None, stopped_by: str | None = None
    ) -> None:
        """The run's status; `stopped_by` names the signal that stopped an interrupted run."""
        with self.transaction() as c:
            c.execute(
                "UPDATE runs SET status = ?, finished_at = ?, error = ?, stopped_by = ? "
                "WHERE id = ?",
                (status, time.time(), error, stopped_by, run_id),
            )

    def set_owner(self, run_id: int, owner: str | None) -> None:
        """The process now running the run (engine/lifecycle.py owner_id)."""
        with self.transaction() as c:
            c.execute("UPDATE runs SET owner = ? WHERE id = ?", (owner, run_id))

    def run(self, run_id: int) -> sqlite3.Row:
        if not -(2**63) <= run_id < 2**63:  # SQLite's integers: such an id cannot exist
            raise StoreError(f"No run {run_id} in {self.path}.", "List runs with 'poolbench runs'.")
        rows = self._select("runs", "SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise StoreError(f"No run {run_id} in {self.path}.", "List runs with 'poolbench runs'.")
        return rows[0]

    def runs(self) -> list[sqlite3.Row]:
        return self._select("runs", "SELECT * FROM runs ORDER BY id")

    # measurements ---------------------------------------------------------------------------
    def add_measurement(self, run_id: int, m: Measurement) -> int:
        """Commit one finished measurement at once: whatever happens next, it is kept."""
        row = m.to_json()  # the record owns its stored shape; JSON columns go in as text
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO measurements (run_id, config, workload, replicate, value, unit, "
                "app_bytes, ops, seconds, device_bytes, device_mib_s, warnings, guards, "
                "workload_def, job_file, created_at, host, config_levels) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    *(row[k] for k in _PLAIN),
                    *(json.dumps(row[k]) for k in ("warnings", "guards", "workload_def")),
                    row["job_file"],
                    time.time(),
                    row["host"],
                    None if row["config_levels"] is None else json.dumps(row["config_levels"]),
                ),
            )
            mid = int(cur.lastrowid or 0)
            if m.latency is not None:
                _add_clat(c, mid, m.latency)
            return mid

    def measurements(self, run_id: int) -> list[sqlite3.Row]:
        return self._select(
            "measurements", "SELECT * FROM measurements WHERE run_id = ? ORDER BY id", (run_id,)
        )

    def measurement_records(self, run_id: int) -> list[Measurement]:
        """The run's measurements as the typed record the engine stored, in stored order."""
        return [Measurement.from_row(dict(r)) for r in self.measurements(run_id)]

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
        return self._select(
            "commands", "SELECT * FROM commands WHERE run_id = ? ORDER BY id", (run_id,)
        )
