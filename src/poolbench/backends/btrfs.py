"""btrfs over several block devices: one filesystem, data and metadata profiles, compression
as a mount option.

The layout is the data profile (single, raid0, raid1, raid1c3, raid1c4, raid10, raid5,
raid6); the metadata profile is `pool_options["metadata_profile"]`, by default the data
profile — except raid5/raid6 data, whose metadata gets raid1/raid1c3 as the btrfs manual
advises. Profiles are read back with `btrfs filesystem df`, the mount options (compress=...)
from /proc/self/mountinfo. btrfs has no cache of its own besides the page cache, so a cold
read is an unmount + mount (which evicts every page and inode of the filesystem), verified.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TypedDict

from poolbench.backends import fragmentation
from poolbench.backends._common import block_names, is_block, mount_at, remount_cold
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
from poolbench.records.cache_drop import RemountDrop
from poolbench.safety.journal import Entry, Journal
from poolbench.system.runner import CommandError, Runner

# Minimum devices per profile: btrfs_raid_array[] in fs/btrfs/volumes.c (devs_min).
MIN_DEVICES = {
    "single": 1,
    "dup": 1,
    "raid0": 1,
    "raid1": 2,
    "raid1c3": 3,
    "raid1c4": 4,
    "raid10": 2,
    "raid5": 2,
    "raid6": 3,
}
DEFAULT_METADATA = {"raid5": "raid1", "raid6": "raid1c3"}
POOL_OPTIONS = ("metadata_profile",)
FS_OPTIONS = ("compression",)
_COMPRESS = re.compile(r"^(?:zlib(?::[1-9])?|lzo|zstd(?::(?:[1-9]|1[0-5]))?|no|none|off)$")
FEATURES = Path("/sys/fs/btrfs/features")


def parse_df(text: str) -> dict[str, str]:
    """`btrfs filesystem df -b` → {"Data": "raid5", "Metadata": "raid1c3", ...}.

    Lines read `Data, RAID5: total=..., used=...`; a profile with total=0 is left out (mkfs
    leaves empty single chunks on some versions). Mixed block groups give "Data+Metadata"."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([A-Za-z+]+),\s*([A-Za-z0-9]+):\s*total=(\d+)", line)
        if not m or m.group(1) == "GlobalReserve" or int(m.group(3)) == 0:
            continue
        kind, profile = m.group(1), m.group(2).lower()
        if kind in found and found[kind] != profile:
            found[kind] = f"{found[kind]}+{profile}"
        else:
            found[kind] = profile
    return found


def compress_option(value: str) -> str | None:
    """The mount option for a compression level, None for no compression."""
    return None if value in ("no", "none", "off") else f"compress={value}"


def _same_compress(asked: str, mount_options: str) -> bool:
    opts = dict(o.partition("=")[::2] for o in mount_options.split(","))
    have = opts.get("compress") or opts.get("compress-force")
    if asked in ("no", "none", "off"):
        return have is None
    if have is None:
        return False
    # The kernel shows the default level: zstd → zstd:3, zlib → zlib:3.
    return have == asked or (":" not in asked and have.split(":")[0] == asked)


class BtrfsDescription(TypedDict):
    """The filesystem as btrfs describes it (a btrfs pool's `Pool.described`, stored as the
    guards' `pool` section)."""

    btrfs_progs: str
    profiles: dict[str, str]  # block group kind (Data, Metadata, System) → profile
    uuid: str | None
    devices: list[str]
    fstype: str | None
    mount_options: str


class BtrfsBackend:
    name = "btrfs"

    def __init__(self, runner: Runner, mountinfo: Path = Path("/proc/self/mountinfo")) -> None:
        self.runner = runner
        self.mountinfo = mountinfo
        self.features = FEATURES

    def check(self) -> Availability:
        r = self.runner
        if r.which("mkfs.btrfs") is None or r.which("btrfs") is None:
            return Availability(False, "btrfs-progs is not installed (Debian: btrfs-progs).")
        try:
            fs = Path("/proc/filesystems").read_text()
        except OSError:
            fs = ""
        if not re.search(r"\bbtrfs\b", fs) and not self.features.is_dir():
            return Availability(
                False,
                f"the running kernel ({os.uname().release}) has no btrfs driver loaded "
                "(/proc/filesystems does not list btrfs); try `modprobe btrfs`.",
            )
        out = r.run(["mkfs.btrfs", "--version"], check=False, mutates=False).stdout.strip()
        return Availability(True, "", out.splitlines()[0] if out else "", "btrfs")

    def _kernel_has(self, feature: str) -> bool:
        if self.features.is_dir():
            return (self.features / feature).exists()
        return True  # the module is not loaded yet: let mkfs/mount tell

    def metadata_profile(self, spec: PoolSpec) -> str:
        return str(spec.pool_options.get("metadata_profile") or DEFAULT_METADATA.get(
            spec.layout, spec.layout))  # fmt: skip

    def validate(self, spec: PoolSpec) -> None:
        a = self.check()
        if not a.ok:
            raise unavailable("btrfs", a.reason)
        _check_option_names(spec)
        for what, profile in (("data", spec.layout), ("metadata", self.metadata_profile(spec))):
            self._check_profile(what, profile, len(spec.devices))
        _check_devices(spec)
        comp = spec.fs_options.get("compression")
        if comp is not None:
            self._check_compression(str(comp))

    def _check_profile(self, what: str, profile: str, n: int) -> None:
        """A known data/metadata profile, enough devices for it, and kernel support."""
        if profile not in MIN_DEVICES:
            raise UsageError(
                f"'{profile}' is not a btrfs {what} profile.",
                f"Use one of {', '.join(MIN_DEVICES)}.",
            )
        if n < MIN_DEVICES[profile]:
            raise UsageError(
                f"btrfs {profile} needs at least {MIN_DEVICES[profile]} devices, not {n}.",
                "Give more disks or choose another profile.",
            )
        if profile in ("raid1c3", "raid1c4") and not self._kernel_has("raid1c34"):
            raise UsageError(
                f"btrfs {profile} needs Linux 5.5 or later; this kernel "
                f"({os.uname().release}) has no raid1c34 feature.",
                "Use raid1, or a newer kernel.",
            )
        if profile in ("raid5", "raid6") and not self._kernel_has("raid56"):
            raise UsageError(f"This kernel's btrfs has no raid56 support ({profile}).", "")

    def _check_compression(self, comp: str) -> None:
        """A compress= value btrfs accepts, with an algorithm this kernel has."""
        if not _COMPRESS.match(comp):
            raise UsageError(
                f"compression={comp} is not a btrfs compress= value.",
                "Use zstd, zstd:1..15, lzo, zlib, zlib:1..9, or no.",
            )
        algo = comp.split(":")[0]
        if algo in ("zstd", "lzo") and not self._kernel_has(f"compress_{algo}"):
            raise UsageError(f"This kernel's btrfs cannot compress with {algo}.", "")

    # -- create ------------------------------------------------------------------------------
    def mkfs_argv(self, spec: PoolSpec) -> list[str]:
        return ["mkfs.btrfs", "-f", "-q", "-L", spec.name, "-d", spec.layout,
                "-m", self.metadata_profile(spec), *spec.devices]  # fmt: skip

    def mount_argv(self, spec: PoolSpec) -> list[str]:
        """Every member named (`device=`), so the mount needs no earlier `btrfs device scan`."""
        opts = [f"device={d}" for d in spec.devices[1:]]
        comp = spec.fs_options.get("compression")
        if comp is not None and compress_option(str(comp)):
            opts.append(str(compress_option(str(comp))))
        argv = ["mount", "-t", "btrfs"]
        if opts:
            argv += ["-o", ",".join(opts)]
        return argv + [spec.devices[0], str(spec.mount_root / spec.name)]

    def create(self, spec: PoolSpec, journal: Journal) -> Pool:
        self.validate(spec)
        dry = self.runner.dry_run
        mountpoint = spec.mount_root / spec.name
        if not spec.mount_root.exists():
            journal.path_created(str(spec.mount_root))
            if not dry:
                spec.mount_root.mkdir(parents=True)
        journal.dir_created(str(mountpoint))
        if not dry:
            mountpoint.mkdir()
        self.runner.run(self.mkfs_argv(spec))
        journal.mount_created(str(mountpoint), spec.devices[0])
        self.runner.run(self.mount_argv(spec))
        pool = Pool(spec, mountpoint, [], {"dry_run": True} if dry else {})
        if not dry:
            pool.block_devices = block_names(list(spec.devices))
            pool.described = dict(self.describe(pool))
        return pool

    def describe(self, pool: Pool) -> BtrfsDescription:
        mp = str(pool.mountpoint)
        df = self.runner.run(["btrfs", "filesystem", "df", "-b", mp], mutates=False).stdout
        show = self.runner.run(["btrfs", "filesystem", "show", "--raw", mp], mutates=False).stdout
        devices = re.findall(
            r"^\s*devid\s+\d+\s+size\s+\d+\s+used\s+\d+\s+path\s+(\S+)", show, re.M
        )
        uuid = re.search(r"uuid:\s*([0-9a-f-]+)", show)
        m = mount_at(pool.mountpoint, self.mountinfo)
        return {
            "btrfs_progs": self.check().version,
            "profiles": parse_df(df),
            "uuid": uuid.group(1) if uuid else None,
            "devices": devices,
            "fstype": m.fstype if m else None,
            "mount_options": _mount_options(pool.mountpoint, self.mountinfo),
        }

    def write_model(self, pool: Pool, block: int | None) -> Found:
        profiles = pool.described.get("profiles")
        data = profiles.get("Data") if isinstance(profiles, dict) else None
        return geometry.for_btrfs_pool(str(data or pool.spec.layout), len(pool.block_devices))

    def stopped_answering(self, pool: Pool, failure: PoolbenchError) -> str | None:
        return file_system_silent(pool, failure)

    def verify(self, pool: Pool) -> list[str]:
        if self.runner.dry_run:
            return []
        try:
            d = self.describe(pool)
        except CommandError as exc:
            return [f"btrfs at {pool.mountpoint} cannot be read back: {exc.problem}"]
        pool.described = dict(d)
        spec = pool.spec
        problems = []
        if d["fstype"] != "btrfs":
            problems.append(f"{pool.mountpoint} is not a mounted btrfs (found {d['fstype']})")
        prof = d["profiles"]
        want = {"Data": spec.layout, "Metadata": self.metadata_profile(spec)}
        if "Data+Metadata" in prof:
            problems.append(f"mixed data+metadata block groups ({prof['Data+Metadata']})")
        for kind, profile in want.items():
            if prof.get(kind) != profile:
                problems.append(f"{kind.lower()} profile is {prof.get(kind)}, not {profile}")
        have = sorted(os.path.realpath(x) for x in d["devices"])
        asked = sorted(os.path.realpath(x) for x in spec.devices)
        if have != asked:
            problems.append(f"member devices are {have}, not {asked}")
        comp = spec.fs_options.get("compression")
        if comp is not None and not _same_compress(str(comp), d["mount_options"]):
            problems.append(f"mount options are '{d['mount_options']}', not compress={comp}")
        return problems

    def drop_cache(self, pool: Pool) -> RemountDrop:
        return remount_cold(self.runner, pool.mountpoint, self.mount_argv(pool.spec),
                            self.mountinfo)  # fmt: skip

    def free_fragmentation(self, pool: Pool) -> tuple[float | None, str]:
        """None: btrfs reports no free-space fragmentation (said in the aging record)."""
        return None, fragmentation.BTRFS_NONE

    def destroy(self, pool: Pool, journal: Journal) -> None:
        mountpoint = str(pool.mountpoint)

        def owned(e: Entry) -> bool:
            return e.get("kind") in ("mount", "dir") and (
                e.get("mountpoint") == mountpoint or e.get("path") == mountpoint
            )

        journal.teardown_or_raise(
            f"btrfs {pool.spec.name} was not fully torn down: ",
            "Inspect it with `findmnt`; `poolbench cleanup` retries.",
            only=owned,
        )
        # The kernel remembers the members of every btrfs it has seen; forget ours, so a
        # later filesystem on a re-used loop device is not confused with this one.
        for dev in pool.spec.devices:
            if self.runner.dry_run or is_block(dev):
                self.runner.run(["btrfs", "device", "scan", "--forget", dev], check=False)


def _mount_options(mountpoint: Path, mountinfo: Path) -> str:
    """Per-superblock options (compress=..., space_cache...) of the mount at `mountpoint`."""
    want = os.path.realpath(mountpoint)
    found = ""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        left, _, right = line.partition(" - ")
        lf, rf = left.split(), right.split()
        if len(lf) >= 5 and len(rf) >= 3 and lf[4] == want:
            found = rf[2]
    return found


def _check_option_names(spec: PoolSpec) -> None:
    """Every pool and filesystem option is one btrfs knows (a typo must not be ignored)."""
    for key in spec.pool_options:
        if key not in POOL_OPTIONS:
            raise UsageError(f"Unknown btrfs option '{key}'.", f"Known: {', '.join(POOL_OPTIONS)}.")
    for key in spec.fs_options:
        if key not in FS_OPTIONS:
            raise UsageError(
                f"Unknown btrfs filesystem option '{key}'.", f"Known: {', '.join(FS_OPTIONS)}."
            )


def _check_devices(spec: PoolSpec) -> None:
    """Block devices only (btrfs cannot span plain files), and none given twice."""
    if spec.devices and any(not d.startswith("/dev/") for d in spec.devices):
        raise UsageError(
            f"btrfs over several devices needs block devices, not plain files ({spec.devices[0]}).",
            'Use loop devices: source = "loop" in [disks].',
        )
    real = [os.path.realpath(d) for d in spec.devices]
    if len(set(real)) != len(real):
        raise UsageError("A device is given twice.", "Name each disk once.")
