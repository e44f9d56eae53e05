"""Every `zpool`, `zfs` and `zdb` command line poolbench runs, for both dialects.

Pure functions: argument lists in, no processes started. Where the dialects differ, the
function takes `dialect` (OPENZFS or ZFS_FUSE):

* zfs-fuse has no `zpool version`, no `-p` for `zpool list`, no `-H`/`-p` for `zpool get`, no
  `-P` for `zpool status` (it shows the paths given at create anyway) and no `zpool labelclear`;
  `zfs get -Hp` works in both.
* `zpool list -H -o name,guid` is read the same in both (a GUID is an exact integer already).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE


def version() -> list[str]:
    """OpenZFS prints its userland and kernel versions; zfs-fuse does not know the command."""
    return ["zpool", "version"]


def supported_versions() -> list[str]:
    """zfs-fuse's way to tell its pool version ("running ZFS pool version 23")."""
    return ["zpool", "upgrade", "-v"]


def list_pools() -> list[str]:
    """Any answer at all: whether the kernel module or the zfs-fuse daemon is there."""
    return ["zpool", "list", "-H"]


def list_guids() -> list[str]:
    """Name and GUID of every imported pool (read by `parse.parse_pool_list`)."""
    return ["zpool", "list", "-H", "-o", "name,guid"]


def status(name: str, dialect: str = ZFS_FUSE, full_paths: bool = False) -> list[str]:
    """`zpool status POOL`; `full_paths` asks OpenZFS for whole paths of the leaves (-P)."""
    return ["zpool", "status", *(["-P"] if full_paths and dialect == OPENZFS else []), name]


def dedup_status(name: str, dialect: str) -> list[str]:
    """`zpool status -D POOL`: the pool with its dedup table's summary and histogram, the
    summary's sizes exact (-p) where the dialect has it (OpenZFS; zfs-fuse has no -p)."""
    return ["zpool", "status", "-D", *(["-p"] if dialect == OPENZFS else []), name]


def set_property(dataset: str, prop: str, value: str) -> list[str]:
    """`zfs set PROP=VALUE DATASET`."""
    return ["zfs", "set", f"{prop}={value}", dataset]


def create(
    name: str,
    vdev_words: Sequence[str],
    mountpoint: str,
    pool_options: Mapping[str, object],
    fs_options: Mapping[str, object],
    force: bool = False,
    cachefile: str = "none",
) -> list[str]:
    """`zpool create [-f] -o cachefile=... -o ... -O ... -m MOUNTPOINT NAME VDEVS...`.

    A benchmark pool never enters the system's cache file (/etc/zfs/zpool.cache, zfs-fuse's
    /var/lib/zfs/zpool.cache), from which the machine imports pools at boot (and zfs-fuse
    as it starts): `cachefile` is "none" or a file of poolbench's own. Both dialects have the
    property (zfs-fuse's pool version 23 too)."""
    argv = ["zpool", "create", *(["-f"] if force else []), "-o", f"cachefile={cachefile}"]
    for key, value in pool_options.items():
        argv += ["-o", f"{key}={value}"]
    for key, value in fs_options.items():
        argv += ["-O", f"{key}={value}"]
    return [*argv, "-m", mountpoint, name, *vdev_words]


def create_volume(name: str, volsize: int, props: Mapping[str, object]) -> list[str]:
    """`zfs create -s -V SIZE -o ... POOL/VOL`: a sparse zvol (charged as it is written, so
    its space is what the data really costs, and no reservation can exceed a small pool)."""
    argv = ["zfs", "create", "-s", "-V", str(volsize)]
    for key, value in props.items():
        argv += ["-o", f"{key}={value}"]
    return [*argv, name]


def destroy(name: str) -> list[str]:
    return ["zpool", "destroy", name]


def export(name: str) -> list[str]:
    return ["zpool", "export", name]


def import_from(directory: str, pool: str, cachefile: str = "none") -> list[str]:
    """Import `pool` (a name or a GUID) looking only at the devices linked in `directory`;
    the cache file is not kept by the pool across an export: it is given again (create)."""
    return ["zpool", "import", "-o", f"cachefile={cachefile}", "-d", directory, pool]


def offline(name: str, leaf: str) -> list[str]:
    return ["zpool", "offline", name, leaf]


def replace(name: str, old: str, new: str, sequential: bool = False) -> list[str]:
    """-s: OpenZFS's sequential rebuild (restores redundancy fast, checksums checked by the
    scrub that follows); without it a healing resilver, even onto a distributed spare."""
    return ["zpool", "replace", "-f", *(["-s"] if sequential else []), name, old, new]


def attach_wait(name: str, vdev: str, new: str) -> list[str]:
    """OpenZFS >= 2.3: attach `new` to the raidz vdev `vdev` (RAIDZ expansion) and return when
    the reflow is done (-w)."""
    return ["zpool", "attach", "-f", "-w", name, vdev, new]


def sync(name: str) -> list[str]:
    return ["zpool", "sync", name]


def labelclear(device: str) -> list[str]:
    """OpenZFS only: remove the four labels of a device that no imported pool uses."""
    return ["zpool", "labelclear", "-f", device]


def _cache(cachefile: str | None) -> list[str]:
    """zdb finds a pool through a cache file: the system's, or (-U) the pool's own."""
    return ["-U", cachefile] if cachefile and cachefile != "none" else []


def zdb_config(name: str, cachefile: str | None = None) -> list[str]:
    """The pool's configuration (vdev tree with ashift and leaf paths), read by opening the
    pool in zdb's own user-space copy of ZFS: over a second on zfs-fuse."""
    return ["zdb", *_cache(cachefile), "-C", name]


def zdb_cached_configs(cachefile: str | None = None) -> list[str]:
    """Every pool's configuration as the cache file holds it (zdb opens no pool: a tenth of
    a second); each pool's section starts with `NAME:` at the line's start."""
    return ["zdb", *_cache(cachefile), "-C"]


def dataset_props(name: str, props: Sequence[str]) -> list[str]:
    """Exact values (-p), tab separated (-H), with their source (read by `parse.parse_zfs_get`)."""
    return ["zfs", "get", "-Hp", "-o", "property,value,source", ",".join(props), name]


def dataset_value(name: str, prop: str) -> list[str]:
    """One property's exact value alone."""
    return ["zfs", "get", "-Hp", "-o", "value", prop, name]


def iostat_members(name: str) -> list[str]:
    """OpenZFS: per-vdev operations, bandwidth and latencies since import, scripted (-H),
    exact (-p), every vdev (-v), with the latency columns (-l). zfs-fuse has no -l."""
    return ["zpool", "iostat", "-Hvlp", name]


def pool_props_all(name: str, dialect: str) -> list[str]:
    """Every pool property with its source: OpenZFS scripted and exact; zfs-fuse a table with
    a header (both read by `parse.parse_pool_get_all`)."""
    if dialect == OPENZFS:
        return ["zpool", "get", "-Hp", "-o", "property,value,source", "all", name]
    return ["zpool", "get", "all", name]


def pool_prop(name: str, prop: str, dialect: str) -> list[str]:
    """One pool property: OpenZFS prints the exact value alone; zfs-fuse a table with a
    header (read by `parse.parse_pool_get`)."""
    if dialect == OPENZFS:
        return ["zpool", "get", "-Hp", "-o", "value", prop, name]
    return ["zpool", "get", prop, name]
