"""Which write model fits the devices a measurement counts (guards/amplification).

A study's pool says what it is (its backend's read-back description: each backend's
`write_model` calls `for_zfs_pool`, `for_btrfs_pool` or `for_md_pool`); for
`poolbench bench` on an existing mount the layout is read from the stack (`for_target`):
ZFS from `zpool status`, `zdb -C` (ashift) and the dataset's recordsize; btrfs from
/sys/fs/btrfs/UUID/allocation/data (the data profile); anything else on one counted device is
written once. The model must describe the devices that are *counted*: an md array counted as
/dev/mdN is one device (1×), its members are the md level.

Where the layout cannot be read the answer is None, with the reason: the device guard then
compares with one copy and says the layout was not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from poolbench import is_digits
from poolbench.guards import amplification as amp
from poolbench.guards.amplification import WriteModel
from poolbench.guards.devices import Target
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import ops

DEFAULT_RECORDSIZE = 128 * 1024
LEAST_ASHIFT = 9  # an unreadable ashift: the least padding, so the model is a lower bound
SYS_FS_BTRFS = Path("/sys/fs/btrfs")
SYS_BLOCK = Path("/sys/class/block")

Found = tuple[WriteModel | None, str]  # the model, or None and why not


def zfs_model(tops: Sequence[tuple[str, int]], ashifts: Sequence[int], recordsize: int | None,
              record_name: str = "recordsize") -> Found:  # fmt: skip
    if not tops:
        return None, "the pool's vdevs could not be read"
    ashift = max(ashifts) if ashifts else LEAST_ASHIFT
    try:
        model = amp.zfs(tops, ashift, recordsize or DEFAULT_RECORDSIZE, record_name)
    except ValueError as exc:
        return None, str(exc)
    if not ashifts:
        model = _relabel(model, f"{model.layout} (ashift unreadable: {LEAST_ASHIFT} assumed, the "
                         "least padding)")  # fmt: skip
    return model, ""


def _relabel(model: WriteModel, layout: str) -> WriteModel:
    return replace(model, layout=layout)


def _int(value: object) -> int | None:
    text = str(value) if value is not None else ""
    return int(text) if is_digits(text) else None


# A study's pool, from what its backend read back after creating it: each backend's
# `write_model` (backends/) calls the one for its stack.
def for_zfs_pool(described: Mapping[str, Any], block: int | None = None) -> Found:
    """A ZFS pool; `block`: the block written (a zvol's volblocksize) in place of the
    dataset's recordsize."""
    tops = [(str(t["kind"]), int(t["width"])) for t in described.get("topology") or []]
    props = described.get("properties") or {}
    rs = block or _int((props.get("recordsize") or {}).get("value"))
    ashifts = [int(a) for a in described.get("vdev_ashift") or []]
    return zfs_model(tops, ashifts, rs, "volblocksize" if block else "recordsize")


def for_btrfs_pool(profile: str, n_devices: int) -> Found:
    """A btrfs file system by its data profile (as read back, else as asked)."""
    try:
        return amp.btrfs(profile, n_devices), ""
    except ValueError as exc:
        return None, str(exc)


def for_md_pool(level: str, raid_devices: int) -> Found:
    """An md array counted by its members: its level and member count (as read back, else
    as asked)."""
    try:
        return amp.md(level, raid_devices), ""
    except ValueError as exc:
        return None, str(exc)


def for_target(target: Target, runner: Runner) -> Found:
    """`poolbench bench`: the layout under a mount, read from the stack."""
    m = target.mount
    if not target.devices:
        return None, target.unverified_reason
    if m.is_zfs:
        return _zfs_of(m.source, runner)
    if m.fstype == "btrfs":
        return btrfs_of(target.devices)
    if len(target.devices) == 1:
        return amp.single_device(f"{m.fstype} on {target.devices[0]}"), ""
    return md_of(target.devices)


def _zfs_of(dataset: str, runner: Runner) -> Found:
    pool = dataset.split("/")[0]
    try:
        status = ops.status(runner, pool)
        got = ops.dataset_props(runner, dataset, ["recordsize"])
    except (CommandError, OSError) as exc:
        return None, f"the pool's layout could not be read ({exc})"
    config = ops.vdev_config_or_none(runner, pool)
    ashifts = config.ashifts if config is not None else []
    rs = _int(got.get("recordsize", {}).get("value"))
    return zfs_model([(t.kind, t.width) for t in status.tops], ashifts, rs)


def btrfs_of(devices: Sequence[str], root: Path = SYS_FS_BTRFS) -> Found:
    """The data profile of the btrfs whose members are `devices` (sysfs allocation dirs)."""
    for fs in root.iterdir() if root.is_dir() else []:
        members = sorted(p.name for p in (fs / "devices").iterdir()) if (
            fs / "devices").is_dir() else []  # fmt: skip
        if not set(devices) & set(members):
            continue
        data = fs / "allocation" / "data"
        profiles = sorted(p.name for p in data.iterdir() if p.is_dir()) if data.is_dir() else []
        if len(profiles) != 1:
            return None, (
                f"btrfs data profiles {', '.join(profiles) or 'none'} found: a conversion in "
                "progress (or an old kernel) leaves the write's copies unknown"
            )
        try:
            return amp.btrfs(profiles[0], len(members)), ""
        except ValueError as exc:
            return None, str(exc)
    return None, "no btrfs in /sys/fs/btrfs holds these devices"


def md_of(devices: Sequence[str], sys_block: Path = SYS_BLOCK) -> Found:
    """Counted devices that are the members of one md array: the array's level."""
    holders = {h.name for d in devices for h in (sys_block / d / "holders").glob("md*")}
    if len(holders) != 1:
        return None, "the counted devices are not the members of one md array"
    md_dir = sys_block / holders.pop() / "md"
    try:
        level = (md_dir / "level").read_text().strip()
        n = int((md_dir / "raid_disks").read_text().strip())
        return amp.md(level, n), ""
    except (OSError, ValueError) as exc:
        return None, f"the md array's level could not be read ({exc})"
