"""Expected device bytes of a write, from the layout (pure): the write amplification model.

A layout makes its member disks write more than the application: a 3-way mirror writes every
byte three times, a raidz writes parity and padding sectors, a btrfs raid1 two copies. Summing
the members' written bytes and comparing the sum with the application's bytes (what the device
guard did at first) is blind on such layouts: a 3-way mirror where a third of the data reached
the disks sums to 1×. So the guard compares the members' bytes with what this model says the
layout must write, and reports the measured ratio (device bytes ÷ application bytes, the *write
amplification*) as a figure of its own.

The model counts data only, for large sequential writes of incompressible data:

- ZFS: a file is stored in records of `recordsize`; one record costs what the planner's
  allocation rules say (planner/capacity.psize_to_asize: ashift rounding, raidz parity and
  padding, dRAID rows) on each side of a mirror. Several top-level vdevs: ZFS hands out space in
  proportion to each vdev's free space (in allocated bytes), so the mix is weighted so (see
  `_zfs_mix`); the bounds are the cheapest and the dearest vdev.
- btrfs: the data profile's copies (raid1 2, raid1c3 3, raid10 2, dup 2, single and raid0 1);
  raid5/6 full stripes n/(n−1), n/(n−2).
- md: raid1 n copies, raid10 2 (mdadm's default near=2), raid4/5 n/(n−1), raid6 n/(n−2),
  raid0 and linear 1.

What it leaves out, on purpose: metadata (indirect blocks, space maps, uberblocks, btrfs
checksum trees, a filesystem journal), which only ever *adds* bytes — on the small tests here
3–11% of the data (docs/methodology.md, "Write amplification"); and partial-record or partial-
stripe writes (a 4K random write into a 128K record rewrites the record), which add far more.
Hence the asymmetric tolerances of `judge`: a small shortfall is already lost data, an excess
is only noted once it is beyond what metadata explains.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from poolbench.planner.layout import VdevSpec
from poolbench.planner.space import psize_to_asize
from poolbench.units import format_size

# A write whose members absorbed less than (1 − SHORT) × the least the layout must write is
# flagged: metadata only adds bytes, so a shortfall beyond this is data that did not reach the
# disks (measured here: honest writes land at +2…+11% of the model, never below it).
SHORT_TOLERANCE = 0.10
# Beyond (1 + EXCESS) × the dearest modelled cost, the excess is noted: metadata measured on
# 64 MiB writes stays under +11% (3-way mirror, where every metadata block is written three
# times, in ditto copies), while a record or stripe rewritten for a smaller write adds ≥ 2×.
EXCESS_TOLERANCE = 0.25

BTRFS_COPIES = {"single": 1, "raid0": 1, "dup": 2, "raid1": 2, "raid1c3": 3, "raid1c4": 4,
                "raid10": 2}  # fmt: skip
MD_COPIES = {"raid0": 1, "linear": 1, "raid10": 2}
PARITY = {"raid4": 1, "raid5": 1, "raid6": 2}  # md and btrfs parity levels

_DRAID = re.compile(r"^draid(\d)(?::(\d+)d)?(?::(\d+)c)?(?::(\d+)s)?$")


@dataclass(frozen=True)
class WriteModel:
    """What a layout's members must write per application byte (data only)."""

    layout: str  # "raidz2 of 6, ashift 12, recordsize 128K"
    ratio: float  # modelled device bytes per application byte
    low: float  # the cheapest part of the layout (= ratio for one kind of vdev)
    high: float  # the dearest
    basis: str  # how the ratio follows from the layout, in words
    record_bytes: int | None = None  # the unit writes are stored in (ZFS recordsize)
    record_name: str = "recordsize"  # what ZFS calls that unit (a zvol's: volblocksize)

    def expected_bytes(self, app_bytes: int) -> int:
        return round(app_bytes * self.ratio)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def single_device(what: str = "one block device") -> WriteModel:
    """Plain filesystems on one device (ext4, xfs, a dm or md device counted as itself)."""
    return WriteModel(what, 1.0, 1.0, 1.0, "one copy of each byte")


# -- ZFS ------------------------------------------------------------------------------------------
def zfs_vdev(kind: str, width: int) -> VdevSpec:
    """A top-level vdev as `zpool status` names it (stripe, mirror, raidz1..3,
    draidP:Dd:Cc:Ss) → the planner's VdevSpec (device sizes do not matter here)."""
    devices = (1,) * width
    if kind in ("stripe", "disk"):
        return VdevSpec("disk", devices)
    if kind == "mirror":
        return VdevSpec("mirror", devices)
    if kind.startswith("raidz"):
        return VdevSpec("raidz", devices, parity=int(kind[5:] or 1))
    m = _DRAID.match(kind)
    if not m:
        raise ValueError(f"unknown vdev kind {kind!r}")
    parity, spares = int(m.group(1)), int(m.group(4) or 0)
    data = int(m.group(2) or min(8, width - parity - spares))
    return VdevSpec("draid", devices, parity=parity, draid_data=data, draid_spares=spares)


def _cost(spec: VdevSpec, record: int, ashift: int) -> tuple[float, float]:
    """(allocated bytes per data byte on the vdev, copies written of each allocation)."""
    copies = spec.width if spec.kind == "mirror" else 1
    return psize_to_asize(spec, record, ashift) / record, float(copies)


def _zfs_mix(costs: Sequence[tuple[float, float]], weights: Sequence[float]) -> float:
    """Device bytes per application byte over several vdevs. Allocation per vdev follows its
    free (allocatable) space, weight w: A_i ∝ w_i; data stored there A_i / a_i; written
    A_i · copies_i. Ratio = Σ w·c / Σ w/a (one kind of vdev: a · c exactly)."""
    written = sum(w * c for (_, c), w in zip(costs, weights, strict=True))
    stored = sum(w / a for (a, _), w in zip(costs, weights, strict=True))
    return written / stored


def _alloc_weight(spec: VdevSpec) -> float:
    """A fresh vdev's allocatable space in member-disk units (equal disks assumed)."""
    if spec.kind == "raidz":
        return float(spec.width)
    if spec.kind == "draid":
        return float(spec.width - spec.draid_spares)
    return 1.0  # a disk, or a mirror (one side's space)


def zfs(
    tops: Sequence[tuple[str, int]], ashift: int, recordsize: int, record_name: str = "recordsize"
) -> WriteModel:
    """ZFS from its top-level vdevs [(kind, width)], the vdevs' ashift and the dataset's
    recordsize (or, `record_name` "volblocksize", a zvol's block)."""
    specs = [zfs_vdev(k, w) for k, w in tops]
    costs = [_cost(s, recordsize, ashift) for s in specs]
    per = [a * c for a, c in costs]
    ratio = _zfs_mix(costs, [_alloc_weight(s) for s in specs])
    rec = format_size(recordsize)
    layout = f"{_zfs_shape(tops)}, ashift {ashift}, {record_name} {rec}"
    noun = "record" if record_name == "recordsize" else "block"
    first = specs[0]
    if len(set(per)) == 1:
        alloc = format_size(psize_to_asize(first, recordsize, ashift))
        sides = f" on each of {first.width} sides" if first.kind == "mirror" else ""
        basis = f"a {rec} {noun} takes {alloc}{sides}"
    else:
        basis = (
            f"{noun}s cost {min(per):.3g}–{max(per):.3g}× on the different vdevs; mixed in "
            "proportion to each vdev's free space"
        )
    return WriteModel(layout, ratio, min(per), max(per), basis, recordsize, record_name)


def _zfs_shape(tops: Sequence[tuple[str, int]]) -> str:
    if all(k in ("stripe", "disk") for k, _ in tops):
        return f"stripe of {len(tops)}" if len(tops) > 1 else "one disk"
    words = [f"{k} of {w}" for k, w in tops]
    if len(set(words)) == 1 and len(words) > 1:
        return f"{len(words)}× {words[0]}"
    return " + ".join(words)


# -- btrfs and md ---------------------------------------------------------------------------------
def _parity_ratio(level: str, devices: int) -> float:
    data = devices - PARITY[level]
    if data < 1:
        raise ValueError(f"{level} on {devices} devices has no data column")
    return devices / data


def btrfs(profile: str, devices: int) -> WriteModel:
    """btrfs by its data profile on `devices` members."""
    profile = profile.lower()
    if profile in PARITY:
        r = _parity_ratio(profile, devices)
        basis = f"full stripes of {devices - PARITY[profile]} data + {PARITY[profile]} parity"
    elif profile in BTRFS_COPIES:
        r = float(BTRFS_COPIES[profile])
        basis = f"{BTRFS_COPIES[profile]} cop{'y' if r == 1 else 'ies'} of each data block"
    else:
        raise ValueError(f"unknown btrfs profile {profile!r}")
    return WriteModel(f"btrfs {profile} on {devices} devices", r, r, r, basis)


def md(level: str, devices: int) -> WriteModel:
    """md by its level on `devices` members (counted at the members, not at /dev/mdN)."""
    level = level.lower()
    if level in PARITY:
        r = _parity_ratio(level, devices)
        basis = f"full stripes of {devices - PARITY[level]} data + {PARITY[level]} parity"
    elif level == "raid1":
        r, basis = float(devices), f"{devices} copies of each block"
    elif level in MD_COPIES:
        r = float(MD_COPIES[level])
        basis = "2 copies (near=2)" if level == "raid10" else "one copy of each block"
    else:
        raise ValueError(f"unknown md level {level!r}")
    return WriteModel(f"md {level} on {devices} devices", r, r, r, basis)


# -- the verdict ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Verdict:
    """One write measured against the model."""

    amplification: float  # measured device bytes / application bytes
    reached: float  # measured / modelled: the share of the required bytes the disks absorbed
    warning: str  # the disks absorbed clearly less than the layout requires
    note: str  # they wrote much more than modelled

    def as_dict(self) -> dict[str, object]:
        return {"amplification": round(self.amplification, 4), "reached": round(self.reached, 4)}


def judge(
    model: WriteModel,
    app_bytes: int,
    device_bytes: int,
    *,
    compressibility: int = 0,
    io_size: int | None = None,
    excess_why: str = "",
    short_why: str = "",
) -> Verdict:
    """Measured write amplification against the layout's; see SHORT_ and EXCESS_TOLERANCE.
    `short_why`, when the workload knows why its disks may write less (untar on a compressing
    pool), names the cause of a shortfall instead of the list of usual suspects."""
    amp = device_bytes / app_bytes if app_bytes else 0.0
    reached = amp / model.ratio if model.ratio else 0.0
    warning = note = ""
    if app_bytes and amp < model.low * (1 - SHORT_TOLERANCE):
        warning = _short_text(model, amp, reached, compressibility, short_why)
    elif app_bytes and amp > model.high * (1 + EXCESS_TOLERANCE):
        note = _excess_text(model, amp, io_size, excess_why)
    return Verdict(amp, reached, warning, note)


def _short_text(
    model: WriteModel, amp: float, reached: float, compressibility: int, why: str = ""
) -> str:
    cause = why or (
        f"the declared {compressibility}% compressibility let the filesystem shrink it"
        if compressibility
        else "sync=disabled, or a cache that still held the data when the window closed "
        "(an fsync not honoured), or compression or deduplication"
    )
    need = (
        f"{model.layout} must write {model.ratio:.2f}× the application's bytes ({model.basis})"
        if model.ratio != 1.0
        else f"{model.layout} must write each byte once"
    )
    return (
        f"the devices absorbed only {amp:.2f}× the bytes written where {need}: "
        f"{max(0.0, 1 - reached):.0%} of the written data did not reach the disks ({cause}); "
        "the figure is faster than the disks."
    )


def _excess_text(model: WriteModel, amp: float, io_size: int | None, why: str = "") -> str:
    """The note for a write that cost more than its model; `why`, when the workload knows
    the reason (untar: metadata the file bytes do not count), is used as it is."""
    why = why or _likely_excess_cause(model, io_size)
    return (
        f"note: the devices wrote {amp:.2f}× the application's bytes where {model.layout} "
        f"models {model.ratio:.2f}×: {why}."
    )


def _likely_excess_cause(model: WriteModel, io_size: int | None) -> str:
    rec = model.record_bytes
    if rec and io_size and io_size < rec:
        noun = "record" if model.record_name == "recordsize" else "block"
        return (
            f"the {format_size(io_size)} writes are smaller than the {format_size(rec)} "
            f"{model.record_name}, so each rewrites a whole {noun}"
        )
    if model.ratio > 1.0 and PARITY.keys() & set(model.layout.split()) and io_size:
        return "writes smaller than a full stripe make the array read, modify and rewrite it"
    return (
        "more than metadata explains: a recordsize or ashift other than the model's, "
        "partial-stripe writes, or another writer on these disks"
    )
