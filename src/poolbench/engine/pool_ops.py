"""What the trial loop does beyond build → measure → destroy, for the built-in studies.

* **The checks before anything is built**: loop disks on tmpfs, pool operations the layout
  cannot do, a zvol target without a working-set size.
* **The untar source**: a compressed tarball is unpacked to a plain tar once per run (untimed,
  journaled), so `untar` measures the pool, not xz.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from poolbench import capabilities
from poolbench.backends import zvol
from poolbench.backends.base import (
    PoolSpec,
    parse_topology,
)
from poolbench.backends.zfs import expansion_supported
from poolbench.engine.measure_checks import block_device_refusal
from poolbench.errors import UsageError
from poolbench.guards.devices import MountInfo, mount_of
from poolbench.safety.journal import Journal
from poolbench.study.model import Disks
from poolbench.workloads.workload import Workload

MiB = 1 << 20

RAM_FILESYSTEMS = ("tmpfs", "ramfs")


def check_loop_scratch(
    disks: Disks, scratch: Path, table: Sequence[MountInfo] | None = None
) -> None:
    """Loop disks in a scratch directory on tmpfs live in RAM: `losetup --direct-io=on`
    refuses them on kernels whose tmpfs has no O_DIRECT (EINVAL: every trial would fail),
    and where it accepts them the figures would measure memory, not a disk."""
    if disks.source != "loop":
        return
    fstype = mount_of(scratch, table).fstype
    if fstype in RAM_FILESYSTEMS:
        raise UsageError(
            f"The scratch directory {scratch} is on {fstype}: loop disks there would live in "
            "RAM (losetup --direct-io refuses them, or the figures would measure memory).",
            "Give --scratch-dir on a disk-backed filesystem, e.g. /var/tmp/poolbench.",
        )


def _check_expand(backend: str, layout: str, n_disks: int, version: str) -> None:
    """RAIDZ expansion needs OpenZFS >= 2.3, a raidz vdev and a disk the layout leaves
    unused."""
    if backend == "zfs" and version and not expansion_supported(version):
        raise capabilities.unsupported(
            "raidz-expansion",
            f"expand (RAIDZ expansion) needs OpenZFS 2.3 or later; this ZFS is {version}.",
            "Drop the expand workload, or run the study on OpenZFS >= 2.3 (the guest tier: "
            "vm/run-openzfs-tier.sh).",
        )
    vdevs = parse_topology(layout, n_disks) if backend == "zfs" else ()
    if not any(v.kind.startswith("raidz") for v in vdevs):
        raise UsageError(
            f"expand attaches a disk to a raidz vdev; layout {layout} on {backend} has none.",
            "Use a raidz layout (e.g. raidz1:3) on ZFS for the expand workload.",
        )
    if sum(v.width for v in vdevs) >= n_disks:
        raise UsageError(
            f"Layout {layout} uses all {n_disks} disks: none is left to attach.",
            "Give the study one more disk than the layout uses (e.g. raidz1:3 on 4 disks).",
        )


def check_pool_workloads(
    backend: str, layout: str, n_disks: int, workloads: Sequence[Workload], version: str = ""
) -> None:
    """Refuse, before anything is built, a degraded-read, resilver or expansion the pool
    cannot do."""
    if any(w.name == "expand" for w in workloads):
        _check_expand(backend, layout, n_disks, version)
    if not any(w.pool_state == "degraded" for w in workloads):
        return
    if backend != "zfs":
        raise UsageError(
            f"degraded-read and resilver need ZFS (zpool offline/replace), not {backend}.",
            "Remove them, or the non-ZFS backends, from the study.",
        )
    vdevs = parse_topology(layout, n_disks)
    if all(v.parity == 0 for v in vdevs):
        raise UsageError(
            f"Layout {layout} has no redundancy: no member can go offline.",
            "Use a mirror or raidz layout for degraded-read and resilver.",
        )
    used = sum(v.width for v in vdevs)
    degraded = next(v for v in vdevs if v.parity > 0)  # the vdev whose member goes offline
    if degraded.draid_spares:  # rebuilt onto its own distributed spare: no disk needed
        return
    if any(w.name == "resilver" for w in workloads) and used >= n_disks:
        raise UsageError(
            f"Layout {layout} uses all {n_disks} disks: none is left to replace the offline one.",
            "Give the study one more disk than the layout uses (e.g. raidz1:4 on 5 disks).",
        )


def check_volume(spec: PoolSpec, workloads: Sequence[Workload], size: str | None) -> None:
    """A zvol target, refused before anything is built: workloads that need files, or no
    working-set size to make the volume from."""
    if not zvol.wanted(spec.volume):
        return
    refused = block_device_refusal(list(workloads))
    if refused:
        raise UsageError(*refused)
    if size is None:
        raise UsageError(
            "A zvol target needs [workloads] size: the volume is made to hold the working set "
            "(the 2x RAM default would not fit in a study's pool).",
            'Set [workloads] size, e.g. size = "256M".',
        )


# -- untar source -----------------------------------------------------------------------------
_OPENERS = {".xz": lzma.open, ".gz": gzip.open, ".tgz": gzip.open, ".bz2": bz2.open}


def plain_tarball(journal: Journal, tarball: Path, scratch: Path) -> Path:
    """The tarball as plain tar: itself if uncompressed, else unpacked once into `scratch`
    (journaled first, so teardown and `poolbench cleanup` remove it)."""
    if not tarball.is_file():
        raise UsageError(
            f"The untar workload's tarball {tarball} is not a file.",
            "Debian: apt install linux-source-6.1 gives /usr/src/linux-source-6.1.tar.xz.",
        )
    opener = _OPENERS.get(tarball.suffix)
    if opener is None:
        return tarball
    out = scratch / f"{tarball.name.rsplit('.', 1)[0]}.plain-{os.getpid()}"
    if not out.name.endswith(".tar"):
        out = out.with_name(out.name + ".tar")
    if not scratch.exists():
        journal.path_created(str(scratch))
        scratch.mkdir(parents=True)
    journal.path_created(str(out))
    src: IO[bytes]
    with opener(tarball, "rb") as src, open(out, "wb") as dst:  # type: ignore[operator]
        shutil.copyfileobj(src, dst, 8 << 20)
    return out
