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
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Literal

from poolbench.errors import UsageError
from poolbench.planner.layout import Layout, VdevKind, VdevSpec, parse_size

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


@dataclass(frozen=True)
class ColumnWork:
    """What each member of a raidz vdev does for `blocks` blocks laid out back to back."""

    data_sectors: int  # data sectors in all blocks (what the application asked for)
    max_read: int  # data sectors the busiest member reads
    max_written: int  # sectors (data, parity, padding) the busiest member writes
    blocks: int
    max_read_ios: int  # block reads the busiest member takes part in
    total_written: int  # sectors written on all members: blocks × the allocation table's asize
    read_by_member: tuple[int, ...]  # data sectors each member reads
    ios_by_member: tuple[int, ...]  # block reads each member takes part in


def raidz_columns(width: int, parity: int, ashift: int, offset: int, psize: int) -> RaidzBlock:
    """Where one block of `psize` bytes at vdev `offset` (bytes) puts its sectors, as the raidz
    map does (vdev_raidz_map_alloc; learnt from the OpenZFS and zfs-fuse source, re-stated).

    s sectors; q = s // (W − P) full rows, r = s mod (W − P); bc = r + P columns (0 when
    r = 0) carry q + 1 sectors, the rest q; the first column (parity) sits on member
    (offset / sector) mod W; the allocation is rounded up to P + 1 sectors and the padding
    sectors follow column bc; raidz1 swaps columns 0 and 1 where offset bit 20 is set.
    """
    sector = 1 << ashift
    s = -(-psize // sector)
    q, r = divmod(s, width - parity)
    bc = r + parity if r else 0
    tot = s + parity * (q + (1 if r else 0))
    acols = width if q else bc
    asize = -(-tot // (parity + 1)) * (parity + 1)
    first = offset // sector
    devs = [(first + c) % width for c in range(acols)]
    if parity == 1 and offset & (1 << 20):
        devs[0], devs[1] = devs[1], devs[0]
    read, written = [0] * width, [0] * width
    for c, dev in enumerate(devs):
        size = q + (1 if c < bc else 0)
        written[dev] += size
        if c >= parity:
            read[dev] += size
    for k in range(asize - tot):
        written[devs[(bc + k) % acols]] += 1
    return RaidzBlock(asize, tuple(read), tuple(written))


@dataclass(frozen=True)
class RaidzBlock:
    """One raidz block: its allocated sectors and each member's data and written sectors."""

    asize: int
    read: tuple[int, ...]  # data sectors per member (what a healthy read fetches)
    written: tuple[int, ...]  # data, parity and padding sectors per member


# One block's work on each member, packed into one integer so the three counts move
# together: data sectors read + sectors written << 48 + (1 if it reads data) << 96.
_FIELD = 48
_MASK = (1 << _FIELD) - 1


def _pack(read: int, written: int) -> int:
    return read | written << _FIELD | (1 if read else 0) << (2 * _FIELD)


def _unpack(values: list[int]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(read, written, block reads) per member from packed sums (each field is a sum of
    non-negative counts below 2^48, so the packed sum separates exactly)."""
    read = tuple([v & _MASK for v in values])
    written = tuple([v >> _FIELD & _MASK for v in values])
    ios = tuple([v >> (2 * _FIELD) for v in values])
    return read, written, ios


@dataclass(frozen=True)
class _Geometry:
    """`raidz_columns`' arithmetic for one block size, without placing it on members."""

    width: int
    parity: int
    q: int  # full rows
    bc: int  # columns carrying q + 1 sectors (0 when the data divides evenly)
    acols: int  # columns the block uses
    asize: int  # sectors allocated (rounded up to P + 1)
    pad: int  # padding sectors, after column bc


@lru_cache(maxsize=2048)
def _geometry(width: int, parity: int, ashift: int, psize: int) -> _Geometry:
    s = -(-psize // (1 << ashift))
    q, r = divmod(s, width - parity)
    bc = r + parity if r else 0
    tot = s + parity * (q + (1 if r else 0))
    asize = -(-tot // (parity + 1)) * (parity + 1)
    return _Geometry(width, parity, q, bc, width if q else bc, asize, asize - tot)


def _block_value(g: _Geometry, position: int, swap: bool) -> int:
    """The packed work of the member `position` columns after the block's first: column c
    carries q + 1 sectors below bc, else q (none past acols); parity columns are written,
    not read; padding sector k lands on column (bc + k) mod acols; raidz1's swap exchanges
    the members of columns 0 and 1."""
    c = {0: 1, 1: 0}.get(position, position) if swap else position
    if c >= g.acols:
        return 0
    size = g.q + (1 if c < g.bc else 0)
    pads = sum(1 for k in range(g.pad) if (g.bc + k) % g.acols == c)
    return _pack(size if c >= g.parity else 0, size + pads)


@lru_cache(maxsize=2048)
def _block_runs(
    width: int, parity: int, ashift: int, psize: int, swap: bool
) -> tuple[tuple[int, int, int], ...]:
    """One block's packed work as runs (from, to, value) of members counted from its first
    column: the value can change only at a column boundary (P, bc, acols), at a padding
    sector or at the two swapped columns, so a block is a handful of runs whatever W."""
    g = _geometry(width, parity, ashift, psize)
    cuts = {0, 1, 2, parity, g.bc, g.acols, width}
    for k in range(g.pad):
        column = (g.bc + k) % g.acols
        cuts |= {column, column + 1}
    edges = sorted(c for c in cuts if 0 <= c <= width)
    runs: list[tuple[int, int, int]] = []
    for lo, hi in zip(edges, edges[1:], strict=False):
        value = _block_value(g, lo, swap)
        if runs and runs[-1][2] == value and runs[-1][1] == lo:
            runs[-1] = (runs[-1][0], hi, value)
        elif value:
            runs.append((lo, hi, value))
    return tuple(runs)


@lru_cache(maxsize=2048)
def _block_steps(
    width: int, parity: int, ashift: int, psize: int, swap: bool
) -> tuple[tuple[int, int], ...]:
    """`_block_runs` as a difference array's entries (member, change): a run adds its value
    where it starts and takes it away where it ends; runs that meet share one entry."""
    steps: dict[int, int] = {}
    for lo, hi, value in _block_runs(width, parity, ashift, psize, swap):
        steps[lo] = steps.get(lo, 0) + value
        steps[hi] = steps.get(hi, 0) - value
    return tuple((at, change) for at, change in sorted(steps.items()) if change)


def _run_shape(width: int, parity: int, ashift: int, psize: int) -> tuple[int, int]:
    """(sectors one block allocates, blocks in a run): blocks are counted until they cover
    8 MiB of the vdev (eight raidz1 swaps) and number at least 64."""
    asize = _geometry(width, parity, ashift, psize).asize
    return asize, max(64, -(-(8 << 20 >> ashift) // asize))


@lru_cache(maxsize=4096)
def raidz_work(width: int, parity: int, ashift: int, psize: int, start: int = 0) -> ColumnWork:
    """Lay blocks of `psize` out back to back from sector `start` (`raidz_columns` for each)
    and count each member's sectors over at least 8 MiB of the vdev (eight 1 MiB swaps).

    Every block is the same pattern (`_block_runs`) turned to start on its first column,
    so each block adds the pattern's few steps to a difference array instead of being laid
    out member by member; `raidz_work_reference` in the tests lays every block out and must
    agree."""
    asize, blocks = _run_shape(width, parity, ashift, psize)
    steps = [_block_steps(width, parity, ashift, psize, swap) for swap in (False, True)]
    diff = [0] * (2 * width + 1)
    plain, swapped = steps
    swap_bit = (1 << 20) if parity == 1 else 0  # raidz1 swaps where byte offset bit 20 is set
    offset = start
    for _ in range(blocks):
        first = offset % width
        for at, value in swapped if (offset << ashift) & swap_bit else plain:
            diff[first + at] += value
        offset += asize
    read, written, ios = _unpack(_fold(diff, width, 1))
    s = -(-psize // (1 << ashift))
    return ColumnWork(
        s * blocks, max(read), max(written), blocks, max(ios), sum(written), read, ios,
    )  # fmt: skip


def _fold(diff: list[int], width: int, step: int) -> list[int]:
    """Prefix sums of a difference array over positions 0 … 2W (taken every `step`
    positions), folded onto the W members (position p is member p mod W)."""
    total = [0] * len(diff)
    for i in range(step):
        total[i::step] = accumulate(diff[i::step])
    return [a + b for a, b in zip(total[:width], total[width : 2 * width], strict=True)]


def first_column_step(width: int, parity: int) -> int:
    """Runs of blocks on a real pool start wherever other allocations left off, but only on
    some members: every raidz allocation is a multiple of P + 1 sectors and every metaslab
    starts at a power-of-two offset, so run starts differ by multiples of the largest power
    of two dividing P + 1, and their first columns (start mod W) by multiples of its gcd
    with W: 2 for raidz1 of even width, 2 for raidz3 of width 6, 1 for every raidz2."""
    p1 = parity + 1
    return math.gcd(p1 & -p1, width)


@lru_cache(maxsize=4096)
def raidz_mixed(width: int, parity: int, ashift: int, psize: int) -> tuple[float, float]:
    """(stream read, random read) in disks when runs of blocks start on every first column a
    real pool allows (`first_column_step`), equally often: what a read of a whole working set
    draws on. Correction 8 in docs/planner.md.

    The same sums as `raidz_work` at every such start, in closed form: the starts are every
    multiple g of the step, so block k of all runs lands once on every member of its residue
    class (k × asize) mod g, and each member gets the pattern summed over one class. raidz1's
    swap changes the pattern only where the swapped and plain patterns differ, counted per
    member from the runs of swapped offsets (`_swap_counts`)."""
    step = first_column_step(width, parity)
    asize, blocks = _run_shape(width, parity, ashift, psize)
    per_class = [0] * step  # blocks whose offset k × asize is r modulo the step
    for r in range(step):
        per_class[r] = sum(1 for k in range(step) if k * asize % step == r) * (blocks // step)
    for k in range(blocks - blocks % step, blocks):
        per_class[k * asize % step] += 1
    sums = [0] * step
    for lo, hi, value in _block_runs(width, parity, ashift, psize, False):
        for c in range(step):  # members lo … hi − 1 whose position is c modulo the step
            sums[c] += value * len(range(lo + (c - lo) % step, hi, step))
    by_class = [sum(per_class[r] * sums[(c - r) % step] for r in range(step)) for c in range(step)]
    total = by_class * (width // step)  # member m gets class m mod step
    if parity == 1:
        g = _geometry(width, parity, ashift, psize)
        hits = _swap_counts(width, ashift, asize, blocks, step)
        for j in (0, 1):  # the swap moves work between the first two columns only
            d = _block_value(g, j, True) - _block_value(g, j, False)
            shifted = hits[-j:] + hits[:-j] if j else hits  # member m: hits[(m - j) mod W]
            total = [a + d * h for a, h in zip(total, shifted, strict=True)]
    read = max([v & _MASK for v in total])
    ios = max([v >> (2 * _FIELD) for v in total])
    starts = width // step
    data = starts * blocks * -(-psize // (1 << ashift))
    return data / read, starts * blocks / ios


def _swap_counts(width: int, ashift: int, asize: int, blocks: int, step: int) -> list[int]:
    """How many blocks of all runs (starts 0, g, 2g, … below W) begin on each member at a
    swapped offset (bit 20 set): for block k the starts cover offsets k·asize + [0, W), cut
    where bit 20 changes; each swapped piece adds 1 to every g-th member of a range."""
    mib = (1 << 20) >> ashift  # sectors per MiB: bit 20 flips every `mib` sectors
    diff = [0] * (2 * width + step)
    for k in range(blocks):
        base = k * asize
        for m in range(base // mib, (base + width - 1) // mib + 1):
            if not m & 1:
                continue
            lo = max(base, m * mib) - base
            hi = min(base + width, (m + 1) * mib) - base
            t0, t1 = -(-lo // step) * step, -(-hi // step) * step
            if t0 < t1:
                diff[base % width + t0] += 1
                diff[base % width + t1] -= 1
    return _fold(diff, width, step)


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
    return Speed(sr * disk.read_bps, sw * disk.write_bps, rr * disk.read_iops, rw * disk.write_iops)


def predict(
    layout: Layout,
    disk: DiskSpeed,
    recordsize: int = RECORDSIZE,
    ashift: int = 12,
    outstanding: int | None = None,
) -> Speed:
    """The pool's figures. With `outstanding` (requests in flight: jobs × queue depth), random
    reads are scaled for requests that queue on one member while another idles."""
    total = Speed(0.0, 0.0, 0.0, 0.0)
    for v in layout.vdevs:
        total = total + predict_vdev(v, disk, recordsize, ashift)
    if outstanding is None:
        return total
    members = total.read_iops / disk.read_iops  # independent servers, in disks
    share = queued_share(outstanding, members)
    return Speed(total.read_bps, total.write_bps, total.read_iops * share, total.write_iops)


def queued_share(outstanding: int, members: float) -> float:
    """The fraction of K members' IOPS that Q requests in flight, each sent to a member at
    random, keep busy: Q / (Q + K − 1) (the closed queueing network of K equal queues; Q = 1
    gives one member's IOPS, Q → ∞ all of them)."""
    if outstanding < 1:
        raise ValueError("outstanding must be at least 1")
    return outstanding / (outstanding + max(members, 1.0) - 1)


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
    "requests on K members keep about Q/(Q + K - 1) of them busy (a model, not validated "
    "here): at queue depth 1, one disk's IOPS whatever the layout.",
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
) -> Prediction:
    """`predict` with the basis of each figure: validated, or a model outside its range."""
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
            "model: Q/(Q + K - 1) of K members busy with Q requests in flight, for disks "
            "with a service time; it erred low by up to 1.39 x on rate-capped devices "
            "(docs/planner.md, correction 4)"
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
        Figure(speed.write_iops, COW_WRITES),
        NOTES,
    )


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
