"""Predicted speed of a layout from one disk's figures (pure).

A model, checked against measurement (bench/validate_speed.py; the table and every correction
with its evidence are in docs/planner.md). Each top-level vdev is an independent unit and a
pool is the sum over its top-level vdevs. Within a vdev the model counts the work each member
does for a run of blocks of the dataset's record size allocated back to back, the way ZFS lays
them out:

- disk: 1 × disk for every figure;
- W-way mirror: reads spread over all W sides (W × disk), every write goes to all sides (1 ×);
- raidz: the raidz map (vdev_raidz_map_alloc): a block of s sectors gets P parity columns and
  s data sectors spread over W − P columns, the first (parity) column on member
  (offset / sector) mod W, rounded up to a multiple of P + 1 sectors; raidz1 also swaps its
  parity and first data column when bit 20 (1 MiB) of the offset is set. A stream is as fast
  as its busiest member: write = s·n / max(sectors a member writes), read = s·n / max(data
  sectors a member reads) on a disk whose speed is its transfer rate (SSD, NVMe, a capped
  device), or the write figure on a spinning disk (its head passes over the parity sectors
  too); the transfer-bound read is a lower bound where runs of blocks starting elsewhere
  would lift it. Random reads of whole blocks: n / max(reads a member serves), averaged
  over the first columns a real pool's runs of blocks can start on (`first_column_step`);
- dRAID: fixed rows of D data + P parity sectors; groups of D + P children are filled one
  at a time, so a stream sees one group: s / ⌈s/D⌉ disks for blocks of s sectors (a lower
  bound; spread over all C − S children is the ceiling); random IOPS floor((C − S)/(D + P))
  × disk, as the OpenZFS dRAID documentation gives it.

Random writes are not a disk figure on ZFS (copy-on-write: they leave as aggregated
sequential transaction-group writes), and nothing here knows the CPU, the ARC, compression,
fragmentation or fill: `predict_detailed` says so beside each figure.

The raidz member counts live in planner/raidz_work.py; every name of it is re-exported here,
where callers have always imported it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from poolbench.errors import UsageError
from poolbench.planner.layout import Layout, VdevKind, VdevSpec
from poolbench.planner.queueing import (
    fork_join_share,
    members_per_read,
    queued_share,
)
from poolbench.planner.raidz_work import (
    raidz_mixed,
    raidz_work,
)
from poolbench.units import parse_size

DiskClass = Literal["hdd", "ssd", "nvme"]
# What limits a disk's streaming rate: the medium passing under the head (a spinning disk:
# skipped sectors cost time) or the transfer (SSD, NVMe, a rate-capped device: they do not).
Medium = Literal["media", "transfer"]
RECORDSIZE = 128 * 1024  # ZFS's default recordsize


@dataclass(frozen=True)
class DiskSpeed:
    """One disk: streaming read/write in bytes/s and random (4K) read/write IOPS."""

    read_bps: float
    write_bps: float
    read_iops: float
    write_iops: float
    source: str = "default"
    medium: Medium = "media"
    # Each screened disk, in the order screened (`--disk-speed-from screen:ID`; the figures
    # above are their median): a layout takes them vdev by vdev in that order, and each vdev
    # runs at its slowest member's figures (`vdev_disk`). Empty: every disk is this one.
    members: tuple[DiskSpeed, ...] = ()
    # The size of the random reads `read_iops` was measured with: 4K for a datasheet or a
    # bench run; a one-disk pool's record where a study measured it (`member_read_share`).
    iops_size: int = 4096

    @classmethod
    def of(cls, figs: dict[str, float], source: str, medium: Medium,
           members: tuple[DiskSpeed, ...] = ()) -> DiskSpeed:  # fmt: skip
        """From figures keyed by field name (read_bps, write_bps, read_iops, write_iops)."""
        return cls(figs["read_bps"], figs["write_bps"], figs["read_iops"], figs["write_iops"],
                   source, medium, members)  # fmt: skip


def vdev_disk(disk: DiskSpeed, layout: Layout, index: int) -> DiskSpeed:
    """The disk figures vdev `index` of `layout` runs at: with screened members, each figure
    the slowest of its own members' (a vdev waits for its slowest member); a vdev beyond the
    screened disks, and a disk without members, at `disk`'s."""
    width = layout.vdevs[index].width
    start = sum(v.width for v in layout.vdevs[:index])
    mine = disk.members[start : start + width]
    if len(mine) < width:
        return disk
    return DiskSpeed(
        min(m.read_bps for m in mine), min(m.write_bps for m in mine),
        min(m.read_iops for m in mine), min(m.write_iops for m in mine),
        f"the slowest of disks {start + 1}-{start + width} screened", disk.medium,
    )  # fmt: skip


# Defaults per class: conservative figures for a current 7200 rpm SATA disk, a SATA SSD and
# a PCIe 3/4 NVMe SSD at queue depth 1..4 (stated in docs/planner.md).
DEFAULT_SPEEDS: dict[str, DiskSpeed] = {
    "hdd": DiskSpeed(180e6, 180e6, 150, 150, "default for hdd"),
    "ssd": DiskSpeed(500e6, 450e6, 20_000, 15_000, "default for ssd", "transfer"),
    "nvme": DiskSpeed(2_500e6, 1_500e6, 100_000, 60_000, "default for nvme", "transfer"),
}


def parse_disk_speed(text: str, medium: Medium = "media") -> DiskSpeed:
    """``180M,250iops`` (MiB/s, IOPS); ``180M/150M,250iops/200iops`` gives read/write apart.

    The throughput takes the size units of the layout grammar (M = MiB, MB = 10^6), per
    second; a bare number of IOPS needs the ``iops`` suffix. `medium` says what limits the
    disk's streaming rate (see `Medium`; `plan` takes it from --disk-class).
    """
    bps: tuple[float, float] | None = None
    iops: tuple[float, float] | None = None
    for part in (p.strip() for p in text.split(",") if p.strip()):
        pieces = [p.strip() for p in part.split("/")]
        if len(pieces) > 2:
            raise UsageError(f"'{part}' in --disk-speed has more than read/write.", _SPEED_FIX)
        if all(re.fullmatch(r"[0-9]{1,9}(?:\.[0-9]{1,6})?\s*iops", p, re.I | re.A) for p in pieces):
            vals = [float(re.sub(r"(?i)\s*iops", "", p)) for p in pieces]
            if min(vals) <= 0:
                raise UsageError(f"'{part}' in --disk-speed is no IOPS at all.", _SPEED_FIX)
            iops = (vals[0], vals[-1])
            continue
        if any(re.search(r"(?i)iops", p) for p in pieces):
            shown = part if len(part) <= 40 else part[:37] + "..."
            raise UsageError(f"'{shown}' in --disk-speed is not a number of IOPS.", _SPEED_FIX)
        try:
            sizes = [float(parse_size(re.sub(r"(?i)/s$", "", p))) for p in pieces]
        except UsageError as exc:
            shown = part if len(part) <= 40 else part[:37] + "..."
            raise UsageError(f"'{shown}' in --disk-speed is not a speed.", _SPEED_FIX) from exc
        bps = (sizes[0], sizes[-1])
    if bps is None and iops is None:
        raise UsageError(f"--disk-speed '{text}' names no figure.", _SPEED_FIX)
    base = DEFAULT_SPEEDS["hdd"]
    r_bps, w_bps = bps if bps else (base.read_bps, base.write_bps)
    r_iops, w_iops = iops if iops else (base.read_iops, base.write_iops)
    return DiskSpeed(r_bps, w_bps, r_iops, w_iops, f"--disk-speed {text}", medium)


_SPEED_FIX = "Write it as THROUGHPUT,IOPS, e.g. --disk-speed 180M,250iops or 500M/450M,20000iops."


@dataclass(frozen=True)
class Speed:
    read_bps: float
    write_bps: float
    read_iops: float
    write_iops: float

    def __add__(self, other: Speed) -> Speed:
        return Speed(
            self.read_bps + other.read_bps,
            self.write_bps + other.write_bps,
            self.read_iops + other.read_iops,
            self.write_iops + other.write_iops,
        )

    def score(self, disk: DiskSpeed) -> float:
        """One number: the geometric mean of the four figures, each in units of one disk."""
        ratios = (
            self.read_bps / disk.read_bps,
            self.write_bps / disk.write_bps,
            self.read_iops / disk.read_iops,
            self.write_iops / disk.write_iops,
        )
        prod = 1.0
        for r in ratios:
            prod *= r
        return float(prod ** (1 / len(ratios)))

    def as_dict(self) -> dict[str, float]:
        return {
            "stream_read_bytes_per_s": round(self.read_bps),
            "stream_write_bytes_per_s": round(self.write_bps),
            "random_read_iops": round(self.read_iops, 1),
            "random_write_iops": round(self.write_iops, 1),
        }


def vdev_multipliers(
    spec: VdevSpec,
    recordsize: int = RECORDSIZE,
    ashift: int = 12,
    medium: Medium = "media",
) -> tuple[float, float, float, float]:
    """(stream read, stream write, random read, random write) in units of one disk, for
    blocks of `recordsize` (random I/O reads and writes whole blocks)."""
    if spec.kind == "disk":
        return (1.0, 1.0, 1.0, 1.0)
    if spec.kind == "mirror":
        w = float(spec.width)
        return (w, 1.0, w, 1.0)
    if spec.kind == "raidz":
        work = raidz_work(spec.width, spec.parity, ashift, recordsize)
        write = work.data_sectors / work.max_written
        read = write if medium == "media" else work.data_sectors / work.max_read
        # Random reads sample the whole working set, whose runs of blocks start on every
        # first column the pool allows (correction 8, docs/planner.md).
        rand = raidz_mixed(spec.width, spec.parity, ashift, recordsize)[1]
        return (read, write, rand, 1.0)
    # dRAID fills one redundancy group (D + P children) before the next, and a block of s
    # sectors is ⌈s/D⌉ whole rows from the group's first column: each child of the group
    # moves ⌈s/D⌉ sectors, the busiest data child reads as many. A stream sees one group
    # (`draid_ceiling` is the figure spread over every child).
    sectors = -(-recordsize // (1 << ashift))
    stream = sectors / -(-sectors // spec.draid_data)
    groups = float((spec.width - spec.draid_spares) // (spec.draid_data + spec.parity))
    return (stream, stream, groups, groups)  # IOPS: the OpenZFS dRAID documentation's floor


def draid_ceiling(spec: VdevSpec, recordsize: int, ashift: int, medium: Medium) -> float:
    """A dRAID stream's read (or write) spread over all C − S children, in disks: what
    several streams, or a read-ahead spanning groups, can reach."""
    children = spec.width - spec.draid_spares
    sectors = -(-recordsize // (1 << ashift))
    rows = -(-sectors // spec.draid_data)
    per_row = spec.draid_data if medium == "transfer" else spec.draid_data + spec.parity
    return children * sectors / (rows * per_row)


def predict_vdev(
    spec: VdevSpec, disk: DiskSpeed, recordsize: int = RECORDSIZE, ashift: int = 12
) -> Speed:
    shape = (spec.kind, spec.width, spec.parity, spec.draid_data, spec.draid_spares)
    return _predict_shape(shape, disk, recordsize, ashift)


@lru_cache(maxsize=4096)
def _predict_shape(
    shape: tuple[VdevKind, int, int, int, int], disk: DiskSpeed, recordsize: int, ashift: int
) -> Speed:
    """A vdev's figures depend on its shape, not its members' sizes: a search asks for the
    same few shapes thousands of times."""
    kind, width, parity, data, spares = shape
    spec = VdevSpec(kind, (1,) * width, parity, data, spares)
    sr, sw, rr, rw = vdev_multipliers(spec, recordsize, ashift, disk.medium)
    rr *= member_read_share(spec, disk, recordsize, ashift)
    return Speed(sr * disk.read_bps, sw * disk.write_bps, rr * disk.read_iops, rw * disk.write_iops)


def member_read_share(spec: VdevSpec, disk: DiskSpeed, recordsize: int, ashift: int) -> float:
    """On a disk that seeks a random read costs a positioning time plus its transfer: a
    member's read of b bytes takes 1/IOPS + (b − iops_size)/rate. A mirror's side reads
    the whole record, a raidz member only its column (⌈s/data columns⌉ sectors):
    44K of a 128K record on raidz1 of 4, which a 128K figure overstated by 9 % on emulated
    hdd-7200 disks (docs/planner.md, correction 10). Returns the disk's IOPS at its own read
    size ÷ at the member's; 1 where the disk has no transfer rate known or no seek."""
    if spec.kind == "draid" or disk.medium != "media" or not disk.read_bps > 0:
        return 1.0  # dRAID: the OpenZFS documentation's whole groups
    sector = 1 << ashift
    sectors = -(-recordsize // sector)
    data = spec.width - spec.parity if spec.kind == "raidz" else 1
    member = -(-sectors // data) * sector
    own = 1 / disk.read_iops
    return own / max(own + (member - disk.iops_size) / disk.read_bps, own / 64)


def predict(
    layout: Layout,
    disk: DiskSpeed,
    recordsize: int = RECORDSIZE,
    ashift: int = 12,
    outstanding: int | None = None,
) -> Speed:
    """The pool's figures. With `outstanding` (requests in flight: jobs × queue depth), random
    reads are scaled for requests that queue on one member while another idles and, on a
    spinning disk, for a read that waits for the slowest of the members it needs."""
    total = Speed(0.0, 0.0, 0.0, 0.0)
    for i, v in enumerate(layout.vdevs):
        total = total + predict_vdev(v, vdev_disk(disk, layout, i), recordsize, ashift)
    if outstanding is None:
        return total
    # independent servers, in disks (a raidz member's shorter read is speed, not a server)
    members = (
        sum(
            predict_vdev(v, vdev_disk(disk, layout, i), recordsize, ashift).read_iops
            / member_read_share(v, vdev_disk(disk, layout, i), recordsize, ashift)
            for i, v in enumerate(layout.vdevs)
        )
        / disk.read_iops
    )
    share = queued_share(outstanding, members)
    reads = total.read_iops
    if disk.medium == "media":
        reads = sum(
            predict_vdev(v, vdev_disk(disk, layout, i), recordsize, ashift).read_iops
            * fork_join_share(members_per_read(v, recordsize, ashift), outstanding)
            for i, v in enumerate(layout.vdevs)
        )
    return Speed(total.read_bps, total.write_bps, reads * share, total.write_iops)


def outstanding_for(disk: DiskSpeed, iodepth: int, jobs: int) -> int | None:
    """Requests in flight for `predict`'s queue-depth rule: fio's jobs × queue depth on a
    disk with a service time (a seek); None, every member busy, on a transfer-bound disk
    (a rate cap, an SSD), whose idle members serve a lone request at once (correction 4,
    docs/planner.md)."""
    if disk.medium != "media":
        return None
    return max(iodepth, 1) * max(jobs, 1)


@dataclass(frozen=True)
class Figure:
    """One predicted figure and what it rests on (validated, or what it cannot know)."""

    value: float
    basis: str


@dataclass(frozen=True)
class Prediction:
    read_bps: Figure
    write_bps: Figure
    read_iops: Figure
    write_iops: Figure
    notes: tuple[str, ...]

    @property
    def speed(self) -> Speed:
        return Speed(
            self.read_bps.value, self.write_bps.value, self.read_iops.value, self.write_iops.value
        )

    def figures(self) -> dict[str, dict[str, object]]:
        """Keyed as `Speed.as_dict`: each figure's value and basis."""
        figures = (self.read_bps, self.write_bps, self.read_iops, self.write_iops)
        keys = zip(self.speed.as_dict(), figures, strict=True)
        return {k: {"value": f.value, "basis": f.basis} for k, f in keys}


STREAM_TOLERANCE = 0.15  # the streaming figures' validated tolerance (issue 14)
VALIDATED = "checked against rate-capped devices (transfer-bound; table in docs/planner.md)"
NOTES = (
    "The CPU is assumed to keep up: a file system short of CPU (zfs-fuse, a user-space port, "
    "on a small machine) stops below these figures.",
    "Reads are assumed to come from the disks: the ARC (ZFS's cache) is not modelled.",
    "Random IOPS assume many requests in flight; on disks with a service time (a seek), Q "
    "requests on K members keep about Q/(Q + K - 1) of them busy: at queue depth 1, one "
    "disk's IOPS whatever the layout, and less where a read needs several members at once "
    "(raidz records: it waits for the slowest); checked on emulated seeking disks.",
)
COW_WRITES = (
    "not predicted: ZFS writes copy-on-write, so random writes leave as aggregated sequential "
    "writes; the figure depends on aggregation, metadata and the CPU (the number is the "
    "in-place-write rule, for comparison only)"
)


def predict_detailed(
    layout: Layout,
    disk: DiskSpeed,
    recordsize: int = RECORDSIZE,
    ashift: int = 12,
    outstanding: int | None = None,
    write_size: int = 4096,
) -> Prediction:
    """`predict` with the basis of each figure: validated, or a model outside its range.
    `write_size`: the random writes' size (the disk figures' 4K unless a workload says)."""
    speed = predict(layout, disk, recordsize, ashift, outstanding)
    kinds = {v.kind for v in layout.vdevs}
    if "draid" in kinds:
        stream = draid_stream_basis(layout, disk, recordsize, ashift, disk.medium)
    elif disk.medium == "media":
        stream = (
            "model for spinning disks (the head passes parity sectors too), not measured "
            "here; the member counting it rests on is " + VALIDATED
        )
    else:
        stream = VALIDATED
    read = stream
    if "raidz" in kinds and disk.medium == "transfer":
        read = raidz_read_basis(layout, disk, speed, recordsize, ashift)
    rand = "model: OpenZFS dRAID documentation" if "draid" in kinds else VALIDATED
    if outstanding is not None and "draid" not in kinds:
        rand = (
            "Q/(Q + K - 1) of K members busy with Q requests in flight, a read that needs "
            "several members waiting for the slowest (spinning disks): checked on emulated "
            "seeking disks under zfs-fuse (docs/planner.md); it erred low by up to 1.39 x on "
            "rate-capped devices, whose requests do not queue behind a seek (correction 4)"
        )
    elif "draid" not in kinds:
        rand = (
            "many requests in flight, every member busy; rate-capped devices gave 0.70-0.94 "
            "of this with 8 in flight (docs/planner.md)"
        )
    return Prediction(
        Figure(speed.read_bps, read),
        Figure(speed.write_bps, stream),
        Figure(speed.read_iops, rand),
        sub_record_write(speed, disk, recordsize, write_size),
        NOTES,
    )


def sub_record_write(speed: Speed, disk: DiskSpeed, recordsize: int, size: int) -> Figure:
    """A random write smaller than the record, on disks that seek: the rest of its record
    must be read first unless the ARC holds it, so the writes go no faster than the
    layout's random reads of whole records (docs/planner.md, "Mirrors or raidz on disks
    that seek", point 5). Elsewhere the in-place rule, for comparison only."""
    if size >= recordsize or disk.medium != "media" or math.isnan(speed.read_iops):
        return Figure(speed.write_iops, COW_WRITES)
    return Figure(min(speed.read_iops, speed.write_iops), (
        f"not predicted: a {size // 1024}K write into a {recordsize // 1024}K record not in "
        f"the ARC reads the record first, so at most the layout's random reads of whole "
        f"records ({speed.read_iops:,.0f} IOPS; the in-place rule gives "
        f"{speed.write_iops:,.0f}); copy-on-write, aggregation and the CPU decide how far "
        "below (docs/planner.md)"
    ))  # fmt: skip


def draid_stream_basis(
    layout: Layout, disk: DiskSpeed, recordsize: int, ashift: int, medium: Medium
) -> str:
    """A dRAID streaming figure is one redundancy group's (vdev_draid.c fills one group
    before the next): a lower bound, with the figure spread over every child as ceiling."""
    high = sum(
        draid_ceiling(v, recordsize, ashift, medium)
        if v.kind == "draid"
        else max(vdev_multipliers(v, recordsize, ashift, medium)[:2])
        for v in layout.vdevs
    )
    rate = max(disk.read_bps, disk.write_bps) / 2**20
    return (
        "model, a lower bound: dRAID fills one redundancy group at a time, so a stream "
        "sees one group's children; not measured on real hardware (zfs-fuse has no dRAID; "
        "in the OpenZFS guest, on virtual disks capped alike, one stream wrote 1.02 and read "
        f"1.76 x this, docs/planner.md); at most {high * rate:,.0f} MiB/s (every child)"
    )


def raidz_read_basis(
    layout: Layout, disk: DiskSpeed, speed: Speed, recordsize: int, ashift: int
) -> str:
    """What a transfer-bound raidz stream read rests on. The model lays data blocks back to
    back; on a real pool other blocks (indirect blocks, each transaction group's metadata, a
    metaslab's end) sit between runs of them and move the member that holds the parity
    (bench/raidz_layout.py reads the real offsets with zdb). That can only lift the read
    towards every member delivering data, so where the back-to-back figure is already within
    the streaming tolerance of that ceiling it stands as validated, elsewhere it is a lower
    bound and the ceiling is printed."""
    upper = sum(
        raidz_mixed(v.width, v.parity, ashift, recordsize)[0]
        if v.kind == "raidz"
        else vdev_multipliers(v, recordsize, ashift, "transfer")[0]
        for v in layout.vdevs
    )
    lower = speed.read_bps / disk.read_bps
    if upper <= lower * (1 + STREAM_TOLERANCE):
        return VALIDATED
    return (
        "outside the validated range: a lower bound (data blocks back to back); other blocks "
        "allocated between runs of data blocks move the parity, by how much depends on the "
        "transaction groups (measured 1.03-1.42 × this, docs/planner.md); at most "
        f"{upper * disk.read_bps / 2**20:,.0f} MiB/s (runs of blocks starting on every member "
        "the allocation allows)"
    )


def side_by_side(predicted: Speed, measured: dict[str, float]) -> list[tuple[str, float, float]]:
    """(metric, predicted, measured) for every metric a study measured (same keys as
    `Speed.as_dict`), for the report's predicted-vs-measured table."""
    pred = predicted.as_dict()
    return [(k, float(pred[k]), float(v)) for k, v in measured.items() if k in pred]
