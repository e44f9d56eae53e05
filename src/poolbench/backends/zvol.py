"""A zvol as the measured target (OpenZFS): what a study configuration asks for, the sparse
volume made in the trial's pool, its device node, and the space it is charged.

A configuration measures a zvol when its `target` level is `zvol`. The volume's block is its
`volblocksize` level, else its `recordsize` level (so one study compares a dataset and a zvol
at the same block size), else ZFS's default (read back and recorded). The volume is sparse
(`zfs create -s`): it is charged as it is written, so `referenced` after the working set is
laid out is what those bytes really cost on the layout, which the planner's block table
predicts. It lives and dies with the pool (`zpool destroy` takes it along).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import NotRequired, TypedDict

from poolbench import capabilities, is_digits
from poolbench.backends._common import wait_for
from poolbench.errors import PoolbenchError, UsageError
from poolbench.system.runner import Runner
from poolbench.zfs import ops
from poolbench.zfs.errors import ZfsCommandError

TARGETS = ("dataset", "zvol")
VOLUME_NAME = "pbvol"
DEV_ZVOL = Path("/dev/zvol")
MIN_BLOCK = 512
# A power of two up to 128K, or up to zfs_max_recordsize (16M) with large_blocks, as
# OpenZFS 2.2+ makes it (2.3.2 made 256K and 1M volumes in the guest).
MAX_BLOCK_OLD, MAX_BLOCK_LARGE = 128 * 1024, 16 << 20
NODE_WAIT_S = 30.0  # udev makes /dev/zvol/POOL/VOL after the volume's minor appears
SPACE_PROPS = ("volsize", "volblocksize", "referenced", "logicalreferenced", "used")
MiB = 1 << 20


def wanted(volume: Mapping[str, str]) -> bool:
    return volume.get("target", "dataset") == "zvol"


def block_asked(volume: Mapping[str, str], fs_options: Mapping[str, str]) -> str | None:
    """The volblocksize to ask for: the configuration's volblocksize, else its recordsize;
    None: ZFS's default."""
    return volume.get("volblocksize") or fs_options.get("recordsize")


def _parse_block(text: str) -> int:
    from poolbench.units import parse_size

    try:
        return parse_size(text)
    except (UsageError, ValueError):
        return -1


def validate(volume: Mapping[str, str], fs_options: Mapping[str, str], fuse: bool,
             version: str, max_block: int = MAX_BLOCK_OLD) -> None:  # fmt: skip
    """Refuse, before anything exists, a target ZFS cannot give."""
    target = volume.get("target", "dataset")
    if target not in TARGETS:
        raise UsageError(
            f"target={target} is not a target poolbench knows.",
            "Use target = dataset (files on the pool's dataset) or zvol (a block device).",
        )
    if "volblocksize" in volume and target != "zvol":
        raise UsageError(
            f"volblocksize={volume['volblocksize']} in a configuration that measures a "
            "dataset: volblocksize is a zvol's block size.",
            "Add target = zvol to those configurations (the volblocksize study does), or "
            "use recordsize for a dataset.",
        )
    if target != "zvol":
        return
    if fuse:
        raise capabilities.unsupported(
            "zvols",
            f"target=zvol: {version} has no zvols (ZFS volumes are not part of zfs-fuse).",
            "Measure datasets on zfs-fuse, or run the zvol configurations on OpenZFS (the "
            "guest tier: vm/run-openzfs-tier.sh).",
        )
    block = block_asked(volume, fs_options)
    n = _parse_block(block) if block else MIN_BLOCK
    if n < MIN_BLOCK or n > max_block or n & (n - 1):
        which = "volblocksize" if "volblocksize" in volume else "recordsize (the zvol's block)"
        raise UsageError(
            f"{which}={block} is not a zvol block size on {version}: it must be a power of "
            f"two from 512 to {max_block >> 10}K.",
            "Use e.g. 8K, 16K (OpenZFS 2.2's default) or 64K.",
        )


def volsize_for(working_set: int, block: int) -> int:
    """A volume that holds the working set and one more record (the backward reads' tail),
    in whole MiB and whole blocks."""
    unit = max(MiB, block)
    need = working_set + max(MiB, block)
    return -(-need // unit) * unit


def dataset(pool_name: str) -> str:
    return f"{pool_name}/{VOLUME_NAME}"


def node(pool_name: str) -> Path:
    """The volume's stable device name; udev points it at /dev/zdN."""
    return DEV_ZVOL / dataset(pool_name)


class VolumeMade(TypedDict):
    """What `create` made, as ZFS reports it (recorded in the pool's description, `zvol`); a
    dry run knows only what it asked for."""

    path: str  # the stable device name
    volsize: int
    asked_volblocksize: str
    device: NotRequired[str]  # the zdN it points at
    volblocksize: NotRequired[int | None]
    sparse: NotRequired[bool]


def create(runner: Runner, pool_name: str, volume: Mapping[str, str],
           fs_options: Mapping[str, str], working_set: int) -> VolumeMade:  # fmt: skip
    """Make the sparse volume, wait for its device node, and read back what ZFS made."""
    block = block_asked(volume, fs_options)
    props = {"volblocksize": block} if block else {}
    size = volsize_for(working_set, _parse_block(block) if block else 128 * 1024)
    ops.create_volume(runner, dataset(pool_name), size, props)
    path = node(pool_name)
    if runner.dry_run:
        return {"path": str(path), "volsize": size, "asked_volblocksize": block or "default"}
    if not wait_for(path.exists, NODE_WAIT_S, 0.1):
        raise PoolbenchError(
            f"The zvol {dataset(pool_name)} was created, but its device {path} did not appear "
            f"within {NODE_WAIT_S:.0f} s.",
            "Is udev running (the zvol rules of zfsutils make /dev/zvol/...)? The pool and "
            "the volume are removed with the trial.",
        )
    got = space(runner, pool_name)
    return {
        "path": str(path),
        "device": path.resolve().name,
        "volsize": got.get("volsize", size),
        "volblocksize": got.get("volblocksize"),
        "asked_volblocksize": block or "default",
        "sparse": True,
    }


def space(runner: Runner, pool_name: str) -> dict[str, int]:
    """The volume's size, block and space as ZFS reports them (bytes); {} if unreadable."""
    try:
        props = ops.dataset_props(runner, dataset(pool_name), SPACE_PROPS)
    except ZfsCommandError:
        return {}
    out: dict[str, int] = {}
    for key in SPACE_PROPS:
        value = str((props.get(key) or {}).get("value", ""))
        if is_digits(value):
            out[key] = int(value)
    return out


def node_back(pool_name: str) -> bool:
    """After an import: wait until the volume's device node is there again."""
    return wait_for(node(pool_name).exists, NODE_WAIT_S, 0.1)
