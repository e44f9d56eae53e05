"""The measuring loop every measurement engine shares: the session on one machine
(engine/session.py: `bench` and each trial of a study) and the fleet (fleet/session.py: many
hosts at once, `bench --hosts`).

Replicates run round by round under the stop rule, each round's seeded order recorded
(engine/replicates.py); every finished measurement is kept for its workload's summary
(`keep`) and committed to the store at once, with the commands that made it (`record`), so
an error or Ctrl-C later loses nothing measured; after the last round each summary gets its
own warnings (`summarise`: the interval, outliers, a slow member). What one measurement is
(a local fio job under every guard, or one fio controller driving every host) is the
caller's `measure`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from poolbench.engine import replicates, slow_members
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.subject import WorkloadResult
from poolbench.guards import cpu
from poolbench.records.findings import modelled_amplification, write_amplification
from poolbench.records.measurement import Measurement
from poolbench.stats import outliers
from poolbench.stats.policy import ReplicatePolicy
from poolbench.store.db import Store

Measure = Callable[[WorkloadResult, int], None]  # (the result to add to, replicate)
Describe = Callable[[WorkloadResult, int], str]  # the progress line of one measurement


@dataclass
class MeasureLoop:
    """One run's loop: where its figures go (store, run, command log) and the seed of its
    round orders."""

    store: Store
    run_id: int
    commands: CommandLog
    seed: int
    round_orders: list[list[str]] = field(default_factory=list)  # for the record (a replay)

    def rounds(
        self,
        results: Sequence[WorkloadResult],
        stop: ReplicatePolicy,
        measure: Measure,
        describe: Describe,
        progress: replicates.Progress | None = None,
    ) -> int:
        """Measure every result until the stop rule owes none of them a replicate (each
        `measure` must `record` one counted figure into the result it was given); returns how
        many measurements were made."""
        return replicates.interleave(
            list(results),
            stop,
            values=lambda r: r.values,
            measure=measure,
            describe=describe,
            progress=progress,
            seed=self.seed,
            name=lambda r: r.workload.name,
            record=lambda _round, names: self.round_orders.append(names),
        )

    def record(self, res: WorkloadResult, m: Measurement, *, counted: bool = True) -> None:
        """Keep the figure for the summary and commit it to the store at once. Not `counted`:
        stored, its warnings shown, but not one of the replicates the stop rule and the
        summary read (a fleet's aggregate over the hosts that were left: not the fleet's)."""
        if counted:
            keep(res, m)
        else:
            for text in m.warnings:
                res.add_warning(text)
        self.store.add_measurement(self.run_id, m)
        self.commands.flush()


def keep(res: WorkloadResult, m: Measurement) -> None:
    """Add one measurement to its workload's summary: the figure, latency, device rate, CPU
    cost, write amplification, who served a cached read, and its warnings."""
    res.values.append(m.value)
    res.clats.append(m.latency)
    if m.device_mib_s is not None:
        res.device_mib_s.append(m.device_mib_s)
    per_gib = cpu.per_gib(m.findings.other.get("cpu"))
    if per_gib is not None:
        res.cpu_s_per_gib.append(per_gib)
    guards = m.findings.to_json()
    res.guards.append(guards)
    got = write_amplification(guards)
    if got is not None:
        res.amplification.append(got)
        res.amplification_model = modelled_amplification(guards)
    if m.findings.cache is not None and "served_by" in m.findings.cache.more:
        res.served_by.append(str(m.findings.cache.more["served_by"]))
    for text in m.warnings:
        res.add_warning(text)


def summarise(res: WorkloadResult) -> None:
    """After the last round: the interval's own warning, the outliers among the replicates,
    and a member slow in most of them (engine/slow_members.py)."""
    if res.values:
        summary = res.summary
        res.add_warning(summary.warning())
        if summary.outliers:
            res.add_warning(outliers.note(", ".join(str(i + 1) for i in summary.outliers)))
    for text in slow_members.named(res.guards):
        res.add_warning(text)
