"""What the trial loop does beyond build → measure → destroy, for the built-in studies.

* **Trial factors** (`TRIAL_FACTORS`): factors the trial loop applies itself, not a backend —
  `vdev_source` (overrides `[disks] vdev_source`), `compressibility` (overrides
  `[workloads] compressibility`), `fill` (pre-fills the pool before the workloads run).
* **Generic layouts** (`parity1`, `parity2`): one single/double-parity array over all the
  disks, in each backend's own terms (ZFS raidz1/raidz2, btrfs and md raid5/raid6), so one
  study can compare stacks on the same disks.
* **Hooks** (`PoolHooks`, engine.hooks.TrialHooks): pool state and pool operations around the
  workloads — one member offline for `degraded-read`, the resilver after `zpool replace`, the
  usable space for `capacity`, the compressratio read back after every measurement.
* **The untar source**: a compressed tarball is unpacked to a plain tar once per run (untimed,
  journaled), so `untar` measures the pool, not xz.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from poolbench.backends import zvol
from poolbench.backends.base import Backend, Pool, PoolSpec, parse_topology
from poolbench.backends.zfs import ZfsBackend, expansion_supported
from poolbench.engine.hooks import OpResult
from poolbench.engine.records import Findings
from poolbench.engine.session import BlockDevice, Subject, block_device_refusal
from poolbench.errors import PoolbenchError, Unsupported, UsageError
from poolbench.guards import geometry
from poolbench.guards.devices import MountInfo, Target, mount_of
from poolbench.safety.journal import Journal
from poolbench.study.model import Disks
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import Workload, streaming
from poolbench.zfs import commands as zfs_commands
from poolbench.zfs.parse import TopVdev

TRIAL_FACTORS = ("vdev_source", "compressibility", "fill")
GiB = 1 << 30
MiB = 1 << 20

GENERIC_LAYOUTS: dict[str, dict[str, str]] = {
    "parity1": {"zfs": "raidz1", "btrfs": "raid5", "md": "raid5"},
    "parity2": {"zfs": "raidz2", "btrfs": "raid6", "md": "raid6"},
}


def backend_layout(backend: str, layout: str) -> str:
    """A generic layout (`parity1`) in `backend`'s terms; any other layout as it is."""
    generic = GENERIC_LAYOUTS.get(layout)
    if generic is None:
        return layout
    if backend not in generic:
        raise UsageError(
            f"Layout '{layout}' has no meaning for the {backend} backend.",
            f"Use it with {', '.join(generic)}.",
        )
    return generic[backend]


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


def disks_for(disks: Disks, levels: Mapping[str, str]) -> Disks:
    """[disks] with the configuration's `vdev_source` level applied."""
    source = levels.get("vdev_source")
    if source is None or source == disks.vdev_source:
        return disks
    if source != "whole" and disks.source == "files":
        raise UsageError(
            f"vdev_source={source} needs block devices, but [disks] source is 'files'.",
            'Use source = "loop" (loop devices over sparse files) or real devices.',
        )
    if source == "slice" and not disks.slice_size:
        raise UsageError(
            "vdev_source=slice needs [disks] slice_size.", 'Add e.g. slice_size = "256M".'
        )
    return disks.model_copy(update={"vdev_source": source})


def _check_expand(backend: str, layout: str, n_disks: int, version: str) -> None:
    """RAIDZ expansion needs OpenZFS >= 2.3, a raidz vdev and a disk the layout leaves
    unused."""
    if backend == "zfs" and version and not expansion_supported(version):
        raise Unsupported(
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


def make_volume(backend: Backend, pool: Pool, working_set: int | None) -> BlockDevice | None:
    """The configuration's zvol, made in the pool (None: it measures the dataset)."""
    if not zvol.wanted(pool.spec.volume):
        return None
    assert isinstance(backend, ZfsBackend) and working_set is not None  # check_volume
    made = backend.create_volume(pool, working_set)
    block = made.get("volblocksize") or 0
    return BlockDevice(Path(made["path"]), int(made["volsize"]), int(block))


def usable_bytes(pool: Pool) -> int:
    """The pool's usable space as it reports it (ZFS: USED + AVAIL), else statvfs."""
    usable = pool.described.get("usable_bytes")
    if isinstance(usable, int) and usable > 0:
        return usable
    st = os.statvfs(pool.mountpoint)
    return st.f_blocks * st.f_frsize


# -- fill -------------------------------------------------------------------------------------
def prefill(
    runner: Runner, pool: Pool, percent: int, working_set: int, streams: int = 1
) -> dict[str, Any]:
    """Fill the pool to `percent` of its usable space with incompressible data (fio, fsync'd,
    untimed) before the workloads run; returns what was done, for every measurement's guards.

    Refuses (before writing) when the working set would not fit on top of the filler."""
    usable = usable_bytes(pool)
    filler = usable * percent // 100
    need = working_set * 3 // 2 + 16 * MiB  # the working set, rewritten copy-on-write
    if filler + need > usable * 98 // 100:
        raise UsageError(
            f"Filling {pool.spec.name} to {percent}% leaves {(usable - filler) >> 20} MiB, too "
            f"little for a {working_set >> 20} MiB working set.",
            "Use a smaller working set (--size) or larger disks.",
        )
    directory = pool.mountpoint / ".poolbench-fill"
    record: dict[str, Any] = {"asked_percent": percent, "usable_bytes": usable}
    if runner.dry_run:
        runner.run(["fio", "--output-format=json", "fill.fio"])
        return record
    directory.mkdir(exist_ok=True)
    t0 = time.monotonic()
    chunk = 1 << 30  # one file per GiB: no single huge file, fio's sizes stay exact
    left, i = filler - filler % MiB, 0
    while left > 0:
        size = min(chunk, left)
        params = fiojob.JobParams(str(directory), size, file_prefix=f"fill{i}")
        job = fiojob.render(streaming("write"), params)
        fio.run_job(runner, job, directory / f"fill{i}.fio", "write")
        left -= size
        i += 1
    st = os.statvfs(pool.mountpoint)
    used = usable - st.f_bavail * st.f_frsize
    record.update(
        {
            "filler_bytes": filler - filler % MiB,
            "used_bytes_after": used,
            "achieved_percent": round(100 * used / usable, 1) if usable else None,
            "data": "incompressible (fio refill_buffers), fsync'd, not timed",
            "seconds": round(time.monotonic() - t0, 2),
        }
    )
    return record


def dry_commands(
    runner: Runner, pool: Pool, levels: Mapping[str, str], workloads: Sequence[Workload]
) -> None:
    """--dry-run: what one trial would run after the pool is built, in order."""
    if "fill" in levels:
        runner.run(["fio", "--output-format=json", f"fill-{levels['fill']}pct.fio"])
    name = pool.spec.name
    offline = False
    for w in workloads:
        if w.pool_state == "degraded" and not offline:
            runner.run(zfs_commands.offline(name, "<a member>"))
            offline = True
        if w.kind == "untar":
            runner.run(["tar", "-x", "--no-same-owner", "-f", "<tarball>", "-C", "<dir>"])
            runner.run(["sync", "--file-system", "<dir>"])
        elif w.name == "resilver":
            runner.run(zfs_commands.replace(name, "<the offline member>", "<the spare>"))
        elif w.name == "expand":
            runner.run(zfs_commands.attach_wait(name, "<the raidz vdev>", "<the unused disk>"))
        elif w.name == "capacity":
            runner.run(zfs_commands.dataset_props(name, ["used", "available"]))
        else:
            if w.needs_data and not w.fresh_file and not w.is_metadata:
                # Laid out before the first measurement (fiojob.render_prepare), not timed.
                runner.run(["fio", "--output-format=json", f"prepare-{w.name}.fio"])
            runner.run(["fio", "--output-format=json", f"{w.name}.fio"])


# -- what the session measures ----------------------------------------------------------------
def subject_for(
    runner: Runner,
    backend: Backend,
    pool: Pool,
    config: str,
    findings: Findings,
    working_set: int | None = None,
    levels: dict[str, str] | None = None,
) -> Subject:
    """The pool as one object for the measurement session: its mountpoint and members (and
    the zvol the configuration measures, made here), its backend's cache defeat, the
    trial's hooks and findings."""
    spec = pool.spec
    block = make_volume(backend, pool, working_set)
    devices = Target(
        str(pool.mountpoint),
        MountInfo(str(pool.mountpoint), spec.backend, spec.name, ""),
        # the pool's own list: an expansion adds its new member to every later window
        devices=pool.block_devices,
        how=f"members of {spec.backend} pool {spec.name}",
        unverified_reason="" if pool.block_devices else "the pool's members are plain files",
    )
    return Subject(
        pool.mountpoint,
        config,
        levels=dict(levels or {}),
        devices=devices,
        cache_defeat=lambda _files: backend.drop_cache(pool),
        hooks=PoolHooks(runner, backend, pool),
        findings=findings,
        write_model=geometry.for_pool(
            spec.backend,
            spec.layout,
            len(pool.block_devices),
            pool.described,
            block=block.block_size if block else None,
        ),  # fmt: skip
        block_device=block,
    )


# -- hooks ------------------------------------------------------------------------------------
def distributed_spare(top: TopVdev | None) -> str | None:
    """The first distributed spare of a dRAID top vdev as OpenZFS names it (draidP-T-S, T the
    top vdev's index, from its status name "draidP:Dd:Cc:Ss-T"), or None: not a dRAID, or
    one without spares."""
    m = re.fullmatch(r"draid(\d):\d+d:\d+c:(\d+)s-(\d+)", top.name) if top else None
    if m is None or int(m.group(2)) == 0:
        return None
    return f"draid{m.group(1)}-{m.group(3)}-0"


class PoolHooks:
    """engine.hooks.TrialHooks for one trial's pool."""

    def __init__(self, runner: Runner, backend: Backend, pool: Pool) -> None:
        self.runner = runner
        self.backend = backend
        self.pool = pool
        self.offline_leaf: str | None = None
        self.offline_top: TopVdev | None = None

    def before(self, w: Workload) -> dict[str, Any]:
        if w.pool_state != "degraded":
            return {}
        if self.offline_leaf is None:
            if not isinstance(self.backend, ZfsBackend):
                raise UsageError(
                    f"The {self.backend.name} backend cannot take a member offline.",
                    "Run degraded-read and resilver on ZFS.",
                )
            tops = self.backend.data_vdevs(self.pool)
            redundant = [t for t in tops if t.kind != "stripe" and t.leaves]
            if not redundant:
                raise UsageError(
                    f"Layout {self.pool.spec.layout} has no redundancy: no member can go offline.",
                    "Use a mirror or raidz layout for degraded-read and resilver.",
                )
            self.offline_top = redundant[0]
            self.offline_leaf = redundant[0].leaves[-1]
            self.backend.offline(self.pool, self.offline_leaf)
        return {"state": "degraded", "offline": self.offline_leaf}

    def operate(self, w: Workload) -> OpResult:
        if w.name == "capacity":
            usable = usable_bytes(self.pool)
            return OpResult(
                usable / GiB,
                0,
                0.0,
                sections={
                    "capacity": {
                        "usable_bytes": usable,
                        "how": "zfs get used,available (root dataset)"
                        if self.pool.described.get("usable_bytes")
                        else "statvfs of the mountpoint",
                    }
                },
            )
        if w.name == "resilver":
            return self._resilver()
        if w.name == "expand":
            return self._expand()
        raise PoolbenchError(f"No pool operation named {w.name}.", "")

    def _expand(self) -> OpResult:
        """RAIDZ expansion: attach the unused disk to the first raidz vdev, timed until the
        reflow is done; the pool's allocated bytes (what the reflow moves) and its usable
        space before and after, as ZFS reports them."""
        assert isinstance(self.backend, ZfsBackend)
        spare_list = list(self.pool.described.get("unused_devices") or [])
        raidz = [t for t in self.backend.data_vdevs(self.pool) if t.kind.startswith("raidz")]
        if not spare_list or not raidz:
            raise UsageError(
                f"Expansion of {self.pool.spec.name}: it needs a raidz vdev and an unused disk.",
                "Give the study one more disk than a raidz layout uses (e.g. raidz1:3 on 4).",
            )
        before = self.backend.usable_now(self.pool)
        alloc = self.backend.allocated(self.pool) or 0
        seconds, after = self.backend.expand(self.pool, raidz[0].name, spare_list[0])
        if after is not None:  # what a later capacity workload reports
            self.pool.described["usable_bytes"] = after
        section = {
            "vdev": raidz[0].name,
            "width_before": raidz[0].width,
            "disk": spare_list[0],
            "allocated_bytes": alloc,
            "usable_before": before,
            "usable_after": after,
            "seconds": round(seconds, 3),
            "timing": "`zpool attach -w` from its start until it returned (reflow done)",
        }
        warnings = [] if after is not None else ["the usable space after could not be read"]
        return OpResult(alloc / seconds / MiB, alloc, seconds,
                        sections={"expand": section}, warnings=warnings)  # fmt: skip

    def _resilver(self) -> OpResult:
        """Replace the offline member and time the resilver: onto the top vdev's distributed
        spare when it is a dRAID with one (OpenZFS's sequential rebuild, then the scrub it
        starts to verify the copied blocks, timed apart), else onto the unused disk."""
        assert self.offline_leaf is not None and isinstance(self.backend, ZfsBackend)
        new = distributed_spare(self.offline_top)
        if new is None:
            spare_list = list(self.pool.described.get("unused_devices") or [])
            if not spare_list:
                raise UsageError(
                    f"Resilver of {self.pool.spec.name}: no spare disk to replace the offline one.",
                    "Give the study one more disk than the layout uses, or a dRAID layout with "
                    "a distributed spare (e.g. draid1:2d:1s).",
                )
            new = spare_list[0]
        t0 = time.monotonic()
        self.backend.replace(self.pool, self.offline_leaf, new)
        st = self.backend.wait_resilver(self.pool)
        seconds = max(time.monotonic() - t0, 1e-3)
        nbytes = st.resilvered_bytes or 0
        warnings = []
        if st.resilvered_bytes is None:
            warnings.append("zpool status did not report the resilvered bytes")
        section: dict[str, Any] = {
            "replaced": self.offline_leaf,
            "with": new,
            "kind": "sequential rebuild to a distributed spare" if st.rebuilt_vdev
            else "healing resilver",
            "resilvered_bytes": st.resilvered_bytes,
            "seconds": round(seconds, 3),
            "status_line": st.line,
            "timing": "from `zpool replace` until `zpool status` reports it finished "
            "(polled every 0.1 s)",
        }  # fmt: skip
        if st.rebuilt_vdev:
            section["rebuilt_vdev"] = st.rebuilt_vdev
            section["verify_scrub"] = self._verify_scrub(warnings)
        return OpResult(nbytes / seconds / MiB, nbytes, seconds,
                        sections={"resilver": section}, warnings=warnings)  # fmt: skip

    def _verify_scrub(self, warnings: list[str]) -> dict[str, Any]:
        """The scrub OpenZFS starts after a sequential rebuild: its time, apart from the
        rebuild's (redundancy is back when the rebuild ends; the checksums are checked when
        the scrub does)."""
        assert isinstance(self.backend, ZfsBackend)
        t0 = time.monotonic()
        sc = self.backend.wait_scrub(self.pool)
        if not sc.seen:
            warnings.append(
                "no scrub followed the sequential rebuild (zfs_rebuild_scrub_enabled=0?)"
            )
            return {"seen": False}
        return {"seen": True, "seconds": round(time.monotonic() - t0, 3), "status_line": sc.line}

    def after(self, w: Workload) -> dict[str, Any]:
        if not isinstance(self.backend, ZfsBackend):
            return {}
        # After the timed window: the workload's blocks in the pool's own accounting (in
        # the guest, 400 small files fsync'd were not yet in the special class's alloc)
        self.backend.sync_txg(self.pool)
        ratio = self.backend.compressratio(self.pool)
        out: dict[str, Any] = {"compressratio": ratio} if ratio else {}
        volume = self.backend.volume_space(self.pool)  # a zvol target: what it is charged
        if volume:
            out["zvol"] = volume
        iostat = self.backend.iostat_snapshot(self.pool)  # OpenZFS: per-vdev I/O and latency
        if iostat:
            out["zpool_iostat"] = iostat
            # what the data vdevs and a special vdev hold (the special study's fill figure)
            alloc, free = self.backend.class_alloc(self.pool, iostat)
            if alloc:
                out["class_alloc"] = alloc
            if free:  # how full each class is: special's 75% threshold
                out["class_free"] = free
        return out

    def compression(self) -> str | None:
        if self.pool.spec.backend == "directory":  # someone else's filesystem: not ours to say
            return "not read (a directory on a filesystem poolbench did not make)"
        if isinstance(self.backend, ZfsBackend):  # read back: OpenZFS's default is "on" (lz4)
            value = self.backend.dataset_property(self.pool, "compression")
        else:  # btrfs: the compress= mount option the configuration asked for (checked at build)
            value = self.pool.spec.fs_options.get("compression")
        return None if value in (None, "off", "no", "none") else f"compression={value}"


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
