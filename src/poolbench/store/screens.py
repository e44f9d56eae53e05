"""The disk screens in the result store (`disk_screens`, migration 0007): written by
`poolbench disks --screen`, read back by serial number for a study on the same disks and for
the reports' disk speeds. The record itself is the engine's (a JSON document here).
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from poolbench.records.jsontypes import JsonObject
from poolbench.store.db import Store

RECENT_DAYS = 30  # a screen older than this is not taken for the disk's speed today
DAY = 86400.0


class FigureJson(TypedDict):
    """One test's replicate figures and how they were measured, with their summary."""

    unit: str
    values: list[float]
    how: str
    mean: NotRequired[float]  # the summary: absent without values
    ci95: NotRequired[list[float] | None]  # None: one run, no interval
    n: NotRequired[int]


class KneeJson(TypedDict):
    at_bytes: float
    at_s: float
    before_bps: float
    after_bps: float
    fall: float


class DiskScreenJson(TypedDict):
    """One disk's screen as the `result` column keeps it and `disks --screen --json` prints
    it (engine/screen/records.DiskScreen writes and reads it)."""

    device: str
    name: str
    serial: str | None
    model: str | None
    size_bytes: int
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool
    zoned: str | None
    write_cache: str | None
    figures: dict[str, FigureJson]
    series: list[list[float]]  # the sustained write: [start_s, seconds, start_bytes, bytes]
    knee: KneeJson | None
    warnings: list[str]


@dataclass(frozen=True)
class StoredScreen:
    screen: str
    created_at: float
    device: str
    serial: str | None
    writes: bool
    result: DiskScreenJson

    @property
    def age_days(self) -> float:
        return (time.time() - self.created_at) / DAY


def add_screen(store: Store, results: Sequence[DiskScreenJson], writes: bool,
               options: JsonObject) -> str:  # fmt: skip
    """Store one screen's disks in one transaction; returns the screen's id."""
    sid = uuid.uuid4().hex[:12]
    now = time.time()
    with store.transaction() as c:
        for r in results:
            c.execute(
                "INSERT INTO disk_screens (screen, created_at, hostname, device, serial, model,"
                " writes, options, result) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (sid, now, socket.gethostname(), r["device"], r.get("serial"), r.get("model"),
                 int(writes), json.dumps(options), json.dumps(r)),
            )  # fmt: skip
    return sid


def _has_table(store: Store) -> bool:
    """A store from before migration 0007, opened read-only, has no screens at all."""
    row = store.conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'disk_screens'"
    ).fetchone()
    return row is not None


def _row(r: tuple[str, float, str, str | None, int, str]) -> StoredScreen:
    return StoredScreen(r[0], float(r[1]), r[2], r[3], bool(r[4]), json.loads(r[5]))


def recent_by_serial(
    store: Store, serials: Sequence[str], days: float = RECENT_DAYS, at: float | None = None
) -> dict[str, StoredScreen]:
    """The newest screen of each serial number taken within `days` of `at` (default now;
    a report passes its run's start), serials without one left out."""
    if not serials or not _has_table(store):
        return {}
    at = time.time() if at is None else at
    marks = ", ".join("?" for _ in serials)
    rows = store.conn.execute(
        "SELECT screen, created_at, device, serial, writes, result FROM disk_screens"
        f" WHERE serial IN ({marks}) AND created_at BETWEEN ? AND ? ORDER BY created_at, id",
        (*serials, at - days * DAY, at + days * DAY),
    ).fetchall()
    found: dict[str, StoredScreen] = {}
    for r in rows:
        found[r[3]] = _row(tuple(r))  # the newest last
    return found


def latest_screen(store: Store) -> str | None:
    """The id of the newest screen in the store (None: no screen)."""
    if not _has_table(store):
        return None
    row = store.conn.execute(
        "SELECT screen FROM disk_screens ORDER BY created_at DESC, id DESC LIMIT 1"
    ).fetchone()
    return None if row is None else str(row[0])


def screen_disks(store: Store, screen: str) -> list[StoredScreen]:
    """Every disk of one screen (its peers), in the order screened."""
    if not _has_table(store):
        return []
    rows = store.conn.execute(
        "SELECT screen, created_at, device, serial, writes, result FROM disk_screens"
        " WHERE screen = ? ORDER BY id",
        (screen,),
    ).fetchall()
    return [_row(tuple(r)) for r in rows]
