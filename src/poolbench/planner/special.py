"""Special vdev sizing from the user's data (pure).

With a special vdev, ZFS puts all metadata there and, per dataset, every data block whose
size after compression is at most `special_small_blocks` (spa_preferred_class(), given the
block's allocation size). Small file blocks stop going there once the special class is
75% full (zfs_special_class_metadata_reserve_pct = 25: the last quarter is kept for
metadata); they then land on the data vdevs, where raidz pads them again.

For each level (0 = metadata only, 4K … 128K, and the recordsize), the bytes that land on a
special vdev: each such block's allocation on that vdev (a mirror: rounded to the sector,
per side, as `zpool iostat -v` counts it) plus the metadata estimate of
planner/dataspace.py, beside the special vdev's size when the layout has one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from poolbench.planner.capacity import PoolPlan
from poolbench.planner.dataspace import WriteModel, alloc_on_data_vdevs, blocks_of, metadata_blocks
from poolbench.planner.filesizes import FileSizes
from poolbench.planner.layout import VdevSpec
from poolbench.planner.space import psize_to_asize

KiB = 1024
LEVELS = (0, 4 * KiB, 8 * KiB, 16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB)
METADATA_RESERVE = 0.25  # zfs_special_class_metadata_reserve_pct


@dataclass(frozen=True)
class SpecialLevel:
    level: int  # special_small_blocks
    small_bytes: int  # data blocks that land on the special vdev (its allocation)
    small_blocks: int
    metadata_bytes: int
    space: int | None  # the special vdev's space (`zpool list` SIZE share), if planned

    @property
    def total(self) -> int:
        return self.small_bytes + self.metadata_bytes

    @property
    def fill(self) -> float | None:
        return self.total / self.space if self.space else None

    @property
    def fits(self) -> bool | None:
        """Whether every small block finds room under the 75% line (metadata always does
        while the vdev has space)."""
        if not self.space:
            return None
        return self.total <= self.space * (1 - METADATA_RESERVE)

    def as_dict(self) -> dict[str, object]:
        fill = self.fill
        return {
            "special_small_blocks": self.level,
            "small_block_bytes": self.small_bytes,
            "small_blocks": self.small_blocks,
            "metadata_bytes": self.metadata_bytes,
            "total_bytes": self.total,
            "special_space_bytes": self.space,
            "fill": round(fill, 6) if fill is not None else None,
            "fits_under_75_percent": self.fits,
        }


def _alloc(spec: VdevSpec, blocks: Counter[int], ashift: int) -> int:
    return sum(psize_to_asize(spec, p, ashift) * c for p, c in blocks.items())


def special_levels(plan: PoolPlan, h: FileSizes, m: WriteModel) -> list[SpecialLevel]:
    """Bytes on the special class at each special_small_blocks level. Without a special
    vdev in the layout, the allocation is that of a mirror at the pool's ashift."""
    spec = next((c.spec for c in plan.classes if c.cls == "special"), None)
    space = next((c.plan.space for c in plan.classes if c.cls == "special" and c.plan), None)
    if spec is None:
        spec = VdevSpec("mirror", (1 << 40, 1 << 40))
    b = blocks_of(h, m)
    blocks = b.all()
    md = _alloc(spec, metadata_blocks(h, b, m), plan.ashift)
    levels = sorted({lv for lv in LEVELS if lv <= m.recordsize} | {m.recordsize})
    out = []
    for lv in levels:
        small = Counter({p: c for p, c in blocks.items() if p <= lv})
        out.append(
            SpecialLevel(lv, _alloc(spec, small, plan.ashift), sum(small.values()), md, space)
        )
    return out


def classes_at_level(plan: PoolPlan, h: FileSizes, m: WriteModel, level: int) -> tuple[int, int]:
    """(`zpool list -v` ALLOC of the data vdevs, of the special class) for the data written
    at one special_small_blocks level while the special class is under its 75% line: the
    special class takes the blocks at or under the level and every metadata block, the
    data vdevs the rest (and no metadata)."""
    spec = next((c.spec for c in plan.classes if c.cls == "special"), None)
    spec = spec or VdevSpec("mirror", (1 << 40, 1 << 40))
    b = blocks_of(h, m)
    blocks = b.all()
    small = Counter({p: c for p, c in blocks.items() if p <= level})
    md = _alloc(spec, metadata_blocks(h, b, m), plan.ashift)
    return alloc_on_data_vdevs(plan, blocks - small), _alloc(spec, small, plan.ashift) + md
