"""Vdev sources: what a pool is built from.

* **files**: sparse files in a scratch directory (`--disks 5x512M` → five 512 MiB files);
  they cost nothing until written.
* **loop**: a loop device over each file (`losetup --direct-io=on`, so the file's host page
  cache is not a second cache under the pool). Needed by btrfs and md, and by partitions.
* **devices**: real block devices, only as safety `Claim`s (see safety/claims.py); a plain
  /dev path is refused here.

On block devices three vdev sources answer the NAS builder's question of mixed disk sizes:
`whole` (the device as it is), `partition` (one GPT partition spanning the disk) and `slice`
(one partition of `--slice-size` per disk).

Everything is journaled *before* it is made: the scratch directory and each file
(`path_created`), each loop device (`loop_intent(file)`; teardown detaches whatever loop device
then backs the file, so a crash between `losetup` and recording its name leaks nothing).

Loop devices come in three kinds: as fast as the sparse file under them, capped at a byte
rate (`[disks] cap`, the blkio throttle), or disks with a head (`[disks] model`): the loop
device goes over the `disk.img` of a disk emulator (emulate/), which gives every request its
seek, rotation and transfer time; its bytes live in the emulator's memory, not in a file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from poolbench import is_digits
from poolbench.backends._common import block_names, is_block, size_of
from poolbench.emulate import process as emulated
from poolbench.emulate.model import HddParams
from poolbench.errors import PoolbenchError, UsageError
from poolbench.safety.claims import ClaimSet
from poolbench.safety.journal import Journal
from poolbench.system import throttle
from poolbench.system.runner import Runner
from poolbench.units import MiB

if TYPE_CHECKING:
    from poolbench.study.model import Disks

SOURCES = ("files", "loop", "devices")
PARTITIONING = ("whole", "partition", "slice")
# GPT needs 1 MiB in front (alignment) and 33 sectors behind (backup table): keep 2 MiB free.
GPT_OVERHEAD = 2 << 20
MIN_SLICE = 64 << 20  # zpool refuses vdevs below 64 MiB


@dataclass
class DiskSet:
    """The devices one pool is built on, and what they are made of."""

    devices: list[str]  # paths to hand to the backend, in order
    source: str  # files | loop | devices
    partitioning: str = "whole"
    files: list[Path] = field(default_factory=list)  # backing files (files, loop)
    whole: list[str] = field(default_factory=list)  # the loop devices / disks under partitions
    model: HddParams | None = None  # emulated disks with a head: their figures

    @property
    def block_devices(self) -> list[str]:
        """Kernel names of the block devices (empty for plain files)."""
        return block_names(self.devices)


def sparse_files(
    journal: Journal, directory: Path, sizes: Sequence[int], prefix: str = "disk"
) -> list[Path]:
    """Make one sparse file per size in `directory` (made too, if missing)."""
    if not sizes:
        raise UsageError("No disks asked for.", "Give --disks COUNTxSIZE, e.g. 5x512M.")
    dry = journal.runner.dry_run
    if not directory.exists():
        journal.path_created(str(directory))
        if not dry:
            directory.mkdir(parents=True)
    files = []
    for i, size in enumerate(sizes):
        f = directory / f"{prefix}{i}.img"
        if f.exists() or f.is_symlink():
            raise PoolbenchError(f"{f} exists already.", "Remove it or use another scratch dir.")
        journal.path_created(str(f))
        if not dry:
            with open(f, "xb") as fh:
                fh.truncate(size)
        files.append(f)
    return files


def loop_devices(runner: Runner, journal: Journal, files: Sequence[Path]) -> list[str]:
    """A direct-I/O loop device over each file (partition scanning on), in order."""
    devs = []
    for f in files:
        journal.loop_intent(str(f))
        dev = runner.run(
            ["losetup", "--find", "--show", "--direct-io=on", "--partscan", str(f)]
        ).stdout.strip()
        if runner.dry_run:
            # (an emulated disk's file is disk.img in its own mountpoint: named by that)
            dev = f"/dev/loop-for-{f.parent.name if f.name == emulated.DISK_FILE else f.name}"
        elif not dev.startswith("/dev/loop"):
            raise PoolbenchError(
                f"losetup gave no device for {f} ({dev!r}).", "Check loop support."
            )
        journal.loop_created(dev, str(f))
        devs.append(dev)
    return devs


def claimed_devices(claims: ClaimSet | None) -> list[str]:
    """The only way real disks enter: claims issued by the safety layer."""
    if claims is None or not claims.claims:
        raise UsageError(
            "Real block devices are used only through the safety layer, which has not claimed any.",
            "Use sparse files or loop devices (--disks 5x512M), or name devices so that "
            "poolbench can check and claim them.",
        )
    return list(claims.device_paths)


def partition_name(device: str, number: int = 1) -> str:
    """/dev/loop0 → /dev/loop0p1, /dev/nvme0n1 → /dev/nvme0n1p1, /dev/sdb → /dev/sdb1."""
    return f"{device}p{number}" if is_digits(device[-1]) else f"{device}{number}"


def sfdisk_script(mode: str, slice_bytes: int | None) -> str:
    if mode == "partition":
        return "label: gpt\n,,\n"
    assert slice_bytes is not None
    return f"label: gpt\nsize={slice_bytes // 1024}KiB\n"


def partition(
    runner: Runner,
    journal: Journal,
    devices: Sequence[str],
    mode: str,
    slice_bytes: int | None = None,
) -> list[str]:
    """Apply the vdev source `mode` to block devices; returns what the pool is built on.
    Each partition table is journaled first: teardown wipes it, leaving the disk blank."""
    if mode not in PARTITIONING:
        raise UsageError(f"Unknown vdev source '{mode}'.", f"Use {', '.join(PARTITIONING)}.")
    if mode == "whole":
        return list(devices)
    if mode == "slice":
        if slice_bytes is None:
            raise UsageError("vdev source 'slice' needs a slice size.", "Add --slice-size 256M.")
        if slice_bytes < MIN_SLICE or slice_bytes % (1 << 20):
            raise UsageError(
                f"Slice size {slice_bytes} bytes is too small or not whole MiB.",
                "Use at least 64M, in whole MiB.",
            )
    parts = []
    for dev in devices:
        if not runner.dry_run and not is_block(dev):
            raise UsageError(
                f"{dev} is not a block device: partitions need loop devices or disks.",
                "Use the loop source for partition/slice vdev sources.",
            )
        size = size_of(dev) if not runner.dry_run else None
        if (
            mode == "slice"
            and size is not None
            and slice_bytes is not None
            and (slice_bytes + GPT_OVERHEAD > size)
        ):
            raise UsageError(
                f"A slice of {slice_bytes >> 20} MiB does not fit on {dev} "
                f"({size >> 20} MiB with 2 MiB for the partition table).",
                "Use a smaller --slice-size.",
            )
        part = partition_name(dev)
        journal.partition_table_intent(dev, part)
        runner.run(["sfdisk", "--quiet", "--wipe", "always", dev],
                   input_text=sfdisk_script(mode, slice_bytes))  # fmt: skip
        if not runner.dry_run:
            _wait_partition(runner, dev, part)
        parts.append(part)
    return parts


def _wait_partition(runner: Runner, dev: str, part: str) -> None:
    # With no udev (containers, this VM) the kernel may not create the node until asked.
    deadline = time.monotonic() + 10
    nudged = False
    while not is_block(part):
        if time.monotonic() > deadline:
            raise PoolbenchError(
                f"Partition {part} did not appear after sfdisk on {dev}.",
                "Check that the kernel re-reads partition tables (partx -a).",
            )
        if not nudged or time.monotonic() > deadline - 5:
            runner.run(["partx", "--add", dev], check=False)
            nudged = True
        time.sleep(0.1)


def provide(
    runner: Runner,
    journal: Journal,
    *,
    source: str,
    scratch: Path | None = None,
    sizes: Sequence[int] = (),
    partitioning: str = "whole",
    slice_bytes: int | None = None,
    claims: ClaimSet | None = None,
    cap_bytes_per_s: int | None = None,
    model: HddParams | None = None,
) -> DiskSet:
    """Make (or take) the devices for one pool; everything made is journaled first. Loop
    devices are capped at `cap_bytes_per_s` each when given (emulated disks of a known
    speed: system/throttle.py), or go over disk emulators with the figures `model`."""
    if source not in SOURCES:
        raise UsageError(f"Unknown disk source '{source}'.", f"Use {', '.join(SOURCES)}.")
    if source == "devices":
        whole = claimed_devices(claims)
        parts = partition(runner, journal, whole, partitioning, slice_bytes)
        return DiskSet(parts, source, partitioning, [], whole)
    if scratch is None:
        raise UsageError("Sparse-file disks need a scratch directory.", "")
    if model is not None:
        served = emulated_disks(journal, scratch, sizes, model)
        loops = loop_devices(runner, journal, served)
        parts = partition(runner, journal, loops, partitioning, slice_bytes)
        return DiskSet(parts, source, partitioning, served, loops, model)
    files = sparse_files(journal, scratch, sizes)
    if source == "files":
        if partitioning != "whole":
            raise UsageError(
                f"The vdev source '{partitioning}' needs block devices, not plain files.",
                'Use source = "loop" in [disks] (loop devices over the files).',
            )
        return DiskSet([str(f) for f in files], source, partitioning, files, [])
    loops = loop_devices(runner, journal, files)
    if cap_bytes_per_s:
        cap_devices(journal, loops, cap_bytes_per_s)
    parts = partition(runner, journal, loops, partitioning, slice_bytes)
    return DiskSet(parts, source, partitioning, files, loops)


def check_emulation(disks: Disks, dry_run: bool = False) -> None:
    """Refuse emulated disks this machine cannot serve, before anything is made."""
    if disks.model is not None and not dry_run:
        emulated.check(disks.size_bytes * disks.count, disks.model.name)


def emulated_disks(
    journal: Journal, directory: Path, sizes: Sequence[int], model: HddParams
) -> list[Path]:
    """One disk emulator per size, mounted in `directory` (made too, if missing); returns
    the files the loop devices go over. Each is journaled before it starts, after its
    mountpoint: teardown stops it once its loop device is gone, then removes the directory."""
    runner = journal.runner
    if not runner.dry_run:
        emulated.check(sum(sizes), model.name)
    if not directory.exists():
        journal.path_created(str(directory))
        if not runner.dry_run:
            directory.mkdir(parents=True)
    served = []
    for i, size in enumerate(sizes):
        d = emulated.EmulatedDisk(directory / f"seek{i}")
        journal.dir_created(str(d.mountpoint))
        if not runner.dry_run:
            d.mountpoint.mkdir()
        for made in (d.pidfile, d.log):
            journal.path_created(str(made))
        journal.emulated_disk_intent(str(d.mountpoint))
        emulated.start(runner, d, size, model.as_dict(), seed=i)
        served.append(d.disk)
    return served


def cap_devices(
    journal: Journal, devices: Sequence[str], bytes_per_s: int, root: Path = throttle.BLKIO
) -> None:
    """Cap each of our loop devices at `bytes_per_s` for reads and writes, journaled first
    and read back: a cap that did not take would make every figure a lie about the disks."""
    why = throttle.unavailable(root)
    if why:
        raise UsageError(
            f"The disks cannot be capped at {bytes_per_s / MiB:g} MiB/s: {why}.",
            "Remove [disks] cap from the study to measure the sparse files as they are.",
        )
    for dev in devices:
        if journal.runner.dry_run:
            continue
        majmin = throttle.device_number(dev)
        journal.throttle_set(dev, majmin, bytes_per_s, str(root))
        throttle.set_cap(majmin, bytes_per_s, root)
        if throttle.caps(root).get(majmin) != (bytes_per_s, bytes_per_s):
            raise PoolbenchError(
                f"The cap on {dev} ({majmin}) did not take: the blkio throttle reads back "
                f"{throttle.caps(root).get(majmin)}.",
                "Check the blkio cgroup; remove [disks] cap to run without it.",
            )


def make_disks(
    runner: Runner,
    journal: Journal,
    disks: Disks,
    base: Path,
    claims: ClaimSet | None = None,
) -> list[str]:
    """The trial loop's entry point: a study's [disks] table → device paths for the backend."""
    from poolbench.units import parse_size

    if disks.n == 0:
        return []  # the directory backend needs no disks
    sizes = [disks.size_bytes] * disks.count if disks.source != "devices" else []
    return provide(
        runner,
        journal,
        source=disks.source,
        scratch=base,
        sizes=sizes,
        partitioning=disks.vdev_source,
        slice_bytes=parse_size(disks.slice_size) if disks.slice_size else None,
        claims=claims,
        cap_bytes_per_s=int(disks.cap * MiB) if disks.cap else None,
        model=disks.model.params() if disks.model else None,
    ).devices


def parse_disks(text: str) -> tuple[list[int], list[str]]:
    """`--disks`: '5x512M' or '2x1G,3x512M' → sizes; '/dev/sdb,/dev/sdc' → device names
    (poolbench.units.parse_disks, the one --disks grammar)."""
    from poolbench.units import parse_disks as units_parse_disks

    disks = units_parse_disks(text)
    return list(disks.sizes), list(disks.devices)


def own_loop_backing(device: str) -> str | None:
    """The backing file of a loop device, from sysfs (None if it is not a loop device)."""
    name = os.path.basename(os.path.realpath(device))
    try:
        return Path(f"/sys/class/block/{name}/loop/backing_file").read_text().strip()
    except OSError:
        return None
