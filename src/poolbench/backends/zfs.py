"""ZFS through `zpool` and `zfs`, in the two dialects found in the wild.

* **OpenZFS 2.x** (what users run): `zpool version` answers; output is read with `-H -p`
  (tabs, exact numbers); dRAID from 2.1; recordsize up to 16M from 2.2 (1M before).
* **zfs-fuse** (pool version 23, the ZFS this kind of machine has): no `version` command, no
  `-p` for `zpool list`, no `-H` for `zpool get`, no `sync` property, no lz4/zstd, recordsize
  at most 128K, ashift 9..13 (`-o ashift=` is a Debian patch). `zfs get -Hp` works.

After `zpool create` the pool is read back — vdev tree (`zpool status`), the ashift of every
top-level vdev (`zdb -C`), the dataset properties (`zfs get -Hp`), the mount — and `verify()`
lists every difference from what was asked: a silently different ashift is exactly the
mistake users make. The ARC is emptied by `zpool export` + `zpool import -d DIR`, where DIR
holds only links to this pool's own members (never a scan of /dev).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from poolbench.backends._common import block_names, mount_at, size_of, wait_for
from poolbench.backends.base import Availability, Pool, PoolSpec, Vdev, parse_topology
from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards import cache
from poolbench.safety.journal import Journal
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import commands, parse, pools
from poolbench.zfs.commands import OPENZFS, ZFS_FUSE
from poolbench.zfs.parse import ResilverStatus, TopVdev, parse_resilver, parse_status, version_tuple

POOL_OPTIONS = ("ashift",)
FS_OPTIONS = ("recordsize", "compression", "atime", "sync", "primarycache")
_FUSE_COMPRESSION = ["on", "off", "lzjb", "gzip", *[f"gzip-{i}" for i in range(1, 10)], "zle"]
_ZSTD = re.compile(r"^zstd(-([1-9]|1[0-9]))?$|^zstd-fast(-([1-9]|10|[2-9]0|100|500|1000))?$")
_CHOICES = {
    "atime": ("on", "off"),
    "sync": ("standard", "always", "disabled"),
    "primarycache": ("all", "none", "metadata"),
}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,200}$")
_RESERVED = ("mirror", "raidz", "draid", "spare", "log")
ARCSTATS = Path("/proc/spl/kstat/zfs/arcstats")


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


def _shape_text(shape: list[tuple[str, int]]) -> str:
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


def parse_size(text: str) -> int:
    """A property size (recordsize) in the one size grammar (poolbench.units); ValueError if
    it is not one. 128K is 2^17 here as in ZFS; 128KB is 128000, which no recordsize is."""
    from poolbench.units import parse_size as units_parse_size

    try:
        return units_parse_size(text)
    except UsageError as exc:
        raise ValueError(text) from exc


class ZfsBackend:
    name = "zfs"

    def __init__(self, runner: Runner, mountinfo: Path = Path("/proc/self/mountinfo")) -> None:
        self.runner = runner
        self.mountinfo = mountinfo
        self._avail: Availability | None = None

    # -- availability ------------------------------------------------------------------------
    def check(self) -> Availability:
        if self._avail is None:
            self._avail = self._probe()
        return self._avail

    def _probe(self) -> Availability:
        r = self.runner
        if r.which("zpool") is None or r.which("zfs") is None:
            return Availability(
                False,
                "zpool/zfs are not installed (Debian: zfsutils-linux for OpenZFS, or zfs-fuse).",
            )
        v = r.run(commands.version(), check=False, mutates=False)
        if v.returncode == 0 and "zfs-" in v.stdout:
            version = v.stdout.strip().splitlines()[0]
            if not pools.answers(r):
                return Availability(
                    False,
                    f"OpenZFS ({version}) is installed but does not answer: is the zfs kernel "
                    "module loaded (modprobe zfs)?",
                    version,
                    OPENZFS,
                )
            return Availability(True, "", version, OPENZFS)
        up = r.run(commands.supported_versions(), check=False, mutates=False)
        pool_version = parse.parse_fuse_pool_version(up.stdout)
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

    @property
    def dialect(self) -> str:
        return self.check().dialect

    def _openzfs_at_least(self, *want: int) -> bool:
        a = self.check()
        return a.dialect == OPENZFS and version_tuple(a.version) >= want

    # -- validation --------------------------------------------------------------------------
    def validate(self, spec: PoolSpec) -> None:
        a = self.check()
        if not a.ok:
            raise UsageError(f"The zfs backend is not available: {a.reason}", "")
        fuse = a.dialect == ZFS_FUSE
        if not _NAME.match(spec.name) or spec.name.startswith(_RESERVED):
            raise UsageError(
                f"'{spec.name}' is not a valid ZFS pool name.",
                "Start with a letter, use letters, digits, '_', '-', '.', ':', and do not begin "
                "with mirror, raidz, draid, spare or log.",
            )
        if not spec.mount_root.is_absolute():
            raise UsageError(f"Mount root {spec.mount_root} is not absolute.", "")
        vdevs = parse_topology(spec.layout, len(spec.devices))
        for v in vdevs:
            if v.kind.startswith("draid") and not self._openzfs_at_least(2, 1):
                raise UsageError(
                    f"Layout '{spec.layout}': dRAID needs OpenZFS 2.1 or later; this ZFS is "
                    f"{a.version}.",
                    "Drop the draid layouts from the study, or run it on OpenZFS ≥ 2.1.",
                )
        used = spec.devices[: sum(v.width for v in vdevs)]
        real = [os.path.realpath(d) for d in used]
        dup = sorted({d for d in real if real.count(d) > 1})
        if dup:
            raise UsageError(
                f"Device {dup[0]} is given twice for pool {spec.name}.", "Name each disk once."
            )
        for key, value in spec.pool_options.items():
            if key not in POOL_OPTIONS:
                raise UsageError(
                    f"Unknown ZFS pool option '{key}'.", f"Known: {', '.join(POOL_OPTIONS)}."
                )
            hi = 13 if fuse else 16
            if not str(value).isdigit() or not 9 <= int(value) <= hi:
                raise UsageError(
                    f"ashift={value} is not possible on {a.version}.",
                    f"Use an ashift from 9 to {hi} (9 = 512-byte, 12 = 4K sectors).",
                )
        for key, value in spec.fs_options.items():
            self._validate_property(key, str(value), fuse, a.version)

    def _validate_property(self, key: str, value: str, fuse: bool, version: str) -> None:
        if key not in FS_OPTIONS:
            raise UsageError(
                f"Unknown ZFS dataset property '{key}'.", f"Known: {', '.join(FS_OPTIONS)}."
            )
        if key == "recordsize":
            hi = (128 << 10) if fuse else (16 << 20 if self._openzfs_at_least(2, 2) else 1 << 20)
            try:
                n = parse_size(value)
            except ValueError:
                n = -1
            if n < 512 or n > hi or n & (n - 1):
                raise UsageError(
                    f"recordsize={value} is not possible on {version}: it must be a power of "
                    f"two from 512 to {hi >> 10}K.",
                    "Use e.g. 16K, 128K" + ("" if fuse else ", 1M") + ".",
                )
        elif key == "compression":
            if fuse:
                if value not in _FUSE_COMPRESSION:
                    raise UsageError(
                        f"compression={value} is not supported by {version}.",
                        f"It offers: {', '.join(_FUSE_COMPRESSION)} (no lz4, no zstd).",
                    )
            else:
                ok = value in (*_FUSE_COMPRESSION, "lz4") or (
                    _ZSTD.match(value) is not None and self._openzfs_at_least(2, 0)
                )
                if not ok:
                    raise UsageError(
                        f"compression={value} is not supported by {version}.",
                        "Use off, lz4, gzip[-1..9], zle, lzjb, zstd[-1..19] or zstd-fast[-N].",
                    )
        elif key == "sync" and fuse:
            raise UsageError(
                f"{version} has no 'sync' property (it came with pool version 28).",
                "Drop the sync factor for zfs-fuse, or run the study on OpenZFS.",
            )
        elif value not in _CHOICES.get(key, (value,)):
            raise UsageError(
                f"{key}={value} is not a valid value.", f"Use one of {', '.join(_CHOICES[key])}."
            )

    # -- create ------------------------------------------------------------------------------
    @staticmethod
    def paths(spec: PoolSpec) -> tuple[Path, Path]:
        """(mountpoint, directory of member links used for import)."""
        return spec.mount_root / spec.name, spec.mount_root / f"{spec.name}.members"

    def create_argv(self, spec: PoolSpec) -> list[str]:
        """The `zpool create` command line for `spec` (validated)."""
        vdevs = parse_topology(spec.layout, len(spec.devices))
        members = list(spec.devices[: sum(v.width for v in vdevs)])
        mountpoint, _ = self.paths(spec)
        words: list[str] = []
        i = 0
        for v in vdevs:
            words += v.zpool_words() + members[i : i + v.width]
            i += v.width
        force = self._needs_force(vdevs, members)
        return commands.create(
            spec.name, words, str(mountpoint), spec.pool_options, spec.fs_options, force
        )

    @staticmethod
    def _needs_force(vdevs: tuple[Vdev, ...], members: list[str]) -> bool:
        """zpool refuses mixed top-level vdevs (raidz1:3+raidz1:4, raidz+mirror) and members
        of different sizes unless forced; the study asked for exactly that on purpose."""
        shapes = {(v.kind, v.width) for v in vdevs if v.kind != "stripe"}
        kinds = {v.kind for v in vdevs}
        sizes = {size_of(m) for m in members} - {None}
        return len(shapes) > 1 or (len(kinds) > 1) or len(sizes) > 1

    def create(self, spec: PoolSpec, journal: Journal) -> Pool:
        self.validate(spec)
        dry = self.runner.dry_run
        vdevs = parse_topology(spec.layout, len(spec.devices))
        members = list(spec.devices[: sum(v.width for v in vdevs)])
        mountpoint, link_dir = self.paths(spec)
        argv = self.create_argv(spec)
        if not spec.mount_root.exists():
            journal.path_created(str(spec.mount_root))
            if not dry:
                spec.mount_root.mkdir(parents=True)
        journal.path_created(str(link_dir))
        if not dry:
            link_dir.mkdir(exist_ok=True)
        journal.dir_created(str(mountpoint))
        journal.pool_intent(spec.name, members, self.dialect)
        pools.create(self.runner, argv)
        journal.pool_created(spec.name, members, import_dir=str(link_dir), dialect=self.dialect,
                             spares=list(spec.devices[len(members):]))  # fmt: skip
        pool = Pool(spec, mountpoint, [], {"dry_run": True} if dry else {})
        if dry:
            return pool
        pool.described = self.describe(spec.name)
        for leaf in pool.described["leaves"]:
            self.link_member(link_dir, leaf)
        pool.described["unused_devices"] = list(spec.devices[len(members) :])
        pool.block_devices = block_names(pool.described["leaves"])
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

    def _leaf_paths(self, name: str, zdb_text: str | None = None) -> list[str]:
        """Absolute paths of the leaf devices (OpenZFS: the partitions it made on disks)."""
        if self.dialect == OPENZFS:
            out = pools.status_text(self.runner, name, OPENZFS, full_paths=True)
            return [leaf for t in parse.read_status(out, name).tops for leaf in t.leaves]
        out = zdb_text if zdb_text is not None else self._run(commands.zdb_config(name)).stdout
        return parse.parse_zdb_paths(out)

    def _run(self, argv: list[str]) -> Any:
        return pools.read(self.runner, argv)

    # -- read back ---------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """Everything the pool says about itself, for verify() and the record."""
        a = self.check()
        status = parse.read_status(pools.status_text(self.runner, name), name)
        props = ["recordsize", "compression", "atime", "primarycache", "mountpoint", "mounted"]
        props += ["compressratio", "used", "available"]
        props += ["sync"] if a.dialect == OPENZFS else []
        values = parse.parse_zfs_get(self._run(commands.dataset_props(name, props)).stdout)
        zdb = self.runner.run(commands.zdb_config(name), check=False, mutates=False)
        ashifts = parse.parse_zdb_ashift(zdb.stdout) if zdb.returncode == 0 else []
        pool_ashift = self._pool_prop(name, "ashift")
        used, avail = values.get("used", {}).get("value"), values.get("available", {}).get("value")
        return {
            "dialect": a.dialect,
            "zfs_version": a.version,
            "guid": pools.pool_guid(self.runner, name),
            "health": status.health,
            "topology": [
                {"kind": t.kind, "width": t.width, "leaves": list(t.leaves)} for t in status.tops
            ],
            "layout": _shape_text([(t.kind, t.width) for t in status.tops]),
            "leaves": self._leaf_paths(name, zdb.stdout if zdb.returncode == 0 else None),
            # USED + AVAIL of the root dataset: what `zfs list` offers (the planner's figure).
            "usable_bytes": int(used) + int(avail)
            if used and avail and used.isdigit() and avail.isdigit()
            else None,
            "vdev_ashift": ashifts,
            "ashift_source": "zdb -C" if ashifts else "",
            "pool_ashift_property": pool_ashift,
            "pool_version": self._pool_prop(name, "version"),
            "properties": values,
        }

    def _pool_prop(self, name: str, prop: str) -> str | None:
        """A pool property; zfs-fuse's `zpool get` has neither -H nor -p."""
        argv = commands.pool_prop(name, prop, self.dialect)
        res = self.runner.run(argv, check=False, mutates=False)
        if res.returncode != 0:
            return None
        return parse.parse_pool_get(res.stdout, name, prop, self.dialect)

    def verify(self, pool: Pool) -> list[str]:
        if self.runner.dry_run:
            return []
        spec = pool.spec
        try:
            d = self.describe(spec.name)
        except CommandError as exc:
            return [f"pool {spec.name} cannot be read back: {exc.problem}"]
        d["unused_devices"] = pool.described.get("unused_devices", [])
        pool.described = d
        problems = self._topology_problems(spec, d)
        asked = spec.pool_options.get("ashift")
        if asked is not None:
            problems += _ashift_problems(asked, d["vdev_ashift"])
        props = d["properties"]
        problems += _property_problems(spec, props, pool.mountpoint)
        m = mount_at(pool.mountpoint, self.mountinfo)
        if props.get("mounted", {}).get("value") != "yes" or m is None:
            problems.append(f"the pool's dataset is not mounted at {pool.mountpoint}")
        if d["health"] != "ONLINE":
            problems.append(f"pool health is {d['health'] or 'unknown'}, not ONLINE")
        return problems

    def _topology_problems(self, spec: PoolSpec, d: dict[str, Any]) -> list[str]:
        """The read-back vdev shape and member devices against the asked layout."""
        problems: list[str] = []
        vdevs = parse_topology(spec.layout, len(spec.devices))
        want = expected_shape(vdevs)
        got = [(t["kind"], t["width"]) for t in d["topology"]]
        if got != want:
            problems.append(
                f"layout is {_shape_text(got) or 'nothing'}, not {_shape_text(want)} as asked"
            )
        members = [os.path.realpath(m) for m in spec.devices[: sum(v.width for v in vdevs)]]
        leaves = [os.path.realpath(x) for x in d["leaves"]]
        if sorted(leaves) != sorted(members) and not self._partitions_of(members, leaves):
            problems.append(f"member devices are {leaves}, not {members}")
        return problems

    @staticmethod
    def _partitions_of(members: list[str], leaves: list[str]) -> bool:
        from poolbench.backends._common import same_or_partition_of

        if len(members) != len(leaves):
            return False
        return all(any(same_or_partition_of(m, lf) for m in members) for lf in leaves)

    # -- cold cache --------------------------------------------------------------------------
    def drop_cache(self, pool: Pool) -> dict[str, Any]:
        """Export and import the pool (which evicts its ARC), and drop the page cache of its
        member files/devices in between; verify each step."""
        name = pool.spec.name
        _, link_dir = self.paths(pool.spec)
        if self.runner.dry_run:
            self.runner.run(commands.export(name))
            self.runner.run(commands.import_from(str(link_dir), name))
            return {"method": "export-import", "verified": False, "detail": "dry run"}
        t0 = time.monotonic()
        guid = pool.described.get("guid") or pools.pool_guid(self.runner, name)
        backing = [Path(p) for p in pool.described.get("leaves", [])]
        arc_before = _arc_bytes()
        pools.export(self.runner, name)
        exported = pools.pool_guid(self.runner, name) is None and wait_for(
            lambda: mount_at(pool.mountpoint, self.mountinfo) is None
        )
        arc_exported = _arc_bytes()
        page = cache.drop(self.runner, backing)
        pools.run(self.runner, commands.import_from(str(link_dir), name))
        now = pools.pool_guid(self.runner, name)
        mounted = wait_for(lambda: mount_at(pool.mountpoint, self.mountinfo) is not None)
        verified = bool(exported and now == guid and mounted and page.verified)
        detail = []
        if not exported:
            detail.append("the pool was still listed or mounted after the export")
        if now != guid:
            detail.append(f"after the import the pool's GUID is {now}, not {guid}")
        if not mounted:
            detail.append(f"the dataset is not mounted at {pool.mountpoint} after the import")
        if not page.verified:
            detail.append(f"page cache of the members: {page.detail}")
        return {
            "method": "export-import",
            "exported": exported,
            "imported_guid": now,
            "guid": guid,
            "mounted": mounted,
            "import_dir": str(link_dir),
            "arc_bytes_before": arc_before,
            "arc_bytes_exported": arc_exported,
            "arc": "evicted by the export" + (
                "" if arc_before is not None else " (this ZFS has no ARC statistics to show it)"
            ),
            "member_page_cache": page.as_dict(),
            "seconds": round(time.monotonic() - t0, 3),
            "verified": verified,
            "detail": "; ".join(detail),
        }  # fmt: skip

    # -- pool operations (the resilver study) ------------------------------------------------
    def offline(self, pool: Pool, leaf: str) -> None:
        """Take one member offline (persistently: it stays offline across export/import)."""
        pools.run(self.runner, commands.offline(pool.spec.name, leaf))

    def replace(self, pool: Pool, old: str, new: str) -> None:
        """Replace member `old` with device `new`; the resilver starts at once."""
        pools.run(self.runner, commands.replace(pool.spec.name, old, new))
        _, link_dir = self.paths(pool.spec)
        if not self.runner.dry_run:
            self.link_member(link_dir, new)

    def data_vdevs(self, pool: Pool) -> list[TopVdev]:
        """The data vdevs with their members as `zpool status` names them now (after an
        export/import through the member links, that is the link's path)."""
        name = pool.spec.name
        return parse.read_status(pools.status_text(self.runner, name), name).tops

    def compressratio(self, pool: Pool) -> str | None:
        """The root dataset's achieved compression ratio, or None if it cannot be read."""
        argv = commands.dataset_value(pool.spec.name, "compressratio")
        res = self.runner.run(argv, check=False, mutates=False)
        return res.stdout.strip() or None if res.returncode == 0 else None

    def resilver_status(self, pool: Pool) -> ResilverStatus:
        return parse_resilver(pools.status_text(self.runner, pool.spec.name))

    def wait_resilver(self, pool: Pool, timeout: float = 3600.0) -> ResilverStatus:
        """Poll `zpool status` until the resilver is reported finished."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.resilver_status(pool)
            if st.done or self.runner.dry_run:
                return st
            if time.monotonic() > deadline:
                raise PoolbenchError(
                    f"The resilver of {pool.spec.name} did not finish within {timeout:.0f} s.",
                    "Use a smaller working set, or check the pool with `zpool status`.",
                )
            time.sleep(0.1)

    # -- destroy -----------------------------------------------------------------------------
    def destroy(self, pool: Pool, journal: Journal) -> None:
        """Destroy the pool through its journal entries (by name and GUID), then remove its
        mountpoint and member links; other entries (disks, loops) stay for their owner."""
        mountpoint, link_dir = self.paths(pool.spec)
        mine = {str(mountpoint), str(link_dir)}

        def owned(e: dict[str, Any]) -> bool:
            if e.get("kind") in ("pool", "pool_intent"):
                return bool(e.get("name") == pool.spec.name)
            return e.get("kind") in ("path", "dir") and e.get("path") in mine

        left = journal.teardown(only=owned)
        if left:
            raise PoolbenchError(
                f"Pool {pool.spec.name} was not fully torn down: " + "; ".join(left),
                "Inspect it with `zpool status`; `poolbench cleanup` retries.",
            )


def _same_value(key: str, asked: str, have: str | None) -> bool:
    if have is None:
        return False
    if key == "recordsize":
        try:
            return parse_size(asked) == int(have)
        except ValueError:
            return False
    if key == "compression" and asked in ("gzip", "gzip-6"):
        return have in ("gzip", "gzip-6")
    return asked.lower() == have.lower()


def _arc_bytes() -> int | None:
    """Current ARC size (OpenZFS only); None where there are no ARC statistics (zfs-fuse)."""
    try:
        for line in ARCSTATS.read_text().splitlines():
            words = line.split()
            if len(words) == 3 and words[0] == "size":
                return int(words[2])
    except OSError:
        return None
    return None


# parse_status and TopVdev stay importable from here until trialops imports them from
# poolbench.zfs.parse (the engine move); new code imports the zfs layer directly.
__all__ = [
    "OPENZFS", "ZFS_FUSE", "ResilverStatus", "TopVdev", "ZfsBackend", "expected_shape",
    "parse_resilver", "parse_status",
]  # fmt: skip


def _ashift_problems(asked: str, vdev_ashift: list[int]) -> list[str]:
    """Each top-level vdev's ashift against the asked one (an unreadable ashift is a problem)."""
    problems: list[str] = []
    if not vdev_ashift:
        problems.append("the vdevs' ashift could not be read back (zdb -C failed)")
    for i, got_a in enumerate(vdev_ashift):
        if got_a != int(asked):
            problems.append(
                f"top-level vdev {i} has ashift {got_a}, not {asked} as asked "
                f"({1 << got_a}-byte instead of {1 << int(asked)}-byte blocks)"
            )
    return problems


def _property_problems(spec: PoolSpec, props: dict[str, Any], mountpoint: Path) -> list[str]:
    """The asked dataset properties and the mountpoint as `zfs get` reports them."""
    problems: list[str] = []
    for key, value in spec.fs_options.items():
        have = props.get(key, {}).get("value")
        if not _same_value(key, str(value), have):
            problems.append(f"{key} is {have}, not {value} as asked")
    mp = props.get("mountpoint", {}).get("value")
    if mp != str(mountpoint):
        problems.append(f"mountpoint is {mp}, not {mountpoint}")
    return problems
