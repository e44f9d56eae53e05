"""What the guards of one measurement did and found (`Findings`, stored as the JSON object
`measurements.guards`), and the figures read from it.

`Findings.to_json` writes exactly the keys poolbench has always written there, and
`Findings.from_json` reads any stored row back (sections it does not know are kept in `other`
and written back unchanged), so the schema and the reports of older runs stay as they were.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from poolbench.records.jsontypes import JsonObject


def obj(value: object) -> JsonObject:
    """A stored JSON object, or {} for anything else (old or damaged rows)."""
    return dict(value) if isinstance(value, Mapping) else {}


def opt_int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _opt_float(value: object) -> float | None:
    """A stored number as it was (an int stays an int, so it is written back the same)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


class DataJson(TypedDict):
    compressibility_percent: int
    pattern: str


class FioJson(TypedDict):
    version: str | None
    controller_version: NotRequired[str]  # fleet runs only
    within_run_bw_dev_bytes_s: float | None
    lat_mean_ns: float | None


# -- what the guards found ----------------------------------------------------------------------
@dataclass(frozen=True)
class DataFinding:
    """What the written data looked like (never zeros)."""

    compressibility_percent: int
    pattern: str = "fio refill_buffers (fresh random data per write), never zeros"

    def to_json(self) -> DataJson:
        return {"compressibility_percent": self.compressibility_percent, "pattern": self.pattern}


@dataclass(frozen=True)
class CacheFinding:
    """How the cache was defeated (or kept on purpose) before a read, and whether that was
    verified. `more` holds what a method reports beyond that (resident bytes, file bytes...)."""

    method: str
    verified: bool | None
    detail: str | None = None
    more: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        out = {"method": self.method, **self.more, "verified": self.verified}
        if self.detail is not None:
            out["detail"] = self.detail
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> CacheFinding:
        more = {k: v for k, v in d.items() if k not in ("method", "verified", "detail")}
        detail = d.get("detail")
        return cls(
            method=str(d.get("method") or ""),
            verified=verified if isinstance(verified := d.get("verified"), bool) else None,
            detail=str(detail) if detail is not None else None,
            more=more,
        )

    @property
    def why(self) -> str:
        """What to tell the user about an unverified drop."""
        return self.detail or self.method


@dataclass(frozen=True)
class DeviceFinding:
    """Bytes the devices under the target saw, against the application's; or why that could
    not be counted (`unverified`). `more` holds a fleet's fio disk_util and its notes."""

    devices: tuple[str, ...] | None = None  # None: no device was counted
    read_bytes: int | None = None
    write_bytes: int | None = None
    ratio_to_app: float | None = None
    unverified: str | None = None
    more: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        if self.devices is not None:
            out = {
                "devices": list(self.devices),
                "read_bytes": self.read_bytes,
                "write_bytes": self.write_bytes,
                "ratio_to_app": self.ratio_to_app,
            }
        if self.unverified is not None:
            out["unverified"] = self.unverified
        return {**out, **self.more}

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> DeviceFinding:
        known = ("devices", "read_bytes", "write_bytes", "ratio_to_app", "unverified")
        devices = d.get("devices")
        ratio = d.get("ratio_to_app")
        return cls(
            devices=tuple(str(x) for x in devices) if isinstance(devices, list) else None,
            read_bytes=opt_int(d.get("read_bytes")),
            write_bytes=opt_int(d.get("write_bytes")),
            ratio_to_app=float(ratio) if isinstance(ratio, int | float) else None,
            unverified=str(d["unverified"]) if d.get("unverified") is not None else None,
            more={k: v for k, v in d.items() if k not in known},
        )

    @property
    def amplification(self) -> float | None:
        """The measured write amplification (guards/amplification), if any."""
        return _number(_part(_part(self.more, "amplification"), "amplification"))

    @property
    def amplification_model(self) -> float | None:
        """What the layout's model said the write must cost, if any."""
        return _number(_part(_part(_part(self.more, "amplification"), "model"), "ratio"))


@dataclass(frozen=True)
class FioFinding:
    """What fio itself reported beside the figure."""

    version: str | None
    within_run_bw_dev_bytes_s: float | None = None
    lat_mean_ns: float | None = None
    controller_version: str | None = None  # fleet runs: the controller's fio

    def to_json(self) -> FioJson:
        bw_dev, lat = self.within_run_bw_dev_bytes_s, self.lat_mean_ns
        if self.controller_version is None:
            return {"version": self.version, "within_run_bw_dev_bytes_s": bw_dev,
                    "lat_mean_ns": lat}  # fmt: skip
        return {"version": self.version, "controller_version": self.controller_version,
                "within_run_bw_dev_bytes_s": bw_dev, "lat_mean_ns": lat}  # fmt: skip

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> FioFinding:
        version = d.get("version")
        ctl = d.get("controller_version")
        return cls(
            version=str(version) if version is not None else None,
            within_run_bw_dev_bytes_s=_opt_float(d.get("within_run_bw_dev_bytes_s")),
            lat_mean_ns=_opt_float(d.get("lat_mean_ns")),
            controller_version=str(ctl) if ctl is not None else None,
        )


# Sections with a typed field on Findings, in the order they are written.
_TYPED = ("data", "durability", "cache", "device", "fio", "pool")


@dataclass
class Findings:
    """Everything the guards of one measurement did and found (`measurements.guards`).

    Assembled step by step while a figure is measured, hence not frozen. Sections specific to
    one kind of trial (replicate, fill, pool_state, capacity, resilver, untar, working_set,
    fleet, aggregate) are kept in `other` under their stored names, ahead of the typed ones.
    """

    data: DataFinding | None = None
    durability: str | None = None
    cache: CacheFinding | None = None
    device: DeviceFinding | None = None
    fio: FioFinding | None = None
    pool: Mapping[str, Any] | None = None  # the pool as described, and what it said after
    other: JsonObject = field(default_factory=dict)

    def to_json(self) -> JsonObject:
        out: JsonObject = {}
        if self.pool is not None:
            out["pool"] = dict(self.pool)
        out.update(self.other)
        if self.data is not None:
            out["data"] = self.data.to_json()
        if self.durability is not None:
            out["durability"] = self.durability
        if self.cache is not None:
            out["cache"] = self.cache.to_json()
        if self.device is not None:
            out["device"] = self.device.to_json()
        if self.fio is not None:
            out["fio"] = self.fio.to_json()
        return out

    @classmethod
    def from_json(cls, d: object) -> Findings:
        g = obj(d)
        data = obj(g.get("data"))
        pct = opt_int(data.get("compressibility_percent"))
        durability = g.get("durability")
        found = cls(
            data=DataFinding(pct, str(data.get("pattern", ""))) if pct is not None else None,
            durability=durability if isinstance(durability, str) else None,
            cache=CacheFinding.from_json(g["cache"]) if isinstance(g.get("cache"), dict) else None,
            device=DeviceFinding.from_json(g["device"])
            if isinstance(g.get("device"), dict)
            else None,
            fio=FioFinding.from_json(g["fio"]) if isinstance(g.get("fio"), dict) else None,
            pool=g["pool"] if isinstance(g.get("pool"), dict) else None,
            other={k: v for k, v in g.items() if k not in _TYPED},
        )
        # A section that is not what poolbench writes (a damaged or foreign row) is kept
        # as it is, so writing the record back loses nothing.
        for key in _TYPED:
            if key in g and getattr(found, key) is None:
                found.other[key] = g[key]
        return found

    def copy(self) -> Findings:
        """A fresh record with the same sections (the trial-wide part of every measurement)."""
        return Findings(
            self.data, self.durability, self.cache, self.device, self.fio,
            dict(self.pool) if self.pool is not None else None, dict(self.other),
        )  # fmt: skip

    def merge_pool(self, said: Mapping[str, object]) -> None:
        """Add what the pool said after a measurement to its description."""
        self.pool = {**(self.pool or {}), **said}

    @property
    def cache_verified(self) -> bool:
        return bool(self.cache and self.cache.verified)


# -- write amplification as stored (guards → device → amplification, guards/amplification) -----
def write_amplification(guards: Mapping[str, object]) -> float | None:
    """The measured write amplification stored in one measurement's guards, if any."""
    dev = guards.get("device")
    return DeviceFinding.from_json(dev).amplification if isinstance(dev, dict) else None


def modelled_amplification(guards: Mapping[str, object]) -> float | None:
    """What the layout's model said the write must cost if any."""
    dev = guards.get("device")
    return DeviceFinding.from_json(dev).amplification_model if isinstance(dev, dict) else None


def _part(section: object, key: str) -> object:
    """A stored section's part, or None when the section is not an object."""
    return section.get(key) if isinstance(section, Mapping) else None


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None
