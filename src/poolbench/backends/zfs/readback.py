"""A ZFS pool read back after `zpool create`, and every difference from what was asked.

The vdev tree (`zpool status`), the ashift of every top-level vdev (`zdb -C`), the dataset
properties (`zfs get -Hp`), the mount: a silently different ashift is exactly the mistake
users make, so `problems` lists it rather than trusting the command line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TypedDict

from poolbench import is_digits
from poolbench.backends._common import block_names, same_or_partition_of
from poolbench.backends.base import Availability, PoolSpec, Vdev, parse_classes, parse_topology
from poolbench.backends.zfs.validate import parse_size
from poolbench.system.runner import Runner
from poolbench.zfs import ops, pools
from poolbench.zfs.dialect import OPENZFS

# `zpool status` section header of each class word
_SECTION = {"log": "logs", "spare": "spares", "cache": "cache", "special": "special",
            "dedup": "dedup"}  # fmt: skip


class TopJson(TypedDict):
    kind: str  # stripe | mirror | raidz1..3 | draidP:Dd:Cc:Ss
    width: int
    leaves: list[str]


class ZfsDescription(TypedDict):
    """The pool as it described itself after `zpool create` (a ZFS pool's `Pool.described`,
    stored as the guards' `pool` section, where the backend adds `unused_devices`)."""

    dialect: str
    zfs_version: str
    guid: int | None
    health: str
    topology: list[TopJson]
    layout: str
    leaves: list[str]
    class_leaves: dict[str, list[str]]  # `zpool status` section (logs, special...) → leaves
    usable_bytes: int | None
    vdev_ashift: list[int]
    ashift_source: str
    pool_ashift_property: str | None
    pool_version: str | None
    properties: dict[str, dict[str, str]]  # property → {value, source} (`zfs get -Hp`)


def expected_shape(vdevs: tuple[Vdev, ...]) -> list[tuple[str, int]]:
    """What `zpool status` should show for a layout: (kind, width) per top-level vdev."""
    shape: list[tuple[str, int]] = []
    for v in vdevs:
        if v.kind == "stripe":
            shape += [("stripe", 1)] * v.width
        elif v.kind.startswith("draid"):
            shape.append((f"{v.kind}:{v.draid_data}d:{v.width}c:{v.draid_spares}s", v.width))
        else:
            shape.append((v.kind, v.width))
    return shape


def shape_text(shape: list[tuple[str, int]]) -> str:
    out: list[str] = []
    i = 0
    while i < len(shape):
        kind, width = shape[i]
        if kind == "stripe":
            n = 1
            while i + n < len(shape) and shape[i + n][0] == "stripe":
                n += 1
            out.append(f"stripe:{n}")
            i += n
            continue
        out.append(f"{kind}:{width}" if not kind.startswith("draid") else kind)
        i += 1
    return "+".join(out)


def describe(
    runner: Runner,
    name: str,
    a: Availability,
    config: ops.VdevConfig | None = None,
    cachefile: str | None = None,
) -> ZfsDescription:
    """Everything the pool says about itself, for verify() and the record. `config`: the
    vdev tree `zdb -C` gave moments ago for this very pool (read again when None, from the
    pool's own `cachefile`)."""
    status = ops.status(runner, name)
    props = ["recordsize", "compression", "atime", "primarycache", "mountpoint", "mounted"]
    props += ["compressratio", "used", "available", "logbias"]
    props += ["sync", "special_small_blocks"] if a.dialect == OPENZFS else []
    values = ops.dataset_props(runner, name, props)
    config = config or ops.vdev_config_or_none(runner, name, cachefile)
    ashifts = config.ashifts if config is not None else []
    pool_ashift = ops.pool_prop(runner, name, "ashift", a.dialect)
    used, avail = values.get("used", {}).get("value"), values.get("available", {}).get("value")
    leaves, class_leaves = ops.leaf_paths(runner, name, a.dialect, status, config)
    return {
        "dialect": a.dialect,
        "zfs_version": a.version,
        "guid": pools.pool_guid(runner, name),
        "health": status.health,
        "topology": [
            {"kind": t.kind, "width": t.width, "leaves": list(t.leaves)} for t in status.tops
        ],
        "layout": shape_text([(t.kind, t.width) for t in status.tops]),
        "leaves": leaves,
        "class_leaves": class_leaves,
        # USED + AVAIL of the root dataset: what `zfs list` offers (the planner's figure).
        "usable_bytes": int(used) + int(avail)
        if used and avail and is_digits(used) and is_digits(avail)
        else None,
        "vdev_ashift": ashifts,
        "ashift_source": "zdb -C" if ashifts else "",
        "pool_ashift_property": pool_ashift,
        "pool_version": ops.pool_prop(runner, name, "version", a.dialect),
        "properties": values,
    }


def problems(spec: PoolSpec, d: ZfsDescription, mountpoint: Path, mounted: bool) -> list[str]:
    """Every difference between `spec` and the pool `d` describes (`mounted`: whether the
    mount table shows the dataset at `mountpoint`)."""
    found = _topology_problems(spec, d)
    asked = spec.pool_options.get("ashift")
    if asked is not None:
        found += _ashift_problems(asked, d["vdev_ashift"])
    props = d["properties"]
    found += _property_problems(spec, props, mountpoint)
    if props.get("mounted", {}).get("value") != "yes" or not mounted:
        found.append(f"the pool's dataset is not mounted at {mountpoint}")
    if d["health"] != "ONLINE":
        found.append(f"pool health is {d['health'] or 'unknown'}, not ONLINE")
    return found


def _topology_problems(spec: PoolSpec, d: ZfsDescription) -> list[str]:
    """The read-back vdev shape and member devices against the asked layout."""
    found: list[str] = []
    vdevs = parse_topology(spec.layout, len(spec.devices))
    want = expected_shape(vdevs)
    got = [(t["kind"], t["width"]) for t in d["topology"]]
    if got != want:
        found.append(f"layout is {shape_text(got) or 'nothing'}, not {shape_text(want)} as asked")
    members = [os.path.realpath(m) for m in spec.devices[: sum(v.width for v in vdevs)]]
    leaves = [os.path.realpath(x) for x in d["leaves"]]
    if sorted(leaves) != sorted(members) and not _partitions_of(members, leaves):
        found.append(f"member devices are {leaves}, not {members}")
    return found + _class_problems(spec, d, len(members))


def _class_problems(spec: PoolSpec, d: ZfsDescription, start: int) -> list[str]:
    """Each class section of `zpool status` holds the devices the layout gave it."""
    found: list[str] = []
    want: dict[str, list[str]] = {}
    for cls, v in parse_classes(spec.layout, len(spec.devices)):
        devices = want.setdefault(_SECTION[cls], [])
        devices += [os.path.realpath(m) for m in spec.devices[start : start + v.width]]
        start += v.width
    got = {k: sorted(os.path.realpath(x) for x in v) for k, v in d["class_leaves"].items()}
    for section in sorted(set(want) | set(got)):
        w, g = sorted(want.get(section, [])), got.get(section, [])
        if w != g and not _partitions_of(w, g):
            found.append(f"the {section} devices are {g or 'none'}, not {w or 'none'}")
    return found


def _partitions_of(members: list[str], leaves: list[str]) -> bool:
    if len(members) != len(leaves):
        return False
    return all(any(same_or_partition_of(m, lf) for m in members) for lf in leaves)


def _ashift_problems(asked: str, vdev_ashift: list[int]) -> list[str]:
    """Each top-level vdev's ashift against the asked one (an unreadable ashift is a problem)."""
    found: list[str] = []
    if not vdev_ashift:
        found.append("the vdevs' ashift could not be read back (zdb -C failed)")
    for i, got_a in enumerate(vdev_ashift):
        if got_a != int(asked):
            found.append(
                f"top-level vdev {i} has ashift {got_a}, not {asked} as asked "
                f"({1 << got_a}-byte instead of {1 << int(asked)}-byte blocks)"
            )
    return found


def _property_problems(
    spec: PoolSpec, props: dict[str, dict[str, str]], mountpoint: Path
) -> list[str]:
    """The asked dataset properties and the mountpoint as `zfs get` reports them."""
    found: list[str] = []
    for key, value in spec.fs_options.items():
        have = props.get(key, {}).get("value")
        if not _same_value(key, str(value), have):
            found.append(f"{key} is {have}, not {value} as asked")
    mp = props.get("mountpoint", {}).get("value")
    if mp != str(mountpoint):
        found.append(f"mountpoint is {mp}, not {mountpoint}")
    return found


def _same_value(key: str, asked: str, have: str | None) -> bool:
    if have is None:
        return False
    if key == "special_small_blocks":
        return asked == "0" and have == "0" or asked != "0" and parse_size(asked) == int(have)
    if key == "recordsize":
        try:
            return parse_size(asked) == int(have)
        except ValueError:
            return False
    if key == "compression" and asked in ("gzip", "gzip-6"):
        return have in ("gzip", "gzip-6")
    return asked.lower() == have.lower()


def holding_devices(described: ZfsDescription) -> list[str]:
    """Kernel names of the devices that hold the pool's blocks: the data vdevs', and a special
    or dedup vdev's (metadata and small blocks live there: a cold stat reads them). Not a
    log's (its blocks are copies of what reaches the data vdevs) nor a cache's."""
    sections = described["class_leaves"]
    held = [leaf for c in ("special", "dedup") for leaf in sections.get(c, [])]
    return block_names(list(described["leaves"]) + held)


def all_class_leaves(described: ZfsDescription) -> list[str]:
    return [leaf for leaves in described["class_leaves"].values() for leaf in leaves]
