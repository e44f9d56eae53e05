"""Measure a fleet: every workload on every host at once, on the engine's measuring loop.

The loop is bench's (engine/loop.py): replicates in seeded rounds under the same stop rule,
each host's figure an engine `Measurement` kept in that host's `WorkloadResult` and stored at
once. What is the fleet's own: one measurement is one fio controller process driving every
live host together (fleet/controller.py), each host's guards are what a fio server allows
(fleet/guards.py), and beside the hosts' rows each replicate stores the aggregate of the
simultaneous runs (fleet/aggregate.py: the sum, the slowest host). The stop rule reads the
sum: the fleet is measured until its figure is trusted.

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
from pathlib import Path

from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.loop import MeasureLoop, summarise
from poolbench.engine.measure_checks import figure
from poolbench.engine.subject import WorkloadResult
from poolbench.errors import UsageError
from poolbench.fleet import clientout, guards, probe
from poolbench.fleet.aggregate import Aggregate
from poolbench.fleet.controller import Controller
from poolbench.fleet.hosts import Host
from poolbench.fleet.records import FleetOptions, FleetWorkloadResult, check_workloads
from poolbench.records.measurement import Measurement
from poolbench.store import queries
from poolbench.store.db import Store
from poolbench.system.runner import Runner
from poolbench.system.watchdog import scaled
from poolbench.workloads import fio

TIME_SLACK_S = 300  # beyond runtime, for setup, end_fsync and the network

Progress = Callable[[str, int, int], None]
Prober = Callable[[Runner, Host, str | None], probe.HostInfo]


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
        self.options = options
        self.targets = {h.label: h.target(default_path) for h in hosts}
        self.controller = Controller(runner, hosts, self.targets, options, run_id)
        self.seed = options.seed if options.seed is not None else secrets.randbelow(2**31)
        self.loop = MeasureLoop(store, run_id, CommandLog(runner, store, run_id), self.seed)
        self.progress = progress
        self.prober = prober
        self.infos: dict[str, probe.HostInfo] = {}
        self.not_applied: dict[str, list[str]] = {h.label: [] for h in hosts}
        self.results = {w.name: FleetWorkloadResult(w, options.stop) for w in options.workloads}
        self.notes: list[str] = []
        self.controller_fio = ""

    @property
    def failures(self) -> dict[str, str]:
        return self.controller.failures

    @property
    def round_orders(self) -> list[list[str]]:
        return self.loop.round_orders

    # -- before any I/O ------------------------------------------------------------------------
    def preflight(self) -> None:
        """Every host answers, runs fio and has its target, or nothing is run at all."""
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
        self.notes += [i.skew_warning for i in self.infos.values() if i.skew_warning]
        for label in self.not_applied:
            self.not_applied[label] += guards.ALWAYS_NOT_APPLIED
        self._record_hosts()

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> list[FleetWorkloadResult]:
        with tempfile.TemporaryDirectory(prefix=f"poolbench-fleet{self.run_id}-") as tmp:
            self.controller.jobs_dir = Path(tmp)
            try:
                totals = [r.total for r in self.results.values()]
                self.loop.rounds(
                    totals,
                    self.options.stop,
                    self._measure_once,
                    lambda r, rep: f"{r.workload.name} run {rep + 1} on all hosts",
                    self.progress,
                )
                for total in totals:
                    summarise(total)
            finally:
                try:
                    self.notes += self.controller.cleanup()
                finally:
                    self._record_hosts()
                    self.loop.commands.flush()
        return list(self.results.values())

    # -- one measurement: every live host at once ----------------------------------------------
    def _measure_once(self, total: WorkloadResult, rep: int) -> None:
        res = self.results[total.workload.name]
        w = res.workload
        ctl = self.controller
        ctl.prepare(w, rep)
        texts = ctl.job_texts(w)
        timeout = self.options.runtime_s + scaled(TIME_SLACK_S) if w.time_based else None
        if w.cached_by_design:
            warm = ctl.run(f"warm-{w.name}.{rep}", texts, w.direction, timeout)
            ctl.fail(warm.errors, f"warming the cache for {w.name}")
        out = ctl.run(f"{w.name}.{rep}", texts, w.direction, timeout)
        if out.controller_version:
            self.controller_fio = out.controller_version
        values = {
            label: self._record_host(res, rep, label, figs, out, texts[label])
            for label, figs in out.figures.items()
        }
        if values:
            self._record_aggregate(res, rep, Aggregate(values, out.figures, sorted(out.errors)))
        ctl.fail(out.errors, f"measuring {w.name} (run {rep + 1})")

    def _record_host(
        self, res: FleetWorkloadResult, rep: int, label: str, figs: clientout.HostFigures,
        out: clientout.FleetOutput, job: str,
    ) -> float:  # fmt: skip
        """One host's figure, under the guards a fio server allows, into the host's result."""
        w = res.workload
        device = guards.device_check(w, label, figs, out.disks.get(label, []))
        self._note(label, device.not_applied)
        warnings = [device.warning] if device.warning else []
        if out.errors:
            warnings.append(
                f"host {label}: measured while {', '.join(sorted(out.errors))} failed: the "
                "fleet was not complete for the whole run"
            )
        cache, cache_warning = guards.cache_check(w, label)
        warnings += [cache_warning] if cache_warning else []
        info = self.infos.get(label)
        ctx = guards.HostContext(
            self.options.compressibility, self.options.size,
            info.fio_version if info else None, self.controller_fio, len(self.controller.live()),
        )  # fmt: skip
        value = figure(w, figs.io_bytes, figs.total_ios, figs.runtime_s)
        self.loop.record(res.host(label), Measurement(
            f"{label}:{self.targets[label]}", w.name, rep, value, w.unit, figs.io_bytes,
            figs.total_ios, figs.runtime_s, None, None, warnings,
            guards.findings(w, label, figs, ctx, device.finding, cache),
            dataclasses.asdict(w), job, host=label, latency=figs.latency,
        ))  # fmt: skip
        return value

    def _record_aggregate(self, res: FleetWorkloadResult, rep: int, agg: Aggregate) -> None:
        """The sum and the slowest host; counted by the stop rule only when no host missed."""
        total, slowest = agg.measurements(res.workload, rep)
        self.loop.record(res.total, total, counted=not agg.partial)
        self.loop.record(res.slowest, slowest, counted=not agg.partial)
        if agg.partial:
            res.partial = True
        else:
            res.slowest_host.append(agg.slowest_host)

    def _note(self, label: str, text: str) -> None:
        if text not in self.not_applied[label]:
            self.not_applied[label].append(text)

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
