"""Space for the user's data on a layout, block by block, as ZFS allocates it (pure).

From a file-size histogram (planner/filesizes.py) and how the data is written (recordsize,
compression, declared compressibility) to the blocks ZFS writes, then to what each block
costs on each layout with capacity.psize_to_asize (raidz parity and padding, dRAID rows,
sector rounding):

- a file of at most one record is one block of its size rounded up to 512 B (zfs_write grows
  a single block to the file's end, dnode_set_blksz rounds it to SPA_MINBLOCKSIZE);
- a longer file is whole records, its last one included: with compression off the last
  record is written whole, zeros and all; with compression on its zeros compress away, so it
  costs about the bytes it holds, rounded to the sector;
- compression (zio_compress_data) keeps a compressed block only when it saves at least 1/8
  of it (d_len = s_len − s_len/8); incompressible data then stays as is, and a compressor's
  expansion on it (lzjb 9/8, lz4 about 1/255) is what decides a tail block's size; a block
  whose compressed form fits in 112 bytes is embedded in its block pointer (embedded_data,
  ZoL 0.6.4 on) and allocates nothing;
- metadata is a model, block by block, each with two copies (dmu_write_policy() gives
  metadata one copy more than data): dnodes of 512 B, 32 to a 16K block that compresses
  to a fifth; one directory block per directory holding its entries (64 B each in a
  micro-ZAP, compressing to 0.3 of that); for each file of more than one block, indirect
  blocks of up to `indirect_bps` 128-byte block pointers, compressing to 0.55. The
  ratios were read off zfs-fuse pools (tests/test_dataspace_zfsfuse.py: mirrors at ashift
  9 give the bytes, at ashift 12 the block count); a block histogram from zdb holds the
  pool's metadata blocks already, so none is added to it.

Several top-level vdevs share the blocks in proportion to their space (the allocator keeps
them equally full in a new pool). Figures are both `zpool list` ALLOC (asize, one side of a
mirror), raw bytes on the disks, and what `zfs list` USED charges (deflated asize).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from poolbench.planner.capacity import PoolPlan, VdevPlan
from poolbench.planner.filesizes import UNIT, FileSizes
from poolbench.planner.space import deflated, psize_to_asize

KiB = 1024
SMALL_FILE = 16 * KiB  # "files under 16K": where raidz padding hurts most
EMBEDDED_MAX = 112  # BPE_PAYLOAD_SIZE
# The metadata model (see the module text); measured against zfs-fuse pools in
# tests/test_dataspace_zfsfuse.py and docs/planner.md.
DNODE_BYTES = 512
DNODES_PER_BLOCK = 32  # 16K dnode blocks (DNODE_BLOCK_SHIFT 14)
DNODE_COMPRESSION = 0.2
DIRENT_BYTES = 64  # one micro-ZAP entry (mzap_ent_phys_t)
DIRENT_COMPRESSION = 0.3
BLKPTR_BYTES = 128
BLKPTR_COMPRESSION = 0.55
METADATA_COPIES = 2


@dataclass(frozen=True)
class WriteModel:
    """How the data is written: the dataset's recordsize and compression."""

    recordsize: int = 128 * KiB
    compression: bool = True
    compressibility: float = 0.0  # fraction of the data that compresses away (declared)
    expansion: float = 1.0 + 1 / 255  # output/input of the compressor on random data (lz4)
    embedded: bool = True  # embedded_data (ZoL 0.6.4 on; not pool v23)
    indirect_bps: int = 1024  # block pointers per indirect block: 128K (OpenZFS), 16K: 128

    def psize(self, lsize: int, data: int) -> int:
        """A block of `lsize` logical bytes holding `data` bytes (the rest zeros) after
        compression: zio_compress_data()'s keep-it-only-if-it-saves-1/8 rule."""
        if not self.compression:
            return lsize
        est = -(-int(data * (1.0 - self.compressibility) * self.expansion * 1000) // 1000)
        if self.embedded and est <= EMBEDDED_MAX:
            return 0
        psize = max(UNIT, -(-est // UNIT) * UNIT)
        return lsize if psize > lsize - (lsize >> 3) else psize


@dataclass(frozen=True)
class Blocks:
    """The data's blocks: psize → count, split by whether they belong to a small file."""

    small: Counter[int]  # blocks of files under SMALL_FILE (by psize)
    large: Counter[int]
    indirect: Counter[int]  # indirect blocks by psize (files of more than one block)
    objects: int  # files and directories (0 for zdb's blocks)
    dirs: int

    def all(self) -> Counter[int]:
        return self.small + self.large

    @property
    def psize_bytes(self) -> int:
        return sum(p * c for p, c in self.all().items())


def blocks_of(h: FileSizes, m: WriteModel) -> Blocks:
    """The blocks a histogram becomes under a write model (a block histogram from zdb is
    taken as it is: those are the pool's blocks already)."""
    small: Counter[int] = Counter()
    large: Counter[int] = Counter()
    indirect: Counter[int] = Counter()
    rs = m.recordsize
    for u, c in h.counts.items():
        size = u * UNIT
        if size == 0 or c == 0:
            continue
        to = small if size < SMALL_FILE else large
        if h.kind == "blocks" or size <= rs:
            to[size if h.kind == "blocks" else m.psize(size, size)] += c
            continue
        n = -(-size // rs)
        to[m.psize(rs, rs)] += c * (n - 1)
        to[m.psize(rs, size - (n - 1) * rs)] += c
        full, rest = divmod(n, m.indirect_bps)
        indirect[_bp_block(m.indirect_bps)] += c * full
        if rest:
            indirect[_bp_block(rest)] += c
    small.pop(0, None)  # embedded: no allocation
    large.pop(0, None)
    objects = h.files + h.notes.dirs if h.kind == "files" else 0
    return Blocks(small, large, indirect, objects, h.notes.dirs if h.kind == "files" else 0)


def _compressed(nbytes: float) -> int:
    return max(UNIT, -(-int(nbytes) // UNIT) * UNIT)


def _bp_block(pointers: int) -> int:
    """psize of an indirect block holding this many block pointers."""
    return _compressed(pointers * BLKPTR_BYTES * BLKPTR_COMPRESSION)


@dataclass(frozen=True)
class DataSpace:
    """One layout's cost for the data. asize: `zpool list` ALLOC; raw: bytes on the disks;
    charged: `zfs list` USED (deflated asize); all include the metadata estimate."""

    plan: PoolPlan
    model: WriteModel
    logical_bytes: int
    psize_bytes: int
    data_asize: int
    data_raw: int
    data_charged: int
    metadata_asize: int
    metadata_charged: int
    small_overhead_asize: int  # parity + padding + rounding of small files' blocks

    @property
    def asize(self) -> int:
        return self.data_asize + self.metadata_asize

    @property
    def charged(self) -> int:
        return self.data_charged + self.metadata_charged

    @property
    def fits(self) -> bool:
        return self.charged <= self.plan.usable_bytes

    @property
    def small_overhead_share(self) -> float:
        """Share of the allocated space that is small files' parity, padding and rounding."""
        return self.small_overhead_asize / self.asize if self.asize else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "layout": self.plan.layout.spec(),
            "ashift": self.plan.ashift,
            "recordsize": self.model.recordsize,
            "compression": self.model.compression,
            "compressibility": self.model.compressibility,
            "logical_bytes": self.logical_bytes,
            "psize_bytes": self.psize_bytes,
            "alloc_bytes": self.asize,
            "data_alloc_bytes": self.data_asize,
            "raw_bytes": round(self.data_raw + self.metadata_asize * _copies(self.plan)),
            "charged_bytes": self.charged,
            "metadata_charged_bytes": self.metadata_charged,
            "usable_bytes": self.plan.usable_bytes,
            "fits": self.fits,
            "small_file_overhead_share": round(self.small_overhead_share, 6),
        }


def _copies(plan: PoolPlan) -> float:
    """Raw bytes per allocated byte, weighted by the vdevs' shares (a mirror's width)."""
    shares = _shares(plan)
    return sum(s * (v.spec.width if v.spec.kind == "mirror" else 1) for v, s in shares)


def _shares(plan: PoolPlan) -> list[tuple[VdevPlan, float]]:
    """Each distinct top-level vdev and its share of the data (identical vdevs, as a wide
    stripe of mirrors has, are priced once)."""
    total = sum(v.space for v in plan.vdevs)
    shares: dict[tuple[object, ...], tuple[VdevPlan, float]] = {}
    for v in plan.vdevs:
        key = (v.spec.kind, v.spec.width, v.spec.parity, v.spec.draid_data, v.deflate_ratio)
        first, share = shares.get(key, (v, 0.0))
        shares[key] = (first, share + v.space / total)
    return list(shares.values())


def _cost(plan: PoolPlan, blocks: Counter[int]) -> tuple[int, int, int]:
    """(asize, raw, charged) of these blocks spread over the pool's data vdevs."""
    asize = raw = charged = 0.0
    for v, share in _shares(plan):
        copies = v.spec.width if v.spec.kind == "mirror" else 1
        for psize, count in blocks.items():
            one = psize_to_asize(v.spec, psize, plan.ashift)
            asize += one * count * share
            raw += one * count * share * copies
            charged += deflated(one, v.deflate_ratio) * count * share
    return round(asize), round(raw), round(charged)


def alloc_on_data_vdevs(plan: PoolPlan, blocks: Counter[int]) -> int:
    """`zpool list` ALLOC of these blocks (psize → count) on the pool's data vdevs."""
    return _cost(plan, blocks)[0]


def metadata_blocks(h: FileSizes, b: Blocks, m: WriteModel) -> Counter[int]:
    """The metadata's blocks by psize, every copy counted (the model in the module text)."""
    if b.objects == 0:
        return Counter()
    out: Counter[int] = Counter(b.indirect)
    out[_compressed(DNODE_BYTES * DNODES_PER_BLOCK * DNODE_COMPRESSION)] += -(
        -b.objects // DNODES_PER_BLOCK
    )
    if b.dirs:
        per_dir = b.objects / b.dirs  # entries: every file and directory is in one
        out[_compressed(per_dir * DIRENT_BYTES * DIRENT_COMPRESSION)] += b.dirs
    return Counter({p: c * METADATA_COPIES for p, c in out.items()})


def data_space(plan: PoolPlan, h: FileSizes, m: WriteModel) -> DataSpace:
    """The data's space on one planned pool."""
    b = blocks_of(h, m)
    d_asize, d_raw, d_charged = _cost(plan, b.all())
    if h.kind == "blocks" or any(c.cls == "special" for c in plan.classes):
        # zdb's histogram counts the metadata among its blocks; a special vdev takes it all
        md_asize = md_charged = 0
    else:
        md_asize, _, md_charged = _cost(plan, metadata_blocks(h, b, m))
    s_asize = _cost(plan, b.small)[0]
    s_psize = sum(p * c for p, c in b.small.items())
    return DataSpace(
        plan=plan,
        model=m,
        logical_bytes=h.logical_bytes,
        psize_bytes=b.psize_bytes,
        data_asize=d_asize,
        data_raw=d_raw,
        data_charged=d_charged,
        metadata_asize=md_asize,
        metadata_charged=md_charged,
        small_overhead_asize=max(0, s_asize - s_psize),
    )
