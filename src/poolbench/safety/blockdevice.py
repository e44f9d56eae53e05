"""The inventory's records: one block device, why it is in use, every device found.

safety/inventory.py fills them from /sys, /proc and the probes; claims, `poolbench disks` and
the study's device checks read them. `as_dict` is the `disks --json` shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypedDict

from poolbench import is_digits
from poolbench.zfs.label import ZfsLabel

# Reasons no flag overrides, ever. Live use (mounted, swap, holders, an imported pool) is not
# overridable either — it must be ended first — but a neighbouring partition of a live one may
# be claimed with the override; a neighbour of a protected one may not.
PROTECTED = {"protected", "protected-via", "protected-disk", "read-only"}
ASHIFT_ADVICE = (
    "4 KiB physical sectors behind 512-byte logical sectors (512e): create ZFS pools with "
    "ashift=12 (-o ashift=12); ashift=9 would make every write a read-modify-write."
)


class ReasonJson(TypedDict):
    kind: str
    detail: str
    overridable: bool


class ZfsLabelJson(TypedDict):
    pool: str | None
    pool_guid: int | None
    state: str
    hostname: str | None


class DeviceJson(TypedDict):
    """One device as `disks --json` prints it."""

    name: str
    path: str
    by_id: list[str]
    kind: str
    parent: str | None
    model: str | None
    serial: str | None
    size_bytes: int
    logical_sector: int | None
    physical_sector: int | None
    rotational: bool
    read_only: bool
    loop_backing_file: str | None
    status: str
    reasons: list[ReasonJson]
    override: str | None
    advice: list[str]
    zfs_label: ZfsLabelJson | None
    partitions: list[DeviceJson]


class InventoryJson(TypedDict):
    """`disks --json`."""

    devices: list[DeviceJson]
    warnings: list[str]


@dataclass(frozen=True)
class Signature:
    """One signature wipefs found on a device (its `--json` entry): what it is and its label."""

    type: str | None
    label: str | None = None

    @classmethod
    def from_json(cls, entry: object) -> Signature | None:
        """wipefs's entry, or None for one that is not an object."""
        if not isinstance(entry, dict):
            return None
        t, label = entry.get("type"), entry.get("label")
        return cls(str(t) if t else None, str(label) if label else None)


@dataclass(frozen=True)
class Reason:
    """One reason a device is in use. `overridable=False`: no flag may claim it."""

    kind: str  # mounted, swap, signature, filesystem, zfs, partition-table, holder, ...
    detail: str
    overridable: bool = True

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.detail)

    def as_dict(self) -> ReasonJson:
        return {"kind": self.kind, "detail": self.detail, "overridable": self.overridable}


@dataclass
class BlockDevice:
    name: str  # kernel name: sda, sda1, loop3, nvme0n1p2, dm-0
    path: str  # /dev/NAME
    dev: str  # major:minor
    kind: str  # disk, part, loop, dm, md, ram, rom
    parent: str | None = None  # the disk of a partition
    by_id: list[str] = field(default_factory=list)
    model: str | None = None
    serial: str | None = None
    size_bytes: int = 0
    logical_sector: int | None = None
    physical_sector: int | None = None
    rotational: bool = False
    read_only: bool = False
    loop_backing_file: str | None = None
    holders: list[str] = field(default_factory=list)
    slaves: list[str] = field(default_factory=list)
    partitions: list[BlockDevice] = field(default_factory=list)
    signatures: list[Signature] = field(default_factory=list)
    zfs: ZfsLabel | None = None
    reasons: list[Reason] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)

    @property
    def in_use(self) -> bool:
        return bool(self.reasons)

    @property
    def status(self) -> str:
        return "in use" if self.reasons else "free"

    @property
    def overridable(self) -> bool:
        return all(r.overridable for r in self.reasons)

    @property
    def override_id(self) -> str:
        """What `--destroy-data-on` must name: the serial, else a by-id path, else the path."""
        return self.serial or (self.by_id[0] if self.by_id else self.path)

    def add(self, reason: Reason) -> None:
        if reason.key not in {r.key for r in self.reasons}:
            self.reasons.append(reason)

    def summary(self) -> str:
        return "; ".join(r.detail for r in self.reasons) if self.reasons else "free"

    def as_dict(self) -> DeviceJson:
        return {
            "name": self.name,
            "path": self.path,
            "by_id": self.by_id,
            "kind": self.kind,
            "parent": self.parent,
            "model": self.model,
            "serial": self.serial,
            "size_bytes": self.size_bytes,
            "logical_sector": self.logical_sector,
            "physical_sector": self.physical_sector,
            "rotational": self.rotational,
            "read_only": self.read_only,
            "loop_backing_file": self.loop_backing_file,
            "status": self.status,
            "reasons": [r.as_dict() for r in self.reasons],
            "override": (
                f"--destroy-data-on {self.override_id}"
                if self.reasons and self.overridable
                else None
            ),
            "advice": self.advice,
            "zfs_label": (
                {
                    "pool": self.zfs.pool_name,
                    "pool_guid": self.zfs.pool_guid,
                    "state": self.zfs.state,
                    "hostname": self.zfs.hostname,
                }
                if self.zfs
                else None
            ),
            "partitions": [p.as_dict() for p in self.partitions],
        }


@dataclass
class Inventory:
    devices: dict[str, BlockDevice]  # every device, partitions included, by kernel name
    warnings: list[str] = field(default_factory=list)

    def get(self, name: str) -> BlockDevice | None:
        return self.devices.get(name)

    def by_dev(self, major_minor: str) -> BlockDevice | None:
        return next((d for d in self.devices.values() if d.dev == major_minor), None)

    def top(self, include_empty: bool = False) -> list[BlockDevice]:
        """Whole devices (partitions hang below them), empty ones (size 0) left out."""
        return sorted(
            (
                d
                for d in self.devices.values()
                if d.parent is None and (include_empty or d.size_bytes > 0)
            ),
            key=lambda d: natural_order(d.name),
        )

    def as_dict(self, include_empty: bool = False) -> InventoryJson:
        return {
            "devices": [d.as_dict() for d in self.top(include_empty)],
            "warnings": self.warnings,
        }


def natural_order(name: str) -> tuple[int | str, ...]:
    """sda2 before sda10: a device name's digits compared as numbers."""
    return tuple(int(t) if is_digits(t) else t for t in re.split(r"(\d+)", name))
