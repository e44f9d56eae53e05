"""Bring runs from another result store (another machine's) into this one.

Rules: the other store is opened read-only and never changed; local rows are never updated or
overwritten; every imported run gets a new local id (its rows follow it: every table with a
`run_id` column that exists in both stores, e.g. measurements, commands, device overrides,
fleet hosts); a run already present, recognised by its `uid` or by the same kind, name, start
time and command line, is skipped with a message, so importing the same store twice imports
nothing the second time. Each run is copied in one transaction: an interruption leaves either
the whole run or none of it. Where a run came from is kept in `runs.origin`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from poolbench.records.run_metadata import RunMetadata
from poolbench.store import opening
from poolbench.store.db import Store, checked_rows
from poolbench.store.migrations import MIGRATIONS
from poolbench.store.opening import StoreError


class ImportedJson(TypedDict):
    source_run: int
    run: int


class SkippedJson(TypedDict):
    source_run: int
    reason: str


class ImportReportJson(TypedDict):
    """`merge --json` (and `import --json`): what came in, what did not and why."""

    source: str
    imported: list[ImportedJson]
    skipped: list[SkippedJson]
    rows: dict[str, int]


@dataclass
class ImportReport:
    source: str
    imported: list[tuple[int, int]] = field(default_factory=list)  # (their id, our new id)
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (their id, why)
    existing: list[tuple[int, int]] = field(default_factory=list)  # (their id, ours): here already
    rows: dict[str, int] = field(default_factory=dict)  # table -> rows copied
    tags: dict[str, str] = field(default_factory=dict)  # said in each imported run's origin

    def as_dict(self) -> ImportReportJson:
        return {
            "source": self.source,
            "imported": [{"source_run": a, "run": b} for a, b in self.imported],
            "skipped": [{"source_run": a, "reason": r} for a, r in self.skipped],
            "rows": self.rows,
        }


def legacy_uid(row: sqlite3.Row) -> str:
    """The uid migration 0003 gives a run made before uids existed (same expression)."""
    micro = int(float(row["started_at"]) * 1000000)
    return f"legacy:{micro}:{row['kind']}:{row['name'] or ''}"


def _open_readonly(path: Path) -> sqlite3.Connection:
    """The other store, checked like our own (opening.py) and opened with mode=ro."""
    opening.check_path(path, "read")
    conn = opening.connect_readonly(path)
    try:
        opening.check_schema(path, conn, {name for name, _ in MIGRATIONS})
    except BaseException:
        conn.close()
        raise
    conn.row_factory = sqlite3.Row
    return conn


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def _run_tables(src: sqlite3.Connection, dst: sqlite3.Connection) -> list[str]:
    """Tables in both stores that hang off a run (they have a run_id column)."""
    names = [
        str(r[0])
        for r in src.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
    ]
    dst_names = {
        str(r[0]) for r in dst.execute("SELECT name FROM sqlite_master WHERE type='table'")
    }
    return [n for n in names if n != "runs" and n in dst_names and "run_id" in _columns(src, n)]


def _existing(dst: sqlite3.Connection, uid: str, row: sqlite3.Row) -> int | None:
    hit = dst.execute(
        "SELECT id FROM runs WHERE uid = ? OR (started_at = ? AND kind = ? AND argv = ? "
        "AND coalesce(name, '') = ?)",
        (uid, row["started_at"], row["kind"], row["argv"], row["name"] or ""),
    ).fetchone()
    return int(hit[0]) if hit else None


def check_source(other: Path) -> None:
    """Refuse a source that is not a readable poolbench store (it is only read)."""
    _open_readonly(other).close()


def import_store(
    local: Store,
    other: Path,
    runs: Sequence[int] | None = None,
    *,
    source: str | None = None,
    tags: dict[str, str] | None = None,
) -> ImportReport:
    """`source`: how the runs' origin names the other store (its path by default);
    `tags`: more to say in each run's origin (a fleet run's host and tag)."""
    if not other.is_file():
        raise StoreError(f"{other} does not exist.", "Give the path of another results.db.")
    if local.path.exists() and os.path.samefile(local.path, other):
        raise StoreError(
            f"{other} is the local store itself.", "Give another machine's store to import."
        )
    src = _open_readonly(other)
    report = ImportReport(source or str(other.resolve()), tags=dict(tags or {}))
    try:
        return _import_runs(local, src, other, runs, report)
    except sqlite3.Error as exc:
        raise opening.from_sqlite(other, exc) from exc
    finally:
        src.close()


def _import_runs(
    local: Store,
    src: sqlite3.Connection,
    other: Path,
    runs: Sequence[int] | None,
    report: ImportReport,
) -> ImportReport:
    src_cols = _columns(src, "runs")
    dst_cols = set(_columns(local.conn, "runs"))
    run_cols = [c for c in src_cols if c in dst_cols and c not in ("id", "uid", "origin")]
    tables = _run_tables(src, local.conn)
    wanted = set(runs) if runs else None
    found: set[int] = set()
    for row in checked_rows(
        other, "runs", src.execute("SELECT * FROM runs ORDER BY id").fetchall()
    ):
        src_id = int(row["id"])
        if wanted is not None and src_id not in wanted:
            continue
        found.add(src_id)
        uid = row["uid"] if "uid" in src_cols and row["uid"] else legacy_uid(row)
        here = _existing(local.conn, uid, row)
        if here is not None:
            report.skipped.append((src_id, f"already in the local store as run {here}"))
            report.existing.append((src_id, here))
            continue
        new_id = _copy_run(local, src, row, run_cols, uid, report, tables)
        report.imported.append((src_id, new_id))
    if wanted is not None and wanted - found:
        missing = ", ".join(str(i) for i in sorted(wanted - found))
        raise StoreError(f"No run {missing} in {other}.", "List its runs with --db OTHER runs.")
    return report


def _copy_run(
    local: Store,
    src: sqlite3.Connection,
    row: sqlite3.Row,
    run_cols: list[str],
    uid: str,
    report: ImportReport,
    tables: list[str],
) -> int:
    src_id = int(row["id"])
    src_path = Path(report.source)
    origin = {
        "store": report.source,
        "run_id": src_id,
        "hostname": RunMetadata.decode(row["metadata"]).machine.hostname,
        "imported_at": time.time(),
        **report.tags,
    }
    if "origin" in row.keys() and row["origin"]:  # noqa: SIM118 (a Row's `in` tests values)
        origin["via"] = json.loads(row["origin"])
    with local.transaction() as c:
        cols = [*run_cols, "uid", "origin"]
        values = [row[k] for k in run_cols] + [uid, json.dumps(origin)]
        cur = c.execute(
            f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", values
        )
        new_id = int(cur.lastrowid or 0)
        for table in tables:
            keep = set(_columns(c, table))
            copy = [k for k in _columns(src, table) if k in keep and k not in ("id", "run_id")]
            rows = src.execute(
                f"SELECT {', '.join(copy)} FROM {table} WHERE run_id = ? ORDER BY id", (src_id,)
            ).fetchall()
            checked_rows(src_path, table, rows)
            if not rows:
                continue
            names = ", ".join(["run_id", *copy])
            marks = ", ".join("?" * (len(copy) + 1))
            try:
                c.executemany(
                    f"INSERT INTO {table} ({names}) VALUES ({marks})",
                    [(new_id, *tuple(r)) for r in rows],
                )
            except sqlite3.IntegrityError as exc:
                raise StoreError(
                    f"Cannot copy {table} of run {src_id} from {report.source}: {exc}.",
                    "Nothing of this run was imported.",
                ) from exc
            report.rows[table] = report.rows.get(table, 0) + len(rows)
    return new_id
