"""A stored run, read back into plain data for the reports (tables, HTML, compare, export).

Nothing here trusts the store's text: names, configurations and warnings are carried as
plain strings and every renderer escapes them for its medium (rich markup, HTML, CSV).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from poolbench import is_digits
from poolbench.engine import slow_members
from poolbench.errors import UsageError
from poolbench.records.findings import Findings
from poolbench.records.jsontypes import JsonObject
from poolbench.records.latency import Latency
from poolbench.records.measurement import Measurement
from poolbench.records.run_metadata import RunMetadata
from poolbench.records.stored_study import StoredStudy
from poolbench.report.metrics import VALUE, Figure, Metric, fallback_note, tail_warning
from poolbench.stats.policy import MeanCI, ReplicatePolicy
from poolbench.store import queries
from poolbench.store.db import Store, resume_command
from poolbench.store.timestamps import stored_time
from poolbench.study.matrix import parse_key

GiB = 1024**3
MiB = 1024**2


@dataclass
class Cell:
    """All replicates of one workload on one configuration."""

    config: str
    workload: str
    unit: str
    values: list[float] = field(default_factory=list)
    replicates: list[int] = field(default_factory=list)
    device_mib_s: list[float] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    guards: list[Findings] = field(default_factory=list)  # per replicate, decoded
    workload_def: JsonObject = field(default_factory=dict)

    @property
    def workload_kind(self) -> str:
        """The workload's kind as stored (workloads/workload.py Kind; "fio" when unsaid)."""
        return str(self.workload_def.get("kind") or "fio")

    @property
    def fio_options(self) -> dict[str, str]:
        """The workload's fio options as stored ({} for a workload without fio)."""
        fio = self.workload_def.get("fio")
        return {str(k): str(v) for k, v in fio.items()} if isinstance(fio, dict) else {}

    @property
    def exact(self) -> bool:
        """A figure read from the pool, not measured (capacity): its definition says so."""
        return bool(self.workload_def.get("exact"))

    policy: ReplicatePolicy = field(default_factory=ReplicatePolicy)  # the run's (RunData.policy)
    # Per replicate, fio's completion latency as stored (store 0005_latency), None without.
    clats: list[Latency | None] = field(default_factory=list)
    _figures: dict[tuple[str, int, int, int], Figure] = field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def summary(self) -> MeanCI:
        """Stein's interval: the run's first-stage sd and df, as the rule that stopped it."""
        return self.policy.summarize(self.values)

    def metric_values(self, metric: Metric) -> list[float]:
        """The replicates' figures in `metric` (latency in µs; [] when none was recorded)."""
        return metric.values(self.values, self.clats)

    def has(self, metric: Metric) -> bool:
        return bool(self.metric_values(metric))

    def figure(self, metric: Metric = VALUE) -> Figure:
        """The cell's figure in `metric` across replicates (has(metric) must hold)."""
        # Cached: a pooled percentile merges every run's histogram (and once per run again
        # for its interval), and a report asks for the same figure in several places.
        key = (metric.key, len(self.values), len(self.clats), id(self.clats))
        got = self._figures.get(key)
        if got is None:
            got = self._figures[key] = metric.figure(self.policy, self.values, self.clats)
        return got

    def metric_warnings(self, metric: Metric) -> list[str]:
        """What makes this metric's figure doubtful beyond the stored warnings."""
        w = tail_warning(metric, self.clats)
        out = [w] if w else []
        if metric.is_latency and self.has(metric) and not self.figure(metric).pooled:
            out.append(fallback_note(metric))
        return out

    @property
    def device_mean(self) -> float | None:
        return sum(self.device_mib_s) / len(self.device_mib_s) if self.device_mib_s else None

    @property
    def amplification(self) -> float | None:
        """Mean measured write amplification (device ÷ application bytes) of the replicates,
        None for a read or an unverified write (guards/amplification)."""
        got = [a for f in self.guards if f.device and (a := f.device.amplification) is not None]
        return sum(got) / len(got) if got else None

    @property
    def amplification_model(self) -> float | None:
        """What the layout must write per byte, when every replicate's model agrees."""
        models = {f.device.amplification_model for f in self.guards if f.device} - {None}
        return models.pop() if len(models) == 1 else None

    def amplification_text(self) -> str:
        """'3.02× (3.00)': measured write amplification and, in brackets, the layout's model
        ('?' when the layout was not modelled); '' for a read."""
        got = self.amplification
        if got is None:
            return ""
        model = self.amplification_model
        return f"{got:.2f}× ({'?' if model is None else f'{model:.2f}'})"

    def pool(self) -> JsonObject:
        """The pool description read back for this configuration (studies), else {}."""
        return next((dict(f.pool) for f in self.guards if f.pool), {})


@dataclass
class RunData:
    id: int
    kind: str
    name: str
    status: str
    started_at: float
    finished_at: float | None
    argv: list[str]
    metadata: RunMetadata
    error: str | None
    measurements: list[Measurement]  # as stored, in the store's order
    commands: list[CommandRow]
    cells: dict[tuple[str, str], Cell]
    configs: list[str]
    workloads: list[str]
    # Trials that failed for good (torn down, reason kept) and were not measured since.
    failed_trials: list[queries.FailedTrial] = field(default_factory=list)
    # The command that measures the failed or missing trials (with --db unless default).
    resume_hint: str = ""
    # Each configuration's factor levels as stored (the key alone cannot be split back).
    config_levels: dict[str, dict[str, str]] = field(default_factory=dict)

    def levels(self, config: str) -> dict[str, str]:
        """A configuration's factor levels (a copy); a key not measured in this run (a
        baseline partner built from levels) is read with the key grammar."""
        known = self.config_levels.get(config)
        return dict(known) if known is not None else parse_key(config)

    def without(self, config: str, factor: str) -> str:
        """The configuration key with one factor removed (the series of a curve)."""
        levels = self.levels(config)
        levels.pop(factor, None)
        return key_of(levels)

    # -- what the run measured -----------------------------------------------------------
    @property
    def study(self) -> StoredStudy:
        return self.metadata.study

    def cell(self, config: str, workload: str) -> Cell | None:
        return self.cells.get((config, workload))

    def factors(self) -> dict[str, list[str]]:
        """Factor → levels in study order, for the factors that vary between configurations."""
        seen: dict[str, list[str]] = {}
        for c in self.configs:
            for k, v in self.levels(c).items():
                if v not in seen.setdefault(k, []):
                    seen[k].append(v)
        return {k: v for k, v in seen.items() if len(v) > 1}

    def fixed_levels(self) -> dict[str, str]:
        """Factor levels shared by every configuration (said once, in the header)."""
        varying = self.factors()
        levels = [self.levels(c) for c in self.configs]
        if not levels or not all(levels):
            return {}
        return {
            k: v
            for k, v in levels[0].items()
            if k not in varying and all(lv.get(k) == v for lv in levels)
        }

    def label(self, config: str) -> str:
        """The configuration without the levels every configuration shares."""
        fixed = self.fixed_levels()
        levels = self.levels(config)
        short = " ".join(f"{k}={v}" for k, v in levels.items() if k not in fixed)
        return short or config

    def compressibility(self) -> int | None:
        if self.study.workloads.compressibility is not None:
            return self.study.workloads.compressibility
        if self.metadata.compressibility is not None:
            return self.metadata.compressibility
        for m in self.measurements:
            data = m.findings.data
            if data is not None:
                return data.compressibility_percent
        return None

    def working_set_bytes(self) -> int | None:
        if self.metadata.working_set_bytes is not None:
            return self.metadata.working_set_bytes
        size = self.study.workloads.size
        if size is not None:
            from poolbench.units import parse_size

            try:
                return parse_size(size)
            except UsageError:
                return None
        return None

    def ram_bytes(self) -> int | None:
        ram = self.metadata.machine.ram_bytes
        return ram if ram is not None else self.metadata.working_set_ram_bytes

    def fio_versions(self) -> list[str]:
        found: list[str] = []
        if self.metadata.fio_version:
            found.append(self.metadata.fio_version)
        for m in self.measurements:
            fio = m.findings.fio
            v = fio.version if fio is not None else None
            if v and v not in found:
                found.append(v)
        return found

    def ci_target(self) -> float:
        """The relative CI half-width the run aimed for (0.05 = ±5%)."""
        t = self.study.ci_target
        if t is not None:
            return float(t) / 100
        stop = self.metadata.stop.ci_target
        return stop if stop is not None else 0.05

    def policy(self) -> ReplicatePolicy:
        """The replicate policy the run was measured under: a study's replicates /
        max_replicates / ci_target, a bench's options.stop; the defaults when neither is
        stored (or what is stored is not a valid policy)."""
        s, stop = self.study, self.metadata.stop
        lo = s.replicates or (3 if stop.min_runs is None else stop.min_runs)
        hi = s.max_replicates or (10 if stop.max_runs is None else stop.max_runs)
        try:
            return ReplicatePolicy(self.ci_target(), lo, hi)
        except ValueError:
            return ReplicatePolicy(self.ci_target())

    def started_text(self) -> str:
        when = stored_time(self.started_at, f"run {self.id}'s start time")
        return when.strftime("%Y-%m-%d %H:%M UTC")


def key_of(levels: dict[str, str]) -> str:
    """The configuration key of these levels (study/matrix.py `Config.key`)."""
    return " ".join(f"{k}={v}" for k, v in levels.items())


def cell_config(m: Measurement) -> str:
    """The configuration a measurement row belongs to in the reports: a run measured on many
    hosts keeps each host's replicates apart, the host one more factor of it."""
    return m.config + (f" host={m.host}" if m.host else "")


def _stored_levels(m: Measurement, config: str) -> dict[str, str]:
    """A measurement's factor levels: as stored (0006_config_levels), a fleet host added as
    one more factor; rows stored before that are read from their key."""
    if m.config_levels is None:
        return parse_key(config)
    levels = dict(m.config_levels)
    if levels and m.host:
        levels["host"] = m.host
    return levels


def _json(text: str | None, default: Any) -> Any:
    if text is None:
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


def resolve_run(store: Store, ref: str) -> int:
    """A run id, or 'latest' (the highest id)."""
    if ref == "latest":
        latest = queries.latest_run_id(store)
        if latest is None:
            raise UsageError(
                f"The result store {store.path} has no runs yet.",
                "Measure something first: poolbench bench PATH, or poolbench run STUDY.",
            )
        return latest
    if not is_digits(ref) or len(ref) > 18:
        shown = ref if len(ref) <= 40 else ref[:37] + "..."
        raise UsageError(
            f"'{shown}' is not a run.", "Give a run id (see 'poolbench runs') or 'latest'."
        )
    return int(ref)


def _started_at(value: Any, run_id: int) -> float:
    """The run's start as stored, once it is known to be a time (else the store is damaged)."""
    stored_time(value, f"run {run_id}'s start time")
    return float(value)


@dataclass(frozen=True)
class CommandRow:
    """One command of the run's log (`commands`), as stored."""

    argv: list[str]
    started_at: float
    duration_s: float
    returncode: int | None  # None: it did not finish (timed out, or stopped)
    dry_run: bool


def _commands(store: Store, run_id: int) -> list[CommandRow]:
    """The run's command log, each argv a list of strings whatever the store holds."""
    commands = []
    for c in store.commands(run_id):
        argv = _json(c["argv"], [])
        commands.append(
            CommandRow(
                [str(a) for a in argv] if isinstance(argv, list) else [str(argv)],
                c["started_at"],
                float(c["duration_s"]),
                c["returncode"],
                bool(c["dry_run"]),
            )
        )
    return commands


def load_run(store: Store, ref: str) -> RunData:
    run_id = resolve_run(store, ref)
    row = store.run(run_id)
    # each row's JSON columns decoded once by the record (a wrong type is read as empty)
    measurements = [Measurement.from_row(dict(r)) for r in store.measurements(run_id)]
    commands = _commands(store, run_id)
    cells: dict[tuple[str, str], Cell] = {}
    config_levels: dict[str, dict[str, str]] = {}
    for m in sorted(measurements, key=lambda m: (m.replicate, m.row_id or 0)):
        config = cell_config(m)
        config_levels.setdefault(config, _stored_levels(m, config))
        cell = cells.setdefault((config, m.workload), Cell(config, m.workload, m.unit))
        cell.values.append(m.value)
        cell.replicates.append(m.replicate)
        if m.device_mib_s is not None:
            cell.device_mib_s.append(m.device_mib_s)
        cell.warnings += [w for w in dict.fromkeys(m.warnings) if w not in cell.warnings]
        cell.guards.append(m.findings)
        cell.workload_def = m.workload_def
        cell.clats.append(m.latency)
    argv = _json(row["argv"], [])
    run = RunData(
        id=run_id,
        kind=str(row["kind"]),
        name=str(row["name"] or ""),
        status=str(row["status"]),
        started_at=_started_at(row["started_at"], run_id),
        finished_at=row["finished_at"],
        argv=[str(a) for a in argv] if isinstance(argv, list) else [],
        metadata=RunMetadata.decode(_json(row["metadata"], {})),
        error=row["error"],
        measurements=measurements,
        commands=commands,
        cells=cells,
        configs=[],
        workloads=[],
        failed_trials=queries.failed_trials(store, run_id),
        resume_hint=resume_command(store.path, run_id),
        config_levels=config_levels,
    )
    _finish_cells(run)
    run.configs = _config_order(run, [c.config for c in cells.values()])
    run.workloads = _workload_order(run, [m.workload for m in measurements])
    return run


def _finish_cells(run: RunData) -> None:
    """What each cell learns from the run and from its replicates together."""
    for cell in run.cells.values():
        cell.policy = run.policy()  # the run's own min/max/target: Stein's interval
        # A slow member is named across the replicates, never from one window.
        cell.warnings += [
            w for w in slow_members.named([f.other for f in cell.guards]) if w not in cell.warnings
        ]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _config_order(run: RunData, seen: list[str]) -> list[str]:
    """Study order (factor by factor, levels as the study lists them), else first seen."""
    configs = _unique(seen)
    factors = run.study.factors
    if factors is None:
        return configs

    def rank(c: str) -> tuple[int, ...]:
        levels = run.levels(c)
        out = []
        for k in levels:
            listed = factors.get(k, [])
            out.append(listed.index(levels[k]) if levels[k] in listed else len(listed))
        return tuple(out)

    return sorted(configs, key=rank)


def _workload_order(run: RunData, seen: list[str]) -> list[str]:
    workloads = _unique(seen)
    names = run.study.workloads.names
    if names is None:
        names = run.metadata.workload_order
    if names is not None:
        order = list(names)
        return sorted(workloads, key=lambda w: order.index(w) if w in order else len(order))
    return workloads


def fmt_value(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "–"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "?"
    for unit, size in (("T", 1024**4), ("G", GiB), ("M", MiB), ("K", 1024)):
        if n >= size:
            x = n / size
            return f"{x:.0f}{unit}" if x == int(x) else f"{x:.1f}{unit}"
    return f"{int(n)}B"
