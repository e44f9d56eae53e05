"""What the trial loop does beyond build → measure → destroy, for the built-in studies.

* **Trial factors**: the factors of factors/ (factors/registry.py), applied by the trial loop
  itself, not a backend; the dry run asks them what they would run.
* **The checks before anything is built**: loop disks on tmpfs, pool operations the layout
  cannot do, a zvol target without a working-set size.
* **The dry run's list** (`dry_commands`): what one trial would run once its pool is built.
* **The untar source**: a compressed tarball is unpacked to a plain tar once per run (untimed,
  journaled), so `untar` measures the pool, not xz.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from poolbench import capabilities
from poolbench.backends import zvol
from poolbench.backends.base import (
    Backend,
    Pool,
    PoolSpec,
    parse_topology,
)
from poolbench.backends.zfs import expansion_supported, show_trial_operation
from poolbench.engine import pgbench_run
from poolbench.engine.measure_checks import block_device_refusal
from poolbench.engine.workspace import Workspace
from poolbench.errors import UsageError
from poolbench.factors import load as load_factor
from poolbench.factors import registry as factors
from poolbench.guards.devices import MountInfo, Target, mount_of
from poolbench.guards.workingset import WorkingSet
from poolbench.records.findings import Findings
from poolbench.safety.journal import Journal
from poolbench.study.model import Disks, Workloads
from poolbench.system.runner import Runner
from poolbench.units import parse_size
from poolbench.workloads import fiojob
from poolbench.workloads.library import L2ARC_INTERVALS
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


def dry_commands(
    runner: Runner, backend: Backend, pool: Pool, levels: Mapping[str, str],
    workloads: Sequence[Workload], wl: Workloads | None = None,
) -> None:  # fmt: skip
    """--dry-run: what one trial would run after the pool is built, in order (`wl`: the
    study's [workloads], for the pgbench commands' sizes)."""
    factors.dry_run(runner, backend, pool, levels)
    name = pool.spec.name
    offline = False
    last_write: Workload | None = None
    for w in workloads:
        # a read right after a write of its own files whole reads them (Workspace.lay_out)
        written, last_write = _writes_its_data(last_write, w), _last_write(last_write, w)
        if w.pool_state == "degraded" and not offline:
            show_trial_operation(runner, name, "offline")
            offline = True
        if w.kind == "pgbench":  # the measurement itself, its commands printed
            request = _dry_pg_request(runner, pool, w, levels, wl or Workloads())
            pgbench_run.Pgbench(runner).measure(w, request, Findings())
        elif w.kind == "untar":
            runner.run(["tar", "-x", "--no-same-owner", "-f", "<tarball>", "-C", "<dir>"])
            runner.run(["sync", "--file-system", "<dir>"])
        elif not _dry_pool_operation(runner, name, w, levels):
            if w.needs_data and not w.fresh_file and not w.is_metadata and not written:
                # Laid out before the first measurement (fiojob.render_prepare), not timed.
                runner.run(["fio", "--output-format=json", f"prepare-{w.name}.fio"])
            runner.run(["fio", "--output-format=json", f"{w.name}.fio"])


def _dry_pg_request(
    runner: Runner, pool: Pool, w: Workload, levels: Mapping[str, str], wl: Workloads
) -> pgbench_run.PgRequest:
    """--dry-run: the request a trial's session would make of the pool it did not build
    (no members to count bytes on, nothing cached: the sizes are the study's)."""
    mp = pool.mountpoint
    target = Target(str(mp), MountInfo(str(mp), pool.spec.backend, pool.spec.name, ""))
    size = parse_size(wl.size)
    return pgbench_run.PgRequest(
        Workspace(runner, mp, 0).root, target, WorkingSet(size, 0, None, 0, False, 0.0),
        w.jobs or wl.jobs, wl.runtime, dict(levels), mp / "journals", disposable=True,
    )  # fmt: skip


def _writes_its_data(last_write: Workload | None, w: Workload) -> bool:
    """Whether the write just before `w` left `w`'s data as the prepare job would lay it out
    (the same working set for both: a trial's workloads share it)."""
    same = fiojob.JobParams("<dir>", MiB)
    return last_write is not None and fiojob.writes_prepared_data(last_write, same, w, same)


def _last_write(last_write: Workload | None, w: Workload) -> Workload | None:
    """The write a later read may find its data from, as Workspace.lay_out tracks it: a read
    ends it, a metadata test or an operation that is not a fio job leaves it."""
    if w.direction == "read":
        return None
    return last_write if w.is_metadata or w.kind != "fio" else w


def _dry_pool_operation(runner: Runner, name: str, w: Workload, levels: Mapping[str, str]) -> bool:
    """--dry-run: a pool operation's commands (False: `w` is not one)."""
    if w.name == "resilver":
        show_trial_operation(runner, name, "resilver")
        load_factor.dry_resilver(runner, levels)  # its foreground: during it, then alone
    elif w.name in ("expand", "capacity"):
        show_trial_operation(runner, name, w.name)
    elif w.name.startswith("l2arc-read-"):  # laid out, then its intervals (arcstats between)
        runner.run(["fio", "--output-format=json", f"prepare-{w.name}.fio"])
        for i in range(L2ARC_INTERVALS):
            runner.run(["fio", "--output-format=json+", f"{w.name}.{i}.fio"])
    else:
        return False
    return True


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
