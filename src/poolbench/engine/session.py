"""Measure one mounted filesystem: every workload, under every guard, repeated until trusted.

This is the engine behind `poolbench bench` and each trial of a study. What is measured comes
as one object (`Subject`: the mountpoint, its devices, and for a study's trial the pool's cache
defeat and hooks). Replicates are interleaved across workloads (engine/replicates.py). Every
finished measurement is committed to the store at once; the working directory is removed on
success, on error and on Ctrl-C.
"""

from __future__ import annotations

import os
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from poolbench import is_digits
from poolbench.engine import cold_read, replicates
from poolbench.engine.device_window import DeviceWindow
from poolbench.engine.hooks import TrialHooks
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.records import (
    CacheFinding,
    DataFinding,
    Findings,
    FioFinding,
    Measurement,
    modelled_amplification,
    write_amplification,
)
from poolbench.engine.untar import Untar
from poolbench.engine.workspace import Workspace
from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards import cache, cpu, devices, fsyncs, geometry, reread, workingset
from poolbench.guards.devices import Target
from poolbench.stats import outliers
from poolbench.stats.policy import MeanCI, ReplicatePolicy
from poolbench.store.db import Store
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiodepth, fiojob
from poolbench.workloads.fioparse import FioResult
from poolbench.workloads.library import Workload

MiB = 1024 * 1024
Progress = replicates.Progress


@dataclass(frozen=True)
class Options:
    workloads: list[Workload]
    size: int | None = None  # bytes; None = the ≥ 2× RAM rule
    compressibility: int = 0
    runtime_s: int = 30
    iodepth: int = 1
    numjobs: int = 1
    metadata_files: int = 20000
    stop: ReplicatePolicy = field(default_factory=replicates.policy)
    tarball: Path | None = None  # the plain tar the `untar` workload extracts
    # Seeds the workload order of each round and fio's random offsets (randseed), so a run
    # with the same seed replays the same offsets; None = drawn at random (and recorded).
    seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["workloads"] = [w.name for w in self.workloads]
        return d


@dataclass
class WorkloadResult:
    workload: Workload
    values: list[float] = field(default_factory=list)
    device_mib_s: list[float] = field(default_factory=list)
    cpu_s_per_gib: list[float] = field(default_factory=list)  # guards/cpu.py, per replicate
    amplification: list[float] = field(default_factory=list)  # writes: device ÷ app bytes
    amplification_model: float | None = None  # what the layout must write per byte
    served_by: list[str] = field(default_factory=list)  # cached tests: guards/reread labels
    warnings: list[str] = field(default_factory=list)
    policy: ReplicatePolicy = field(default_factory=ReplicatePolicy)
    # Per replicate, fio's completion latency as stored (Latency.to_json), None without.
    clats: list[dict[str, Any] | None] = field(default_factory=list)

    @property
    def summary(self) -> MeanCI:
        """Stein's interval of the replicates (the policy's first-stage sd and df)."""
        return self.policy.summarize(self.values)

    @property
    def served_label(self) -> str:
        """A cached test's note: who served its replicates, by the device bytes."""
        kinds = set(self.served_by)
        if len(kinds) == 1:
            return reread.Served(kinds.pop(), None, "").label
        return "cached by design, unverified" if not kinds else "cache and disks varied"

    def add_warning(self, text: str) -> None:
        if text and text not in self.warnings:
            self.warnings.append(text)


@dataclass(frozen=True)
class BlockDevice:
    """A block device measured in place of files: a zvol of a study's pool."""

    path: Path  # its stable name (/dev/zvol/POOL/VOL): an import re-creates the node under it
    size_bytes: int
    block_size: int  # ZFS's block for it (volblocksize): the ARC guard's unit


# Called before a cold read with the data files; returns what it did (for the record).
CacheDefeat = Callable[[list[Path]], dict[str, Any]]


@dataclass(frozen=True)
class Subject:
    """What a session measures: a mounted filesystem, and for a study's trial the pool under
    it (engine/pool_ops.py `subject_for`)."""

    path: Path
    config: str  # stored as the measurement's configuration (bench: the path)
    devices: Target | None = None  # None: found from the mount at preflight
    cache_defeat: CacheDefeat | None = None  # None: the page cache drop (guards/cache.py)
    hooks: TrialHooks | None = None  # pool state and pool operations (studies only)
    findings: Findings = field(default_factory=Findings)  # trial-wide, in every measurement
    # What the layout must write per application byte (guards/geometry), or None and why;
    # None here: read from the stack at preflight.
    write_model: geometry.Found | None = None
    # Measured instead of files under `path` (which still holds the job files); None: files.
    block_device: BlockDevice | None = None

    @classmethod
    def directory(cls, path: Path) -> Subject:
        return cls(path, str(path))


class Session:
    def __init__(
        self,
        runner: Runner,
        store: Store,
        run_id: int,
        subject: Subject,
        options: Options,
        *,
        progress: Progress | None = None,
        commands: CommandLog | None = None,
    ) -> None:
        self.runner = runner
        self.store = store
        self.run_id = run_id
        self.subject = subject
        self.target = subject.path
        self.options = options
        self.progress = progress
        self.results = {w.name: WorkloadResult(w, policy=options.stop) for w in options.workloads}
        self.seed = options.seed if options.seed is not None else secrets.randbelow(2**31)
        self.round_orders: list[list[str]] = []  # bench: each round's workload order
        self._reads_disturbed = False  # a write ran since the read data was laid out
        block = subject.block_device
        self.workspace = Workspace(runner, subject.path, run_id, block.path if block else None)
        self.device_target = subject.devices
        self.write_model = subject.write_model
        self.working_set: workingset.WorkingSet | None = None
        self.fio_version = ""
        # A study passes its run's one log: each trial's session must not store again the
        # commands an earlier trial (or the pool steps around it) already stored.
        self.commands = commands if commands is not None else CommandLog(runner, store, run_id)
        self._untar = Untar(runner, options.tarball) if options.tarball else None
        self._zfs: str | None = None  # "openzfs" / "zfs-fuse": whose ARC a cold read checks

    # -- preflight -------------------------------------------------------------------------
    def preflight(self) -> dict[str, Any]:
        """Everything that can be refused is refused here, before any I/O."""
        self.fio_version = fio.fio_version(self.runner)
        self._refuse_target()
        self._refuse_workloads()
        self._refuse_block_device()
        meta_bytes = 0
        meta = [w for w in self.options.workloads if w.is_metadata]
        if meta:  # each file: its data (smallfile-*) and about 4 KiB of metadata
            per_file = max(int(w.fio.get("filesize", 4096)) + 4096 for w in meta)
            meta_bytes = self.options.metadata_files * max(8192, per_file)
        self.working_set = workingset.choose(self.target, self.options.size, meta_bytes)
        if self.device_target is None:
            self.device_target = devices.resolve(self.target, self.runner)
        self._zfs = None if self.runner.dry_run else cache.zfs_flavour(self.target)
        if self.write_model is None:
            self.write_model = geometry.for_target(self.device_target, self.runner)
        model, unmodelled = self.write_model
        from poolbench.system.probes import device_info

        return {
            "fio_version": self.fio_version,
            "working_set": self.working_set.as_dict(),
            "target": self.device_target.as_dict(),
            "write_model": model.as_dict() if model else {"unmodelled": unmodelled},
            "devices": [device_info(d) for d in self.device_target.devices],
            "options": self.options.as_dict() | {"seed": self.seed},
        }

    def _refuse_target(self) -> None:
        if not self.target.exists():
            raise UsageError(
                f"The target {self.target} does not exist.",
                "Give the directory of a mounted filesystem to measure.",
            )
        if not self.target.is_dir():
            raise UsageError(
                f"The target {self.target} is not a directory.",
                "Give a directory on the filesystem to measure (poolbench creates its files "
                "in a subdirectory and removes them afterwards).",
            )
        if not os.access(self.target, os.W_OK | os.X_OK):
            raise UsageError(
                f"The target {self.target} is not writable by this user.",
                "Run as a user who can write there (often root), or pick another directory.",
            )

    def _refuse_workloads(self) -> None:
        if any(w.kind == "untar" for w in self.options.workloads):
            tb = self.options.tarball
            if tb is None or not tb.is_file():
                raise UsageError(
                    "The untar workload needs a tarball"
                    + (f"; {tb} is not a file." if tb else "."),
                    "Set [workloads] tarball (Debian: apt install linux-source-6.1, then "
                    "/usr/src/linux-source-6.1.tar.xz).",
                )
        if any(w.kind == "pool" for w in self.options.workloads) and self.subject.hooks is None:
            raise UsageError(
                "Pool operations (capacity, resilver, degraded-read) run only inside a study.",
                "Use them in a study file, not with `poolbench bench`.",
            )

    def _refuse_block_device(self) -> None:
        """On a block device: only what a block device can do, and room for the working
        set (checked again here: a study checks the workloads before it builds anything)."""
        block = self.subject.block_device
        if block is None:
            return
        refused = block_device_refusal(self.options.workloads)
        if refused:
            raise UsageError(*refused)
        need = (self.options.size or 0) + max(
            (int(w.fio.get("bs", 0)) for w in self.options.workloads if w.tail_record), default=0
        )
        if self.options.size is None or need > block.size_bytes:
            raise UsageError(
                f"The block device {block.path} holds {block.size_bytes} bytes; the working set "
                f"needs {need or 'an explicit size'}.",
                "Set [workloads] size to what the device can hold.",
            )

    # -- the loops --------------------------------------------------------------------------
    def run(self) -> list[WorkloadResult]:
        """bench: every workload, replicated until the stop rule is satisfied."""
        assert self.working_set is not None, "preflight() first"
        if self.runner.dry_run:
            self._plan_only()
            return list(self.results.values())
        self.workspace.create()
        try:
            self._loop()
        finally:
            self.commands.flush()
            self.workspace.remove()
        return list(self.results.values())

    def run_once(self, replicate: int, skip: set[str] | None = None) -> list[WorkloadResult]:
        """Trial mode: measure each workload once as `replicate` (a study repeats whole
        trials, each on a freshly built pool, instead of repeating inside one)."""
        assert self.working_set is not None, "preflight() first"
        self.workspace.create()
        try:
            for res in self.results.values():
                if not (skip and res.workload.name in skip):
                    self._measure_once(res, replicate)
        finally:
            self.commands.flush()
            self.workspace.remove()
        return list(self.results.values())

    def _loop(self) -> None:
        stop = self.options.stop
        done = replicates.interleave(
            list(self.results.values()),
            stop,
            values=lambda r: r.values,
            measure=self._measure_once,
            describe=lambda r, rep: f"{r.workload.name} run {rep + 1}",
            progress=self.progress,
            seed=self.seed,
            name=lambda r: r.workload.name,
            record=lambda _round, names: self.round_orders.append(names),
        )
        if self.progress:
            self.progress("done", done, done)
        for res in self.results.values():
            if res.values:
                summary = res.summary
                res.add_warning(summary.warning())
                if summary.outliers:
                    res.add_warning(outliers.note(", ".join(str(i + 1) for i in summary.outliers)))

    def _plan_only(self) -> None:
        """--dry-run: show every fio job that would run, once per workload; run nothing."""
        for res in self.results.values():
            params = self._params(res.workload)
            prep = fiojob.render_prepare(res.workload, params)
            if prep is not None:
                self.runner.run(["fio", "--output-format=json", f"prepare-{res.workload.name}.fio"])
            self.runner.run(["fio", "--output-format=json+", f"{res.workload.name}.fio"])

    # -- one measurement --------------------------------------------------------------------
    def _params(self, w: Workload) -> fiojob.JobParams:
        assert self.working_set is not None
        return fiojob.JobParams(
            directory=self.workspace.directory(w),
            size_bytes=self.working_set.size_bytes,
            compressibility=self.options.compressibility,
            runtime_s=self.options.runtime_s,
            iodepth=self.options.iodepth,
            numjobs=self.options.numjobs,
            metadata_files=self.options.metadata_files,
            device=str(block.path) if (block := self.subject.block_device) else None,
        )

    def _findings_for(self, w: Workload) -> Findings:
        """The trial-wide findings, and the pool state `w` runs in."""
        findings = self.subject.findings.copy()
        hooks = self.subject.hooks
        state = hooks.before(w) if hooks else {}
        if state:
            findings.other["pool_state"] = state
        return findings

    def _measure_once(self, res: WorkloadResult, replicate: int) -> None:
        if res.workload.kind == "fio":
            self._measure_fio(res, replicate)
        else:
            self._measure_other(res, replicate)

    def randseed(self, w: Workload, replicate: int) -> int:
        """fio's seed for one measurement: from (session seed, workload, replicate) only, so
        every configuration of a study gets the same offsets at a replicate (common random
        numbers) and `--seed N` replays them."""
        return zlib.crc32(f"{self.seed}:{w.name}:{replicate}".encode()) & 0x7FFFFFFF

    def _lay_out(self, w: Workload, params: fiojob.JobParams) -> None:
        """Prepare the data; a read replicate reads data laid out as in the first one, so a
        file that a write workload has changed since it was laid out is laid out afresh."""
        if w.direction == "read" and self._reads_disturbed:
            self.workspace.discard(w, params)
            self._reads_disturbed = False
        elif w.direction != "read" and not w.is_metadata:
            # (a read changes nothing: the next read finds its data as laid out)
            self._reads_disturbed = True
        self.workspace.prepare(w, params)

    def _measure_fio(self, res: WorkloadResult, replicate: int) -> None:
        w = res.workload
        params = replace(self._params(w), randseed=self.randseed(w, replicate))
        job = fiojob.render(w, params)
        jobs = self.workspace.jobs_dir
        self._lay_out(w, params)
        findings = self._findings_for(w)
        if "randseed" in job:
            findings.other["fio_randseed"] = params.randseed
        findings.data = DataFinding(self.options.compressibility)
        findings.durability = _durability(w)
        warnings: list[str] = []
        files, block_size = self._cold_files(w, params)
        if w.cached_by_design and not self.runner.dry_run:
            # iozone's reread: the first read warms the cache, the second is measured.
            fio.run_job(self.runner, job, jobs / f"warm-{w.name}.fio", w.direction)
            findings.cache = CacheFinding("kept on purpose (cached test)", None)
        elif w.cold:
            findings.cache = self._defeat_cache(files, warnings)
        assert self.device_target is not None
        arc_of = self._zfs if w.cold and not w.cached_by_design else None
        arc = cache.ArcWindow(arc_of, block_size=block_size, metadata=w.is_metadata,
                              direct="direct=1" in job.splitlines())  # fmt: skip
        window = DeviceWindow(self.device_target, *(self.write_model or (None, "")))
        clock = cpu.CpuWindow(self._zfs)
        try:
            result = fio.run_job(self.runner, job, jobs / f"{w.name}.{replicate}.fio", w.direction)
            seconds = result.runtime_s + self._sync_metadata(w)
        except BaseException:
            window.abandon()
            raise
        findings.other["cpu"] = clock.close(result.cpu_usr_s, result.cpu_sys_s, result.io_bytes)
        dev = window.close(
            w.direction if not w.is_metadata else "meta",
            result.io_bytes,
            seconds,
            compressibility=self.options.compressibility,
            cached_by_design=w.cached_by_design,
            warn_unverified=not w.is_metadata,
            io_size=_random_io_size(w),
        )
        findings.device = dev.finding
        if dev.members:  # per-disk breakdown, kept in the measurement's guards JSON
            findings.other["members"] = {m.name: m.as_dict() for m in dev.members}
        if w.cached_by_design and findings.cache is not None:
            findings.cache = _served(findings.cache, result.io_bytes, dev.finding.read_bytes)
        arc_seen = arc.close(result.io_bytes, result.total_ios)
        warnings += dev.warnings + self._settle_cold(w, findings, arc_seen)
        warnings += self._cold_rule_warning(w, findings)
        findings.fio = FioFinding(result.fio_version, result.within_run_bw_dev, result.lat_mean_ns)
        warnings += _depth_check(job, result, findings)
        warnings += _fsync_check(w, result, findings)
        self._read_back(w, findings)
        value = figure(w, result.io_bytes, result.total_ios, seconds)
        self._record(res, Measurement(
            self.subject.config, w.name, replicate, value, w.unit, result.io_bytes,
            result.total_ios, seconds, dev.device_bytes, dev.device_mib_s, warnings, findings,
            asdict(w), job, latency=result.latency,
        ))  # fmt: skip

    def _cold_files(self, w: Workload, params: fiojob.JobParams) -> tuple[list[Path], int]:
        """A cold read's files and their block size, read before the cache drop, never after
        it: a listing of the metadata directory makes OpenZFS prefetch every file's dnode, and
        a stat reads an inode, which would warm exactly what a cold metadata read measures."""
        files = self.workspace.data_files(w, params) if w.cold else []
        block = self.subject.block_device
        return files, block.block_size if block else cache.block_size_of(files)

    def _sync_metadata(self, w: Workload) -> float:
        """Metadata tests that change the tree end with a timed syncfs; returns its seconds."""
        if not w.is_metadata or w.name.split("-")[1] in ("stat", "read"):
            return 0.0
        t0 = time.monotonic()
        self.runner.run(["sync", "--file-system", str(self.workspace.meta_dir)])
        return time.monotonic() - t0

    def _settle_cold(
        self, w: Workload, findings: Findings, arc: dict[str, Any] | None
    ) -> list[str]:
        """After a cold read: what the ARC and (metadata) the devices say about the drop."""
        if not w.cold or findings.cache is None or self.runner.dry_run:
            return []
        meta = self.options.metadata_files if w.is_metadata else None
        findings.cache, warnings = cold_read.settle(findings.cache, arc, findings.device, meta)
        return warnings

    def _cold_rule_warning(self, w: Workload, findings: Findings) -> list[str]:
        ws = self.working_set
        assert ws is not None
        if w.cold and ws.below_cold_rule and not findings.cache_verified:
            return [
                f"working set is {ws.ratio_to_ram:.2f}× RAM and the cache drop was not "
                "verified: this read may measure RAM"
            ]
        return []

    def _read_back(self, w: Workload, findings: Findings) -> None:
        """What the pool says after this measurement (e.g. the achieved compressratio)."""
        hooks = self.subject.hooks
        if hooks is None or self.runner.dry_run:
            return
        said = hooks.after(w)
        if said:
            findings.merge_pool(said)

    def _measure_other(self, res: WorkloadResult, replicate: int) -> None:
        """A workload that is not a fio job: `untar` (timed here) or a pool operation (done
        by the trial loop's hooks), under the same guards and into the same store."""
        w = res.workload
        hooks = self.subject.hooks
        assert hooks is not None or w.kind == "untar"
        if w.needs_data:
            self.workspace.prepare(w, self._params(w))
        findings = self._findings_for(w)
        if w.kind == "untar":
            assert self._untar is not None and self.device_target is not None
            op = self._untar.measure(
                self.workspace.root, self.device_target, self.options.compressibility, findings,
                self.write_model, hooks.compression() if hooks is not None else None,
            )  # fmt: skip
        else:
            assert hooks is not None
            op = hooks.operate(w)
        findings.other.update(op.sections)
        self._read_back(w, findings)
        device_mib_s = None
        if op.device_bytes is not None and op.seconds > 0:
            device_mib_s = op.device_bytes / op.seconds / MiB
        self._record(res, Measurement(
            self.subject.config, w.name, replicate, op.value, w.unit, op.app_bytes, op.ops,
            op.seconds, op.device_bytes, device_mib_s, op.warnings, findings, asdict(w), "",
        ))  # fmt: skip

    def _record(self, res: WorkloadResult, m: Measurement) -> None:
        """Keep the figure for the summary and commit it to the store at once."""
        res.values.append(m.value)
        res.clats.append(m.latency.to_json() if m.latency is not None else None)
        if m.device_mib_s is not None:
            res.device_mib_s.append(m.device_mib_s)
        per_gib = cpu.per_gib(m.findings.other.get("cpu"))
        if per_gib is not None:
            res.cpu_s_per_gib.append(per_gib)
        guards = m.findings.to_json()
        got = write_amplification(guards)
        if got is not None:
            res.amplification.append(got)
            res.amplification_model = modelled_amplification(guards)
        if m.findings.cache is not None and "served_by" in m.findings.cache.more:
            res.served_by.append(str(m.findings.cache.more["served_by"]))
        for text in m.warnings:
            res.add_warning(text)
        self.store.add_measurement(self.run_id, m.to_row())
        self.commands.flush()

    def _defeat_cache(self, files: list[Path], warnings: list[str]) -> CacheFinding:
        if self.subject.cache_defeat is not None:
            record = CacheFinding.from_json(self.subject.cache_defeat(files))
        else:
            record = CacheFinding.from_json(cache.drop(self.runner, files).as_dict())
        if record.verified is False:
            warnings.append(
                f"the cache drop before this cold read could not be verified ({record.why})"
            )
        return record

    def flush_commands(self) -> None:
        self.commands.flush()


def block_device_refusal(workloads: list[Workload]) -> tuple[str, str] | None:
    """(problem, fix) when a workload cannot run on a block device: one that works on files
    (metadata, small files, untar), several streams (each a file of its own), or a pool
    operation; None when all can."""
    bad = [
        w.name for w in workloads
        if w.kind != "fio" or w.is_metadata or w.streams > 1 or w.cached_by_design
    ]  # fmt: skip
    if not bad:
        return None
    return (
        f"{', '.join(bad)} cannot run on a block device (a zvol): metadata, small-file, "
        "untar, multi-stream, cached and pool-operation workloads work on files.",
        "Measure those on a dataset (target = dataset), and on a zvol only single-stream fio "
        "reads and writes (seq-read, seq-write, rand-read-4k, rand-write-16k, rand-mix70-16k, "
        "sync-write-*).",
    )


def _random_io_size(w: Workload) -> int | None:
    """The size of a random write, which may rewrite a larger record (amplification's note)."""
    bs = str(w.fio.get("bs", ""))
    return int(bs) if "rand" in str(w.fio.get("rw", "")) and is_digits(bs) else None


def _served(kept: CacheFinding, app_bytes: int, device_read_bytes: int | None) -> CacheFinding:
    """A cached test's cache record with who really served it (guards/reread)."""
    who = reread.served(app_bytes, device_read_bytes)
    more = {**kept.more, "served_by": who.by, "device_share": who.device_share}
    return replace(kept, more=more)


def _durability(w: Workload) -> str:
    if w.is_metadata:
        read = w.name.split("-")[1] in ("stat", "read")
        return "n/a" if read else "syncfs after the last operation, timed"
    if "fsync" in w.fio:
        return "fsync after every write, and end_fsync=1, inside the timed window"
    if w.fio.get("sync") == "dsync":
        return "O_DSYNC on every write, and end_fsync=1, inside the timed window"
    if w.direction in ("write", "mixed"):
        return "end_fsync=1 inside the timed window"
    return "n/a"


def figure(w: Workload, io_bytes: int, ios: int, seconds: float) -> float:
    """The workload's figure in its unit (MiB/s or operations/s); bench, study and fleet."""
    if seconds <= 0:
        raise PoolbenchError(
            f"fio reported a zero runtime for {w.name}.",
            "The working set is too small to time; raise --size.",
        )
    if w.unit == "MiB/s":
        return io_bytes / seconds / MiB
    return ios / seconds


def _fsync_check(w: Workload, result: FioResult, findings: Findings) -> list[str]:
    """A workload with fsync=N: how many fsyncs fio made, and a warning if too few."""
    every = int(w.fio.get("fsync", 0) or 0)
    if every <= 0 or result.direction == "read":
        return []
    found, warnings = fsyncs.check(every, result.total_ios, result.fsyncs, result.jobs)
    findings.other["fsyncs"] = found
    return warnings


def _depth_check(job: str, result: FioResult, findings: Findings) -> list[str]:
    """The queue depth fio achieved, recorded; a warning when it is well below the request.
    The depth asked is the job's own: a workload that names its load (rand-read-4k-qd8)
    overrides the study's."""
    asked = [int(ln.split("=", 1)[1]) for ln in job.splitlines() if ln.startswith("iodepth=")]
    requested = max(asked, default=1)
    if requested <= 1:
        return []
    depth = fiodepth.achieved(result.depth_levels, requested, result.submit_busy)
    if depth is not None:
        findings.other["queue_depth"] = depth.as_dict()
    engine = next((ln.split("=", 1)[1] for ln in job.splitlines() if ln.startswith("ioengine=")),
                  "?")  # fmt: skip
    msg = fiodepth.warning(depth, f"ioengine={engine}")
    return [msg] if msg else []
