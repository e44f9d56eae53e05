"""What a measurement ran on: the fingerprint of a run (`bench`) or of a study's trial, stored in
its own table (`fingerprints`, store/fingerprints.py) as versioned JSON and read back here,
once, into typed records (pure).

A history (`poolbench history`) compares one point's fingerprint with the previous one's to
say what changed when a step happened: a ZFS or kernel upgrade, a property set, a disk
replaced (another serial) or updated (another firmware), the pool fuller. So every field is a
value as read back from the machine, never as asked, and a field that could not be read is
None with the reason in `notes`, not a guess.

`VERSION` is the record's shape. A stored record of a newer version than this poolbench knows
is refused (`FingerprintError`), as a store written by a newer poolbench is; older versions
are read by `from_json` with the defaults of the fields they lacked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from poolbench.records.jsontypes import JsonObject

VERSION = 1


class FingerprintError(ValueError):
    """A stored fingerprint this poolbench cannot read (damaged, or from a newer version)."""

    def __init__(self, message: str, *, newer: bool = False) -> None:
        super().__init__(message)
        self.newer = newer  # written by a newer poolbench: not damage, upgrade to read it


def _str(d: Mapping[str, object], key: str) -> str | None:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _int(d: Mapping[str, object], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _float(d: Mapping[str, object], key: str) -> float | None:
    v = d.get(key)
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    return float(v)


def _strings(d: Mapping[str, object], key: str) -> dict[str, str]:
    v = d.get(key)
    if not isinstance(v, Mapping):
        return {}
    return {str(k): str(x) for k, x in v.items()}


@dataclass(frozen=True)
class Disk:
    """One block device under the target, as the kernel reports it."""

    name: str  # kernel name when measured (sda, nvme0n1, loop3): names move, serials do not
    model: str | None = None
    serial: str | None = None  # None: the device reports none (loop devices, some USB)
    firmware: str | None = None
    size_bytes: int | None = None
    note: str = ""  # why serial or firmware is missing ("loop device backed by …")
    # A blkio throttle in force on the device (bytes/s, reads and writes; None: no rule): a
    # cap changes its speed as surely as a new disk does.
    cap_read_bps: int | None = None
    cap_write_bps: int | None = None

    @property
    def ident(self) -> str:
        """How the disk is known across runs: its serial, else its kernel name."""
        return f"serial {self.serial}" if self.serial else self.name

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Disk:
        return cls(_str(d, "name") or "?", _str(d, "model"), _str(d, "serial"),
                   _str(d, "firmware"), _int(d, "size_bytes"), _str(d, "note") or "",
                   _int(d, "cap_read_bps"), _int(d, "cap_write_bps"))  # fmt: skip


@dataclass(frozen=True)
class Pool:
    """The pool (or filesystem) behind the measured path, as read back."""

    stack: str  # the filesystem type: zfs, btrfs, ext4, xfs, tmpfs, …
    name: str  # ZFS: the pool; otherwise the mount's source
    dataset: str | None = None  # ZFS: the dataset mounted there
    layout: str = ""  # ZFS: "raidz1:3+mirror:2" (zpool status); btrfs: "data raid1, …"
    properties: dict[str, str] = field(default_factory=dict)  # pool properties (settable)
    dataset_properties: dict[str, str] = field(default_factory=dict)  # or the mount options
    size_bytes: int | None = None  # the filesystem's size as statvfs sees it
    used_bytes: int | None = None
    fragmentation: float | None = None  # percent (OpenZFS `fragmentation`); None: see notes

    @property
    def fill(self) -> float | None:
        """Used / size, 0…1: how full the filesystem was when measured."""
        if self.size_bytes and self.used_bytes is not None:
            return self.used_bytes / self.size_bytes
        return None

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Pool:
        return cls(
            _str(d, "stack") or "?", _str(d, "name") or "?", _str(d, "dataset"),
            _str(d, "layout") or "", _strings(d, "properties"),
            _strings(d, "dataset_properties"), _int(d, "size_bytes"), _int(d, "used_bytes"),
            _float(d, "fragmentation"),
        )  # fmt: skip


@dataclass(frozen=True)
class Fingerprint:
    """A run's (or a trial's) fingerprint: versions, memory, the pool and its disks."""

    path: str  # the directory measured
    poolbench: str
    kernel: str
    hostname: str
    pool: Pool
    disks: tuple[Disk, ...] = ()
    zfs: str | None = None  # OpenZFS: "zfs-2.2.6-1 (module 2.2.6-1)"; zfs-fuse: its pool version
    fio: str | None = None
    ram_bytes: int | None = None
    arc_max_bytes: int | None = None  # OpenZFS c_max; None: no readable ARC (see notes)
    arc_size_bytes: int | None = None  # the ARC's size when the run started
    notes: tuple[str, ...] = ()  # what could not be read, and why
    version: int = VERSION

    @property
    def fill(self) -> float | None:
        return self.pool.fill

    def to_json(self) -> JsonObject:
        return asdict(self)

    def to_text(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, d: Mapping[str, object]) -> Fingerprint:
        version = _int(d, "version")
        if version is None or version < 1:
            raise FingerprintError("the fingerprint has no version")
        if version > VERSION:
            raise FingerprintError(
                f"the fingerprint is of version {version}; this poolbench reads up to {VERSION}",
                newer=True,
            )
        pool = d.get("pool")
        disks = d.get("disks")
        notes = d.get("notes")
        return cls(
            _str(d, "path") or "", _str(d, "poolbench") or "?", _str(d, "kernel") or "?",
            _str(d, "hostname") or "?",
            Pool.from_json(pool if isinstance(pool, Mapping) else {}),
            tuple(Disk.from_json(x) for x in disks if isinstance(x, Mapping))
            if isinstance(disks, list) else (),
            _str(d, "zfs"), _str(d, "fio"), _int(d, "ram_bytes"), _int(d, "arc_max_bytes"),
            _int(d, "arc_size_bytes"),
            tuple(str(n) for n in notes) if isinstance(notes, list) else (), version,
        )  # fmt: skip

    @classmethod
    def from_text(cls, text: str) -> Fingerprint:
        try:
            d = json.loads(text)
        except (TypeError, ValueError, RecursionError) as exc:
            raise FingerprintError(f"the fingerprint is not valid JSON ({exc})") from None
        if not isinstance(d, dict):
            raise FingerprintError("the fingerprint is not a JSON object")
        return cls.from_json(d)
