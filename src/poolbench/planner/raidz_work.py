"""The raidz block layout's fast path: the work each member does for a run of blocks (pure).

planner/performance.py's model counts, for a raidz vdev, the sectors each member reads and
writes for blocks of the record size laid out back to back as vdev_raidz_map_alloc does
(parity columns, the padding that rounds a block up to P + 1 sectors, raidz1's swap at
1 MiB). Laying every block out with `raidz_columns` is exact but slow, so each block's
pattern is summed as runs and the mixed starts in closed form; tests/test_planner_raidz_fast.py
checks both against the block-by-block count. performance.py re-exports every name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate


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
