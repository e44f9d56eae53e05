"""ZFS operations as single calls (zrepl's `internal/zfs` is the model).

Each function builds its command line with `commands`, runs it through the Runner, reads its
`-H -p` output with `parse` and raises the typed error (`errors`) its stderr names; callers
outside this package never see an argument list or a line of output. Where a caller can go on
without the answer (a read-back for the record), the function says so by returning None or an
empty record instead of raising; the argv and the Runner flags are those the callers ran
before, so a dry run prints the same lines.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from poolbench.system.runner import Runner
from poolbench.zfs import commands, parse, pools
from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE
from poolbench.zfs.errors import ZfsCommandError
from poolbench.zfs.parse import DedupTable, IostatRow, PoolStatus, ResilverStatus, ScrubStatus

__all__ = ["PoolCreate", "VdevConfig"]


# -- what is installed --------------------------------------------------------------------------
def installed(runner: Runner, *, with_zfs: bool = False) -> bool:
    """Whether `zpool` (and `zfs`, if asked) is on PATH."""
    if runner.which("zpool") is None:
        return False
    return not with_zfs or runner.which("zfs") is not None


def openzfs_version(runner: Runner) -> str | None:
    """`zpool version`'s first line ("zfs-2.2.3-1") on OpenZFS; None elsewhere (zfs-fuse has no
    such command)."""
    v = runner.run(commands.version(), check=False, mutates=False)
    if v.returncode == 0 and "zfs-" in v.stdout:
        return v.stdout.strip().splitlines()[0]
    return None


def fuse_pool_version(runner: Runner) -> str | None:
    """The pool version zfs-fuse says it runs (`zpool upgrade -v`), or None."""
    up = runner.run(commands.supported_versions(), check=False, mutates=False)
    return parse.parse_fuse_pool_version(up.stdout)


def pool_guids(runner: Runner) -> dict[str, int]:
    """Name -> GUID of every imported pool, asked once (`pools.imported` retries a busy
    daemon); a failure raises its typed error, whose result holds zpool's stderr."""
    return parse.parse_pool_list(pools.read(runner, commands.list_guids()).stdout)


# -- create and import ---------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolCreate:
    """What `zpool create` is asked: the pool's name, its vdev words (kinds, members and class
    words in order), its mountpoint, `-o` pool and `-O` dataset properties, and whether to
    force a layout zpool would refuse as mixed."""

    name: str
    vdev_words: Sequence[str]
    mountpoint: str
    pool_options: Mapping[str, object] = field(default_factory=dict)
    fs_options: Mapping[str, object] = field(default_factory=dict)
    force: bool = False
    # never the system's (commands.create): "none", or a file of poolbench's own, which
    # zdb reads the pool's vdev tree from in a tenth of a second (`zdb -U FILE -C`)
    cachefile: str = "none"

    def argv(self) -> list[str]:
        """The command line, for the record and the tests (create_pool runs it)."""
        return commands.create(self.name, self.vdev_words, self.mountpoint, self.pool_options,
                               self.fs_options, self.force, self.cachefile)  # fmt: skip


def create_pool(runner: Runner, request: PoolCreate) -> None:
    """`zpool create`, retried while a just-labelled device settles (pools.create)."""
    pools.create(runner, request.argv())


def create_volume(runner: Runner, name: str, volsize: int, props: Mapping[str, object]) -> None:
    """A sparse zvol `name` of `volsize` bytes with the given properties."""
    pools.run(runner, commands.create_volume(name, volsize, props))


def import_pool(runner: Runner, directory: str, pool: str, cachefile: str = "none") -> None:
    """Import `pool` (a name or a GUID) from the device links in `directory` only, never
    into the system's cache file (commands.create)."""
    pools.run(runner, commands.import_from(directory, pool, cachefile))


def try_import(runner: Runner, directory: str, pool: str) -> None:
    """Import as above where a failure is no error: the caller looks for the pool after."""
    runner.run(commands.import_from(directory, pool), check=False)


# -- pool operations (the resilver and expansion studies) ---------------------------------------
def offline(runner: Runner, pool: str, leaf: str) -> None:
    pools.run(runner, commands.offline(pool, leaf))


def replace(runner: Runner, pool: str, old: str, new: str, sequential: bool = False) -> None:
    pools.run(runner, commands.replace(pool, old, new, sequential))


def attach_wait(runner: Runner, pool: str, vdev: str, new: str, timeout: float) -> None:
    """RAIDZ expansion: attach `new` to `vdev`, returning when the reflow is done (within
    `timeout` seconds: the reflow rewrites what the pool holds)."""
    pools.run(runner, commands.attach_wait(pool, vdev, new), timeout=timeout)


def sync(runner: Runner, pool: str) -> None:
    """`zpool sync`: write the open transaction group."""
    pools.run(runner, commands.sync(pool))


def sync_if_possible(runner: Runner, pool: str) -> None:
    """`zpool sync` whose failure only means the figures read next may lag one txg."""
    with contextlib.suppress(ZfsCommandError):
        sync(runner, pool)


# -- reading back -------------------------------------------------------------------------------
def status(runner: Runner, pool: str, dialect: str = ZFS_FUSE,
           full_paths: bool = False) -> PoolStatus:  # fmt: skip
    """`zpool status POOL`, read; NoSuchPool if no such pool is imported."""
    return parse.read_status(pools.status_text(runner, pool, dialect, full_paths), pool)


def status_with_paths(runner: Runner, pool: str) -> PoolStatus:
    """`zpool status` with whole leaf paths where the dialect has -P (OpenZFS; without it a
    leaf built from /tmp/links/disk0 prints as "disk0"); zfs-fuse refuses -P and prints the
    path it was given."""
    full = runner.run(commands.status(pool, OPENZFS, full_paths=True), check=False,
                      mutates=False)  # fmt: skip
    if full.returncode == 0:
        return parse.read_status(full.stdout, pool)
    return status(runner, pool)


def status_or_none(runner: Runner, pool: str, dialect: str = ZFS_FUSE) -> PoolStatus | None:
    """`zpool status`, or None if it cannot be read."""
    try:
        return status(runner, pool, dialect)
    except ZfsCommandError:
        return None


def resilver_status(runner: Runner, pool: str) -> ResilverStatus:
    return parse.parse_resilver(pools.status_text(runner, pool))


def scrub_status(runner: Runner, pool: str) -> ScrubStatus:
    return parse.parse_scrub(pools.status_text(runner, pool))


@dataclass(frozen=True)
class VdevConfig:
    """What `zdb -C` says of the vdev tree: each top-level vdev's ashift, every leaf's path."""

    ashifts: list[int]
    paths: list[str]


def vdev_config(runner: Runner, pool: str, cachefile: str | None = None) -> VdevConfig:
    """The pool's vdev tree from its cache file (`zdb [-U FILE] -C`: written when the pool is
    created or imported, so it is the pool as it stands here), else from the pool itself
    (`zdb -C POOL`, ten times slower on zfs-fuse: a second per trial); a failure raises its
    typed error."""
    cached = runner.run(commands.zdb_cached_configs(cachefile), check=False, mutates=False)
    out = parse.zdb_pool_section(cached.stdout, pool) if cached.returncode == 0 else None
    if out is None:
        out = pools.read(runner, commands.zdb_config(pool, cachefile)).stdout
    return VdevConfig(parse.parse_zdb_ashift(out), parse.parse_zdb_paths(out))


def vdev_config_or_none(
    runner: Runner, pool: str, cachefile: str | None = None
) -> VdevConfig | None:
    """`zdb -C`, or None: it needs the pool's cache file, which not every setup keeps."""
    try:
        return vdev_config(runner, pool, cachefile)
    except ZfsCommandError:
        return None


def dataset_props(runner: Runner, dataset: str, props: Sequence[str]) -> dict[str, dict[str, str]]:
    """property -> {"value", "source"} of `dataset` (`zfs get -Hp`); failures raise."""
    return parse.parse_zfs_get(pools.read(runner, commands.dataset_props(dataset, props)).stdout)


def set_property(runner: Runner, dataset: str, prop: str, value: str) -> None:
    """`zfs set PROP=VALUE`; a failure raises its typed error."""
    pools.run(runner, commands.set_property(dataset, prop, value))


def dedup_table(runner: Runner, pool: str, dialect: str, version: str) -> DedupTable:
    """The pool's dedup table as `zpool status -D` reports it; `version` the ZFS's own
    (`zpool version`'s "zfs-2.3.2-1"; zfs-fuse's), since OpenZFS before 2.3 and zfs-fuse
    print its sizes per entry and 2.3 in all. A failure raises its typed error."""
    text = pools.read(runner, commands.dedup_status(pool, dialect)).stdout
    # The kernel module averages them (module/zfs/ddt.c), not the zpool command: after an
    # upgrade not yet rebooted into, its version is not the userland's.
    kernel = _kernel_version(runner) if dialect == OPENZFS else None
    averaged = dialect != OPENZFS or parse.version_tuple(kernel or version) < (2, 3)
    return parse.parse_dedup_table(text, averaged)


def _kernel_version(runner: Runner) -> str | None:
    """`zpool version`'s kernel module line ("zfs-kmod-2.2.7-pve1"), or None."""
    v = runner.run(commands.version(), check=False, mutates=False)
    lines = [x for x in v.stdout.splitlines() if x.startswith("zfs-kmod-")]
    return lines[0] if v.returncode == 0 and lines else None


def dataset_value(runner: Runner, dataset: str, prop: str) -> str | None:
    """One property's exact value, or None if it cannot be read."""
    res = runner.run(commands.dataset_value(dataset, prop), check=False, mutates=False)
    return res.stdout.strip() or None if res.returncode == 0 else None


def pool_prop(runner: Runner, pool: str, prop: str, dialect: str) -> str | None:
    """A pool property in either dialect (zfs-fuse's `zpool get` has neither -H nor -p), or
    None if it cannot be read."""
    res = runner.run(commands.pool_prop(pool, prop, dialect), check=False, mutates=False)
    if res.returncode != 0:
        return None
    return parse.parse_pool_get(res.stdout, pool, prop, dialect)


def pool_props_all(runner: Runner, pool: str, dialect: str) -> dict[str, dict[str, str]]:
    """property -> {value, source} of every pool property, or {} if they cannot be read."""
    res = runner.run(commands.pool_props_all(pool, dialect), check=False, mutates=False)
    return parse.parse_pool_get_all(res.stdout, pool, dialect) if res.returncode == 0 else {}


def iostat_members(runner: Runner, pool: str) -> list[IostatRow] | None:
    """OpenZFS: every vdev's `zpool iostat -Hvlp` figures since import, or None if unread."""
    res = runner.run(commands.iostat_members(pool), check=False, mutates=False)
    return list(parse.parse_iostat(res.stdout)) if res.returncode == 0 else None


def class_alloc(
    runner: Runner, pool: str, dialect: str, iostat: list[IostatRow]
) -> tuple[dict[str, int], dict[str, int]]:
    """Bytes allocated, and free, on the data vdevs and each allocation class, from an iostat
    snapshot and `zpool status`'s sections; empty if the status cannot be read."""
    st = status_or_none(runner, pool, dialect)
    if st is None:
        return {}, {}
    return parse.class_alloc(st, iostat), parse.class_alloc(st, iostat, "free")


def leaf_paths(
    runner: Runner, pool: str, dialect: str, shown: PoolStatus, config: VdevConfig | None
) -> tuple[list[str], dict[str, list[str]]]:
    """Absolute paths of the data vdevs' leaf devices (OpenZFS: the partitions it made on
    disks), and of each class section's (logs, cache, spares, special, dedup). `shown` (a
    `zpool status` without -P) and `config` are what the caller has read already; with
    `config` None (zdb -C failed) zdb -C is run here, and its failure raised."""
    if dialect == OPENZFS:
        st = status(runner, pool, OPENZFS, full_paths=True)
        data = [leaf for t in st.tops for leaf in t.leaves]
        return data, {k: [parse.leaf_path(w) for w in v] for k, v in st.class_leaves.items()}
    # zfs-fuse: zdb -C names the leaves of the vdev tree (data and log vdevs); the status
    # sections tell the class ones apart (and name the spares and cache devices)
    sections = {k: [parse.leaf_path(w) for w in v] for k, v in shown.class_leaves.items()}
    in_class = {os.path.realpath(p) for v in sections.values() for p in v}
    paths = (config or vdev_config(runner, pool)).paths
    return [p for p in paths if os.path.realpath(p) not in in_class], sections
