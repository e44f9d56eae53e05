"""The study a run measured, as its metadata keeps it (`runs.metadata` → `study`: the
validated study file, study/model.py's `Study.model_dump()`), decoded once for the reports.

Only what the reports read is decoded. Any shape reads: an older or damaged row gives what it
can (a value of the wrong type reads as absent), never raises. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


def _table(v: object) -> Mapping[str, object] | None:
    return v if isinstance(v, Mapping) else None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _number(v: object) -> int | float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _text(v: object) -> str | None:
    return None if v is None else str(v)


@dataclass(frozen=True)
class StoredDisks:
    """The study's [disks]: what they were and how many."""

    source: str | None = None  # loop | files | devices
    count: int | None = None
    size: str | None = None
    devices: tuple[str, ...] = ()
    cap: int | float | None = None  # MiB/s each way ([disks] cap)
    vdev_source: str | None = None
    model: Mapping[str, object] | None = None  # an emulated disk with a head ([disks] model)

    @classmethod
    def decode(cls, d: Mapping[str, object]) -> StoredDisks:
        devices = d.get("devices")
        cap, model = _number(d.get("cap")), _table(d.get("model"))
        return cls(
            source=_text(d.get("source")),
            count=_int(d.get("count")),
            size=_text(d.get("size")),
            devices=tuple(str(x) for x in devices) if isinstance(devices, list) else (),
            cap=cap if cap is not None and cap > 0 else None,
            vdev_source=_text(d.get("vdev_source")),
            model=model,
        )


@dataclass(frozen=True)
class StoredWorkloads:
    """The study's [workloads] options the reports use."""

    names: tuple[str, ...] | None = None  # None: not stored
    size: str | None = None  # the working set
    compressibility: int | None = None
    iodepth: int | None = None
    jobs: int | None = None

    @classmethod
    def decode(cls, d: Mapping[str, object]) -> StoredWorkloads:
        names = d.get("names")
        return cls(
            names=tuple(str(n) for n in names) if isinstance(names, list) else None,
            size=_text(d.get("size")),
            compressibility=_int(d.get("compressibility")),
            iodepth=_int(d.get("iodepth")),
            jobs=_int(d.get("jobs")),
        )


@dataclass(frozen=True)
class StoredStudy:
    """A run's study file as stored; `present` is False for a run without one (bench)."""

    present: bool = False
    disks: StoredDisks | None = None
    workloads: StoredWorkloads = StoredWorkloads()
    factors: dict[str, list[str]] | None = None  # factor → its levels, in study order
    replicates: int | None = None
    max_replicates: int | None = None
    ci_target: int | float | None = None  # percent (5.0 = ±5%)

    @classmethod
    def decode(cls, stored: object) -> StoredStudy:
        d = _table(stored)
        if not d:
            return cls()
        disks, workloads, factors = (_table(d.get(k)) for k in ("disks", "workloads", "factors"))
        return cls(
            present=True,
            disks=StoredDisks.decode(disks) if disks is not None else None,
            workloads=StoredWorkloads.decode(workloads or {}),
            factors={
                str(k): [str(x) for x in v] if isinstance(v, list) else []
                for k, v in factors.items()
            }
            if factors is not None
            else None,
            replicates=_int(d.get("replicates")),
            max_replicates=_int(d.get("max_replicates")),
            ci_target=_number(d.get("ci_target")),
        )
