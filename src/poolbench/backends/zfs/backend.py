"""`ZfsBackend`: the backend protocol and its ZFS capabilities, over the modules that do each
job (validate, build, read back, cold cache, pool operations)."""

from __future__ import annotations

import os
from pathlib import Path

from poolbench import capabilities, is_digits
from poolbench.backends import fragmentation, planned, zvol
from poolbench.backends._common import mount_at, size_of
from poolbench.backends.base import (
    Availability,
    Pool,
    PoolSpec,
    Vdev,
    parse_classes,
    parse_topology,
)
from poolbench.backends.zfs import coldcache, operations, readback
from poolbench.backends.zfs.validate import member_count, validate
from poolbench.errors import PoolbenchError
from poolbench.guards import geometry
from poolbench.guards.geometry import Found
from poolbench.records.cache_drop import ExportImportDrop
from poolbench.safety.journal import Entry, Journal
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import health, ops, pools
from poolbench.zfs.dialect import OPENZFS, ZFS_FUSE
from poolbench.zfs.parse import IostatRow, ResilverStatus, ScrubStatus, TopVdev


class ZfsBackend:
    name = "zfs"

    def __init__(self, runner: Runner, mountinfo: Path = Path("/proc/self/mountinfo")) -> None:
        self.runner = runner
        self.mountinfo = mountinfo
        self._avail: Availability | None = None
        # pool name → the vdev tree `zdb -C` gave at create(), for verify() right after
        self._created_config: dict[str, ops.VdevConfig | None] = {}
        # pool name → its own cache file (never the system's: see cache_file)
        self._cachefiles: dict[str, str] = {}

    # -- availability ------------------------------------------------------------------------
    def check(self) -> Availability:
        if self._avail is None:
            self._avail = _probe(self.runner)
        return self._avail

    @property
    def dialect(self) -> str:
        return self.check().dialect

    def validate(self, spec: PoolSpec) -> None:
        validate(spec, self.check())

    # -- create ------------------------------------------------------------------------------
    @staticmethod
    def paths(spec: PoolSpec) -> tuple[Path, Path]:
        """(mountpoint, directory of member links used for import)."""
        return spec.mount_root / spec.name, spec.mount_root / f"{spec.name}.members"

    @staticmethod
    def cache_file(spec: PoolSpec) -> Path:
        """The pool's own cache file, beside its mountpoint: a benchmark pool is never in
        the system's (which the machine imports at boot, and zfs-fuse as it starts), so a
        crash or a power cut cannot bring it back; zdb still reads its vdev tree from it in
        a tenth of a second (`zdb -U FILE -C`), where `cachefile=none` would cost a second
        per trial on zfs-fuse (`zdb -e`, which reads the members' labels)."""
        return spec.mount_root / f"{spec.name}.cache"

    def create_request(self, spec: PoolSpec) -> ops.PoolCreate:
        """What `zpool create` is asked for `spec` (validated): the data vdevs, then each
        class word once with its vdevs (zpool refuses a second 'log', 'spare' or 'cache')."""
        vdevs = parse_topology(spec.layout, len(spec.devices))
        classes = parse_classes(spec.layout, len(spec.devices))
        members = list(spec.devices[: member_count(vdevs, classes)])
        mountpoint, _ = self.paths(spec)
        words: list[str] = []
        i = 0
        for v in vdevs:
            words += v.zpool_words() + members[i : i + v.width]
            i += v.width
        placed: list[tuple[str, list[str]]] = []
        for cls, v in classes:
            placed.append((cls, v.zpool_words() + members[i : i + v.width]))
            i += v.width
        for cls in dict.fromkeys(c for c, _ in placed):
            words.append(cls)
            for _, group in (p for p in placed if p[0] == cls):
                words += group
        # special_small_blocks=0 is ZFS's default, and OpenZFS refuses the property, even at
        # 0, on a pool without a special vdev ("property requires a special vdev", 2.3.2)
        fs_options = {
            k: v for k, v in spec.fs_options.items()
            if not (k == "special_small_blocks" and str(v) == "0")
        }  # fmt: skip
        force = self._needs_force(vdevs, members, classes)
        return ops.PoolCreate(spec.name, words, str(mountpoint), spec.pool_options, fs_options,
                              force, str(self.cache_file(spec)))  # fmt: skip

    def create_argv(self, spec: PoolSpec) -> list[str]:
        """The `zpool create` command line for `spec`, as the record and the tests show it."""
        return self.create_request(spec).argv()

    @staticmethod
    def _needs_force(
        vdevs: tuple[Vdev, ...], members: list[str], classes: tuple[tuple[str, Vdev], ...] = ()
    ) -> bool:
        """zpool refuses mixed top-level vdevs (raidz1:3+raidz1:4, raidz+mirror), a special
        or dedup vdev unlike the data vdevs, and members of different sizes unless forced;
        the study asked for exactly that on purpose. (Log vdevs are not compared: zpool's
        replication check skips them.)"""
        alloc = tuple(v for cls, v in classes if cls in ("special", "dedup"))
        shapes = {(v.kind, v.width) for v in vdevs + alloc if v.kind != "stripe"}
        kinds = {v.kind for v in vdevs + alloc}
        sizes = {size_of(m) for m in members} - {None}
        return len(shapes) > 1 or (len(kinds) > 1) or len(sizes) > 1

    def create(self, spec: PoolSpec, journal: Journal) -> Pool:
        self.validate(spec)
        dry = self.runner.dry_run
        vdevs = parse_topology(spec.layout, len(spec.devices))
        classes = parse_classes(spec.layout, len(spec.devices))
        members = list(spec.devices[: member_count(vdevs, classes)])
        mountpoint, link_dir = self.paths(spec)
        request = self.create_request(spec)
        if not spec.mount_root.exists():
            journal.path_created(str(spec.mount_root))
            if not dry:
                spec.mount_root.mkdir(parents=True)
        journal.path_created(str(link_dir))
        if not dry:
            link_dir.mkdir(exist_ok=True)
        journal.path_created(request.cachefile)  # ZFS writes it; removed after the pool
        self._cachefiles[spec.name] = request.cachefile
        journal.dir_created(str(mountpoint))
        journal.pool_intent(spec.name, members, self.dialect)
        ops.create_pool(self.runner, request)
        journal.pool_created(spec.name, members, import_dir=str(link_dir), dialect=self.dialect,
                             spares=list(spec.devices[len(members):]))  # fmt: skip
        unused = list(spec.devices[len(members) :])
        if dry:  # not built: what it would report is planned (backends/planned.py)
            planned_pool = {"dry_run": True, "leaves": members, "unused_devices": unused}
            return Pool(spec, mountpoint, [], planned_pool)
        pool = Pool(spec, mountpoint, [], {})
        # `zdb -C` takes over a second on zfs-fuse (two per trial were a fifth of a small
        # study's time): the vdev tree read here is the one verify() reads back, right after,
        # since nothing can change a pool's vdevs in between.
        config = ops.vdev_config_or_none(self.runner, spec.name, request.cachefile)
        self._created_config[spec.name] = config
        desc = readback.describe(self.runner, spec.name, self.check(), config)
        # log devices too: `zpool import -d` of a pool missing its log refuses
        for leaf in desc["leaves"] + readback.all_class_leaves(desc):
            self.link_member(link_dir, leaf)
        pool.described = {**desc, "unused_devices": unused}
        pool.block_devices = readback.holding_devices(desc)
        return pool

    @staticmethod
    def link_member(link_dir: Path, leaf: str) -> None:
        """A link to a member in the pool's import directory (`zpool import -d`)."""
        link = link_dir / os.path.basename(leaf)
        n = 1
        while link.is_symlink():
            if os.readlink(link) == leaf:
                return
            link = link_dir / f"{os.path.basename(leaf)}.{n}"
            n += 1
        link.symlink_to(leaf)

    # -- read back ---------------------------------------------------------------------------
    def describe(self, name: str) -> readback.ZfsDescription:
        """Everything the pool says about itself, for verify() and the record."""
        return readback.describe(self.runner, name, self.check(), None, self._cachefiles.get(name))

    def write_model(self, pool: Pool, block: int | None) -> Found:
        return geometry.for_zfs_pool(pool.described, block)

    def stopped_answering(self, pool: Pool, failure: PoolbenchError) -> str | None:
        """A pool suspended, counting I/O errors on its own row, or a ZFS that does not
        answer `zpool status` (zfs/health.py)."""
        found = health.probe(self.runner, pool.spec.name, self.dialect)
        return found.describe() if found.stopped_answering else None

    def verify(self, pool: Pool) -> list[str]:
        if self.runner.dry_run:
            return []
        spec = pool.spec
        config = self._created_config.pop(spec.name, None)  # the vdev tree create() read
        try:
            d = readback.describe(self.runner, spec.name, self.check(), config,
                                  self._cachefiles.get(spec.name))  # fmt: skip
        except CommandError as exc:
            return [f"pool {spec.name} cannot be read back: {exc.problem}"]
        pool.described = {**d, "unused_devices": pool.described.get("unused_devices", [])}
        mounted = mount_at(pool.mountpoint, self.mountinfo) is not None
        return readback.problems(spec, d, pool.mountpoint, mounted)

    def drop_cache(self, pool: Pool) -> ExportImportDrop:
        """The ARC emptied by export/import through the member links (coldcache.py)."""
        _, link_dir = self.paths(pool.spec)
        cachefile = str(self.cache_file(pool.spec))  # the import keeps it off the system's
        return coldcache.drop_cache(self.runner, pool, link_dir, self.mountinfo, cachefile)

    # -- a zvol target (SupportsVolumes) -------------------------------------------------------
    def create_volume(self, pool: Pool, working_set: int) -> zvol.VolumeMade:
        """The configuration's zvol (backends/zvol.py), recorded in the pool's description;
        it goes with the pool when the pool is destroyed."""
        made = zvol.create(self.runner, pool.spec.name, pool.spec.volume, pool.spec.fs_options,
                           working_set)  # fmt: skip
        pool.described["zvol"] = made
        return made

    def volume_space(self, pool: Pool) -> dict[str, int]:
        if unbuilt(pool) or not pool.described.get("zvol"):
            return {}
        return zvol.space(self.runner, pool.spec.name)

    # -- pool operations (SupportsDiskReplace, SupportsExpansion) ------------------------------
    def data_vdevs(self, pool: Pool) -> list[TopVdev]:
        if unbuilt(pool):
            return planned.data_vdevs(pool)
        return operations.data_vdevs(self.runner, pool)

    def offline(self, pool: Pool, leaf: str) -> None:
        """Take one member offline (persistently: it stays offline across export/import)."""
        ops.offline(self.runner, pool.spec.name, leaf)

    def replace(self, pool: Pool, old: str, new: str) -> None:
        """Replace member `old` with device `new`; the resilver starts at once. Onto a
        distributed spare it is a sequential rebuild (`-s`), as zed's own spare activation."""
        distributed = not new.startswith("/")  # a dRAID's distributed spare (draid1-0-0)
        ops.replace(self.runner, pool.spec.name, old, new, distributed)
        _, link_dir = self.paths(pool.spec)
        if not self.runner.dry_run and not distributed:
            self.link_member(link_dir, new)

    def resilver_status(self, pool: Pool) -> ResilverStatus:
        return ops.resilver_status(self.runner, pool.spec.name)

    def wait_resilver(self, pool: Pool, timeout: float = 3600.0) -> ResilverStatus:
        if unbuilt(pool):  # nothing to wait for, nothing resilvered
            return ResilverStatus(True, False, None, "(dry run)")
        return operations.wait_resilver(self.runner, pool, timeout)

    def wait_scrub(self, pool: Pool, timeout: float = 3600.0, start: float = 30.0) -> ScrubStatus:
        if unbuilt(pool):
            return ScrubStatus(False, False, "(dry run)")
        return operations.wait_scrub(self.runner, pool, timeout, start)

    def expand(self, pool: Pool, vdev: str, new: str) -> tuple[float, int | None]:
        """Attach `new` to the raidz vdev `vdev` and wait for the reflow (OpenZFS >= 2.3);
        returns the seconds `zpool attach -w` took and USED + AVAIL of the root dataset
        afterwards."""
        a = self.check()
        if not operations.expansion_supported(a.version):
            raise capabilities.unsupported(
                "raidz-expansion",
                f"RAIDZ expansion needs OpenZFS 2.3 or later; this ZFS is {a.version}.",
                "Drop the expand workload, or run it on OpenZFS >= 2.3 (the guest tier: "
                "vm/run-openzfs-tier.sh).",
            )
        seconds = operations.attach(self.runner, pool, vdev, new)
        _, link_dir = self.paths(pool.spec)
        if not self.runner.dry_run:
            self.link_member(link_dir, new)
        operations.settle_expansion(self.runner, pool)
        if unbuilt(pool):  # nothing to read back
            return seconds, None
        # The pool has one member more: read it back, and count the new disk in every device
        # window from now on (the session's target shares this list).
        unused = [d for d in pool.described.get("unused_devices") or [] if d != new]
        desc = self.describe(pool.spec.name)
        pool.described.update(desc, unused_devices=unused)
        pool.block_devices[:] = readback.holding_devices(desc)
        return seconds, self.usable_now(pool)

    def allocated(self, pool: Pool) -> int | None:
        """The pool's allocated bytes (zpool ALLOC: parity included) now."""
        if unbuilt(pool):
            return None
        got = ops.pool_prop(self.runner, pool.spec.name, "allocated", self.dialect)
        return int(got) if got is not None and is_digits(got) else None

    def usable_now(self, pool: Pool) -> int | None:
        if unbuilt(pool):
            return None
        return operations.usable_now(self.runner, pool)

    # -- read back after a measurement (SupportsAccounting, SupportsCompressionReadBack) -----
    def compressratio(self, pool: Pool) -> str | None:
        """The root dataset's achieved compression ratio, or None if it cannot be read."""
        return self.dataset_property(pool, "compressratio")

    def compression_setting(self, pool: Pool) -> str | None:
        """The root dataset's compression as ZFS reports it (OpenZFS's default is "on")."""
        return self.dataset_property(pool, "compression")

    def dataset_property(self, pool: Pool, prop: str) -> str | None:
        """One property of the root dataset as ZFS reports it, or None if it cannot be read."""
        if unbuilt(pool):
            return None
        return ops.dataset_value(self.runner, pool.spec.name, prop)

    def free_fragmentation(self, pool: Pool) -> tuple[float | None, str]:
        """OpenZFS's `fragmentation` pool property; zfs-fuse has none."""
        if self.dialect != OPENZFS:
            return None, fragmentation.ZFS_FUSE_NONE
        operations.sync_txg(self.runner, pool, self.dialect)  # space maps update per txg
        if unbuilt(pool):
            return None, fragmentation.ZFS_HOW
        got = ops.pool_prop(self.runner, pool.spec.name, "fragmentation", self.dialect)
        return fragmentation.zfs_percent(got), fragmentation.ZFS_HOW

    def sync_txg(self, pool: Pool) -> None:
        operations.sync_txg(self.runner, pool, self.dialect)

    def iostat_snapshot(self, pool: Pool) -> list[IostatRow] | None:
        if unbuilt(pool):
            return None
        return operations.iostat_snapshot(self.runner, pool, self.dialect)

    def class_alloc(
        self, pool: Pool, iostat: list[IostatRow]
    ) -> tuple[dict[str, int], dict[str, int]]:
        """Bytes allocated, and bytes free, on the data vdevs and on each allocation class
        (special, dedup), from an iostat snapshot (OpenZFS) and `zpool status`; empty
        where it cannot tell."""
        return ops.class_alloc(self.runner, pool.spec.name, self.dialect, iostat)

    # -- destroy -----------------------------------------------------------------------------
    def destroy(self, pool: Pool, journal: Journal) -> None:
        """Destroy the pool through its journal entries (by name and GUID), then remove its
        mountpoint and member links; other entries (disks, loops) stay for their owner."""
        mountpoint, link_dir = self.paths(pool.spec)
        mine = {str(mountpoint), str(link_dir)}

        def owned(e: Entry) -> bool:
            if e.get("kind") in ("pool", "pool_intent"):
                return bool(e.get("name") == pool.spec.name)
            return e.get("kind") in ("path", "dir") and e.get("path") in mine

        journal.teardown_or_raise(
            f"Pool {pool.spec.name} was not fully torn down: ",
            "Inspect it with `zpool status`; `poolbench cleanup` retries.",
            only=owned,
        )


def _probe(r: Runner) -> Availability:
    """Which ZFS answers here (OpenZFS or zfs-fuse), its version, or why none does."""
    if not ops.installed(r, with_zfs=True):
        return Availability(
            False,
            "zpool/zfs are not installed (Debian: zfsutils-linux for OpenZFS, or zfs-fuse).",
        )
    version = ops.openzfs_version(r)
    if version is not None:
        if not pools.answers(r):
            return Availability(
                False,
                f"OpenZFS ({version}) is installed but does not answer: is the zfs kernel "
                "module loaded (modprobe zfs)?",
                version,
                OPENZFS,
            )
        return Availability(True, "", version, OPENZFS)
    pool_version = ops.fuse_pool_version(r)
    if r.which("zfs-fuse") is None and not pool_version:
        return Availability(False, "zpool answers neither as OpenZFS nor as zfs-fuse.")
    version = f"zfs-fuse, pool version {pool_version or '?'}"
    if not pools.answers(r):
        return Availability(
            False,
            "the zfs-fuse daemon is not running; start it with `zfs-fuse` (as root). A "
            "real `poolbench run`, `study` or `demo` starts it (and stops it after); a dry "
            "run changes nothing, so it does not.",
            version,
            ZFS_FUSE,
        )
    return Availability(True, "", version, ZFS_FUSE)


def unbuilt(pool: Pool) -> bool:
    """A dry run's pool: nothing of it can be read (backends/planned.py answers the rest)."""
    return bool(pool.described.get("dry_run"))
