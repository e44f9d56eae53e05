"""What this ZFS can build, refused before anything exists: the pool's name, its layout (dRAID
from OpenZFS 2.1, allocation classes not on zfs-fuse), its members, `-o` pool options and
`-O` dataset properties in each dialect's limits (zfs-fuse: recordsize at most 128K, no lz4
or zstd, no `sync`, ashift 9..13)."""

from __future__ import annotations

import os
import re

from poolbench import is_digits
from poolbench.backends import zvol
from poolbench.backends.base import (
    Availability,
    PoolSpec,
    Vdev,
    parse_classes,
    parse_topology,
    unavailable,
)
from poolbench.errors import UsageError
from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE
from poolbench.zfs.parse import version_tuple

POOL_OPTIONS = ("ashift",)
FS_OPTIONS = (
    "recordsize", "compression", "atime", "sync", "primarycache", "special_small_blocks",
    "logbias",
)  # fmt: skip
_FUSE_COMPRESSION = ["on", "off", "lzjb", "gzip", *[f"gzip-{i}" for i in range(1, 10)], "zle"]
_ZSTD = re.compile(r"^zstd(-([1-9]|1[0-9]))?$|^zstd-fast(-([1-9]|10|[2-9]0|100|500|1000))?$")
_CHOICES = {
    "atime": ("on", "off"),
    "sync": ("standard", "always", "disabled"),
    "primarycache": ("all", "none", "metadata"),
    "logbias": ("latency", "throughput"),
}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,200}$")
_RESERVED = ("mirror", "raidz", "draid", "spare", "log")


def parse_size(text: str) -> int:
    """A property size (recordsize) in the one size grammar (poolbench.units); ValueError if
    it is not one. 128K is 2^17 here as in ZFS; 128KB is 128000, which no recordsize is."""
    from poolbench.units import parse_size as units_parse_size

    try:
        return units_parse_size(text)
    except UsageError as exc:
        raise ValueError(text) from exc


def openzfs_at_least(a: Availability, *want: int) -> bool:
    return a.dialect == OPENZFS and version_tuple(a.version) >= want


def member_count(vdevs: tuple[Vdev, ...], classes: tuple[tuple[str, Vdev], ...]) -> int:
    """Devices the layout uses: the data vdevs' and then the class vdevs'."""
    return sum(v.width for v in vdevs) + sum(v.width for _, v in classes)


def validate(spec: PoolSpec, a: Availability) -> None:
    """Refuse `spec` with a UsageError naming the fix if the ZFS `a` describes cannot build it."""
    if not a.ok:
        raise unavailable("zfs", a.reason)
    fuse = a.dialect == ZFS_FUSE
    if not _NAME.match(spec.name) or spec.name.startswith(_RESERVED):
        raise UsageError(
            f"'{spec.name}' is not a valid ZFS pool name.",
            "Start with a letter, use letters, digits, '_', '-', '.', ':', and do not begin "
            "with mirror, raidz, draid, spare or log.",
        )
    if not spec.mount_root.is_absolute():
        raise UsageError(f"Mount root {spec.mount_root} is not absolute.", "")
    vdevs, classes = _validate_layout(spec, a)
    used = spec.devices[: member_count(vdevs, classes)]
    real = [os.path.realpath(d) for d in used]
    dup = sorted({d for d in real if real.count(d) > 1})
    if dup:
        raise UsageError(
            f"Device {dup[0]} is given twice for pool {spec.name}.", "Name each disk once."
        )
    _validate_pool_options(spec, a)
    for key, value in spec.fs_options.items():
        _validate_property(key, str(value), fuse, a)
    large = zvol.MAX_BLOCK_LARGE if openzfs_at_least(a, 2, 2) else zvol.MAX_BLOCK_OLD
    zvol.validate(spec.volume, spec.fs_options, fuse, a.version, large)
    small = str(spec.fs_options.get("special_small_blocks", "0"))
    if small != "0" and not any(cls in ("special", "dedup") for cls, _ in classes):
        raise UsageError(
            f"special_small_blocks={small} on layout '{spec.layout}': OpenZFS refuses it "
            "on a pool without a special vdev.",
            "Add a special vdev to the layout (e.g. '+ special mirror:2'), or use "
            "special_small_blocks=0 for this layout (a study's exclude can pair them).",
        )


def _validate_pool_options(spec: PoolSpec, a: Availability) -> None:
    for key, value in spec.pool_options.items():
        if key not in POOL_OPTIONS:
            raise UsageError(
                f"Unknown ZFS pool option '{key}'.", f"Known: {', '.join(POOL_OPTIONS)}."
            )
        hi = 13 if a.dialect == ZFS_FUSE else 16
        if not is_digits(str(value)) or not 9 <= int(value) <= hi:
            raise UsageError(
                f"ashift={value} is not possible on {a.version}.",
                f"Use an ashift from 9 to {hi} (9 = 512-byte, 12 = 4K sectors).",
            )


def _validate_layout(
    spec: PoolSpec, a: Availability
) -> tuple[tuple[Vdev, ...], tuple[tuple[str, Vdev], ...]]:
    """The layout's data and class vdevs, refused where this ZFS lacks them."""
    vdevs = parse_topology(spec.layout, len(spec.devices))
    for v in vdevs:
        if v.kind.startswith("draid") and not openzfs_at_least(a, 2, 1):
            raise UsageError(
                f"Layout '{spec.layout}': dRAID needs OpenZFS 2.1 or later; this ZFS is "
                f"{a.version}.",
                "Drop the draid layouts from the study, or run it on OpenZFS ≥ 2.1.",
            )
    classes = parse_classes(spec.layout, len(spec.devices))
    for cls, _ in classes:
        if cls in ("special", "dedup") and a.dialect == ZFS_FUSE:
            raise UsageError(
                f"Layout '{spec.layout}': {a.version} has no {cls} vdevs (allocation "
                "classes came with ZFS on Linux 0.8; pool v23 has log, cache and spare "
                "devices only).",
                f"Drop the {cls} part on zfs-fuse, or run it on OpenZFS (the guest tier: "
                "vm/run-openzfs-tier.sh).",
            )
    return vdevs, classes


def _validate_property(key: str, value: str, fuse: bool, a: Availability) -> None:
    version = a.version
    if key not in FS_OPTIONS:
        raise UsageError(
            f"Unknown ZFS dataset property '{key}'.", f"Known: {', '.join(FS_OPTIONS)}."
        )
    if key == "recordsize":
        _check_recordsize(value, fuse, a)
    elif key == "compression":
        _check_compression(value, fuse, a)
    elif key == "sync" and fuse:
        raise UsageError(
            f"{version} has no 'sync' property (it came with pool version 28).",
            "Drop the sync factor for zfs-fuse, or run the study on OpenZFS.",
        )
    elif key == "special_small_blocks":
        _check_special_small(value, fuse, version)
    elif value not in _CHOICES.get(key, (value,)):
        raise UsageError(
            f"{key}={value} is not a valid value.", f"Use one of {', '.join(_CHOICES[key])}."
        )


def _check_recordsize(value: str, fuse: bool, a: Availability) -> None:
    hi = (128 << 10) if fuse else (16 << 20 if openzfs_at_least(a, 2, 2) else 1 << 20)
    try:
        n = parse_size(value)
    except ValueError:
        n = -1
    if n < 512 or n > hi or n & (n - 1):
        raise UsageError(
            f"recordsize={value} is not possible on {a.version}: it must be a power of "
            f"two from 512 to {hi >> 10}K.",
            "Use e.g. 16K, 128K" + ("" if fuse else ", 1M") + ".",
        )


def _check_compression(value: str, fuse: bool, a: Availability) -> None:
    if fuse:
        if value not in _FUSE_COMPRESSION:
            raise UsageError(
                f"compression={value} is not supported by {a.version}.",
                f"It offers: {', '.join(_FUSE_COMPRESSION)} (no lz4, no zstd).",
            )
        return
    ok = value in (*_FUSE_COMPRESSION, "lz4") or (
        _ZSTD.match(value) is not None and openzfs_at_least(a, 2, 0)
    )
    if not ok:
        raise UsageError(
            f"compression={value} is not supported by {a.version}.",
            "Use off, lz4, gzip[-1..9], zle, lzjb, zstd[-1..19] or zstd-fast[-N].",
        )


def _check_special_small(value: str, fuse: bool, version: str) -> None:
    """special_small_blocks: 0, or a power of two from 512 to 16M (OpenZFS 2.3)."""
    if fuse:
        raise UsageError(
            f"{version} has no 'special_small_blocks' property (allocation classes came with "
            "ZFS on Linux 0.8; pool v23 has none).",
            "Drop the special_small_blocks factor on zfs-fuse, or run the study on OpenZFS "
            "(the guest tier: vm/run-openzfs-tier.sh).",
        )
    from poolbench.units import parse_special_small

    parse_special_small(value)
