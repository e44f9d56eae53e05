"""One job entry of fio's JSON output, decoded once (pure).

fio's `--output-format=json` (and json+) prints one entry per job (per job group with
group_reporting) under `jobs`, or under `client_stats` in client/server mode. The parsers
(workloads/fioparse.py, fleet/clientout.py, the disk screen) decode each entry here into a
`FioJob` and read its fields; nothing else reads fio's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import Latency, percentile_key

SIDES = ("read", "write")  # the directions poolbench measures (never trim)


def _part(value: object, key: str) -> object:
    return value.get(key) if isinstance(value, Mapping) else None


def _num(value: object) -> float:
    """fio's number, 0 for anything else (a key fio left out)."""
    return float(value) if isinstance(value, int | float | str) and value != "" else 0.0


def _clat(c: object, direction: str) -> Latency | None:
    """One side's completion latency, or None when it timed no completion."""
    if not isinstance(c, Mapping) or not int(c.get("N", 0) or 0):
        return None
    pct = c.get("percentile") or {}
    bins = c.get("bins") or {}
    return Latency(
        direction=direction,
        samples=int(c["N"]),
        mean_ns=float(c.get("mean", 0.0)),
        min_ns=float(c.get("min", 0.0)),
        max_ns=float(c.get("max", 0.0)),
        stddev_ns=float(c.get("stddev", 0.0)),
        percentiles={percentile_key(k): float(v) for k, v in pct.items()},
        bins={int(k): int(v) for k, v in bins.items()},
    )


@dataclass(frozen=True)
class FioSide:
    """One direction's figures in a job entry (fio's `read` or `write` object)."""

    io_bytes: int
    total_ios: int
    runtime_ms: float
    bw_bytes: float
    iops: float
    bw_dev_kib: float  # spread of fio's bandwidth samples (KiB/s)
    lat_mean_ns: float  # mean total latency (lat_ns)
    slat_samples: int  # submission latencies fio timed; 0 for the sync engines
    slat_mean_ns: float
    clat: Latency | None  # completion latency; None when fio timed none

    @classmethod
    def from_json(cls, d: object, direction: str) -> FioSide:
        """The side as fio printed it; KeyError/TypeError/ValueError when a figure the
        result needs is missing or not a number (the caller says whose result it was)."""
        if not isinstance(d, Mapping):
            raise TypeError(f"fio's {direction!r} section is {type(d).__name__}, not an object")
        slat = d.get("slat_ns")
        return cls(
            io_bytes=int(d["io_bytes"]),
            total_ios=int(d["total_ios"]),
            runtime_ms=float(d["runtime"]),
            bw_bytes=float(d["bw_bytes"]),
            iops=float(d["iops"]),
            bw_dev_kib=float(d.get("bw_dev", 0.0)),
            lat_mean_ns=_num(_part(d.get("lat_ns"), "mean")),
            slat_samples=int(_num(_part(slat, "N"))),
            slat_mean_ns=_num(_part(slat, "mean")),
            clat=_clat(d.get("clat_ns"), direction),
        )


@dataclass(frozen=True)
class FioJob:
    """One job entry: its name and errno, each direction it reported, its CPU time, its
    depth levels, fsyncs and steady-state samples; in client mode the server it came from.

    A side fio did not print, or printed without a figure the result needs, is absent from
    `sides`; `unreadable` says why for the latter, and `side` raises with that reason."""

    name: str
    error: int  # fio's errno for the job; 0 when it succeeded
    sides: Mapping[str, FioSide] = field(default_factory=dict)
    unreadable: Mapping[str, str] = field(default_factory=dict)  # side → why not decoded
    usr_cpu_percent: float = 0.0  # percent of job_runtime
    sys_cpu_percent: float = 0.0
    job_runtime_ms: float = 0.0
    numjobs: int = 1  # the job's own numjobs option
    depth_levels: Mapping[str, float] = field(default_factory=dict)  # fio's iodepth_level
    fsyncs: int = 0  # the job's "sync" section: fsync calls
    steady_bw: tuple[float, ...] = ()  # fio's whole ring of steady-state bandwidth slots
    steady_criterion: str | None = None
    hostname: str = ""  # client mode: the server it was reached at
    port: int = 0

    def side(self, direction: str) -> FioSide:
        """The side a result needs; KeyError (with the reason) when it cannot be had."""
        if direction not in self.sides:
            why = self.unreadable.get(direction, "no such section")
            raise KeyError(f"fio job {self.name!r}, {direction!r}: {why}")
        return self.sides[direction]

    @classmethod
    def from_json(cls, d: JsonObject) -> FioJob:
        sides: dict[str, FioSide] = {}
        unreadable: dict[str, str] = {}
        for s in SIDES:
            if s in d:
                try:
                    sides[s] = FioSide.from_json(d[s], s)
                except (KeyError, TypeError, ValueError) as exc:
                    unreadable[s] = repr(exc)
        ss = d.get("steadystate")
        bw = _part(_part(ss, "data"), "bw")
        crit = _part(ss, "criterion")
        return cls(
            name=str(d.get("jobname", "?")),
            error=int(d.get("error", 0) or 0),
            sides=sides,
            unreadable=unreadable,
            usr_cpu_percent=_num(d.get("usr_cpu")),
            sys_cpu_percent=_num(d.get("sys_cpu")),
            job_runtime_ms=_num(d.get("job_runtime")),
            numjobs=int(_num(_part(d.get("job options"), "numjobs")) or 1),
            depth_levels={str(k): float(v) for k, v in (d.get("iodepth_level") or {}).items()},
            fsyncs=int(_num(_part(d.get("sync"), "total_ios"))),
            steady_bw=tuple(float(x) for x in bw if isinstance(x, int | float))
            if isinstance(bw, list)
            else (),
            steady_criterion=str(crit) if crit is not None else None,
            hostname=str(d.get("hostname", "")),
            port=int(d.get("port", 0) or 0),
        )
