"""One stored figure and everything that qualifies it: the record the engine produces, the
store persists (`measurements`, one row) and the reports read back.

`to_json` is the row with its JSON columns decoded (what `export --json` and a merge carry);
`from_json` reads that back, and `from_row` reads a row as stored, its JSON columns still
text. A damaged or older row reads as far as it can (a wrong type is read as empty), never
raises: the store refuses rows poolbench cannot have written before they get here. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from poolbench.records.findings import Findings, obj, opt_int
from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import Latency

# The columns that hold JSON text in the store (0001_initial, 0005_latency, 0006_config_levels).
JSON_COLUMNS = ("warnings", "guards", "workload_def", "clat", "config_levels")


@dataclass(frozen=True)
class Measurement:
    """One figure and everything that qualifies it."""

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
    findings: Findings  # stored as the JSON column `guards`
    workload_def: JsonObject  # the workload definition as stored (a JSON column)
    job_file: str
    host: str | None = None  # fleet runs: the host measured; None on one machine
    latency: Latency | None = None  # fio's completion latency (None: not a fio job, or none)
    # The configuration's factor levels as data ({} for a bench target); None: not known
    # (a fleet host's path, a row stored before levels were kept).
    config_levels: dict[str, str] | None = None
    # A stored row's own: its id and when it was stored (None before it is; not in to_json).
    row_id: int | None = field(default=None, compare=False)
    created_at: float | None = field(default=None, compare=False)

    def to_json(self) -> JsonObject:
        """The stored row, its JSON columns decoded (`guards` for the findings, `clat` for
        the latency): the shape the store has always had."""
        return {
            "config": self.config,
            "workload": self.workload,
            "replicate": self.replicate,
            "value": self.value,
            "unit": self.unit,
            "app_bytes": self.app_bytes,
            "ops": self.ops,
            "seconds": self.seconds,
            "device_bytes": self.device_bytes,
            "device_mib_s": self.device_mib_s,
            "warnings": list(self.warnings),
            "guards": self.findings.to_json(),
            "workload_def": dict(self.workload_def),
            "job_file": self.job_file,
            "host": self.host,
            "clat": self.latency.to_json() if self.latency is not None else None,
            "config_levels": None if self.config_levels is None else dict(self.config_levels),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Measurement:
        """A stored measurement (a row with its JSON columns already decoded)."""
        clat = d.get("clat")
        return cls(
            config=str(d["config"]),
            workload=str(d["workload"]),
            replicate=_int(d["replicate"]),
            value=_float(d["value"]),
            unit=str(d["unit"]),
            app_bytes=_int(d.get("app_bytes")),
            ops=_int(d.get("ops")),
            seconds=_float(d.get("seconds")),
            device_bytes=opt_int(d.get("device_bytes")),
            device_mib_s=_opt_float(d.get("device_mib_s")),
            warnings=_warnings(d.get("warnings")),
            findings=Findings.from_json(d.get("guards")),
            workload_def=obj(d.get("workload_def")),
            job_file=str(d.get("job_file") or ""),
            host=str(d["host"]) if d.get("host") else None,
            latency=Latency.from_json(clat) if isinstance(clat, Mapping) else None,
            config_levels=_levels(d.get("config_levels")),
            row_id=opt_int(d.get("id")),
            created_at=_opt_float(d.get("created_at")),
        )

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> Measurement:
        """A row as the store holds it: its JSON columns are text (NULL or broken: empty)."""
        return cls.from_json({**row, **{c: _decoded(row.get(c)) for c in JSON_COLUMNS}})


def _decoded(v: object) -> object:
    if not isinstance(v, str | bytes):
        return v
    try:
        return json.loads(v)
    except (ValueError, RecursionError):
        return None


# Number columns hold numbers (the store refuses a row with text there): anything else is 0.
def _int(v: object) -> int:
    return int(v) if isinstance(v, int | float) else 0


def _float(v: object) -> float:
    return float(v) if isinstance(v, int | float) else 0.0


def _opt_float(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def _warnings(v: object) -> list[str]:
    """The stored warnings; a single value that is not a list is one warning."""
    if isinstance(v, list):
        return [str(w) for w in v]
    return [] if v is None else [str(v)]


def _levels(v: object) -> dict[str, str] | None:
    """Stored factor levels (a JSON object, or its decoded dict); None when absent or not one."""
    if isinstance(v, str):
        v = _decoded(v)
    if not isinstance(v, Mapping):
        return None
    return {str(k): str(x) for k, x in v.items()}
