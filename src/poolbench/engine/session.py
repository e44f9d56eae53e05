"""Measure one mounted filesystem: every workload, under every guard, repeated until trusted.

This is the engine behind `poolbench bench` and each trial of a study. Replicates are
interleaved across workloads (A B C A B C ..., never A A A B B B) so slow drift on the devices
is spread over all workloads instead of masquerading as a difference between them. Every
finished measurement is committed to the store at once; the working directory is removed on
success, on error and on Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from poolbench.errors import PoolbenchError, UsageError
from poolbench.guards import cache, devices, workingset
from poolbench.guards.devices import Target
from poolbench.stats.summary import StopRule, Summary, summarize
from poolbench.store.db import Measurement, Store
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import Workload

MiB = 1024 * 1024


@dataclass(frozen=True)
class Options:
    workloads: list[Workload]
    size: int | None = None  # bytes; None = the ≥ 2× RAM rule
    compressibility: int = 0
    runtime_s: int = 30
    iodepth: int = 1
    numjobs: int = 1
    metadata_files: int = 20000
    stop: StopRule = field(default_factory=StopRule)
    tarball: Path | None = None  # the plain tar the `untar` workload extracts

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["workloads"] = [w.name for w in self.workloads]
        return d


@dataclass
class WorkloadResult:
    workload: Workload
    values: list[float] = field(default_factory=list)
    device_mib_s: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def summary(self) -> Summary:
        return summarize(self.values)

    def add_warning(self, text: str) -> None:
        if text and text not in self.warnings:
            self.warnings.append(text)


# Called before a cold read with the data files; returns what it did (for the record).
CacheDefeat = Callable[[list[Path]], dict[str, Any]]


@dataclass
class OpResult:
    """The outcome of a pool operation (a `pool` workload: capacity, resilver)."""

    value: float
    app_bytes: int
    seconds: float
    ops: int = 0
    device_bytes: int | None = None
    guards: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


class TrialHooks(Protocol):
    """What the trial loop does around a study's workloads (pool state, pool operations)."""

    def before(self, w: Workload) -> dict[str, Any]:
        """Bring the pool into the state `w` runs in (`w.pool_state`); returns what it did."""

    def operate(self, w: Workload) -> OpResult:
        """Run a `pool` workload (kind "pool") and return its figure."""

    def after(self, w: Workload) -> dict[str, Any]:
        """Read back what the pool says after the measurement (merged into guards["pool"])."""


Progress = Callable[[str, int, int], None]  # (description, done, total)


class Session:
    def __init__(
        self,
        runner: Runner,
        store: Store,
        run_id: int,
        target: Path,
        options: Options,
        *,
        config: str | None = None,
        cache_defeat: CacheDefeat | None = None,
        device_target: Target | None = None,
        progress: Progress | None = None,
        extra_guards: dict[str, Any] | None = None,
        hooks: TrialHooks | None = None,
    ) -> None:
        self.runner = runner
        self.store = store
        self.run_id = run_id
        self.target = target
        self.options = options
        self.config = config or str(target)
        self.cache_defeat = cache_defeat
        self.progress = progress
        self.results = {w.name: WorkloadResult(w) for w in options.workloads}
        self._flushed_calls = 0
        self.workdir = target / f".poolbench-run{run_id}-{os.getpid()}"
        self.meta_dir = self.workdir / "meta"
        self.jobs_dir = self.workdir / "jobs"
        self.device_target = device_target
        self.working_set: workingset.WorkingSet | None = None
        self.fio_version = ""
        self.extra_guards = extra_guards or {}
        self.hooks = hooks
        self._tar_content: tuple[int, int] | None = None

    # -- preflight -------------------------------------------------------------------------
    def preflight(self) -> dict[str, Any]:
        """Everything that can be refused is refused here, before any I/O."""
        self.fio_version = fio.fio_version(self.runner)
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
        if any(w.kind == "untar" for w in self.options.workloads):
            tb = self.options.tarball
            if tb is None or not tb.is_file():
                raise UsageError(
                    "The untar workload needs a tarball"
                    + (f"; {tb} is not a file." if tb else "."),
                    "Set [workloads] tarball (Debian: apt install linux-source-6.1, then "
                    "/usr/src/linux-source-6.1.tar.xz).",
                )
        if any(w.kind == "pool" for w in self.options.workloads) and self.hooks is None:
            raise UsageError(
                "Pool operations (capacity, resilver, degraded-read) run only inside a study.",
                "Use them in a study file, not with `poolbench bench`.",
            )
        meta_bytes = 0
        if any(w.is_metadata for w in self.options.workloads):
            meta_bytes = self.options.metadata_files * 8192
        self.working_set = workingset.choose(self.target, self.options.size, meta_bytes)
        if self.device_target is None:
            self.device_target = devices.resolve(self.target, self.runner)
        from poolbench.system.probes import device_info

        return {
            "fio_version": self.fio_version,
            "working_set": self.working_set.as_dict(),
            "target": self.device_target.as_dict(),
            "devices": [device_info(d) for d in self.device_target.devices],
            "options": self.options.as_dict(),
        }

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> list[WorkloadResult]:
        assert self.working_set is not None, "preflight() first"
        if self.runner.dry_run:
            self.workdir = self.target / ".poolbench-dry-run"
        else:
            self.workdir.mkdir()
            self.jobs_dir.mkdir()
        try:
            self._loop()
        finally:
            self.flush_commands()
            if not self.runner.dry_run:
                shutil.rmtree(self.workdir, ignore_errors=True)
        return list(self.results.values())

    def run_once(self, replicate: int, skip: set[str] | None = None) -> list[WorkloadResult]:
        """Trial mode: measure each workload once as `replicate` (a study repeats whole
        trials, each on a freshly built pool, instead of repeating inside one)."""
        assert self.working_set is not None, "preflight() first"
        self.workdir.mkdir()
        self.jobs_dir.mkdir()
        try:
            for res in self.results.values():
                if skip and res.workload.name in skip:
                    continue
                self._measure_once(res, replicate)
        finally:
            self.flush_commands()
            shutil.rmtree(self.workdir, ignore_errors=True)
        return list(self.results.values())

    def _loop(self) -> None:
        stop = self.options.stop
        if self.runner.dry_run:
            self._plan_only()
            return
        total = len(self.results) * stop.min_runs
        done = 0
        while True:
            pending = [r for r in self.results.values() if stop.needs_more(r.values)]
            if not pending:
                break
            for res in pending:
                replicate = len(res.values)
                if replicate >= stop.min_runs:
                    total += 1  # a run beyond the planned minimum: the CI is still too wide
                if self.progress:
                    self.progress(f"{res.workload.name} run {replicate + 1}", done, total)
                self._measure_once(res, replicate)
                done += 1
        if self.progress:
            self.progress("done", done, done)
        for res in self.results.values():
            if res.values:
                res.add_warning(stop.verdict(res.values))
                flagged = res.summary.outliers
                if flagged:
                    runs = ", ".join(str(i + 1) for i in flagged)
                    res.add_warning(
                        f"run(s) {runs} are outliers by the MAD rule (|modified z| > 3.5): "
                        "something disturbed the machine; they are kept in the mean"
                    )

    def _plan_only(self) -> None:
        """--dry-run: show every fio job that would run, once per workload; run nothing."""
        for res in self.results.values():
            params = self._params(res.workload)
            prep = fiojob.render_prepare(res.workload, params)
            if prep is not None:
                self.runner.run(["fio", "--output-format=json", f"prepare-{res.workload.name}.fio"])
            self.runner.run(["fio", "--output-format=json", f"{res.workload.name}.fio"])

    # -- one measurement --------------------------------------------------------------------
    def _params(self, w: Workload) -> fiojob.JobParams:
        assert self.working_set is not None
        return fiojob.JobParams(
            directory=str(self.meta_dir if w.is_metadata else self.workdir),
            size_bytes=self.working_set.size_bytes,
            compressibility=self.options.compressibility,
            runtime_s=self.options.runtime_s,
            iodepth=self.options.iodepth,
            numjobs=self.options.numjobs,
            metadata_files=self.options.metadata_files,
        )

    def _data_files(self, w: Workload, params: fiojob.JobParams) -> list[Path]:
        if w.is_metadata:
            return sorted(self.meta_dir.glob("meta.*")) if self.meta_dir.exists() else []
        return [self.workdir / n for n in fiojob.file_names(params, w.streams)]

    def _prepare(self, w: Workload, params: fiojob.JobParams) -> None:
        """Bring the data into the state the workload needs. Never timed."""
        files = self._data_files(w, params)
        if w.is_metadata:
            op = w.name.split("-")[1]
            if op == "create":
                shutil.rmtree(self.meta_dir, ignore_errors=True)
                self.meta_dir.mkdir()
            elif len(files) < params.metadata_files:
                shutil.rmtree(self.meta_dir, ignore_errors=True)
                self.meta_dir.mkdir()
                create = fiojob.render(_metadata_prepare(), params)
                fio.run_job(self.runner, create, self.jobs_dir / "prepare-meta.fio", "meta")
            return
        if w.fresh_file:
            for f in files:
                f.unlink(missing_ok=True)
            return
        need = fiojob.file_bytes(w, params)
        if all(f.exists() and f.stat().st_size >= need for f in files):
            return
        job = fiojob.render_prepare(w, params)
        assert job is not None
        for f in files:
            f.unlink(missing_ok=True)
        fio.run_job(self.runner, job, self.jobs_dir / f"prepare-{w.name}.fio", "write")

    def _measure_once(self, res: WorkloadResult, replicate: int) -> None:
        w = res.workload
        if w.kind != "fio":
            self._measure_other(res, replicate)
            return
        params = self._params(w)
        job = fiojob.render(w, params)
        job_path = self.jobs_dir / f"{w.name}.{replicate}.fio"
        self._prepare(w, params)
        state = self.hooks.before(w) if self.hooks else {}
        files = self._data_files(w, params)
        guards: dict[str, Any] = {
            **self.extra_guards,
            **({"pool_state": state} if state else {}),
            "data": {
                "compressibility_percent": self.options.compressibility,
                "pattern": "fio refill_buffers (fresh random data per write), never zeros",
            },
            "durability": "end_fsync=1 inside the timed window"
            if w.direction == "write"
            else ("syncfs after the last operation, timed" if w.is_metadata else "n/a"),
        }
        warnings: list[str] = []
        if w.cached_by_design and not self.runner.dry_run:
            # iozone's reread: the first read warms the cache, the second is measured.
            fio.run_job(self.runner, job, self.jobs_dir / f"warm-{w.name}.fio", w.direction)
            guards["cache"] = {"method": "kept on purpose (cached test)", "verified": None}
        elif w.cold:
            guards["cache"] = self._defeat_cache(files, warnings)
        target = self.device_target
        assert target is not None
        before = devices.read_counters(target.devices) if target.verifiable else {}
        result = fio.run_job(self.runner, job, job_path, w.direction)
        seconds = result.runtime_s
        if w.is_metadata and w.name.split("-")[1] != "stat":
            t0 = time.monotonic()
            self.runner.run(["sync", "--file-system", str(self.meta_dir)])
            seconds += time.monotonic() - t0
        after = devices.read_counters(target.devices) if target.verifiable else {}
        value = _value(w, result.io_bytes, result.total_ios, seconds)
        device_bytes: int | None = None
        device_mib_s: float | None = None
        if target.verifiable:
            io = devices.delta(before, after)
            chk = devices.check(
                w.direction if not w.is_metadata else "meta",
                result.io_bytes,
                io,
                seconds,
                cached_by_design=w.cached_by_design,
                compressibility=self.options.compressibility,
            )
            device_bytes, device_mib_s = chk.device_bytes, chk.device_mib_s
            guards["device"] = {
                "devices": target.devices,
                "read_bytes": io.read_bytes,
                "write_bytes": io.write_bytes,
                "ratio_to_app": chk.ratio,
            }
            if chk.warning:
                warnings.append(chk.warning)
        else:
            guards["device"] = {"unverified": target.unverified_reason}
            if not w.is_metadata:
                warnings.append(
                    f"unverified: {target.unverified_reason}, so poolbench cannot confirm the "
                    "bytes reached a disk"
                )
        ws = self.working_set
        assert ws is not None
        if w.cold and ws.below_cold_rule:
            cache_ok = guards.get("cache", {}).get("verified")
            if not cache_ok:
                warnings.append(
                    f"working set is {ws.ratio_to_ram:.2f}× RAM and the cache drop was not "
                    "verified: this read may measure RAM"
                )
        guards["fio"] = {
            "version": result.fio_version,
            "within_run_bw_dev_bytes_s": result.within_run_bw_dev,
            "lat_mean_ns": result.lat_mean_ns,
        }
        self._read_back(w, guards)
        res.values.append(value)
        if device_mib_s is not None:
            res.device_mib_s.append(device_mib_s)
        for text in warnings:
            res.add_warning(text)
        self.store.add_measurement(
            self.run_id,
            Measurement(
                config=self.config,
                workload=w.name,
                replicate=replicate,
                value=value,
                unit=w.unit,
                app_bytes=result.io_bytes,
                ops=result.total_ios,
                seconds=seconds,
                device_bytes=device_bytes,
                device_mib_s=device_mib_s,
                warnings=warnings,
                guards=guards,
                workload_def=_workload_dict(w),
                job_file=job,
            ),
        )
        self.flush_commands()

    def _read_back(self, w: Workload, guards: dict[str, Any]) -> None:
        """What the pool says after this measurement (e.g. the achieved compressratio)."""
        if self.hooks is None or self.runner.dry_run:
            return
        after = self.hooks.after(w)
        if after:
            guards["pool"] = {**guards.get("pool", {}), **after}

    def _measure_other(self, res: WorkloadResult, replicate: int) -> None:
        """A workload that is not a fio job: `untar` (timed here) or a pool operation (done
        by the trial loop's hooks), under the same guards and into the same store."""
        w = res.workload
        assert self.hooks is not None or w.kind == "untar"
        if w.needs_data:
            self._prepare(w, self._params(w))
        guards: dict[str, Any] = {**self.extra_guards}
        if self.hooks is not None:
            state = self.hooks.before(w)
            if state:
                guards["pool_state"] = state
        if w.kind == "untar":
            op = self._untar(guards)
        else:
            assert self.hooks is not None
            op = self.hooks.operate(w)
            guards.update(op.guards)
        self._read_back(w, guards)
        res.values.append(op.value)
        device_mib_s = None
        if op.device_bytes is not None and op.seconds > 0:
            device_mib_s = op.device_bytes / op.seconds / MiB
            res.device_mib_s.append(device_mib_s)
        for text in op.warnings:
            res.add_warning(text)
        self.store.add_measurement(
            self.run_id,
            Measurement(
                config=self.config,
                workload=w.name,
                replicate=replicate,
                value=op.value,
                unit=w.unit,
                app_bytes=op.app_bytes,
                ops=op.ops,
                seconds=op.seconds,
                device_bytes=op.device_bytes,
                device_mib_s=device_mib_s,
                warnings=op.warnings,
                guards=guards,
                workload_def=_workload_dict(w),
                job_file="",
            ),
        )
        self.flush_commands()

    def _untar(self, guards: dict[str, Any]) -> OpResult:
        """`tar -x` of the (plain) tarball into a fresh directory, then syncfs; both timed.
        The tarball is read once beforehand (untimed) so its source disk is not measured."""
        tar = self.options.tarball
        assert tar is not None
        dest = self.workdir / "untar"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        self.runner.run(["sync", "--file-system", str(self.workdir)])  # settle, untimed
        app_bytes, files = self._tarball_content(tar)
        target = self.device_target
        assert target is not None
        before = devices.read_counters(target.devices) if target.verifiable else {}
        t0 = time.monotonic()
        self.runner.run(["tar", "-x", "--no-same-owner", "-f", str(tar), "-C", str(dest)])
        self.runner.run(["sync", "--file-system", str(dest)])
        seconds = time.monotonic() - t0
        after = devices.read_counters(target.devices) if target.verifiable else {}
        warnings: list[str] = []
        device_bytes = None
        if target.verifiable:
            io = devices.delta(before, after)
            chk = devices.check("write", app_bytes, io, seconds,
                                compressibility=self.options.compressibility)  # fmt: skip
            device_bytes = chk.device_bytes
            guards["device"] = {
                "devices": target.devices,
                "read_bytes": io.read_bytes,
                "write_bytes": io.write_bytes,
                "ratio_to_app": chk.ratio,
            }
            if chk.warning:
                warnings.append(chk.warning)
        else:
            guards["device"] = {"unverified": target.unverified_reason}
            warnings.append(
                f"unverified: {target.unverified_reason}, so poolbench cannot confirm the "
                "bytes reached a disk"
            )
        guards["durability"] = "syncfs after tar -x, inside the timed window"
        guards["untar"] = {"tarball": str(tar), "files": files, "file_bytes": app_bytes}
        shutil.rmtree(dest, ignore_errors=True)
        return OpResult(app_bytes / seconds / MiB, app_bytes, seconds, files, device_bytes,
                        guards, warnings)  # fmt: skip

    def _tarball_content(self, tar: Path) -> tuple[int, int]:
        """(bytes of regular file data, number of entries); the read also warms the cache."""
        if self._tar_content is None:
            import tarfile

            total = entries = 0
            with tarfile.open(tar) as tf:
                for member in tf:
                    entries += 1
                    if member.isfile():
                        total += member.size
            self._tar_content = (total, entries)
        with open(tar, "rb") as fh:  # warm the page cache: measure the pool, not the source
            while fh.read(8 << 20):
                pass
        return self._tar_content

    def _defeat_cache(self, files: list[Path], warnings: list[str]) -> dict[str, Any]:
        if self.cache_defeat is not None:
            record = self.cache_defeat(files)
        else:
            record = cache.drop(self.runner, files).as_dict()
        if not record.get("verified"):
            warnings.append(
                "the cache drop before this cold read could not be verified "
                f"({record.get('detail') or record.get('method')})"
            )
        return record

    def flush_commands(self) -> None:
        if self.runner.dry_run:
            return  # a dry run stores nothing
        calls = self.runner.calls[self._flushed_calls :]
        if calls:
            self.store.add_commands(self.run_id, calls)
            self._flushed_calls += len(calls)


def _metadata_prepare() -> Workload:
    from poolbench.workloads.library import metadata

    return metadata("create", "seq")


def _value(w: Workload, io_bytes: int, ios: int, seconds: float) -> float:
    if seconds <= 0:
        raise PoolbenchError(
            f"fio reported a zero runtime for {w.name}.",
            "The working set is too small to time; raise --size.",
        )
    if w.unit == "MiB/s":
        return io_bytes / seconds / MiB
    return ios / seconds


def _workload_dict(w: Workload) -> dict[str, Any]:
    d = asdict(w)
    return d
