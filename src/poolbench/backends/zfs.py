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

from poolbench import is_digits
from poolbench.backends import zvol
from poolbench.backends._common import block_names, mount_at, size_of, wait_for
from poolbench.backends.base import (
    Availability,
    Pool,
    PoolSpec,
    Vdev,
    parse_classes,
    parse_topology,
)
from poolbench.errors import PoolbenchError, Unsupported, UsageError
from poolbench.guards import cache
from poolbench.safety.journal import Journal
from poolbench.system.runner import CommandError, Runner
from poolbench.zfs import commands, parse, pools
from poolbench.zfs.commands import OPENZFS, ZFS_FUSE
from poolbench.zfs.parse import (
    ResilverStatus,
    ScrubStatus,
    TopVdev,
    parse_resilver,
    parse_scrub,
    parse_status,
    version_tuple,
)

POOL_OPTIONS = ("ashift",)
FS_OPTIONS = ("recordsize", "compression", "atime", "sync", "primarycache", "special_small_blocks")
_FUSE_COMPRESSION = ["on", "off", "lzjb", "gzip", *[f"gzip-{i}" for i in range(1, 10)], "zle"]
_ZSTD = re.compile(r"^zstd(-([1-9]|1[0-9]))?$|^zstd-fast(-([1-9]|10|[2-9]0|100|500|1000))?$")
_CHOICES = {
    "atime": ("on", "off"),
    "sync": ("standard", "always", "disabled"),
    "primarycache": ("all", "none", "metadata"),
}
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,200}$")
_RESERVED = ("mirror", "raidz", "draid", "spare", "log")


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
        vdevs, classes = self._validate_layout(spec, a)
        used = spec.devices[: _member_count(vdevs, classes)]
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
            if not is_digits(str(value)) or not 9 <= int(value) <= hi:
                raise UsageError(
                    f"ashift={value} is not possible on {a.version}.",
                    f"Use an ashift from 9 to {hi} (9 = 512-byte, 12 = 4K sectors).",
                )
        for key, value in spec.fs_options.items():
            self._validate_property(key, str(value), fuse, a.version)
        large = zvol.MAX_BLOCK_LARGE if self._openzfs_at_least(2, 2) else zvol.MAX_BLOCK_OLD
        zvol.validate(spec.volume, spec.fs_options, fuse, a.version, large)
        small = str(spec.fs_options.get("special_small_blocks", "0"))
        if small != "0" and not any(cls in ("special", "dedup") for cls, _ in classes):
            raise UsageError(
                f"special_small_blocks={small} on layout '{spec.layout}': OpenZFS refuses it "
                "on a pool without a special vdev.",
                "Add a special vdev to the layout (e.g. '+ special mirror:2'), or use "
                "special_small_blocks=0 for this layout (a study's exclude can pair them).",
            )

    def _validate_layout(
        self, spec: PoolSpec, a: Availability
    ) -> tuple[tuple[Vdev, ...], tuple[tuple[str, Vdev], ...]]:
        """The layout's data and class vdevs, refused where this ZFS lacks them."""
        vdevs = parse_topology(spec.layout, len(spec.devices))
        for v in vdevs:
            if v.kind.startswith("draid") and not self._openzfs_at_least(2, 1):
                raise UsageError(
                    f"Layout '{spec.layout}': dRAID needs OpenZFS 2.1 or later; this ZFS is "
                    f"{a.version}.",
                    "Drop the draid layouts from the study, or run it on OpenZFS ≥ 2.1.",
                )
        classes = parse_classes(spec.layout, len(spec.devices))
        for cls, _ in classes:
            if cls in ("special", "dedup") and a.dialect == ZFS_FUSE:
                raise UsageError(
                    f"Layout '{spec.layout}': {a.version} has no {cls} vdevs (allocation "
                    "classes came with ZFS on Linux 0.8; pool v23 has log, cache and spare "
                    "devices only).",
                    f"Drop the {cls} part on zfs-fuse, or run it on OpenZFS (the guest tier: "
                    "vm/run-openzfs-tier.sh).",
                )
        return vdevs, classes

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
        elif key == "special_small_blocks":
            _check_special_small(value, fuse, version)
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
        """The `zpool create` command line for `spec` (validated): the data vdevs, then each
        class word once with its vdevs (zpool refuses a second 'log', 'spare' or 'cache')."""
        vdevs = parse_topology(spec.layout, len(spec.devices))
        classes = parse_classes(spec.layout, len(spec.devices))
        members = list(spec.devices[: _member_count(vdevs, classes)])
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
        force = self._needs_force(vdevs, members, classes)
        # special_small_blocks=0 is ZFS's default, and OpenZFS refuses the property, even at
        # 0, on a pool without a special vdev ("property requires a special vdev", 2.3.2)
        fs_options = {
            k: v for k, v in spec.fs_options.items()
            if not (k == "special_small_blocks" and str(v) == "0")
        }  # fmt: skip
        return commands.create(
            spec.name, words, str(mountpoint), spec.pool_options, fs_options, force
        )

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
        members = list(spec.devices[: _member_count(vdevs, classes)])
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
        # log devices too: `zpool import -d` of a pool missing its log refuses
        for leaf in pool.described["leaves"] + _all_class_leaves(pool.described):
            self.link_member(link_dir, leaf)
        pool.described["unused_devices"] = list(spec.devices[len(members) :])
        pool.block_devices = _holding_devices(pool.described)
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

    def _leaf_paths(
        self, name: str, zdb_text: str | None = None, status_text: str | None = None
    ) -> tuple[list[str], dict[str, list[str]]]:
        """Absolute paths of the data vdevs' leaf devices (OpenZFS: the partitions it made
        on disks), and of each class section's (logs, cache, spares, special, dedup)."""
        if self.dialect == OPENZFS:
            out = pools.status_text(self.runner, name, OPENZFS, full_paths=True)
            st = parse.read_status(out, name)
            data = [leaf for t in st.tops for leaf in t.leaves]
            return data, {k: [parse.leaf_path(w) for w in v] for k, v in st.class_leaves.items()}
        # zfs-fuse: zdb -C names the leaves of the vdev tree (data and log vdevs); the status
        # sections tell the class ones apart (and name the spares and cache devices)
        text = status_text if status_text is not None else pools.status_text(self.runner, name)
        sections = {
            k: [parse.leaf_path(w) for w in v]
            for k, v in parse.read_status(text, name).class_leaves.items()
        }
        in_class = {os.path.realpath(p) for v in sections.values() for p in v}
        out = zdb_text if zdb_text is not None else self._run(commands.zdb_config(name)).stdout
        data = [p for p in parse.parse_zdb_paths(out) if os.path.realpath(p) not in in_class]
        return data, sections

    def _run(self, argv: list[str]) -> Any:
        return pools.read(self.runner, argv)

    # -- read back ---------------------------------------------------------------------------
    def describe(self, name: str) -> dict[str, Any]:
        """Everything the pool says about itself, for verify() and the record."""
        a = self.check()
        status_text = pools.status_text(self.runner, name)
        status = parse.read_status(status_text, name)
        props = ["recordsize", "compression", "atime", "primarycache", "mountpoint", "mounted"]
        props += ["compressratio", "used", "available"]
        props += ["sync", "special_small_blocks"] if a.dialect == OPENZFS else []
        values = parse.parse_zfs_get(self._run(commands.dataset_props(name, props)).stdout)
        zdb = self.runner.run(commands.zdb_config(name), check=False, mutates=False)
        ashifts = parse.parse_zdb_ashift(zdb.stdout) if zdb.returncode == 0 else []
        pool_ashift = self._pool_prop(name, "ashift")
        used, avail = values.get("used", {}).get("value"), values.get("available", {}).get("value")
        leaves, class_leaves = self._leaf_paths(
            name, zdb.stdout if zdb.returncode == 0 else None, status_text
        )
        return {
            "dialect": a.dialect,
            "zfs_version": a.version,
            "guid": pools.pool_guid(self.runner, name),
            "health": status.health,
            "topology": [
                {"kind": t.kind, "width": t.width, "leaves": list(t.leaves)} for t in status.tops
            ],
            "layout": _shape_text([(t.kind, t.width) for t in status.tops]),
            "leaves": leaves,
            "class_leaves": class_leaves,
            # USED + AVAIL of the root dataset: what `zfs list` offers (the planner's figure).
            "usable_bytes": int(used) + int(avail)
            if used and avail and is_digits(used) and is_digits(avail)
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
        return problems + self._class_problems(spec, d, len(members))

    def _class_problems(self, spec: PoolSpec, d: dict[str, Any], start: int) -> list[str]:
        """Each class section of `zpool status` holds the devices the layout gave it."""
        problems: list[str] = []
        want: dict[str, list[str]] = {}
        for cls, v in parse_classes(spec.layout, len(spec.devices)):
            devices = want.setdefault(_SECTION[cls], [])
            devices += [os.path.realpath(m) for m in spec.devices[start : start + v.width]]
            start += v.width
        got = {
            k: sorted(os.path.realpath(x) for x in v) for k, v in d.get("class_leaves", {}).items()
        }
        for section in sorted(set(want) | set(got)):
            w, g = sorted(want.get(section, [])), got.get(section, [])
            if w != g and not self._partitions_of(w, g):
                problems.append(f"the {section} devices are {g or 'none'}, not {w or 'none'}")
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
        member files/devices in between; verify each step. The ARC's data size is checked once
        the pool is exported (OpenZFS; zfs-fuse where it publishes /zfs-kstat); where it
        cannot be seen the drop is never "verified" (None): the device byte check decides."""
        name = pool.spec.name
        _, link_dir = self.paths(pool.spec)
        if self.runner.dry_run:
            self.runner.run(commands.export(name))
            self.runner.run(commands.import_from(str(link_dir), name))
            return {"method": "export-import", "verified": False, "detail": "dry run"}
        t0 = time.monotonic()
        guid = pool.described.get("guid") or pools.pool_guid(self.runner, name)
        backing = [Path(p) for p in pool.described.get("leaves", [])]
        stats = cache.arcstats_path(pool.described.get("dialect") or "openzfs")
        arc_before = cache.read_arcstats(stats)
        pools.export(self.runner, name)
        exported = pools.pool_guid(self.runner, name) is None and wait_for(
            lambda: mount_at(pool.mountpoint, self.mountinfo) is None
        )
        arc_exported = cache.read_arcstats(stats)
        arc_ok, arc_said = cache.arc_after_export(
            arc_exported, len(pools.imported(self.runner)) if arc_exported else 0
        )
        page = cache.drop(self.runner, backing)
        pools.run(self.runner, commands.import_from(str(link_dir), name))
        now = pools.pool_guid(self.runner, name)
        mounted = wait_for(lambda: mount_at(pool.mountpoint, self.mountinfo) is not None)
        problems = _drop_problems(pool, exported, guid, now, mounted, page, arc_ok, arc_said)
        if pool.described.get("zvol") and not zvol.node_back(name):
            problems.append(f"the zvol's device {zvol.node(name)} did not come back")
        # False: a step failed; True: every step and the ARC checked out; None: the steps
        # did, but the ARC could not tell (zfs-fuse; other pools' data): the read decides.
        verified = False if problems else (True if arc_ok else None)
        return {
            "method": "export-import",
            "exported": exported,
            "imported_guid": now,
            "guid": guid,
            "mounted": mounted,
            "import_dir": str(link_dir),
            "arc_bytes_before": (arc_before or {}).get("size"),
            "arc_bytes_exported": (arc_exported or {}).get("size"),
            "arc_data_bytes_exported": (arc_exported or {}).get("data_size"),
            "arc": arc_said,
            "member_page_cache": page.as_dict(),
            "seconds": round(time.monotonic() - t0, 3),
            "verified": verified,
            "detail": "; ".join(problems),
        }  # fmt: skip

    # -- a zvol target ------------------------------------------------------------------------
    def create_volume(self, pool: Pool, working_set: int) -> dict[str, Any]:
        """The configuration's zvol (backends/zvol.py), recorded in the pool's description;
        it goes with the pool when the pool is destroyed."""
        made = zvol.create(self.runner, pool.spec.name, pool.spec.volume, pool.spec.fs_options,
                           working_set)  # fmt: skip
        pool.described["zvol"] = made
        return made

    def volume_space(self, pool: Pool) -> dict[str, int]:
        return zvol.space(self.runner, pool.spec.name) if pool.described.get("zvol") else {}

    # -- pool operations (the resilver study) ------------------------------------------------
    def offline(self, pool: Pool, leaf: str) -> None:
        """Take one member offline (persistently: it stays offline across export/import)."""
        pools.run(self.runner, commands.offline(pool.spec.name, leaf))

    def replace(self, pool: Pool, old: str, new: str) -> None:
        """Replace member `old` with device `new`; the resilver starts at once. Onto a
        distributed spare it is a sequential rebuild (`-s`), as zed's own spare activation."""
        distributed = not new.startswith("/")  # a dRAID's distributed spare (draid1-0-0)
        pools.run(self.runner, commands.replace(pool.spec.name, old, new, distributed))
        _, link_dir = self.paths(pool.spec)
        if not self.runner.dry_run and not distributed:
            self.link_member(link_dir, new)

    def expand(self, pool: Pool, vdev: str, new: str) -> tuple[float, int | None]:
        """Attach `new` to the raidz vdev `vdev` and wait for the reflow (OpenZFS >= 2.3);
        returns the seconds `zpool attach -w` took and USED + AVAIL of the root dataset
        afterwards. `zpool attach -w` returns when
        the reflow is done, but the new metaslabs arrive in a later transaction group (seen
        on 2.3.2: SIZE still the old width's until then): two `zpool sync` first."""
        a = self.check()
        if not expansion_supported(a.version):
            raise Unsupported(
                f"RAIDZ expansion needs OpenZFS 2.3 or later; this ZFS is {a.version}.",
                "Drop the expand workload, or run it on OpenZFS >= 2.3 (the guest tier: "
                "vm/run-openzfs-tier.sh).",
            )
        name = pool.spec.name
        t0 = time.monotonic()
        pools.run(self.runner, commands.attach_wait(name, vdev, new))
        seconds = max(time.monotonic() - t0, 1e-3)
        _, link_dir = self.paths(pool.spec)
        if not self.runner.dry_run:
            self.link_member(link_dir, new)
        for _ in range(2):
            pools.run(self.runner, commands.sync(name))
        # The pool has one member more: read it back, and count the new disk in every device
        # window from now on (the session's target shares this list).
        unused = [d for d in pool.described.get("unused_devices") or [] if d != new]
        pool.described.update(self.describe(name), unused_devices=unused)
        pool.block_devices[:] = _holding_devices(pool.described)
        return seconds, self.usable_now(pool)

    def allocated(self, pool: Pool) -> int | None:
        """The pool's allocated bytes (zpool ALLOC: parity included) now."""
        got = self._pool_prop(pool.spec.name, "allocated")
        return int(got) if got is not None and is_digits(got) else None

    def usable_now(self, pool: Pool) -> int | None:
        """USED + AVAIL of the root dataset as ZFS reports it now."""
        got = [self.dataset_property(pool, p) for p in ("used", "available")]
        if all(v is not None and is_digits(v) for v in got):
            return sum(int(v) for v in got if v is not None)
        return None

    def data_vdevs(self, pool: Pool) -> list[TopVdev]:
        """The data vdevs with their members as `zpool status` names them now (after an
        export/import through the member links, that is the link's path)."""
        name = pool.spec.name
        return parse.read_status(pools.status_text(self.runner, name), name).tops

    def compressratio(self, pool: Pool) -> str | None:
        """The root dataset's achieved compression ratio, or None if it cannot be read."""
        return self.dataset_property(pool, "compressratio")

    def dataset_property(self, pool: Pool, prop: str) -> str | None:
        """One property of the root dataset as ZFS reports it, or None if it cannot be read."""
        argv = commands.dataset_value(pool.spec.name, prop)
        res = self.runner.run(argv, check=False, mutates=False)
        return res.stdout.strip() or None if res.returncode == 0 else None

    def sync_txg(self, pool: Pool) -> None:
        """OpenZFS: write the open transaction group (`zpool sync`). What a workload wrote
        is in the ZIL after its fsync and syncfs, but in the pool's allocation (iostat's
        alloc, a zvol's referenced, compressratio) only once its txg is written; zfs-fuse
        (pool v23) has no `zpool sync`."""
        if self.dialect == OPENZFS:
            self.runner.run(commands.sync(pool.spec.name), check=False)

    def iostat_snapshot(self, pool: Pool) -> list[dict[str, Any]] | None:
        """OpenZFS: every vdev's `zpool iostat -vlp` figures since import, or None (zfs-fuse
        has no latency columns; a failed read is not a failed trial)."""
        if self.dialect != OPENZFS:
            return None
        res = self.runner.run(commands.iostat_members(pool.spec.name), check=False,
                              mutates=False)  # fmt: skip
        return parse.parse_iostat(res.stdout) if res.returncode == 0 else None

    def class_alloc(
        self, pool: Pool, iostat: list[dict[str, Any]]
    ) -> tuple[dict[str, int], dict[str, int]]:
        """Bytes allocated, and bytes free, on the data vdevs and on each allocation class
        (special, dedup), from an iostat snapshot (OpenZFS) and `zpool status`; empty
        where it cannot tell."""
        res = self.runner.run(commands.status(pool.spec.name, self.dialect), check=False,
                              mutates=False)  # fmt: skip
        if res.returncode != 0:
            return {}, {}
        status = parse.read_status(res.stdout, pool.spec.name)
        return parse.class_alloc(status, iostat), parse.class_alloc(status, iostat, "free")

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

    def wait_scrub(self, pool: Pool, timeout: float = 3600.0, start: float = 30.0) -> ScrubStatus:
        """Poll `zpool status` until the scrub that follows a sequential rebuild finishes;
        one not seen within `start` seconds is reported as not seen."""
        t0 = time.monotonic()
        while True:
            st = parse_scrub(pools.status_text(self.runner, pool.spec.name))
            if st.done or self.runner.dry_run:
                return st
            waited = time.monotonic() - t0
            if not st.seen and waited > start:
                return st
            if waited > timeout:
                raise PoolbenchError(
                    f"The scrub of {pool.spec.name} did not finish within {timeout:.0f} s.",
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


def _check_special_small(value: str, fuse: bool, version: str) -> None:
    """special_small_blocks: 0, or a power of two from 512 to 16M (OpenZFS 2.3)."""
    if fuse:
        raise UsageError(
            f"{version} has no 'special_small_blocks' property (allocation classes came with "
            "ZFS on Linux 0.8; pool v23 has none).",
            "Drop the special_small_blocks factor on zfs-fuse, or run the study on OpenZFS "
            "(the guest tier: vm/run-openzfs-tier.sh).",
        )
    from poolbench.units import parse_special_small

    parse_special_small(value)


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


def _drop_problems(
    pool: Pool, exported: bool, guid: object, now: object, mounted: bool,
    page: cache.CacheDrop, arc_ok: bool | None, arc_said: str,
) -> list[str]:  # fmt: skip
    """What went wrong in an export/import cache drop (empty: every step checked out)."""
    problems = []
    if not exported:
        problems.append("the pool was still listed or mounted after the export")
    if now != guid:
        problems.append(f"after the import the pool's GUID is {now}, not {guid}")
    if not mounted:
        problems.append(f"the dataset is not mounted at {pool.mountpoint} after the import")
    if page.verified is False:
        problems.append(f"page cache of the members: {page.detail}")
    if arc_ok is False:
        problems.append(arc_said)
    return problems


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


def expansion_supported(version: str) -> bool:
    """Whether the ZFS that reported `version` (`zpool version`'s first line, or zfs-fuse's)
    can attach a disk to a raidz vdev: OpenZFS >= 2.3."""
    from poolbench.planner.rules import raidz_expansion_supported, reported_release

    return raidz_expansion_supported(reported_release(version))


def _holding_devices(described: dict[str, Any]) -> list[str]:
    """Kernel names of the devices that hold the pool's blocks: the data vdevs', and a special
    or dedup vdev's (metadata and small blocks live there: a cold stat reads them). Not a
    log's (its blocks are copies of what reaches the data vdevs) nor a cache's."""
    sections = described.get("class_leaves") or {}
    held = [leaf for c in ("special", "dedup") for leaf in sections.get(c, [])]
    return block_names(list(described["leaves"]) + held)


def _member_count(vdevs: tuple[Vdev, ...], classes: tuple[tuple[str, Vdev], ...]) -> int:
    """Devices the layout uses: the data vdevs' and then the class vdevs'."""
    return sum(v.width for v in vdevs) + sum(v.width for _, v in classes)


# `zpool status` section header of each class word
_SECTION = {"log": "logs", "spare": "spares", "cache": "cache", "special": "special",
            "dedup": "dedup"}  # fmt: skip


def _all_class_leaves(described: dict[str, Any]) -> list[str]:
    return [leaf for leaves in described.get("class_leaves", {}).values() for leaf in leaves]
