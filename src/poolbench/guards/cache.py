"""Cold reads: empty the page cache before a cold read, and prove that it is empty.

The drop itself is a write of "3" to /proc/sys/vm/drop_caches (after a sync, so dirty pages
can be dropped), done by opening the file — not by a command line, which is how a famous
`["echo", "3", ">", ...]` bug dropped nothing. Without root, poolbench falls back to
posix_fadvise(DONTNEED) on its own files. Either way the effect is verified: `fincore` counts
the pages of the data files still resident, and more than 1% resident fails the guard.

fincore cannot see ZFS's ARC, so on ZFS it proves nothing: the ARC is emptied by the backend
(export/import, whose ARC data size is checked here: `arc_after_export`) and the ARC's own
counters are read around every cold read (`ArcWindow`: OpenZFS's arcstats, or zfs-fuse's
/zfs-kstat where it publishes them). Where they cannot be read the record says so and is
never "verified"; the device byte check then decides. Empty files (metadata workloads) give
fincore nothing to count either: their cold reads are judged by device reads
(`cold_stat_check`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from poolbench import is_digits
from poolbench.system.probes import resident_bytes
from poolbench.system.runner import Runner

__all__ = [
    "ArcRead",
    "ArcSeen",
    "ArcWindow",
    "CacheDrop",
    "arc_after_export",
    "arc_read",
    "drop",
    "read_arcstats",
    "zfs_flavour",
]

DROP_CACHES = Path("/proc/sys/vm/drop_caches")
MAX_RESIDENT_FRACTION = 0.01
ZERO_BYTES = (
    "no file data to count (empty files, or block devices, whose size fincore cannot use), "
    "so the page cache check proves nothing here: the read's device bytes (on ZFS, the "
    "ARC's counters) decide"
)


@dataclass(frozen=True)
class CacheDrop:
    method: str  # "drop_caches", "fadvise", "none"
    resident_before: int | None
    resident_after: int | None
    file_bytes: int
    verified: bool | None  # None: nothing the page cache check could prove (empty files)
    detail: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _fadvise_dontneed(files: Sequence[Path]) -> None:
    for f in files:
        try:
            fd = os.open(f, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def drop(runner: Runner, files: Sequence[Path]) -> CacheDrop:
    """Empty the page cache of `files` (and, as root, the whole page cache) and verify it."""
    total = sum(f.stat().st_size for f in files if f.exists())
    before = resident_bytes(runner, files)
    os.sync()
    method = "none"
    detail = ""
    if runner.dry_run:
        return CacheDrop("dry-run", before, before, total, False, "dry run: nothing dropped")
    try:
        with open(DROP_CACHES, "w") as fh:
            fh.write("3\n")
        method = "drop_caches"
    except OSError as exc:
        # Not root (or a container): drop what we can, our own files' pages.
        _fadvise_dontneed(files)
        method = "fadvise"
        detail = f"cannot write {DROP_CACHES} ({exc.strerror}); used posix_fadvise(DONTNEED). "
    after = resident_bytes(runner, files)
    if after is None:
        return CacheDrop(
            method, before, None, total, False, detail + "fincore unavailable: drop unverified"
        )
    if total == 0:
        # Empty files (metadata workloads) or block devices: fincore has no page to count,
        # so it proves nothing (e.g. about inode caches); what the read does decides.
        return CacheDrop(method, before, after, total, None, detail + ZERO_BYTES)
    verified = after <= MAX_RESIDENT_FRACTION * total
    if not verified:
        detail += (
            f"{after} of {total} bytes still in the page cache after the drop "
            "(another process may hold them, or the filesystem ignores the drop)"
        )
    return CacheDrop(method, before, after, total, verified, detail.strip())


# -- the ARC (ZFS's own cache, which fincore cannot see) ----------------------------------------
ARCSTATS = Path("/proc/spl/kstat/zfs/arcstats")
# zfs-fuse keeps its ARC in its daemon and publishes the counters as one file per name in
# a FUSE mount of its own (unless started with --no-kstat-mount).
FUSE_ARCSTATS = Path("/zfs-kstat/zfs/arcstats")
_FUSE_KEYS = (
    "size", "data_size", "demand_data_hits", "demand_data_misses", "prefetch_data_misses",
)  # fmt: skip
# More than this share of a cold read served from RAM: the figure measures RAM in part. A
# cold read after export/import serves ~0% from RAM; a partly warm ARC more.
ARC_SERVED_LIMIT = 0.25
# O_DIRECT reads on OpenZFS >= 2.3 (`direct=standard`, page-aligned requests) go around the
# ARC: its demand data counters do not move at all (guest: 0 of 2816 4K reads; the same read
# buffered, 2168 of 2168). Below this share of the reads seen by the ARC, they bypassed it.
DIRECT_BYPASS_SHARE = 0.1
# Data the ARC may still hold after the only imported pool was exported (anonymous buffers
# in flight); anything above this means the export did not empty it.
ARC_EMPTY_SLACK = 8 * 1024 * 1024
UNOBSERVABLE = (
    "unobservable: this zfs-fuse publishes no ARC counters (/zfs-kstat is not mounted: "
    "--no-kstat-mount, or the daemon restarted), and its cache lives inside the daemon; the "
    "device byte check decides whether the disks served the read"
)


def arcstats_path(flavour: str | None) -> Path | None:
    """Where this ZFS publishes its ARC counters ('openzfs' or 'zfs-fuse'); None: not ZFS."""
    return {"openzfs": ARCSTATS, "zfs-fuse": FUSE_ARCSTATS}.get(flavour or "")


def read_arcstats(path: Path | None = ARCSTATS) -> dict[str, int] | None:
    """The ARC's counters (name -> value) from OpenZFS's kstat file or zfs-fuse's kstat
    directory; None where there are none."""
    if path is None:
        return None
    try:
        if path.is_dir():
            return {k: int((path / k).read_text().split()[0]) for k in _FUSE_KEYS}
        text = path.read_text()
    except (OSError, ValueError, IndexError):
        return None
    out: dict[str, int] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and is_digits(words[2]):
            out[words[0]] = int(words[2])
    return out or None


def zfs_flavour(path: Path) -> str | None:
    """'openzfs' or 'zfs-fuse' for a path on ZFS (from the mount that holds it), else None."""
    from poolbench.guards.devices import mount_of

    try:
        m = mount_of(path)
    except (OSError, ValueError):
        return None
    if not m.is_zfs:
        return None
    return "openzfs" if m.fstype == "zfs" else "zfs-fuse"


@dataclass(frozen=True)
class ArcRead:
    """What the ARC did during one read (arcstats deltas).

    Every data block the ARC fetched from the pool is one miss, by a demand read or by
    prefetch, so blocks fetched × the file's block size is what the pool delivered; the rest
    of the bytes the application read came from RAM (the ARC, or the dbuf cache above it,
    which the ARC's hit counters never see). Hit counts are kept for the record only: a demand
    hit may be on a block prefetch fetched from the disks a moment before, and OpenZFS 2.3's
    own split of those (demand_hit_predictive_prefetch) also counts blocks prefetch merely
    touched in the ARC (seen in the guest: a fully cached read had a 10% "hit ratio")."""

    size_at_start: int  # ARC size when the read began (after the drop)
    data_size_at_start: int
    demand_reads: int  # demand data hits + I/O hits (OpenZFS ≥ 2.2) + misses
    demand_hits: int  # of them, hits (for the record: see above)
    blocks_from_pool: int  # demand + prefetch data misses
    block_size: int  # the read file's data block size (st_blksize: its recordsize)
    app_bytes: int
    direct: bool = False  # the read was opened O_DIRECT (fio direct=1)
    ios: int = 0  # the application's reads (fio's total_ios)

    @property
    def bypassed(self) -> bool:
        """O_DIRECT reads that went around the ARC (OpenZFS >= 2.3 Direct I/O): the ARC
        never saw them, so its counters say nothing about where the bytes came from; the
        device bytes do. OpenZFS <= 2.2, zfs-fuse and `direct=disabled` accept O_DIRECT
        and still read through the ARC, which then counts every read."""
        return self.direct and self.ios > 0 and self.demand_reads < DIRECT_BYPASS_SHARE * self.ios

    @property
    def served_fraction(self) -> float | None:
        """Share of the application's bytes that the pool did not deliver (None: unknown,
        or the ARC was bypassed and cannot tell)."""
        if self.app_bytes <= 0 or self.block_size <= 0 or self.bypassed:
            return None
        return max(0.0, 1.0 - self.blocks_from_pool * self.block_size / self.app_bytes)

    def as_dict(self) -> dict[str, object]:
        served = self.served_fraction
        out = {**asdict(self), "served_fraction": None if served is None else round(served, 4)}
        if self.direct:
            out["direct_io"] = (
                f"O_DIRECT bypassed the ARC: its demand counters saw {self.demand_reads} of "
                f"{self.ios} reads, so the device bytes show where the data came from"
                if self.bypassed
                else f"O_DIRECT was asked, but the ARC saw {self.demand_reads} of {self.ios} "
                "reads: this ZFS reads O_DIRECT through the ARC (zfs-fuse, OpenZFS <= 2.2, "
                "or direct=disabled)"
            )
        return out

    def warning(self) -> str:
        served = self.served_fraction
        if served is None or served <= ARC_SERVED_LIMIT:
            return ""
        return (
            f"the ARC served ~{served:.0%} of this read from RAM (arcstats: "
            f"{self.blocks_from_pool} blocks of {self.block_size} bytes fetched from the pool "
            f"for {self.app_bytes} bytes read), so this figure measures RAM, not the disks: "
            "use a working set ≥ 2× the ARC, or a study (`poolbench run`), which exports and "
            "imports the pool."
        )


def arc_read(
    before: dict[str, int],
    after: dict[str, int],
    block_size: int,
    app_bytes: int,
    direct: bool = False,
    ios: int = 0,
) -> ArcRead:
    def d(key: str) -> int:
        return max(0, after.get(key, 0) - before.get(key, 0))

    hits = d("demand_data_hits")
    misses = d("demand_data_misses")
    return ArcRead(
        size_at_start=before.get("size", 0),
        data_size_at_start=before.get("data_size", 0),
        demand_reads=hits + d("demand_data_iohits") + misses,
        demand_hits=hits,
        blocks_from_pool=misses + d("prefetch_data_misses"),
        block_size=block_size,
        app_bytes=app_bytes,
        direct=direct,
        ios=ios,
    )


@dataclass(frozen=True)
class ArcMetaRead:
    """What the ARC did during a cold metadata read (stat, open): its metadata counters.

    A stat reads dnodes and directory blocks, never a file's data, so the data counters (and
    ArcRead's share of a file's bytes) say nothing about it: a cold stat of 200 files on
    OpenZFS 2.3 fetched 4.5-5.5 KiB from the disks while ArcRead called it "~100% from RAM".
    What does tell: whether the ARC had to fetch any metadata block at all. None: this ZFS
    publishes no metadata counters (zfs-fuse); the device bytes decide alone."""

    demand_hits: int | None
    fetched: int | None  # demand + prefetch metadata misses: blocks read from the pool

    def as_dict(self) -> dict[str, object]:
        return {"metadata_demand_hits": self.demand_hits, "metadata_blocks_fetched": self.fetched}

    def warning(self) -> str:
        if self.fetched is None or self.fetched > 0 or not self.demand_hits:
            return ""
        return (
            f"the ARC served every metadata block of this read from RAM (arcstats: "
            f"{self.demand_hits} demand metadata hits, no block fetched from the pool), so "
            "this figure measures RAM, not the disks"
        )


def arc_meta_read(before: dict[str, int], after: dict[str, int]) -> ArcMetaRead:
    if "demand_metadata_misses" not in after:
        return ArcMetaRead(None, None)

    def d(key: str) -> int:
        return max(0, after.get(key, 0) - before.get(key, 0))

    return ArcMetaRead(
        demand_hits=d("demand_metadata_hits") + d("demand_metadata_iohits"),
        fetched=d("demand_metadata_misses") + d("prefetch_metadata_misses"),
    )


def block_size_of(files: Sequence[Path]) -> int:
    """The data block size ZFS reports for the first readable file (0: none)."""
    for f in files:
        try:
            return os.stat(f).st_blksize
        except OSError:
            continue
    return 0


@dataclass(frozen=True)
class ArcSeen:
    """What the ARC's counters showed of one cold read (ArcWindow.close): the read, data or
    metadata, where they could be read (`source`), else why not (`note`)."""

    read: ArcRead | ArcMetaRead | None  # None: the counters could not be read
    source: str = ""
    note: str = ""

    @property
    def observable(self) -> bool:
        return self.read is not None

    @property
    def served_fraction(self) -> float | None:
        """The share of a data read the pool did not deliver, as recorded (None: unknown, or
        a metadata read, whose data share means nothing)."""
        served = self.read.served_fraction if isinstance(self.read, ArcRead) else None
        return None if served is None else round(served, 4)

    @property
    def warning(self) -> str:
        """Why the read measured RAM, not the disks ('' when it did not)."""
        return self.read.warning() if self.read is not None else ""

    def to_json(self) -> dict[str, object]:
        """The cache record's `arc_during_read`, as stored (the warning goes with the
        measurement's warnings instead)."""
        if self.read is None:
            return {"observable": False, "note": self.note}
        return {"observable": True, "source": self.source, **self.read.as_dict()}


class ArcWindow:
    """Open just before a cold read, close right after: what the ARC served (OpenZFS, and
    zfs-fuse where it publishes its counters), that it cannot be seen, or nothing (not ZFS)."""

    def __init__(
        self,
        flavour: str | None,
        files: Sequence[Path] = (),
        arcstats: Path | None = None,
        direct: bool = False,
        block_size: int | None = None,
        metadata: bool = False,
    ) -> None:
        """`block_size`: the files' ZFS block size, read before the cache drop (a stat after
        it would warm a cold metadata read); None: read from `files` here. `metadata`: the
        read is of metadata (stat, open), judged by the ARC's metadata counters."""
        self.flavour = flavour
        self.direct = direct
        self.metadata = metadata
        self.arcstats = arcstats or arcstats_path(flavour)
        self.before = read_arcstats(self.arcstats)
        if block_size is None:
            block_size = block_size_of(files)
        self.block_size = block_size if self.before else 0

    def close(self, app_bytes: int, ios: int = 0) -> ArcSeen | None:
        if self.flavour is None:
            return None
        after = read_arcstats(self.arcstats)
        if self.before is None or after is None:
            note = UNOBSERVABLE if self.flavour == "zfs-fuse" else f"{self.arcstats} unreadable"
            return ArcSeen(None, note=note)
        read: ArcRead | ArcMetaRead = (
            arc_meta_read(self.before, after)
            if self.metadata
            else arc_read(self.before, after, self.block_size, app_bytes, self.direct, ios)
        )
        return ArcSeen(read, source=str(self.arcstats))


def arc_after_export(exported: dict[str, int] | None, other_pools: int) -> tuple[bool | None, str]:
    """Check the ARC once the pool is exported: (True/False, what was seen), or None when the
    size alone cannot tell (no arcstats; other pools' data legitimately stays)."""
    if exported is None:
        return None, UNOBSERVABLE
    left = exported.get("data_size", exported.get("size", 0))
    if left <= ARC_EMPTY_SLACK:  # whatever else is imported, this pool's data is not there
        return True, f"the ARC holds {left} bytes of data after the export"
    if other_pools:
        return None, (
            f"the ARC holds {left} bytes of data after the export, of {other_pools} other "
            "imported pool(s) or of this one: the read's hit counters decide"
        )
    return False, (
        f"the ARC still holds {left} bytes of data after the export with no pool imported: "
        "the export did not empty it"
    )


# -- cold metadata reads ---------------------------------------------------------------------
# A cold stat must read each file's metadata from the disks. 16 bytes per file is far below
# any filesystem's on-disk inode (ext4 256 B, a ZFS dnode 512 B before compression, a btrfs
# inode item 160 B), so fewer device bytes than this mean a cache answered.
MIN_META_BYTES_PER_FILE = 16


def cold_stat_check(device_read_bytes: int | None, files: int) -> tuple[bool | None, str]:
    """Whether a cold metadata read was served by the disks, judged by their read bytes."""
    if device_read_bytes is None:
        return None, "unverified: no device bytes were counted to show the metadata was read"
    need = MIN_META_BYTES_PER_FILE * files
    if device_read_bytes >= need:
        return True, (
            f"verified by device reads: {device_read_bytes} bytes for {files} files' metadata"
        )
    return False, (
        f"the devices read only {device_read_bytes} bytes for {files} files' metadata (a cold "
        f"read needs ≥ {need}): the metadata came from a cache, so this figure measures RAM"
    )
