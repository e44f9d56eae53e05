"""Linux md (mdadm) RAID 0/1/5/6/10 with ext4, ext3 or xfs on top.

The layout is the md level; `fs_options["fs"]` picks ext4 (default), ext3 or xfs;
`pool_options["chunk"]` sets the chunk size (e.g. 512K) and `pool_options["assume_clean"]`
("yes") skips the initial resync — otherwise poolbench waits for it (`mdadm --wait`), because
a resync running under a measurement steals the disks' bandwidth.

The initial resync is a figure of its own (one user waited nine hours for it; ZFS needs
none): the description carries `initial_resync` — how long `mdadm --wait` took, the bytes per
member it covered, and `measured_during_resync` (always false: poolbench either waits or the
array was created `--assume-clean`, which skips the resync and leaves parity uncomputed until
written). `sync_action` is read back at every verify, so a resync or check that is running
when a measurement would start is reported.

A kernel without the md driver (no /proc/mdstat and no md_mod module) makes the backend
unavailable, with that reason.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from poolbench import is_digits
from poolbench.backends import fragmentation
from poolbench.backends._common import block_names, mount_at, remount_cold
from poolbench.backends.base import (
    Availability,
    Pool,
    PoolSpec,
    file_system_silent,
    unavailable,
)
from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards import geometry
from poolbench.guards.geometry import Found
from poolbench.records.cache_drop import RemountDrop, StripeCacheFlush
from poolbench.safety.journal import Entry, Journal
from poolbench.system.runner import CommandError, Runner
from poolbench.units import parse_size

MIN_DEVICES = {"raid0": 2, "raid1": 2, "raid5": 3, "raid6": 4, "raid10": 2}
FILESYSTEMS = ("ext4", "ext3", "xfs")
POOL_OPTIONS = ("chunk", "assume_clean")
FS_OPTIONS = ("fs",)


def parse_detail_export(text: str) -> dict[str, str]:
    """`mdadm --detail --export DEV`: KEY=VALUE lines."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip()
    return out


class ResyncJson(TypedDict):
    """The array's initial resync as a figure: how it was handled and how long it took."""

    mode: str
    seconds: float | None
    member_bytes: int | None
    mib_per_s: float | None
    measured_during_resync: bool


class MdDescription(TypedDict):
    """The array as `mdadm --detail` and sysfs describe it (an md pool's `Pool.described`,
    stored as the guards' `pool` section)."""

    mdadm: str
    device: str
    level: str | None
    raid_devices: int
    members: list[str]
    fstype: str | None
    mount_source: str | None
    sync_action: str | None  # "idle" when no resync, recovery or check runs
    chunk_bytes: int | None
    initial_resync: ResyncJson | None


class MdBackend:
    name = "md"

    def __init__(
        self,
        runner: Runner,
        *,
        proc_mdstat: Path = Path("/proc/mdstat"),
        modules_dir: Path | None = None,
        mountinfo: Path = Path("/proc/self/mountinfo"),
        sys_block: Path = Path("/sys/block"),
        node_exists: Callable[[str], bool] = os.path.exists,
    ) -> None:
        self.runner = runner
        self.sys_block = sys_block
        self.node_exists = node_exists
        self.proc_mdstat = proc_mdstat
        self.modules_dir = modules_dir or Path("/lib/modules") / os.uname().release
        self.mountinfo = mountinfo

    def _md_module(self) -> bool:
        """Is md built in or available as a module for the running kernel?"""
        for index in ("modules.builtin", "modules.dep"):
            try:
                text = (self.modules_dir / index).read_text()
            except OSError:
                continue
            if re.search(r"(^|/)md-mod\.ko", text, re.M):
                return True
        return False

    def check(self) -> Availability:
        if not self.proc_mdstat.exists() and not self._md_module():
            return Availability(
                False,
                f"the running kernel ({os.uname().release}) has no md driver: "
                f"{self.proc_mdstat} is absent and no md_mod module is available "
                f"(looked in {self.modules_dir}). Use a kernel with CONFIG_BLK_DEV_MD, or "
                "`modprobe md_mod` where modules can be loaded.",
            )
        if self.runner.which("mdadm") is None:
            return Availability(False, "mdadm is not installed (Debian: mdadm).")
        out = self.runner.run(["mdadm", "--version"], check=False, mutates=False)
        text = (out.stdout + out.stderr).strip()
        return Availability(True, "", text.splitlines()[0] if text else "", "md")

    def validate(self, spec: PoolSpec) -> None:
        a = self.check()
        if not a.ok:
            raise unavailable("md", a.reason)
        self.validate_spec(spec)

    @staticmethod
    def validate_spec(spec: PoolSpec) -> None:
        """The checks that need no kernel (also run by tests on any machine)."""
        if spec.layout not in MIN_DEVICES:
            raise UsageError(
                f"'{spec.layout}' is not an md level.", f"Use one of {', '.join(MIN_DEVICES)}."
            )
        n = len(spec.devices)
        if n < MIN_DEVICES[spec.layout]:
            raise UsageError(
                f"md {spec.layout} needs at least {MIN_DEVICES[spec.layout]} devices, not {n}.",
                "Give more disks or choose another level.",
            )
        for key in spec.pool_options:
            if key not in POOL_OPTIONS:
                raise UsageError(
                    f"Unknown md option '{key}'.", f"Known: {', '.join(POOL_OPTIONS)}."
                )
        for key in spec.fs_options:
            if key not in FS_OPTIONS:
                raise UsageError(f"Unknown md filesystem option '{key}'.", "Known: fs.")
        fs = spec.fs_options.get("fs", "ext4")
        if fs not in FILESYSTEMS:
            raise UsageError(f"fs={fs} is not supported on md.", "Use ext4, ext3 or xfs.")
        chunk = spec.pool_options.get("chunk")
        if chunk is not None and not re.fullmatch(r"\d+[KM]", str(chunk)):
            raise UsageError(f"chunk={chunk} is not a chunk size.", "Write e.g. 64K or 512K.")
        clean = str(spec.pool_options.get("assume_clean", "no")).lower()
        if clean not in ("yes", "no", "true", "false", "1", "0"):
            raise UsageError(f"assume_clean={clean} is not yes or no.", "Write yes or no.")
        if any(not d.startswith("/dev/") for d in spec.devices):
            raise UsageError("md arrays need block devices.", 'Use source = "loop" in [disks].')
        if not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", spec.name):
            raise UsageError(f"'{spec.name}' is not a usable md array name.", "")

    @staticmethod
    def array_path(spec: PoolSpec) -> str:
        return f"/dev/md/{spec.name}"

    @staticmethod
    def assume_clean(spec: PoolSpec) -> bool:
        return str(spec.pool_options.get("assume_clean", "no")).lower() in ("yes", "true", "1")

    @staticmethod
    def mkfs_argv(spec: PoolSpec) -> list[str]:
        dev, fs = MdBackend.array_path(spec), spec.fs_options.get("fs", "ext4")
        if fs == "xfs":
            return ["mkfs.xfs", "-f", "-q", dev]
        if fs == "ext3":
            # ext3 has no uninit_bg: mke2fs writes every inode table now, nothing lazy is left.
            return ["mkfs.ext3", "-q", "-F", "-L", spec.name[:16], dev]
        return ["mkfs.ext4", "-q", "-F", "-L", spec.name[:16],
                "-E", "lazy_itable_init=0,lazy_journal_init=0", dev]  # fmt: skip

    def create_argvs(self, spec: PoolSpec) -> list[list[str]]:
        """mdadm --create, [mdadm --wait], mkfs — in order."""
        dev = self.array_path(spec)
        create = ["mdadm", "--create", dev, "--run", "--metadata=1.2",
                  f"--level={spec.layout}", f"--raid-devices={len(spec.devices)}"]  # fmt: skip
        if "chunk" in spec.pool_options and spec.layout != "raid1":
            create.append(f"--chunk={spec.pool_options['chunk']}")
        clean = self.assume_clean(spec)
        if clean:
            create.append("--assume-clean")
        create += list(spec.devices)
        argvs = [create]
        if not clean and spec.layout != "raid0":
            argvs.append(["mdadm", "--wait", dev])
        argvs.append(self.mkfs_argv(spec))
        return argvs

    def mount_argv(self, spec: PoolSpec) -> list[str]:
        fs = spec.fs_options.get("fs", "ext4")
        return ["mount", "-t", fs, self.array_path(spec), str(spec.mount_root / spec.name)]

    def create(self, spec: PoolSpec, journal: Journal) -> Pool:
        self.validate(spec)
        dry = self.runner.dry_run
        dev = self.array_path(spec)
        mountpoint = spec.mount_root / spec.name
        if not spec.mount_root.exists():
            journal.path_created(str(spec.mount_root))
            if not dry:
                spec.mount_root.mkdir(parents=True)
        journal.dir_created(str(mountpoint))
        if not dry:
            mountpoint.mkdir()
        journal.array_created(dev, list(spec.devices))
        waited: float | None = None
        created = time.monotonic()
        for argv in self.create_argvs(spec):
            # `mdadm --wait` exits 1 when there is nothing to wait for.
            self.runner.run(argv, check=argv[1] != "--wait")
            if argv[1] == "--create":
                created = time.monotonic()
                self._settle()
                if not dry and not self.node_exists(dev):
                    raise PoolbenchError(
                        f"mdadm created the array, but {dev} did not appear.",
                        "Check that udev runs and has mdadm's rules (63-md-raid-arrays.rules).",
                    )
            if argv[1] == "--wait":
                # the resync starts with the array: time it from the end of --create
                waited = time.monotonic() - created
        # The kernel shows the mount's source as /dev/mdNNN, which /dev/md/NAME links to.
        journal.mount_created(str(mountpoint), os.path.realpath(dev))
        self.runner.run(self.mount_argv(spec))
        pool = Pool(spec, mountpoint, [] if dry else block_names(list(spec.devices)), {})
        pool.described = {"initial_resync": self.resync_record(spec, waited)}
        if dry:  # not built: nothing of it to read (backends/planned.py)
            pool.described["dry_run"] = True
        else:
            pool.described = dict(self.describe(pool))
        return pool

    def _settle(self) -> None:
        """Let udev finish with the array's events: it makes /dev/md/NAME after `mdadm
        --create` (with udev running, mdadm leaves that to udev and returns at once), and it
        still holds the members open for a moment after `mdadm --stop` / --zero-superblock,
        which makes detaching a loop member under it fail."""
        if self.runner.which("udevadm") is not None:
            self.runner.run(["udevadm", "settle", "--timeout=60"], check=False, mutates=False)

    def _sysfs_md(self, spec: PoolSpec) -> Path:
        """/sys/block/mdNNN/md of the array (/dev/md/NAME links to /dev/mdNNN)."""
        return self.sys_block / os.path.basename(os.path.realpath(self.array_path(spec))) / "md"

    def _sysfs(self, spec: PoolSpec, attr: str) -> str | None:
        try:
            return (self._sysfs_md(spec) / attr).read_text().strip()
        except OSError:
            return None

    def resync_record(self, spec: PoolSpec, waited: float | None) -> ResyncJson:
        """The initial resync as a figure: how it was handled and how long it took."""
        size_kib = self._sysfs(spec, "component_size")
        member = int(size_kib) * 1024 if size_kib and is_digits(size_kib) else None
        if spec.layout == "raid0":
            mode = "none (raid0 has no redundancy to build)"
        elif self.assume_clean(spec):
            mode = "skipped (--assume-clean: parity/mirrors not computed until written)"
        else:
            mode = "waited (mdadm --wait) before any measurement"
        rate = member / waited / 2**20 if member and waited else None
        return {
            "mode": mode,
            "seconds": None if waited is None else round(waited, 3),
            "member_bytes": member,
            "mib_per_s": None if rate is None else round(rate, 1),
            "measured_during_resync": False,
        }

    def describe(self, pool: Pool) -> MdDescription:
        dev = self.array_path(pool.spec)
        out = self.runner.run(["mdadm", "--detail", "--export", dev], mutates=False).stdout
        detail = parse_detail_export(out)
        members = [
            v for k, v in detail.items() if k.startswith("MD_DEVICE_") and k.endswith("_DEV")
        ]
        m = mount_at(pool.mountpoint, self.mountinfo)
        return {
            "mdadm": self.check().version,
            "device": dev,
            "level": detail.get("MD_LEVEL"),
            "raid_devices": int(detail.get("MD_DEVICES", "0") or 0),
            "members": members,
            "fstype": m.fstype if m else None,
            "mount_source": m.source if m else None,
            # "idle" when no resync, recovery or check is running on the array
            "sync_action": self._sysfs(pool.spec, "sync_action"),
            "chunk_bytes": _int_or_none(self._sysfs(pool.spec, "chunk_size")),
            "initial_resync": pool.described.get("initial_resync"),
        }

    def write_model(self, pool: Pool, block: int | None) -> Found:
        level = pool.described.get("level") or pool.spec.layout
        members = pool.described.get("raid_devices")
        n = members if isinstance(members, int) and members else len(pool.block_devices)
        return geometry.for_md_pool(str(level), n)

    def stopped_answering(self, pool: Pool, failure: PoolbenchError) -> str | None:
        return file_system_silent(pool, failure)

    def verify(self, pool: Pool) -> list[str]:
        if self.runner.dry_run:
            return []
        try:
            d = self.describe(pool)
        except CommandError as exc:
            return [f"md array {self.array_path(pool.spec)} cannot be read back: {exc.problem}"]
        pool.described = dict(d)
        spec = pool.spec
        problems = []
        if d["level"] != spec.layout:
            problems.append(f"md level is {d['level']}, not {spec.layout}")
        if d["raid_devices"] != len(spec.devices):
            problems.append(f"the array has {d['raid_devices']} devices, not {len(spec.devices)}")
        have = sorted(os.path.realpath(x) for x in d["members"])
        if have != sorted(os.path.realpath(x) for x in spec.devices):
            problems.append(f"member devices are {have}, not {list(spec.devices)}")
        fs = spec.fs_options.get("fs", "ext4")
        if d["fstype"] != fs:
            problems.append(f"{pool.mountpoint} holds {d['fstype']}, not {fs}")
        chunk = spec.pool_options.get("chunk")
        if chunk and spec.layout != "raid1" and d["chunk_bytes"] != parse_size(str(chunk)):
            problems.append(f"the chunk is {d['chunk_bytes']} bytes, not {chunk}")
        if d["sync_action"] not in (None, "idle"):
            problems.append(
                f"the array is busy with a {d['sync_action']}: a measurement now would share "
                "the disks with it"
            )
        return problems

    def drop_cache(self, pool: Pool) -> RemountDrop:
        size = self._sysfs_md(pool.spec) / "stripe_cache_size"
        flush = (lambda: flush_stripe_cache(size)) if size.exists() else None
        return remount_cold(self.runner, pool.mountpoint, self.mount_argv(pool.spec),
                            self.mountinfo, while_unmounted=flush)  # fmt: skip

    def free_fragmentation(self, pool: Pool) -> tuple[float | None, str]:
        """ext4/ext3: e2freefrag's histogram (read-only, on the mounted array's device),
        weighted as OpenZFS weighs its free segments; xfs: none."""
        fs = pool.spec.fs_options.get("fs", "ext4")
        if fs == "xfs":
            return None, "none: xfs free space is not read (xfs_db freesp is not run)"
        res = self.runner.run(["e2freefrag", self.array_path(pool.spec)], check=False,
                              mutates=False)  # fmt: skip
        if res.returncode != 0:
            return None, f"none: e2freefrag failed ({res.stderr.strip()[:120]})"
        return fragmentation.e2freefrag_percent(res.stdout), fragmentation.E2FREEFRAG_HOW

    def destroy(self, pool: Pool, journal: Journal) -> None:
        mountpoint, dev = str(pool.mountpoint), self.array_path(pool.spec)

        def owned(e: Entry) -> bool:
            kind = e.get("kind")
            return (
                (kind == "mount" and e.get("mountpoint") == mountpoint)
                or (kind == "dir" and e.get("path") == mountpoint)
                or (kind == "md" and e.get("device") == dev)
            )

        try:
            journal.teardown_or_raise(
                f"md array {dev} was not fully torn down: ",
                "Inspect it with `cat /proc/mdstat`; `poolbench cleanup` retries.",
                only=owned,
            )
        finally:
            self._settle()  # after the teardown, whether or not it left something


STRIPE_CACHE_MIN = 17  # md refuses a stripe_cache_size of 16 or less


def flush_stripe_cache(size_file: Path) -> StripeCacheFlush:
    """Empty an md raid4/5/6 array's stripe cache, which neither drop_caches nor an unmount
    touches: a cold read of blocks the array wrote or read lately is otherwise served from
    it, never reaching the members (a cold stat on raid6 read 4 KiB for 300 files' inodes).
    Shrinking the cache to md's minimum frees all but that many idle stripes; restoring the
    size allocates empty ones. Written to sysfs directly, as drop_caches is."""
    try:
        was = int(size_file.read_text().strip())
        size_file.write_text(f"{STRIPE_CACHE_MIN}\n")
        size_file.write_text(f"{was}\n")
        now = int(size_file.read_text().strip())
    except (OSError, ValueError) as exc:
        return {"method": "stripe_cache_size", "verified": False,
                "detail": f"md's stripe cache could not be emptied ({exc})"}  # fmt: skip
    return {
        "method": "stripe_cache_size",
        "size": was,
        "kept_at_most": STRIPE_CACHE_MIN,  # stripes md keeps through the shrink
        "verified": now == was,
        "detail": "" if now == was else f"stripe_cache_size is {now}, not {was} as before",
    }


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text and is_digits(text) else None
