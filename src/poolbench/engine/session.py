"""Measure one mounted filesystem: every workload, under every guard, repeated until trusted.

This is the engine behind `poolbench bench` and each trial of a study. What is measured comes
as one object (`Subject`: the mountpoint, its devices, and for a study's trial the pool's cache
defeat and hooks). The loop is the one the fleet shares (engine/loop.py): replicates
interleaved across workloads (engine/replicates.py), every finished measurement committed to
the store at once. The working directory is removed on success, on error and on Ctrl-C.
"""

from __future__ import annotations

import os
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

from poolbench.engine import cold_read, fingerprint, quanta, replicates
from poolbench.engine import window as long_window
from poolbench.engine.device_window import DeviceWindow
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.loop import MeasureLoop, summarise
from poolbench.engine.measure_checks import (
    block_device_refusal,
    depth_check,
    device_findings,
    durability,
    figure,
    fsync_check,
    latency_findings,
    random_io_size,
    served_cache,
    workload_refusal,
)
from poolbench.engine.pgbench_run import Pgbench, PgRequest, check_installed
from poolbench.engine.replay import check as replay_check
from poolbench.engine.subject import (
    Options,
    Subject,
    Timed,
    WorkloadResult,
)
from poolbench.engine.untar import Untar
from poolbench.engine.workspace import Workspace
from poolbench.errors import UsageError
from poolbench.guards import cache, cpu, devices, geometry, workingset
from poolbench.records.findings import CacheFinding, DataFinding, Findings, FioFinding
from poolbench.records.fingerprint import Fingerprint
from poolbench.records.measurement import Measurement
from poolbench.records.run_metadata import RunMetadataJson
from poolbench.store import fingerprints
from poolbench.store.db import Store
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.workload import Workload

MiB = 1024 * 1024
Progress = replicates.Progress
# Re-exported: the session's records and the figure are imported from here by bench, studies
# and the fleet.
__all__ = ["Session"]


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
        fio_version: str | None = None,
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
        block = subject.block_device
        self.workspace = Workspace(runner, subject.path, run_id, block.path if block else None)
        self.device_target = subject.devices
        self.write_model = subject.write_model
        self.working_set: workingset.WorkingSet | None = None
        self.fio_version = ""
        self._fio_known = fio_version  # read once by a study's preflight (None: read here)
        # A study passes its run's one log: each trial's session must not store again the
        # commands an earlier trial (or the pool steps around it) already stored.
        self.commands = commands if commands is not None else CommandLog(runner, store, run_id)
        self.loop = MeasureLoop(store, run_id, self.commands, self.seed)
        self._untar = Untar(runner, options.tarball) if options.tarball else None
        self._zfs: str | None = None  # "openzfs" / "zfs-fuse": whose ARC a cold read checks
        self.show_job: Callable[[str, str], None] | None = None  # --dry-run: (name, job text)
        self.fingerprint: Fingerprint | None = None  # what it ran on, once measuring began

    # -- preflight -------------------------------------------------------------------------
    def preflight(self) -> RunMetadataJson:
        """Everything that can be refused is refused here, before any I/O."""
        self.fio_version = replay_check.fio_version(
            self.runner, self.options.workloads, self._fio_known
        )
        # A dry run's trial pool is not built: its mountpoint is planned, not there to check
        # (a bench's target is the user's: refused if it is not there, dry run or not).
        in_trial = self.subject.hooks is not None
        planned = self.runner.dry_run and in_trial and not self.target.exists()
        if not planned:
            self._refuse_target()
        workload_refusal(self.options, in_study=in_trial)
        check_installed(self.options.workloads, self.target)
        self._refuse_block_device()
        meta_bytes = 0
        meta = [w for w in self.options.workloads if w.is_metadata]
        if meta:  # each file: its data (smallfile-*) and about 4 KiB of metadata
            per_file = max(int(w.fio.get("filesize", 4096)) + 4096 for w in meta)
            meta_bytes = self.options.metadata_files * max(8192, per_file)
        self.working_set = workingset.choose(
            None if planned else self.target, self.options.size, meta_bytes
        )
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
            "options": self.options.as_json(self.seed),
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
        self._fingerprint(None)
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
        self._fingerprint(replicate)
        self.workspace.create()
        try:
            for res in self.results.values():
                if not (skip and res.workload.name in skip):
                    self._measure_once(res, replicate)
        finally:
            self.commands.flush()
            if not self.subject.disposable:  # else it goes with the pool, all at once
                self.workspace.remove()
        return list(self.results.values())

    def _fingerprint(self, replicate: int | None) -> None:
        """What this run (None) or this trial's replicate runs on, stored before it starts,
        with the fill level the measurement begins at."""
        if self.runner.dry_run:
            return
        fp = fingerprint.take(self.runner, self.target, self.device_target, self.fio_version)
        self.fingerprint = fp
        config = None if replicate is None else self.subject.config
        fingerprints.add(self.store, self.run_id, fp, config, replicate)

    @property
    def round_orders(self) -> list[list[str]]:
        """bench: each round's workload order, as it ran."""
        return self.loop.round_orders

    def _loop(self) -> None:
        results = list(self.results.values())
        done = self.loop.rounds(
            results,
            self.options.stop,
            self._measure_once,
            lambda r, rep: f"{r.workload.name} run {rep + 1}",
            self.progress,
        )
        if self.progress:
            self.progress("done", done, done)
        for res in results:
            summarise(res)

    def _plan_only(self) -> None:
        """--dry-run: each workload's fio commands, each job (replicate 1's) to `show_job`."""
        for res in self.results.values():
            w = res.workload
            if w.kind == "pgbench":  # its PostgreSQL commands (the real path), not a fio job
                Pgbench(self.runner).measure(w, self._pg_request(w), Findings())
                continue
            params = replace(self._params(w), randseed=self.randseed(w, 0))
            prep = fiojob.render_prepare(w, params)
            job = fiojob.render(w, params) if w.kind == "fio" else None
            steps = [("json", f"prepare-{w.name}.fio", prep), ("json+", f"{w.name}.fio", job)]
            for fmt, name, text in steps[0 if prep is not None else 1 :]:
                self.runner.run(["fio", f"--output-format={fmt}", name])
                if text is not None and self.show_job is not None:
                    self.show_job(name, text)

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
            min_window_s=self.options.min_window_s,
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
        """One measurement of `res`'s workload, kept and committed (a dry run's: its
        commands, no figure, nothing stored)."""
        if res.workload.kind == "fio":
            m = self._measure_fio(res.workload, replicate)
        else:
            m = self._measure_other(res.workload, replicate)
        if m is not None:
            self.loop.record(res, m)

    def randseed(self, w: Workload, replicate: int) -> int:
        """fio's seed for one measurement: from (session seed, workload, replicate) only, so
        every configuration of a study gets the same offsets at a replicate (common random
        numbers) and `--seed N` replays them."""
        return zlib.crc32(f"{self.seed}:{w.name}:{replicate}".encode()) & 0x7FFFFFFF

    def _measure_fio(self, w: Workload, replicate: int) -> Measurement | None:
        params = replace(self._params(w), randseed=self.randseed(w, replicate))
        job = fiojob.render(w, params)
        jobs = self.workspace.jobs_dir
        written_by = self.workspace.lay_out(w, params)
        findings = self._findings_for(w)
        if written_by is not None:  # said with the figure: whose files this read read
            findings.other["data_written_by"] = written_by
        if "randseed" in job:
            findings.other["fio_randseed"] = params.randseed
        findings.data = DataFinding(self.options.compressibility)
        findings.durability = durability(w)
        warnings: list[str] = []
        files, block_size = self._cold_files(w, params)
        if w.cached_by_design:
            # iozone's reread: the first read warms the cache, the second is measured.
            fio.run_job(self.runner, job, jobs / f"warm-{w.name}.fio", w.direction)
            findings.cache = CacheFinding("kept on purpose (cached test)", None)
        elif w.cold:
            findings.cache = self._defeat_cache(files, warnings)
        timed, job = self._long_enough(w, params, job, replicate, block_size, findings)
        if self.runner.dry_run:  # nothing was measured: no figure, nothing stored
            self.workspace.wrote(w, params)
            timed.window.abandon()
            self._read_back(w, findings)
            return None
        result, seconds, window, arc = timed.result, timed.seconds, timed.window, timed.arc
        findings.other["cpu"] = timed.clock.close(
            result.cpu_usr_s, result.cpu_sys_s, result.io_bytes
        )
        dev = window.close(
            w.direction if not w.is_metadata else "meta",
            result.io_bytes,
            seconds,
            compressibility=self.options.compressibility,
            cached_by_design=w.cached_by_design,
            warn_unverified=not w.is_metadata,
            io_size=random_io_size(w),
        )
        device_findings(findings, dev)
        if w.cached_by_design and findings.cache is not None:
            findings.cache = served_cache(findings.cache, result.io_bytes, dev.finding.read_bytes)
        arc_seen = arc.close(result.io_bytes, result.total_ios)
        warnings += dev.warnings + self._settle_cold(w, findings, arc_seen)
        warnings += self._cold_rule_warning(w, findings)
        findings.fio = FioFinding(result.fio_version, result.within_run_bw_dev, result.lat_mean_ns)
        warnings += depth_check(job, result, findings) + timed.warnings
        warnings += fsync_check(w, result, findings) + replay_check.check(w, job, findings)
        self._read_back(w, findings)
        value = figure(w, result.io_bytes, result.total_ios, seconds)
        return Measurement(
            self.subject.config, w.name, replicate, value, w.unit, result.io_bytes,
            result.total_ios, seconds, dev.device_bytes, dev.device_mib_s, warnings, findings,
            asdict(w), job, latency=result.latency, config_levels=dict(self.subject.levels),
        )  # fmt: skip

    def _timed(self, w: Workload, job: str, name: str, block_size: int) -> Timed:
        """One timed fio run inside the device, ARC and CPU windows."""
        assert self.device_target is not None
        arc_of = self._zfs if w.cold and not w.cached_by_design else None
        arc = cache.ArcWindow(arc_of, block_size=block_size, metadata=w.is_metadata,
                              direct="direct=1" in job.splitlines())  # fmt: skip
        window = DeviceWindow(self.device_target, *(self.write_model or (None, "")))
        clock = cpu.CpuWindow(self._zfs)
        try:
            result = fio.run_job(self.runner, job, self.workspace.jobs_dir / name, w.direction)
            seconds = result.runtime_s + self._sync_metadata(w)
        except BaseException:
            window.abandon()
            raise
        return Timed(result, seconds, window, arc, clock)

    def _long_enough(
        self, w: Workload, params: fiojob.JobParams, job: str, replicate: int,
        block_size: int, findings: Findings,
    ) -> tuple[Timed, str]:  # fmt: skip
        """The timed run, and for a size-bound write that ended before the minimum window,
        the run again over the working set written `loops` times (engine/window.py); the
        first pass only sizes the second. Returns the run kept and its job."""
        timed = self._timed(w, job, f"{w.name}.{replicate}.fio", block_size)
        minimum, first_pass = params.min_window_s, None
        # (a dry run's fio ran for no time: its window is not lengthened)
        extend = long_window.extendable(w) and not self.runner.dry_run
        loops = long_window.loops_for(timed.seconds, minimum) if extend else 1
        if loops > 1:
            timed.window.abandon()
            first_pass = timed.seconds
            params = replace(params, loops=loops)
            job = fiojob.render(w, params)
            self.workspace.lay_out(w, params)
            timed = self._timed(w, job, f"{w.name}.{replicate}.loops.fio", block_size)
        moves_in = None if self.runner.dry_run else quanta.of(self._zfs)
        findings.other["window"], timed.warnings = long_window.finding(
            w, timed.result, timed.seconds, minimum, first_pass_s=first_pass, loops=loops,
            quanta=moves_in,
        )  # fmt: skip
        return timed, job

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

    def _settle_cold(self, w: Workload, findings: Findings, arc: cache.ArcSeen | None) -> list[str]:
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
        if hooks is None:
            return
        said = hooks.after(w).to_json()  # a dry run's: the commands, nothing read
        if said:
            findings.merge_pool(said)
            latency_findings(findings, w)  # OpenZFS: the slow member by its disk_wait

    def _measure_other(self, w: Workload, replicate: int) -> Measurement | None:
        """A workload that is not a fio job: `untar` (timed here) or a pool operation (done
        by the trial loop's hooks), under the same guards and into the same store."""
        hooks = self.subject.hooks
        if w.needs_data:
            self.workspace.prepare(w, self._params(w))
        findings = self._findings_for(w)
        if w.kind == "pgbench":
            op = Pgbench(self.runner).measure(w, self._pg_request(w), findings)
        elif w.kind == "untar":
            assert self._untar is not None and self.device_target is not None
            op = self._untar.measure(
                self.workspace.root, self.device_target, self.options.compressibility, findings,
                self.write_model, hooks.compression() if hooks is not None else None,
            )  # fmt: skip
        else:
            assert hooks is not None
            op = hooks.operate(w, replace(self._params(w), randseed=self.randseed(w, replicate)))
        findings.other.update(op.sections)
        self._read_back(w, findings)
        if self.runner.dry_run:  # nothing was measured: no figure, nothing stored
            return None
        device_mib_s = None
        if op.device_bytes is not None and op.seconds > 0:
            device_mib_s = op.device_bytes / op.seconds / MiB
        return Measurement(
            self.subject.config, w.name, replicate, op.value, w.unit, op.app_bytes, op.ops,
            op.seconds, op.device_bytes, device_mib_s, op.warnings, findings, asdict(w), "",
            latency=op.latency, config_levels=dict(self.subject.levels),
        )  # fmt: skip

    def _pg_request(self, w: Workload) -> PgRequest:
        assert self.working_set is not None and self.device_target is not None
        journals = self.store.path.parent / "journals"  # engine/trial_loop.default_paths
        return PgRequest(self.workspace.root, self.device_target, self.working_set,
                         w.jobs or self.options.numjobs, self.options.runtime_s,
                         dict(self.subject.levels), journals,
                         self.subject.disposable)  # fmt: skip

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
