"""The one list of what poolbench uses from the machine it runs on (pure, standard library only).

Every capability has an id, the words a user reads, what provides it, and what its absence
disables. `poolbench doctor` shows each of them, found or not; a study refused for a missing
one names it with the same words and id (`unsupported`) and points to `doctor`; the install
script asks this module which Debian packages each optional part is (`python3 -m
poolbench.capabilities packages PART...`, run from a checkout before poolbench is installed).

Groups, as docs/install.md names them: **core** (fio, a ZFS, or at least a directory to
bench: doctor exits non-zero only when the core is missing); **zfs** (features of the ZFS in
use, by flavour and release); **system** (root, kernel facilities, block tools);
**optional** (one per feature: PostgreSQL, btrfs, xfs, md, the untar tarball).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from poolbench.errors import Unsupported

CORE, ZFS, SYSTEM, OPTIONAL = "core", "zfs", "system", "optional"
GROUP_TITLES = {
    CORE: "core: what every measurement needs (doctor exits 7 without it)",
    ZFS: "zfs: features of the ZFS in use",
    SYSTEM: "system: root, kernel facilities, block tools",
    OPTIONAL: "optional: one per feature",
}


@dataclass(frozen=True)
class Capability:
    id: str  # stable: doctor --json, refusals, docs/install.md
    name: str  # the words a user reads
    group: str  # core | zfs | system | optional
    provides: str  # what gives it (a package, a ZFS release, a kernel facility)
    disables: str  # what its absence disables: studies, options, commands
    packages: tuple[str, ...] = ()  # Debian packages that add it ((): not a package)
    since: str = ""  # ZFS features: the OpenZFS release that brought it ("" = any OpenZFS)
    programs: tuple[str, ...] = ()  # the programs poolbench runs for it (doctor looks for them)


CAPABILITIES: tuple[Capability, ...] = (
    Capability("fio", "fio 3.27 or newer", CORE, "the fio package",
               "every measurement: run, study, bench, demo, disks --screen (plan, disks, "
               "report and export need no fio)", ("fio",), programs=("fio",)),
    Capability("zfs", "ZFS (zpool, zfs)", CORE,
               "the host's own OpenZFS (zfsutils-linux); zfs-fuse only on a machine with no "
               "ZFS at all",
               "every ZFS pool: studies, run and demo on ZFS layouts (bench on a mounted "
               "directory, btrfs and md still run)", programs=("zpool", "zfs", "zfs-fuse")),
    Capability("directory", "a directory to bench", CORE,
               "a writable scratch directory (default /var/tmp/poolbench)",
               "bench, and the sparse-file disks of studies and the demo"),
    Capability("draid", "dRAID", ZFS, "OpenZFS 2.1 or newer",
               "dRAID layouts (draid1:... in --layouts of parity, geometry, width, resilver; "
               "geometry's default dRAID column)", since="2.1.0"),
    Capability("special-vdevs", "special and dedup vdevs", ZFS, "OpenZFS 0.8 or newer",
               "study special; '+ special' and '+ dedup' in a layout", since="0.8.0"),
    Capability("zvols", "zvols (ZFS volumes)", ZFS, "OpenZFS",
               "study volblocksize; geometry --targets zvol; target = zvol in a study file"),
    Capability("sync", "the sync property", ZFS, "OpenZFS",
               "study sync-slog --levels (always, disabled); zfs-fuse behaves as "
               "sync=standard"),
    Capability("arcstats", "ARC counters (arcstats)", ZFS,
               "OpenZFS (/proc/spl/kstat/zfs/arcstats), or zfs-fuse's /zfs-kstat",
               "the ARC check of every cold read (the device bytes still decide); study "
               "l2arc"),
    Capability("arc-limit", "an ARC ceiling (zfs_arc_max)", ZFS,
               "OpenZFS's module parameters (/sys/module/zfs/parameters)",
               "study l2arc; the arc_max factor"),
    Capability("prefetch-tunable", "predictive prefetch on or off (zfs_prefetch_disable)",
               ZFS, "OpenZFS's module parameters (/sys/module/zfs/parameters)",
               "study prefetch; the prefetch factor"),
    Capability("raidz-expansion", "RAIDZ expansion", ZFS, "OpenZFS 2.3 or newer",
               "study expand; the expand workload", since="2.3.0"),
    Capability("direct-io", "Direct I/O (O_DIRECT around the ARC)", ZFS,
               "OpenZFS 2.3 or newer",
               "nothing is refused: below 2.3, O_DIRECT reads (qd-curve, --iodepth) go "
               "through the ARC, and the cold-read check says so", since="2.3.0"),
    Capability("fragmentation", "the free-space fragmentation figure", ZFS, "OpenZFS",
               "study aging --frag; frag_target"),
    Capability("root", "root", SYSTEM, "running poolbench as root (sudo)",
               "every real run, study, demo and record: pools, loop devices, mounts, cold "
               "reads, disk caps (plan, disks, report and any --dry-run do not need it)"),
    Capability("loop-devices", "loop devices", SYSTEM,
               "the kernel's loop driver and losetup (package mount)",
               "the sparse-file disks of studies and the demo (source = loop)", ("mount",),
               programs=("losetup",)),
    Capability("block-tools", "block device tools", SYSTEM,
               "lsblk, wipefs, blkid, fincore (package util-linux)",
               "disks, the safety checks on real devices, the page-cache check",
               ("util-linux",), programs=("lsblk", "wipefs", "blkid", "fincore")),
    Capability("partitions", "partition tools", SYSTEM, "sfdisk and partx (package fdisk)",
               "study vdev-source (its partition and slice levels)", ("fdisk",),
               programs=("sfdisk", "partx")),
    Capability("blkio-throttle", "a blkio throttle (disk caps)", SYSTEM,
               "the kernel's cgroup v1 blkio controller, mounted at /sys/fs/cgroup/blkio",
               "[disks] cap, study slow-disk; the demo runs uncapped without it"),
    Capability("block-tracing", "block tracing", SYSTEM,
               "blktrace and blkparse (package blktrace)", "poolbench record", ("blktrace",),
               programs=("blktrace", "blkparse")),
    Capability("postgresql", "PostgreSQL and pgbench", OPTIONAL,
               "the postgresql and postgresql-contrib packages",
               "study database; the pgbench workloads", ("postgresql", "postgresql-contrib"),
               programs=("pgbench",)),
    Capability("btrfs", "btrfs", OPTIONAL, "btrfs-progs and the kernel's btrfs driver",
               "fs-compare's btrfs raid5/raid6; backend = btrfs", ("btrfs-progs",),
               programs=("mkfs.btrfs", "btrfs")),
    Capability("xfs", "xfs", OPTIONAL, "xfsprogs", "fs-compare's md + xfs",
               ("xfsprogs",), programs=("mkfs.xfs",)),
    Capability("ext4", "ext3 and ext4", OPTIONAL, "e2fsprogs",
               "fs-compare's md + ext3/ext4", ("e2fsprogs",),
               programs=("mkfs.ext4", "mkfs.ext3", "e2freefrag")),
    Capability("md", "md RAID", OPTIONAL, "mdadm and the kernel's md driver",
               "fs-compare's md raid5/raid6 stacks; backend = md", ("mdadm",),
               programs=("mdadm",)),
    Capability("untar-tarball", "a kernel source tarball", OPTIONAL,
               "linux-source-6.1 (/usr/src/linux-source-6.1.tar.xz)",
               "the untar workload at fs-compare's default --tarball (any other tarball "
               "works with --tarball FILE)", ("linux-source-6.1",)),
)  # fmt: skip

BY_ID: dict[str, Capability] = {c.id: c for c in CAPABILITIES}

# The install script's optional parts: what a user asks for by name, and the capabilities it
# adds (docs/install.md). The core (fio) is always installed; the ZFS is the host's own.
PARTS: dict[str, tuple[str, ...]] = {
    "database": ("postgresql",),
    "record": ("block-tracing",),
    "fs-compare": ("btrfs", "xfs", "ext4", "md"),
    "untar": ("untar-tarball",),
}


def get(cap_id: str) -> Capability:
    return BY_ID[cap_id]


def doctor_hint(cap_id: str) -> str:
    """The sentence every refusal for a missing capability ends with."""
    return f"`poolbench doctor` shows what this machine has: {get(cap_id).name} [{cap_id}]."


def unsupported(cap_id: str, problem: str, fix: str) -> Unsupported:
    """The refusal of something this machine lacks, named as `poolbench doctor` names it."""
    fix = fix.rstrip()
    if fix and fix[-1] not in ".!?":
        fix += "."
    return Unsupported(problem, f"{fix} {doctor_hint(cap_id)}".strip(), capability=cap_id)


def of_program(program: str) -> Capability | None:
    """The capability a program poolbench runs belongs to, if any."""
    return next((c for c in CAPABILITIES if program in c.programs), None)


def install_hint(program: str) -> str:
    """What to say when `program` is not there: its package, and doctor's words for it."""
    cap = of_program(program)
    if cap is None:
        return "Install it or fix PATH."
    what = f"Debian package: {', '.join(cap.packages)}" if cap.packages else cap.provides
    return f"Install it ({what}). {doctor_hint(cap.id)}"


def packages_for(parts: list[str]) -> list[str]:
    """The Debian packages of the install script's parts ('all' = every part), in order,
    once each; an unknown part raises KeyError naming it."""
    names = list(PARTS) if "all" in parts else parts
    out: list[str] = []
    for part in names:
        for cap_id in PARTS[part]:
            out += [p for p in BY_ID[cap_id].packages if p not in out]
    return out


def _main(argv: list[str]) -> int:
    """`python3 -m poolbench.capabilities packages PART...` (scripts/install.sh) and
    `... parts` (the list of parts with what each enables)."""
    if argv[:1] == ["parts"]:
        for part, ids in PARTS.items():
            print(f"{part}\t{'; '.join(BY_ID[i].disables for i in ids)}")
        return 0
    if argv[:1] == ["packages"]:
        try:
            print(" ".join(packages_for(argv[1:])))
        except KeyError as exc:
            print(f"unknown part {exc}; the parts are: all, {', '.join(PARTS)}", file=sys.stderr)
            return 2
        return 0
    print("usage: python3 -m poolbench.capabilities packages PART... | parts", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
