"""RAIDZ expansion: what `zpool list` and `zfs list` say after `zpool attach` (pure).

OpenZFS 2.3 grows a raidz vdev by one disk per `zpool attach POOL raidzP-N DISK`. Read in
the 2.3 source (module/zfs/vdev_raidz.c, vdev.c):

- ``vdev_raidz_open``: the vdev's asize is the smallest child's × the children, the new disk
  included once the expansion is done (× children − 1 while it runs); a disk smaller than
  the smallest child is refused by `zpool attach`;
- ``vdev_metaslab_init`` on expansion keeps the metaslab shift chosen at creation and adds
  metaslabs up to asize >> shift; a vdev that now has more than 64 metaslabs and had no
  embedded log metaslab gives one of the new ones to it;
- ``vdev_set_deflate_ratio`` asks ``vdev_psize_to_asize_txg(vd, 128K, txg 0)`` and
  ``vdev_raidz_get_logical_width`` answers txg 0 with the *original* width: the deflate
  ratio, and so what `zfs list` charges per allocated byte, stays the original width's;
- ``vdev_raidz_asize`` sizes a block by the logical width of its birth txg: blocks written
  before the expansion keep their old data:parity ratio (they are moved, not re-striped),
  blocks written after it use the new width.

So `zfs list` AVAIL after an expansion is the grown space deflated at the *old* ratio; a new
128 KiB record then costs less than 128 KiB of that AVAIL, and the pool holds more new data
than AVAIL says (`new_record_bytes` below is how much, for 128 KiB records).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from poolbench.errors import UsageError
from poolbench.planner.capacity import PoolPlan
from poolbench.planner.layout import VdevSpec
from poolbench.planner.space import (
    ZFS_EMBEDDED_SLOG_MIN_MS,
    deflate_ratio,
    deflated,
    device_osize,
    leaf_asize,
    psize_to_asize,
    slop_space,
)

RECORD = 1 << 17  # the 128 KiB block the deflate ratio is defined by


@dataclass(frozen=True)
class ExpansionPlan:
    before: PoolPlan
    vdev_index: int  # which data vdev grows
    spec_after: VdevSpec
    asize: int
    ms_count: int
    space: int  # this vdev's SIZE after
    embedded_log_space: int
    deflate_ratio: int  # the original width's, in 1/512ths
    new_width_ratio: int  # what the ratio would be for a pool created at the new width
    size_bytes: int  # zpool list SIZE after
    dspace: int
    slop_bytes: int
    usable_bytes: int  # AVAIL + USED of the root dataset after, for an empty pool
    record_charge_old: int  # what `zfs list` charges a 128 KiB record written before
    record_charge_new: int  # ... and one written after the expansion

    @property
    def new_record_bytes(self) -> int:
        """128 KiB records written after the expansion that fit in `usable_bytes` of AVAIL:
        each is charged record_charge_new, not 128 KiB."""
        return self.usable_bytes // self.record_charge_new * RECORD

    def as_dict(self) -> dict[str, object]:
        return {
            "vdev_index": self.vdev_index,
            "vdev_after": self.spec_after.spec(),
            "width_before": self.before.vdevs[self.vdev_index].spec.width,
            "width_after": self.spec_after.width,
            "asize_bytes": self.asize,
            "metaslab_count": self.ms_count,
            "size_bytes": self.size_bytes,
            "dspace_bytes": self.dspace,
            "slop_bytes": self.slop_bytes,
            "usable_bytes": self.usable_bytes,
            "deflate_ratio_512ths": self.deflate_ratio,
            "new_width_deflate_ratio_512ths": self.new_width_ratio,
            "record_charge_before_bytes": self.record_charge_old,
            "record_charge_after_bytes": self.record_charge_new,
            "new_128k_record_bytes": self.new_record_bytes,
        }


def plan_expansion(
    plan: PoolPlan, width: int, new_device: int | None = None, vdev_index: int | None = None
) -> ExpansionPlan:
    """`plan`'s pool after attaching disks to one raidz vdev until it is `width` wide.

    `new_device` is each added disk's size (default: the vdev's largest member); `vdev_index`
    the data vdev (default: the only raidz vdev)."""
    index = _raidz_index(plan, vdev_index)
    vp = plan.vdevs[index]
    spec = vp.spec
    if width <= spec.width:
        raise UsageError(
            f"--expand-to {width}: {spec.type_name} is already {spec.width} disks wide.",
            f"Give a width above {spec.width}; each `zpool attach` adds one disk.",
        )
    added = new_device if new_device is not None else max(spec.devices)
    new_leaf = leaf_asize(device_osize(added, plan.whole_disk, plan.rules))
    smallest = min(vp.leaf_asizes)
    if new_leaf < smallest:
        raise UsageError(
            f"A disk of {added} bytes is smaller than the raidz vdev's smallest member; "
            "`zpool attach` refuses it (device is too small).",
            "Attach a disk at least as large as the existing members.",
        )
    after = replace(spec, devices=spec.devices + (added,) * (width - spec.width))
    asize = smallest * width
    count = asize >> vp.ms_shift
    space = count << vp.ms_shift
    elog = vp.embedded_log_space
    if not elog and plan.rules.embedded_slog and count > ZFS_EMBEDDED_SLOG_MIN_MS:
        elog = 1 << vp.ms_shift  # one of the new metaslabs, all the same size
    others = [v for i, v in enumerate(plan.vdevs) if i != index]
    dspace = sum(v.dspace for v in others) + deflated(space - elog, vp.deflate_ratio)
    elog_dspace = sum(v.embedded_log_dspace for v in others) + deflated(elog, vp.deflate_ratio)
    slop = slop_space(dspace, elog_dspace, plan.rules)
    size = plan.size_bytes - vp.space + space
    return ExpansionPlan(
        before=plan,
        vdev_index=index,
        spec_after=after,
        asize=asize,
        ms_count=count,
        space=space,
        embedded_log_space=elog,
        deflate_ratio=vp.deflate_ratio,
        new_width_ratio=deflate_ratio(after, plan.ashift),
        size_bytes=size,
        dspace=dspace,
        slop_bytes=slop,
        usable_bytes=dspace - slop if dspace >= slop else 0,
        record_charge_old=deflated(psize_to_asize(spec, RECORD, plan.ashift), vp.deflate_ratio),
        record_charge_new=deflated(psize_to_asize(after, RECORD, plan.ashift), vp.deflate_ratio),
    )


def _raidz_index(plan: PoolPlan, vdev_index: int | None) -> int:
    raidz = [i for i, v in enumerate(plan.vdevs) if v.spec.kind == "raidz"]
    if vdev_index is not None and vdev_index in raidz:
        return vdev_index
    if vdev_index is None and len(raidz) == 1:
        return raidz[0]
    raise UsageError(
        f"Layout '{plan.layout.spec()}' has {len(raidz)} raidz vdevs; RAIDZ expansion grows "
        "one raidz vdev (`zpool attach` to raidzP-N).",
        "Plan a layout with exactly one raidz data vdev (mirrors grow by attach too, but "
        "their space does not change; dRAID cannot be expanded).",
    )
