"""Deciding whether a file may be opened as poolbench's result store, before SQLite touches it.

The store is opened in one of three ways:
- `write`: the file exists and is ours (migrated if older), or it does not exist and we create
  it (with its parent directories) and mark it with our application id;
- `read`: the file must exist and be ours; it is opened with SQLite's `mode=ro`, so nothing is
  created or written (a store needing migrations is migrated in memory only);
- `dry`: like `read` when the file exists, an empty in-memory store when it does not.

Every refusal leaves the file's bytes exactly as they were: checks only read the header and
the schema (`PRAGMA application_id`, `schema_migrations`) of a read-only connection.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
import urllib.parse
from pathlib import Path
from typing import Literal

from poolbench.errors import EXIT_INPUT, PoolbenchError

Mode = Literal["write", "read", "dry"]

# `PRAGMA application_id` of every store this poolbench creates ("pbnc"). Stores made before
# it was set have 0 and are recognised by their schema_migrations table instead.
APPLICATION_ID = 0x70626E63
SQLITE_MAGIC = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10000


# What a store operation can raise after the store was opened (locked, disk full, ...): the
# CLI turns it into one paragraph without importing sqlite3 itself (SQL stays in store/).
DATABASE_ERRORS: tuple[type[Exception], ...] = (sqlite3.Error,)


class StoreError(PoolbenchError):
    """A store that does not exist, cannot be opened or is damaged, or a run not in it."""

    exit_code = EXIT_INPUT


def damaged(path: Path, detail: str) -> StoreError:
    """The one message for a store whose rows or pages cannot be read as poolbench wrote them."""
    return StoreError(
        f"This store is damaged: {path}: {detail}.",
        "Restore it from a backup, or use another store with --db or POOLBENCH_DB; "
        "poolbench did not change it.",
    )


def locked(path: Path) -> StoreError:
    return StoreError(
        f"The result store {path} is locked by another process (another poolbench still "
        f"writing?) for longer than {BUSY_TIMEOUT_MS // 1000} s.",
        "Wait for it to finish, or use another store with --db.",
    )


def from_sqlite(path: Path, exc: sqlite3.Error) -> StoreError:
    """A SQLite error met while using the store, as a sentence about the store."""
    text = str(exc)
    if "locked" in text or "busy" in text:
        return locked(path)
    if "readonly" in text or "read-only" in text:
        return StoreError(
            f"The result store {path} is read-only ({text}).",
            "Make it writable, or pass another store with --db.",
        )
    return damaged(path, text)


def _not_a_store(path: Path, what: str) -> StoreError:
    return StoreError(
        f"{path} is not a poolbench result store: {what}. poolbench left it unchanged.",
        "Pass the path of a results.db written by poolbench, or a new file name, with --db "
        "or POOLBENCH_DB.",
    )


def check_path(path: Path, mode: Mode) -> bool:
    """Refuse what cannot be a store before SQLite opens it; True when the file exists."""
    if str(path) in ("", ".") or "\x00" in str(path):
        raise StoreError(
            'The result store path is empty or contains a NUL byte (POOLBENCH_DB=""?).',
            "Set POOLBENCH_DB to a file path, or unset it to use the default store.",
        )
    try:
        st = path.stat()
    except FileNotFoundError:
        if mode == "read":
            raise StoreError(
                f"There is no result store at {path} (nothing has been stored there yet).",
                "Measure something first (poolbench bench PATH, poolbench run STUDY), or "
                "pass the store you meant with --db or POOLBENCH_DB.",
            ) from None
        return False
    except OSError as exc:
        raise StoreError(
            f"Cannot look at the result store {path}: {exc.strerror}.",
            "Pass a readable location with --db or POOLBENCH_DB.",
        ) from exc
    if stat.S_ISDIR(st.st_mode):
        raise _not_a_store(path, "it is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise _not_a_store(path, "it is not a regular file (a device, FIFO or socket)")
    _check_header(path, st.st_size)
    if mode == "write" and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)):
        raise StoreError(
            f"The result store {path} (or its directory) is read-only: results cannot be "
            "stored in it.",
            "Make it writable, or pass another store with --db.",
        )
    return True


def _check_header(path: Path, size: int) -> None:
    if size == 0:
        raise _not_a_store(path, "it is an empty file poolbench did not create")
    try:
        with path.open("rb") as f:
            head = f.read(100)
    except OSError as exc:
        raise StoreError(
            f"Cannot read the result store {path}: {exc.strerror}.",
            "Check its permissions, or pass another store with --db.",
        ) from exc
    if not head.startswith(SQLITE_MAGIC):
        raise _not_a_store(path, "it is not an SQLite database (a text file?)")
    if len(head) < 100 or size < 512:
        raise damaged(path, "the file is truncated (shorter than an SQLite header page)")


def connect_readonly(path: Path) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise from_sqlite(path, exc) from exc
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def snapshot(path: Path) -> bytes:
    """A consistent copy of the store at `path`, whole even while another process writes it
    (SQLite's online backup, read-only on the source): what `fleet run` fetches from a host."""
    src = connect_readonly(path)
    try:
        with tempfile.TemporaryDirectory(prefix="poolbench-snapshot-") as tmp:
            copy = Path(tmp) / "store.db"
            dst = sqlite3.connect(copy)
            try:
                src.backup(dst)
            except sqlite3.Error as exc:
                raise from_sqlite(path, exc) from exc
            finally:
                dst.close()
            return copy.read_bytes()
    finally:
        src.close()


def check_schema(path: Path, conn: sqlite3.Connection, known: set[str]) -> set[str]:
    """Refuse another application's database, a damaged one or a newer poolbench's; returns
    the migrations already applied."""
    try:
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        ok = conn.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.Error as exc:
        raise from_sqlite(path, exc) from exc
    if app_id not in (0, APPLICATION_ID):
        raise _not_a_store(path, f"it belongs to another application (application id {app_id})")
    if "schema_migrations" not in tables:
        raise _not_a_store(
            path, "it is another application's SQLite database (no schema_migrations table)"
        )
    if ok != "ok":
        raise damaged(path, "SQLite's integrity check says: " + " ".join(str(ok).split()))
    try:
        done = {str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")}
    except sqlite3.Error as exc:
        raise from_sqlite(path, exc) from exc
    if not done:
        raise _not_a_store(path, "its schema_migrations table is empty")
    if done - known:
        raise StoreError(
            f"The result store {path} was written by a newer poolbench "
            f"(migrations {sorted(done - known)}).",
            "Upgrade poolbench, or use another store with --db.",
        )
    if "runs" not in tables:
        raise damaged(path, "it has no runs table")
    return done
