"""Measure a fleet: every workload on every host at once, through one fio controller.

Each measurement is one controller process, `fio --output-format=json --client=H1 job1
--client=H2 job2 ...`: fio connects to every server, sends each its own complete job file
(fio's client mode ignores job options given on the command line) and starts them together.
The controller's JSON gives each host's figures; poolbench stores one row per host and two
aggregate rows: the sum over the hosts, and the slowest host (a fleet is as fast as its
slowest member).

Guards, per host (DESIGN.md §3). Applied remotely because they live in the job file: data
pattern (fresh random buffers, never zeros), durable writes (end_fsync), fio's own cache
invalidation before each job (invalidate=1, posix_fadvise). Partly applied: the device check,
from fio's per-server `disk_util` (I/O counts and busy time of the disks fio maps the target
to; no byte counts, nothing for tmpfs, network or FUSE filesystems). Not applied, and recorded
and shown as such for each host: a verified cache drop (no fincore or drop_caches remotely, and
ZFS's ARC ignores fadvise), and the working set against the host's RAM (fio does not report
RAM; --size is required and taken as given).

Failures: a host that does not answer is refused before any I/O. A host that dies or fails
mid-run is named; the other hosts' results of that measurement are stored, the run is marked
partial and stops (a fleet with a member missing is a different fleet). fio's servers stop
their jobs when the controller quits (the runner SIGTERMs it on Ctrl-C or a timeout, and fio
sends every server a quit).
"""

from __future__ import annotations

import dataclasses
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolbench.engine import replicates
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.records import (
    CacheFinding,
    DataFinding,
    DeviceFinding,
    Findings,
    FioFinding,
    Measurement,
)
from poolbench.engine.session import figure
from poolbench.errors import PoolbenchError, UsageError
from poolbench.fleet import clientout, probe
from poolbench.fleet.hosts import Host
from poolbench.stats.policy import MeanCI, ReplicatePolicy
from poolbench.store import queries
from poolbench.store.db import Store
from poolbench.system.runner import Runner
from poolbench.workloads import fio, fiojob
from poolbench.workloads.library import Workload

MiB = 1024 * 1024
SUM = "fleet:sum"
SLOWEST = "fleet:slowest"
TIME_SLACK_S = 300  # beyond runtime, for setup, end_fsync and the network

CACHE_NOTE = (
    "cache drop not verified: fio's invalidate=1 (posix_fadvise) is all that runs on a fio "
    "server; poolbench cannot run fincore or drop_caches there, and ZFS's ARC ignores fadvise"
)
RAM_NOTE = (
    "working set vs RAM not checked: fio does not report the host's RAM; --size is taken as "
    "given, so reads may be served from that host's cache if --size is below 2x its RAM"
)
NO_DISKS_NOTE = (
    "device check not applied: fio reported no disk statistics for the target (tmpfs, a "
    "network or FUSE filesystem, or a device fio cannot map)"
)
DISK_COUNTS_NOTE = (
    "device bytes not verifiable: fio's disk_util gives I/O counts and busy time, not bytes; "
    "only 'the disks saw no I/O at all' is detected"
)


class FleetHostFailed(PoolbenchError):
    """One or more hosts failed mid-run; the others' results are kept."""


@dataclass(frozen=True)
class FleetOptions:
    workloads: list[Workload]
    size: int
    compressibility: int = 0
    runtime_s: int = 30
    iodepth: int = 1
    numjobs: int = 1
    stop: replicates.ReplicatePolicy = field(default_factory=replicates.policy)
    # Seeds the workload order of each round (as `bench --seed`); None = drawn and recorded.
    seed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["workloads"] = [w.name for w in self.workloads]
        return d


@dataclass
class FleetWorkloadResult:
    workload: Workload
    per_host: dict[str, list[float]] = field(default_factory=dict)
    sums: list[float] = field(default_factory=list)
    slowest: list[float] = field(default_factory=list)
    slowest_host: list[str] = field(default_factory=list)
    partial: bool = False
    warnings: list[str] = field(default_factory=list)

    def add_warning(self, text: str) -> None:
        if text and text not in self.warnings:
            self.warnings.append(text)

    def summary(self, values: list[float], policy: ReplicatePolicy | None = None) -> MeanCI | None:
        """Stein's interval under `policy` (the run's FleetOptions.stop)."""
        return (policy or ReplicatePolicy()).summarize(values) if values else None


Progress = Callable[[str, int, int], None]
Prober = Callable[[Runner, Host, str | None], probe.HostInfo]


def check_workloads(workloads: list[Workload]) -> None:
    meta = [w.name for w in workloads if w.is_metadata]
    if meta:
        raise UsageError(
            f"Metadata workloads ({', '.join(meta)}) are not supported with --hosts.",
            "Measure them on each host with `poolbench bench PATH`, or drop them from --workloads.",
        )


class FleetSession:
    def __init__(
        self,
        runner: Runner,
        store: Store,
        run_id: int,
        hosts: list[Host],
        default_path: str | None,
        options: FleetOptions,
        *,
        progress: Progress | None = None,
        prober: Prober = probe.probe,
    ) -> None:
        check_workloads(options.workloads)
        self.runner = runner
        self.store = store
        self.run_id = run_id
        self.hosts = hosts
        self.targets = {h.label: h.target(default_path) for h in hosts}
        self.options = options
        self.seed = options.seed if options.seed is not None else secrets.randbelow(2**31)
        self.round_orders: list[list[str]] = []  # each round's workload order, for the record
        self.progress = progress
        self.prober = prober
        self.infos: dict[str, probe.HostInfo] = {}
        self.not_applied: dict[str, list[str]] = {h.label: [] for h in hosts}
        self.results = {w.name: FleetWorkloadResult(w) for w in options.workloads}
        self.failures: dict[str, str] = {}
        self.notes: list[str] = []
        self.controller_fio = ""
        self._prepared: set[str] = set()
        self.commands = CommandLog(runner, store, run_id)
        self._jobs_dir: Path | None = None

    # -- before any I/O ------------------------------------------------------------------------
    def preflight(self) -> dict[str, Any]:
        self.controller_fio = fio.fio_version(self.runner)
        for h in self.hosts:
            self.infos[h.label] = self.prober(self.runner, h, self.targets[h.label])
        bad = [i for i in self.infos.values() if not i.ok]
        if bad:
            lines = "; ".join(i.error or f"host {i.label} did not answer" for i in bad)
            raise UsageError(
                f"{len(bad)} of {len(self.hosts)} host(s) cannot run the measurement: {lines}.",
                "Start `fio --server=ADDRESS` on each (bound to its management address) and "
                "check with `poolbench hosts check HOSTFILE`; nothing was run.",
            )
        note = probe.version_note(list(self.infos.values()), self.controller_fio)
        if note:
            self.notes.append(note)
        for i in self.infos.values():
            if i.skew_warning:
                self.notes.append(i.skew_warning)
        for label in self.not_applied:
            self.not_applied[label] += [CACHE_NOTE, RAM_NOTE]
        self._record_hosts()
        return {
            "fleet": {
                "controller_fio": self.controller_fio,
                "hosts": [i.as_dict() for i in self.infos.values()],
                "notes": self.notes,
                "not_applied": self.not_applied,
                "options": self.options.as_dict() | {"seed": self.seed},
                "started_together": "one fio controller process per measurement",
            }
        }

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> list[FleetWorkloadResult]:
        with tempfile.TemporaryDirectory(prefix=f"poolbench-fleet{self.run_id}-") as tmp:
            self._jobs_dir = Path(tmp)
            try:
                self._loop()
            finally:
                try:
                    self._cleanup()
                finally:
                    self._record_hosts()
                    self.flush_commands()
        return list(self.results.values())

    def _loop(self) -> None:
        stop = self.options.stop
        replicates.interleave(
            list(self.results.values()),
            stop,
            values=lambda r: r.sums,
            measure=self._measure_once,
            describe=lambda r, rep: f"{r.workload.name} run {rep + 1} on all hosts",
            progress=self.progress,
            seed=self.seed,
            name=lambda r: r.workload.name,
            record=lambda _round, names: self.round_orders.append(names),
        )
        for res in self.results.values():
            if res.sums:
                res.add_warning(stop.summarize(res.sums).warning())

    # -- one fleet job -------------------------------------------------------------------------
    def _params(self, label: str, w: Workload) -> fiojob.JobParams:
        return fiojob.JobParams(
            directory=self.targets[label],
            size_bytes=self.options.size,
            compressibility=self.options.compressibility,
            runtime_s=self.options.runtime_s,
            iodepth=self.options.iodepth,
            numjobs=self.options.numjobs,
            file_prefix=self._prefix(w),
        )

    def _prefix(self, w: Workload) -> str:
        # fio's client mode prefixes every file name with the server's IP address, so hosts
        # sharing a filesystem never collide. Fresh-file writers get their own files (unlinked
        # after each run); readers and in-place writers share prepared data of one shape.
        if w.fresh_file:
            return f"poolbench-run{self.run_id}.{w.name}"
        per_file = fiojob.file_bytes(w, self._shape_params())
        return f"poolbench-run{self.run_id}.data{w.streams}x{per_file}"

    def _shape_params(self) -> fiojob.JobParams:
        return fiojob.JobParams(directory="/", size_bytes=self.options.size)

    def _fleet_job(
        self, name: str, texts: dict[str, str], direction: str, timeout: float | None
    ) -> clientout.FleetOutput:
        assert self._jobs_dir is not None
        argv = ["fio", "--output-format=json"]
        hosts = [h for h in self.hosts if h.label not in self.failures]
        for i, h in enumerate(hosts):
            path = self._jobs_dir / f"{name}.host{i}.fio"
            path.write_text(texts[h.label])
            argv += [f"--client={h.connect}", str(path)]
        res = self.runner.run(argv, check=False, timeout=timeout)
        return clientout.parse(res.stdout, res.stderr, hosts, direction)

    def dry_argv(self, w: Workload) -> list[str]:
        """--dry-run: the controller command one measurement of `w` would run."""
        argv = ["fio", "--output-format=json"]
        for i, h in enumerate(self.hosts):
            argv += [f"--client={h.connect}", f"{w.name}.host{i}.fio"]
        return argv

    def job_texts(self, w: Workload) -> dict[str, str]:
        """Each live host's complete job file for one measurement of `w`."""
        texts = {}
        for label in self._live():
            text = fiojob.render(w, self._params(label, w))
            if w.fresh_file:
                text = text.replace("[global]\n", "[global]\nunlink=1\n", 1)
            texts[label] = text
        return texts

    def _live(self) -> list[str]:
        return [h.label for h in self.hosts if h.label not in self.failures]

    def _prepare(self, w: Workload, rep: int) -> None:
        if not w.needs_data or self._prefix(w) in self._prepared:
            return
        texts = {}
        for label in self._live():
            job = fiojob.render_prepare(w, self._params(label, w))
            assert job is not None
            texts[label] = job
        out = self._fleet_job(f"prepare-{w.name}.{rep}", texts, "write", None)
        self._fail(out.errors, f"preparing data for {w.name}")
        self._prepared.add(self._prefix(w))

    def _fail(self, errors: dict[str, str], during: str) -> None:
        if not errors:
            return
        self.failures.update(errors)
        raise FleetHostFailed(
            f"While {during}: " + "; ".join(errors.values()) + ".",
            "The other hosts' finished results are kept and the run is marked partial. Check "
            "the named host's fio server (`poolbench hosts check`) and run again.",
        )

    def _measure_once(self, res: FleetWorkloadResult, rep: int) -> None:
        w = res.workload
        self._prepare(w, rep)
        texts = self.job_texts(w)
        timeout = self.options.runtime_s + TIME_SLACK_S if w.time_based else None
        if w.cached_by_design:
            warm = self._fleet_job(f"warm-{w.name}.{rep}", texts, w.direction, timeout)
            self._fail(warm.errors, f"warming the cache for {w.name}")
        out = self._fleet_job(f"{w.name}.{rep}", texts, w.direction, timeout)
        if out.controller_version:
            self.controller_fio = out.controller_version
        values: dict[str, float] = {}
        for label, figs in out.figures.items():
            values[label] = self._store_host(res, rep, label, figs, out, texts[label])
        if values:
            self._store_aggregates(res, rep, values, out, partial=bool(out.errors))
        self.flush_commands()
        self._fail(out.errors, f"measuring {w.name} (run {rep + 1})")

    def _device_guard(
        self, w: Workload, label: str, figs: clientout.HostFigures, out: clientout.FleetOutput
    ) -> tuple[DeviceFinding, str]:
        disks = out.disks.get(label, [])
        if not disks:
            self._note(label, NO_DISKS_NOTE)
            finding = DeviceFinding(more={"not_applied": NO_DISKS_NOTE, "disk_util": []})
            return finding, f"host {label}: {NO_DISKS_NOTE}"
        self._note(label, DISK_COUNTS_NOTE)
        reads = sum(d.read_ios for d in disks)
        writes = sum(d.write_ios for d in disks)
        finding = DeviceFinding(
            more={"disk_util": [d.as_dict() for d in disks], "bytes": DISK_COUNTS_NOTE}
        )
        warning = ""
        if w.direction == "read" and figs.io_bytes and reads == 0:
            warning = (
                f"host {label}: its disks ({', '.join(d.name for d in disks)}) served no read "
                "at all: this figure measures that host's cache, not its disks"
            )
            if w.cached_by_design:
                warning += ", as this cached test intends"
        elif w.direction == "write" and figs.io_bytes and writes == 0:
            warning = (
                f"host {label}: its disks ({', '.join(d.name for d in disks)}) absorbed no "
                "write at all: the figure is faster than the disks"
            )
        return finding, warning

    def _note(self, label: str, text: str) -> None:
        if text not in self.not_applied[label]:
            self.not_applied[label].append(text)

    def _cache_guard(self, w: Workload, label: str, warnings: list[str]) -> CacheFinding:
        """A fio server can only be asked to fadvise: a cold read's cache drop is unverified."""
        if w.cached_by_design:
            return CacheFinding("kept on purpose (cached test)", None)
        if w.cold:
            warnings.append(f"host {label}: {CACHE_NOTE}")
            return CacheFinding(
                "fio invalidate=1 on the server", False, more={"not_applied": CACHE_NOTE}
            )
        return CacheFinding("n/a", None)

    def _host_findings(
        self, w: Workload, label: str, figs: clientout.HostFigures, warnings: list[str]
    ) -> Findings:
        info = self.infos.get(label)
        return Findings(
            data=DataFinding(self.options.compressibility),
            durability="end_fsync=1 inside the timed window" if w.direction == "write" else "n/a",
            cache=self._cache_guard(w, label, warnings),
            fio=FioFinding(
                info.fio_version if info else None,
                figs.within_run_bw_dev,
                figs.lat_mean_ns,
                controller_version=self.controller_fio,
            ),
            other={
                "working_set": {"bytes": self.options.size, "not_applied": RAM_NOTE},
                "fleet": {"host": label, "hosts_started_together": len(self._live())},
            },
        )

    def _store_host(
        self,
        res: FleetWorkloadResult,
        rep: int,
        label: str,
        figs: clientout.HostFigures,
        out: clientout.FleetOutput,
        job: str,
    ) -> float:
        w = res.workload
        value = figure(w, figs.io_bytes, figs.total_ios, figs.runtime_s)
        device, dev_warning = self._device_guard(w, label, figs, out)
        warnings = [dev_warning] if dev_warning else []
        if out.errors:
            warnings.append(
                f"host {label}: measured while {', '.join(sorted(out.errors))} failed: the "
                "fleet was not complete for the whole run"
            )
        findings = self._host_findings(w, label, figs, warnings)
        findings.device = device
        res.per_host.setdefault(label, []).append(value)
        for text in warnings:
            res.add_warning(text)
        m = Measurement(
            f"{label}:{self.targets[label]}", w.name, rep, value, w.unit, figs.io_bytes,
            figs.total_ios, figs.runtime_s, None, None, warnings, findings,
            dataclasses.asdict(w), job, host=label, latency=figs.latency,
        )  # fmt: skip
        self.store.add_measurement(self.run_id, m)
        return value

    def _store_aggregates(
        self,
        res: FleetWorkloadResult,
        rep: int,
        values: dict[str, float],
        out: clientout.FleetOutput,
        *,
        partial: bool,
    ) -> None:
        w = res.workload
        slow_label = min(values, key=lambda k: values[k])
        figs = out.figures
        io_bytes = sum(f.io_bytes for f in figs.values())
        longest = max(f.runtime_s for f in figs.values())
        agg: dict[str, Any] = {
            "hosts": sorted(values),
            "values": values,
            "slowest_host": slow_label,
            "partial": partial,
            "missing_hosts": sorted(out.errors),
            # Hosts that finish early stop adding throughput: total bytes over the longest
            # host's runtime is the rate the fleet sustained while all of it was busy or done.
            "bytes_over_longest_runtime_mib_s": io_bytes / longest / MiB if longest else None,
        }
        warnings = []
        if partial:
            missing = ", ".join(sorted(out.errors))
            warnings.append(
                f"partial: {len(values)} of {len(values) + len(out.errors)} hosts reported "
                f"(missing: {missing}); this sum is not the fleet's"
            )
            res.partial = True
        slow = figs[slow_label]
        rows = (
            (SUM, sum(values.values()), io_bytes, sum(f.total_ios for f in figs.values()), longest),
            (SLOWEST, values[slow_label], slow.io_bytes, slow.total_ios, slow.runtime_s),
        )
        for config, value, app_bytes, ops, seconds in rows:
            findings = Findings(other={"aggregate": {**agg, "kind": config}})
            m = Measurement(
                config, w.name, rep, value, w.unit, app_bytes, ops, seconds, None, None,
                warnings, findings, dataclasses.asdict(w), "", host=None,
            )  # fmt: skip
            self.store.add_measurement(self.run_id, m)
        if not partial:
            res.sums.append(sum(values.values()))
            res.slowest.append(values[slow_label])
            res.slowest_host.append(slow_label)
        for text in warnings:
            res.add_warning(text)

    # -- after -----------------------------------------------------------------------------------
    def _cleanup(self) -> None:
        """Remove the prepared data files on every host still answering."""
        live = self._live()
        for label in sorted(self.failures):
            self.notes.append(
                f"host {label} failed: poolbench's data files (names containing "
                f"poolbench-run{self.run_id}.) may remain under {self.targets[label]} there; "
                "remove them by hand"
            )
        if not self._prepared or not live or self.runner.dry_run:
            return
        texts = {}
        for label in live:
            lines = [
                "[global]",
                f"directory={self.targets[label]}",
                "rw=read",
                "bs=4096",
                "size=4096",
                "ioengine=psync",
                "allow_file_create=0",
                "unlink=1",
                "",
            ]
            for prefix in sorted(self._prepared):
                streams = int(prefix.rsplit(".data", 1)[1].split("x", 1)[0])
                params = fiojob.JobParams(directory="/", size_bytes=1, file_prefix=prefix)
                for n in fiojob.file_names(params, streams):
                    lines += [f"[rm.{n}]", f"filename={n}", ""]
            texts[label] = "\n".join(lines)
        try:
            out = self._fleet_job("cleanup", texts, "read", 120)
        except Exception as exc:  # never mask the run's own outcome
            self.notes.append(f"could not remove the data files on the hosts: {exc}")
            return
        for label, err in out.errors.items():
            self.notes.append(f"data files under {self.targets[label]} may remain: {err}")

    def _record_hosts(self) -> None:
        rows = []
        for h in self.hosts:
            info = self.infos.get(h.label)
            rows.append(
                queries.RunHost(
                    label=h.label,
                    address=h.address,
                    port=h.port,
                    path=self.targets[h.label],
                    server_hostname=info.server_hostname if info else None,
                    os=info.os if info else None,
                    arch=info.arch if info else None,
                    fio_version=info.fio_version if info else None,
                    clock_skew_s=info.clock_skew_s if info else None,
                    status="failed" if h.label in self.failures else "ok",
                    error=self.failures.get(h.label),
                    not_applied=self.not_applied[h.label],
                )
            )
        queries.record_run_hosts(self.store, self.run_id, rows)

    def flush_commands(self) -> None:
        self.commands.flush()
