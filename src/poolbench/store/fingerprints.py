"""The fingerprints in the result store (`fingerprints`, migration 0009): one per bench run,
one per study trial, written when the measuring starts and read back as typed records
(records/fingerprint.py), decoded here once."""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from poolbench.records.fingerprint import Fingerprint, FingerprintError
from poolbench.store import opening
from poolbench.store.db import Store
from poolbench.store.opening import StoreError


@dataclass(frozen=True)
class StoredFingerprint:
    run_id: int
    config: str | None  # a study trial's configuration; None: a bench run
    replicate: int | None
    created_at: float
    fingerprint: Fingerprint


def add(store: Store, run_id: int, fp: Fingerprint, config: str | None = None,
        replicate: int | None = None) -> None:  # fmt: skip
    """Store one fingerprint, committed at once."""
    with store.transaction() as c:
        c.execute(
            "INSERT INTO fingerprints (run_id, config, replicate, version, record, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (run_id, config, replicate, fp.version, fp.to_text(), time.time()),
        )


def of_run(store: Store, run_id: int) -> list[StoredFingerprint]:
    """The run's fingerprints in the order they were taken ([] for a run made before them);
    a record this poolbench cannot read makes the store damaged, named with the row."""
    try:
        rows = list(store.conn.execute(
            "SELECT id, run_id, config, replicate, created_at, record FROM fingerprints "
            "WHERE run_id = ? ORDER BY id", (run_id,),
        ))  # fmt: skip
    except sqlite3.Error as exc:
        raise opening.from_sqlite(store.path, exc) from exc
    out = []
    for row in rows:
        try:
            fp = Fingerprint.from_text(row[5])
        except FingerprintError as exc:
            if exc.newer:
                raise StoreError(
                    f"The store {store.path} holds a fingerprint (row {row[0]}) written by a "
                    f"newer poolbench: {exc}.",
                    "Upgrade poolbench to read this store; it was not changed.",
                ) from None
            raise opening.damaged(store.path, f"fingerprints row {row[0]}: {exc}") from None
        out.append(StoredFingerprint(int(row[1]), row[2], row[3], float(row[4]), fp))
    return out
