"""Stored traces: one directory per recording, beside the result store.

`traces/NAME/` holds blktrace's own per-CPU files (`trace.blktrace.N`, the recording as
taken), `blkparse.txt` (its text), `trace.iolog` (the I/Os as fio replays them) and
`summary.json` (the figures, `tracestats.TraceSummary`, with the device and how it was
recorded). A workload names a trace as `trace:NAME` (looked up in the traces directory of
the default store: storepath.default_store's directory) or
`trace:PATH` (a trace directory anywhere, e.g. one recorded with --db).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from poolbench import storepath
from poolbench.errors import UsageError
from poolbench.workloads import replay
from poolbench.workloads.tracestats import TraceSummary
from poolbench.workloads.workload import Workload

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
SUMMARY = "summary.json"


def traces_dir(db: Path | None = None) -> Path:
    """`traces/` beside the store: `db`, else the default store (`storepath.default_store`,
    the store's own rule: a set but empty POOLBENCH_DB is refused here too)."""
    return (db if db is not None else storepath.default_store()).parent / "traces"


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise UsageError(
            f"'{name}' is not a trace name.",
            "Use letters, digits, '.', '_' and '-' (up to 64, starting with a letter or "
            "digit), e.g. --name db-morning.",
        )
    return name


def resolve(text: str, db: Path | None = None) -> Path:
    """The stored trace directory that `trace:TEXT` names (a NAME, or a path)."""
    if "/" in text:
        path = Path(text)
        path = path.parent if path.name == SUMMARY else path
    else:
        path = traces_dir(db) / check_name(text)
    if not (path / SUMMARY).is_file():
        known = sorted(p.parent.name for p in traces_dir(db).glob(f"*/{SUMMARY}"))
        raise UsageError(
            f"No recorded trace at {path} (no {SUMMARY} there).",
            "Record one with `poolbench record DEVICE --seconds N --name NAME`"
            + (f"; recorded here: {', '.join(known)}." if known else ".")
            + " A trace recorded with --db lives beside that store: name it by its path.",
        )
    return path


@dataclass(frozen=True)
class StoredTrace:
    """A trace's summary document (`summary.json`) decoded: its figures, the device and how
    long it was recorded; `how` the rest, what its recorder noted (when, method, the binary
    files' check, lost events)."""

    name: str
    summary: TraceSummary
    device: str
    seconds: int | None
    how: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def from_json(cls, name: str, doc: object) -> StoredTrace:
        """KeyError/TypeError when `doc` is not a summary document."""
        if not isinstance(doc, dict):
            raise TypeError(f"the summary is {type(doc).__name__}, not an object")
        seconds = doc.get("seconds")
        return cls(
            name,
            TraceSummary.from_json(doc["trace"]),
            str(doc.get("device", "?")),
            seconds if isinstance(seconds, int) and not isinstance(seconds, bool) else None,
            {k: v for k, v in doc.items() if k not in ("trace", "device", "seconds")},
        )


def load_summary(path: Path) -> StoredTrace:
    """The trace's summary document, decoded."""
    try:
        return StoredTrace.from_json(path.name, json.loads((path / SUMMARY).read_text()))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(
            f"The trace summary {path / SUMMARY} cannot be read: {exc}.",
            "Record the trace again with `poolbench record`.",
        ) from exc


def save_summary(path: Path, doc: Mapping[str, object]) -> None:
    tmp = path / f".{SUMMARY}.tmp"
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
    os.replace(tmp, path / SUMMARY)  # a reader never sees half a summary


def workload(name: str) -> Workload:
    """`trace:NAME` / `trace-fast:NAME` (or a path) as a workload."""
    _mode, _, ref = name.partition(":")
    if not ref:
        raise UsageError(
            f"'{name}' names no trace.",
            "Write trace:NAME (timed) or trace-fast:NAME (as fast as possible).",
        )
    path = resolve(ref)
    summary = load_summary(path).summary
    if summary.ios == 0:
        raise UsageError(
            f"The trace {path} holds no I/O: there is nothing to replay.",
            "Record again while the workload runs on the device.",
        )
    return replay.workload(name, path, summary)


def stored(db: Path | None = None) -> list[StoredTrace]:
    """Every stored trace, by name (one whose summary cannot be read is left out)."""
    out = []
    for p in sorted(traces_dir(db).glob(f"*/{SUMMARY}")):
        try:
            out.append(StoredTrace.from_json(p.parent.name, json.loads(p.read_text())))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return out
