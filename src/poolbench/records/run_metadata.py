"""A run's metadata (the `runs.metadata` JSON column) as one record, decoded once.

The engine writes the column as it learns things (the machine, the preflight, the study, the
claims); the store stamps it with METADATA_VERSION. `RunMetadata.decode` reads any stored
shape, old stores included (no version: 0; a key missing or of a wrong type is its default),
and readers call fields, never keys. `stored` keeps the column as it was, for the records that
show it whole (the HTML page's metadata section, `export --json`). `RunMetadataJson` is the
column as the engine writes it (bench, study and fleet runs each set their own keys).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

from poolbench.records.jsontypes import JsonObject
from poolbench.records.stored_study import StoredStudy

# 1: the first stamped shape (machine, options, study, working_set, devices, target, claims...).
METADATA_VERSION = 1
VERSION_KEY = "metadata_version"


class StopJson(TypedDict):
    """A run's stopping rule as written (stats/policy.ReplicatePolicy's fields)."""

    ci_target: float
    min_runs: int
    max_runs: int
    confidence: float
    power: float


class BenchOptionsJson(TypedDict):
    """A bench's options (engine/subject.Options), the workloads by name, and its seed."""

    workloads: list[str]
    size: int | None
    compressibility: int
    runtime_s: int
    iodepth: int
    numjobs: int
    metadata_files: int
    min_window_s: float
    stop: StopJson
    tarball: str | None  # None in a bench (a study's trials unpack one for `untar`)
    seed: int | None


class FleetOptionsJson(TypedDict):
    """A fleet's options (fleet/records.FleetOptions), the workloads by name, its seed."""

    workloads: list[str]
    size: int
    compressibility: int
    runtime_s: int
    iodepth: int
    numjobs: int
    stop: StopJson
    seed: int


class FleetJson(TypedDict, total=False):
    """A fleet run's own section (fleet/run.py): its preflight, then what the hosts did."""

    controller_fio: str
    hosts: Sequence[Mapping[str, object]]  # fleet/probe.HostInfoJson, as probed
    notes: list[str]
    not_applied: dict[str, list[str]]
    options: FleetOptionsJson
    started_together: str
    failures: dict[str, str]
    round_orders: list[list[str]]


class PlannedTrialJson(TypedDict):
    index: int
    replicate: int
    config: str


class RunMetadataJson(TypedDict, total=False):
    """The column as written, in the order its writers add the keys. The sections another
    module owns whole (the machine, the working set, the claims...) are its own records,
    seen here as mappings: `RunMetadata.decode` checks every value it reads back."""

    machine: Mapping[str, object]  # system/probes.Machine
    time_limit_scales: list[float]  # system/watchdog.time_limit_scales, when not all 1
    # a bench's (engine/session.preflight, engine/bench_run.py)
    fio_version: str
    working_set: Mapping[str, object]  # guards/workingset.WorkingSet
    target: Mapping[str, object]  # guards/devices.Target
    write_model: Mapping[str, object]  # guards/geometry.WriteModel, or why there is none
    devices: Sequence[Mapping[str, object]]  # system/probes.DeviceInfo
    options: BenchOptionsJson
    scratch: str | None
    round_orders: list[list[str]]
    # a study's (engine/trial_loop.metadata, engine/study_lifecycle.py)
    study: Mapping[str, object]  # study/model.Study as pydantic dumps it
    study_text: str | None
    seed: int | None
    pool_tokens: list[str]  # one per invocation (--resume adds one)
    claims: Mapping[str, object] | None  # safety/claims.ClaimsJson
    screen: str  # why --no-screen left the disks unscreened
    backends: dict[str, Mapping[str, object]]  # backends/base.Availability's fields
    planned_trials: list[PlannedTrialJson]
    # a fleet's (fleet/run.py)
    fleet: FleetJson
    metadata_version: int  # stamped by the store


def _dict(value: object) -> Mapping[str, object]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class Machine:
    """The host the run ran on (engine/probes.machine)."""

    hostname: str | None = None
    poolbench_version: str | None = None
    kernel: str | None = None
    ram_bytes: int | None = None
    arc_max_bytes: int | None = None
    cpus: int | None = None

    @classmethod
    def decode(cls, value: object) -> Machine:
        m = _dict(value)
        return cls(
            _str(m.get("hostname")),
            _str(m.get("poolbench_version")),
            _str(m.get("kernel")),
            _int(m.get("ram_bytes")),
            _int(m.get("arc_max_bytes")),
            _int(m.get("cpus")),
        )


@dataclass(frozen=True)
class Backend:
    """One storage backend the run found, with its version (and dialect: zfs-fuse, OpenZFS)."""

    name: str
    version: str | None
    dialect: str | None

    def text(self) -> str:
        dialect = f" ({self.dialect})" if self.dialect else ""
        return f"{self.name} {self.version or '?'}{dialect}".strip()


@dataclass(frozen=True)
class Device:
    """A real device the run measured or claimed, or a pool member a trial recorded (the
    safety layer's description of it)."""

    name: str
    model: str | None
    size_bytes: int | None
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool | None
    loop_backing_file: str | None
    serial: str | None = None

    @classmethod
    def decode(cls, d: Mapping[str, object]) -> Device:
        rot = d.get("rotational")
        return cls(
            str(d.get("name") or "?"),
            _str(d.get("model")),
            _int(d.get("size_bytes")),
            _int(d.get("logical_sector")),
            _int(d.get("physical_sector")),
            bool(rot) if rot is not None else None,
            _str(d.get("loop_backing_file")),
            _str(d.get("serial")),
        )


@dataclass(frozen=True)
class Stop:
    """A bench run's stopping rule (options.stop): ReplicatePolicy's names, or StopRule's in
    older runs (target, min_runs, max_runs)."""

    ci_target: float | None = None
    min_runs: int | None = None
    max_runs: int | None = None

    @classmethod
    def decode(cls, value: object) -> Stop:
        s = _dict(value)
        target = _num(s.get("ci_target"))
        return cls(
            target if target is not None else _num(s.get("target")),
            _int(s.get("min_runs")),
            _int(s.get("max_runs")),
        )


@dataclass(frozen=True)
class RunMetadata:
    """What a run recorded about itself, beside its measurements."""

    version: int = 0  # 0: written before the record had a version
    seed: int | None = None
    machine: Machine = Machine()
    backends: tuple[Backend, ...] = ()
    fio_version: str | None = None
    devices: tuple[Device, ...] = ()
    not_screened: str | None = None  # why --no-screen left the disks unscreened
    target_path: str | None = None
    target_how: str = ""
    claims: tuple[Device, ...] = ()  # the devices the safety layer claimed for the run
    working_set_bytes: int | None = None
    working_set_ram_bytes: int | None = None
    compressibility: int | None = None  # options.compressibility (bench)
    workload_order: tuple[str, ...] | None = None  # options.workloads (bench)
    stop: Stop = Stop()
    study_text: str | None = None
    time_limit_scales: tuple[float, ...] = ()  # POOLBENCH_TIME_LIMIT_SCALE per invocation
    # The study file as stored (study/'s schema), decoded for the reports.
    study: StoredStudy = StoredStudy()
    # The column as stored, for the records that show it whole.
    stored: JsonObject = field(default_factory=dict)

    @property
    def claimed_serials(self) -> tuple[str, ...]:
        return tuple(c.serial for c in self.claims if c.serial)

    @classmethod
    def decode(cls, stored: object) -> RunMetadata:
        """The record from the column (its text or its decoded object); any shape reads."""
        if isinstance(stored, str | bytes):
            try:
                stored = json.loads(stored or "{}")
            except ValueError:
                stored = {}
        whole = stored if isinstance(stored, dict) else {}
        m = _dict(whole)
        opts, ws, target = _dict(m.get("options")), _dict(m.get("working_set")), m.get("target")
        target = _dict(target)
        devices = m.get("devices")
        backends = _dict(m.get("backends"))
        claims = _dict(m.get("claims")).get("claims")
        order = opts.get("workloads")
        return cls(
            version=_int(m.get(VERSION_KEY)) or 0,
            seed=_int(m.get("seed")),
            machine=Machine.decode(m.get("machine")),
            backends=tuple(
                Backend(str(name), _str(av.get("version")), _str(av.get("dialect")))
                for name, av in backends.items()
                if isinstance(av, dict)
            ),
            fio_version=_str(m.get("fio_version")),
            devices=tuple(Device.decode(d) for d in devices or [] if isinstance(d, dict))
            if isinstance(devices, list)
            else (),
            not_screened=said if isinstance(said := m.get("screen"), str) else None,
            target_path=_str(target.get("path")),
            target_how=str(target.get("how", "")),
            claims=tuple(
                Device.decode(c)
                for c in (claims if isinstance(claims, list) else [])
                if isinstance(c, dict)
            ),
            working_set_bytes=_int(ws.get("size_bytes")),
            working_set_ram_bytes=_int(ws.get("ram_bytes")),
            compressibility=_int(opts.get("compressibility")),
            workload_order=tuple(str(w) for w in order) if isinstance(order, list) else None,
            stop=Stop.decode(opts.get("stop")),
            study_text=_str(m.get("study_text")),
            time_limit_scales=tuple(float(x) for x in scales if _num(x) is not None)
            if isinstance(scales := m.get("time_limit_scales"), list)
            else (),
            study=StoredStudy.decode(whole.get("study")),
            stored=whole,
        )


def stamped(metadata: RunMetadataJson) -> RunMetadataJson:
    """The column to store: the metadata with this version's stamp."""
    return {**metadata, "metadata_version": METADATA_VERSION}
