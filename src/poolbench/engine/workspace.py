"""The files one session works with under the target: its working directory, the fio job
files, and the data each workload needs prepared (never timed). On a block device target (a
zvol) the data is the device's first bytes, laid out once and again after a write changed
them; the job files still live in the directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import metadata, smallfile
from poolbench.workloads.workload import Workload


class Workspace:
    """`<target>/.poolbench-run<R>-<pid>/`: data files, `meta/` for metadata tests, `jobs/`."""

    def __init__(
        self, runner: Runner, target: Path, run_id: int, device: Path | None = None
    ) -> None:
        self.runner = runner
        self.device = device
        self.device_laid_out = 0  # bytes of the device holding laid-out data (0: none)
        self.root = target / f".poolbench-run{run_id}-{os.getpid()}"
        if runner.dry_run:
            self.root = target / ".poolbench-dry-run"
        self.meta_dir = self.root / "meta"
        self.jobs_dir = self.root / "jobs"
        # The last write since the read data was laid out, with its job's parameters (None:
        # no write since): whether a read may use what it left is fiojob's to say.
        self._last_write: tuple[Workload, fiojob.JobParams] | None = None
        # A dry run's data files, as its fio runs would have left them (path -> bytes): the
        # files a real run finds there, so it lays out what the real run would, no more.
        self._planned: dict[Path, int] = {}
        self._planned_meta = (0, 0)  # and its metadata directory's: (files, bytes each)

    def create(self) -> None:
        if self.runner.dry_run:  # a dry run makes nothing (its fio writes no job file)
            return
        self.root.mkdir()
        self.jobs_dir.mkdir()

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def directory(self, w: Workload) -> str:
        return str(self.meta_dir if w.is_metadata else self.root)

    def data_files(self, w: Workload, params: fiojob.JobParams) -> list[Path]:
        if self.device is not None:
            return [self.device]
        if w.is_metadata:
            return sorted(self.meta_dir.glob("meta.*")) if self.meta_dir.exists() else []
        return [self.root / n for n in fiojob.file_names(params, w.streams)]

    def discard(self, w: Workload, params: fiojob.JobParams) -> None:
        """Forget the data laid out for `w`: its next read lays it out afresh."""
        if self.device is not None:
            self.device_laid_out = 0
            return
        for f in self.data_files(w, params):
            self._unlink(f)

    def wrote(self, w: Workload, params: fiojob.JobParams) -> None:
        """A dry run's timed job of `w` ran: the files a write leaves (a real run's are there
        to see)."""
        if not self.runner.dry_run or self.device is not None:
            return
        if w.is_metadata:  # meta-create and smallfile-write leave their files, delete none
            op = w.name.split("-")[1]
            size = int(w.fio["filesize"]) if w.many_files else 0
            made = {"create": (params.metadata_files, size), "write": (params.metadata_files, size)}
            self._planned_meta = made.get(op, (0, 0) if op == "delete" else self._planned_meta)
        elif w.direction != "read":
            self._plan(self.data_files(w, params), fiojob.file_bytes(w, params))

    def _plan(self, files: list[Path], size: int) -> None:
        for f in files:
            self._planned[f] = max(size, self._planned.get(f, 0))

    def _size(self, f: Path) -> int | None:
        """The file's bytes (None: no such file); a dry run's, as planned."""
        if self.runner.dry_run:
            return self._planned.get(f)
        return f.stat().st_size if f.exists() else None

    def _unlink(self, f: Path) -> None:
        if self.runner.dry_run:
            self._planned.pop(f, None)
        else:
            f.unlink(missing_ok=True)

    def lay_out(self, w: Workload, params: fiojob.JobParams) -> str | None:
        """Prepare the data. A read replicate reads data laid out as in the first one, so a
        file that a write workload has changed since it was laid out is laid out afresh,
        unless that write left it exactly as laid out (fiojob.writes_prepared_data): then
        returns that write's name (a streaming write then read saves a third of its I/O)."""
        last = self._last_write
        if w.direction == "read" and last is not None:
            self._last_write = None
            if fiojob.writes_prepared_data(*last, w, params):
                if not self.prepare(w, params):  # short: laid out
                    return last[0].name
                return None
            self.discard(w, params)
        elif w.direction != "read" and not w.is_metadata:
            # (a read changes nothing: the next read finds its data as laid out)
            self._last_write = (w, params)
        self.prepare(w, params)
        return None

    def prepare(self, w: Workload, params: fiojob.JobParams) -> bool:
        """Bring the data into the state the workload needs. Never timed. Returns whether
        it wrote data (a prepare job ran)."""
        if self.device is not None:
            self._prepare_device(w, params)
            return False
        if w.is_metadata:
            self._prepare_metadata(w, params)
            return False
        files = self.data_files(w, params)
        if w.fresh_file:
            for f in files:
                self._unlink(f)
            return False
        need = fiojob.file_bytes(w, params)
        if all((size := self._size(f)) is not None and size >= need for f in files):
            return False
        job = fiojob.render_prepare(w, params)
        assert job is not None
        for f in files:
            self._unlink(f)
        fio.run_job(self.runner, job, self.jobs_dir / f"prepare-{w.name}.fio", "write")
        self._plan(files, need)
        return True

    def _prepare_device(self, w: Workload, params: fiojob.JobParams) -> None:
        """A write to a block device overwrites what is there (there is no file to delete:
        fresh_file means nothing); a read or an in-place write needs its bytes written once."""
        need = fiojob.file_bytes(w, params)
        if not w.needs_data or self.device_laid_out >= need:
            return
        job = fiojob.render_prepare(w, params)
        assert job is not None
        fio.run_job(self.runner, job, self.jobs_dir / f"prepare-{w.name}.fio", "write")
        self.device_laid_out = need

    def _prepare_metadata(self, w: Workload, params: fiojob.JobParams) -> None:
        op = w.name.split("-")[1]
        if op in ("create", "write"):  # meta-create-*, smallfile-write-*: a fresh directory
            self._fresh_meta_dir()
            return
        # smallfile-read-SIZE reads files written whole; meta-stat/delete need them to exist.
        need = int(w.fio["filesize"]) if w.many_files else 0
        files = self.data_files(w, params)
        have = [f.stat().st_size for f in files]
        if self.runner.dry_run:  # the files its fio runs would have left
            have = [self._planned_meta[1]] * self._planned_meta[0]
        if len(have) < params.metadata_files or any(size < need for size in have):
            self._fresh_meta_dir()
            maker = smallfile("write", need) if w.many_files else metadata("create", "seq")
            create = fiojob.render(maker, params)
            fio.run_job(self.runner, create, self.jobs_dir / "prepare-meta.fio", maker.direction)
            self._planned_meta = (params.metadata_files, need)

    def _fresh_meta_dir(self) -> None:
        if self.runner.dry_run:
            return
        shutil.rmtree(self.meta_dir, ignore_errors=True)
        self.meta_dir.mkdir()
