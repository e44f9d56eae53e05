"""The backend protocol: what every storage stack offers the trial loop.

check availability → validate(spec) → create(spec) → verify(pool) → [measure] → destroy(pool).
A backend receives devices only as paths the caller made (sparse files, loop devices) or
claimed through the safety layer; it never picks devices itself. Everything it creates is
recorded in the journal *before* it is created, so that teardown after an error, Ctrl-C or a
crash removes it and nothing else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from poolbench.errors import UsageError
from poolbench.safety.journal import Journal


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""  # why not, and how to fix it
    version: str = ""
    dialect: str = ""  # zfs: "openzfs" | "zfs-fuse"


@dataclass(frozen=True)
class Vdev:
    """One ZFS top-level vdev of a study layout."""

    kind: str  # stripe | mirror | raidz1 | raidz2 | raidz3 | draid1..3
    width: int
    draid_data: int | None = None
    draid_spares: int = 0

    @property
    def parity(self) -> int:
        if self.kind.startswith("raidz") or self.kind.startswith("draid"):
            return int(self.kind[-1])
        if self.kind == "mirror":
            return self.width - 1
        return 0

    def zpool_words(self) -> list[str]:
        """The vdev keyword for `zpool create` (stripe members take none)."""
        if self.kind == "stripe":
            return []
        if self.kind.startswith("draid"):
            return [f"{self.kind}:{self.draid_data}d:{self.width}c:{self.draid_spares}s"]
        return [self.kind]


_VDEV_RE = re.compile(r"^(stripe|mirror|raidz[123]|draid[123])(?::(\d+))?(?::(\d+)d)?(?::(\d+)s)?$")
# The form the docstring and the error message show: draidP:Dd:Ss:WIDTH (width last).
_DRAID_WIDTH_LAST = re.compile(r"^(draid[123])(?::(\d+)d)?(?::(\d+)s)?:(\d+)$")
_MIN_WIDTH = {"stripe": 1, "mirror": 2, "raidz1": 2, "raidz2": 3, "raidz3": 4}


def parse_topology(text: str, n_disks: int) -> tuple[Vdev, ...]:
    """'raidz2' (all disks), 'raidz1:3+raidz1:3', 'mirror:2+mirror:2', 'draid2:4d:1s:7'.

    Without a width, a single vdev takes every disk. Errors name the layout and the fix.
    """
    parts = [p.strip() for p in text.split("+")]
    vdevs: list[Vdev] = []
    for part in parts:
        m = _VDEV_RE.match(part)
        last = _DRAID_WIDTH_LAST.match(part) if not m else None
        if last:
            kind_l, data_l, spares_l, width_l = last.groups()
            m = _VDEV_RE.match(
                f"{kind_l}:{width_l}"
                + (f":{data_l}d" if data_l else "")
                + (f":{spares_l}s" if spares_l else "")
            )
        if not m:
            raise UsageError(
                f"Layout '{text}': '{part}' is not a vdev.",
                "Write TYPE[:WIDTH] joined by '+', TYPE one of stripe, mirror, raidz1, raidz2, "
                "raidz3 or draidP:Dd:Ss[:WIDTH] (e.g. raidz2, mirror:2+mirror:2).",
            )
        kind, width_s, data_s, spares_s = m.groups()
        width = int(width_s) if width_s else (n_disks if len(parts) == 1 else 0)
        if width == 0:
            raise UsageError(
                f"Layout '{text}': with several vdevs each needs a width ('{part}' has none).",
                "Write e.g. raidz1:3+raidz1:3.",
            )
        if kind.startswith("draid"):
            parity = int(kind[-1])
            data = int(data_s) if data_s else 8
            spares = int(spares_s) if spares_s else 0
            if width < data + parity + spares:
                raise UsageError(
                    f"Layout '{text}': {kind} with {data} data disks per group and {spares} "
                    f"spares needs at least {data + parity + spares} disks, not {width}.",
                    "Use more disks or fewer data disks per group.",
                )
            vdevs.append(Vdev(kind, width, data, spares))
            continue
        if data_s or spares_s:
            raise UsageError(f"Layout '{text}': only dRAID takes d/s counts ('{part}').")
        need = _MIN_WIDTH[kind]
        if width < need:
            raise UsageError(
                f"Layout '{text}': {kind} of {width} disk(s) is impossible; {kind} needs at "
                f"least {need}.",
                "Give more disks or choose a layout with less redundancy.",
            )
        vdevs.append(Vdev(kind, width))
    total = sum(v.width for v in vdevs)
    if total > n_disks:
        raise UsageError(
            f"Layout '{text}' needs {total} disks but the study has {n_disks}.",
            "Add disks (--disks) or use a narrower layout.",
        )
    return tuple(vdevs)


@dataclass(frozen=True)
class PoolSpec:
    """What to build: which backend, which layout, on which devices, with which properties."""

    backend: str  # zfs | btrfs | md | directory
    layout: str  # zfs topology, btrfs profile (raid1, ...), md level (raid5, ...)
    devices: tuple[str, ...]
    name: str  # pool / filesystem label, unique per trial (pb-<run>-<n>)
    mount_root: Path  # where mountpoints are made
    pool_options: Mapping[str, str] = field(default_factory=dict)  # zfs: ashift
    fs_options: Mapping[str, str] = field(default_factory=dict)  # dataset props, mount opts, fs


@dataclass
class Pool:
    spec: PoolSpec
    mountpoint: Path
    # Kernel names of the block devices that carry the pool's I/O (for the device guard);
    # empty when the members are plain files.
    block_devices: list[str]
    described: dict[str, Any] = field(default_factory=dict)  # read back from the stack


class Backend(Protocol):
    name: str

    def check(self) -> Availability: ...

    def validate(self, spec: PoolSpec) -> None:
        """Refuse an impossible or unsupported spec with a UsageError, before anything exists."""

    def create(self, spec: PoolSpec, journal: Journal) -> Pool: ...

    def verify(self, pool: Pool) -> list[str]:
        """Differences between what was asked and what the stack reports; empty if none."""

    def drop_cache(self, pool: Pool) -> dict[str, Any]:
        """Empty every cache of the pool before a cold read; returns what it did and whether
        that was verified (key "verified")."""

    def destroy(self, pool: Pool, journal: Journal) -> None: ...
