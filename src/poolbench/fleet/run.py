"""`poolbench bench --hosts` as one run, under the same run lifecycle as `run` and `bench`
(engine/lifecycle.py): a host failing mid-run ends the run as partial, with the other hosts'
results kept; whatever happens, the hosts' notes and failures are stored with the run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from poolbench.engine import lifecycle
from poolbench.engine.subject import stop_json
from poolbench.fleet import probe
from poolbench.fleet.hosts import Host
from poolbench.fleet.records import FleetHostFailed, FleetOptions, FleetWorkloadResult
from poolbench.fleet.session import FleetSession, Prober
from poolbench.records.run_metadata import FleetJson, FleetOptionsJson
from poolbench.store.db import Store
from poolbench.system.runner import Runner


@dataclass
class FleetRun:
    run_id: int
    status: str  # finished | partial
    session: FleetSession
    results: list[FleetWorkloadResult]
    failure: FleetHostFailed | None  # the host failure that made the run partial


def run_fleet(
    runner: Runner,
    store: Store,
    fleet: list[Host],
    default_path: str | None,
    options: FleetOptions,
    progress: Callable[[str, int, int], None],
    *,
    prober: Prober = probe.probe,
    on_interrupt: Callable[[int, int], None] | None = None,
) -> FleetRun:
    """Measure the fleet as a new run; `on_interrupt(run_id, kept)` on Ctrl-C, SIGTERM or
    SIGHUP (the run is then interrupted, what was measured kept)."""
    metadata = lifecycle.first_metadata()
    name = "fleet:" + ",".join(h.label for h in fleet)
    run_id = lifecycle.start(store, "bench", name, metadata)
    session = FleetSession(runner, store, run_id, fleet, default_path, options, prober=prober)

    def record_hosts(_outcome: lifecycle.Outcome) -> None:
        fleet_meta = metadata.setdefault("fleet", {})
        fleet_meta["not_applied"] = session.not_applied
        fleet_meta["notes"] = session.notes
        fleet_meta["failures"] = session.failures
        fleet_meta["round_orders"] = session.round_orders  # seeded by options.seed: a replay
        store.update_metadata(run_id, metadata)

    failure: FleetHostFailed | None = None
    said = (lambda kept: on_interrupt(run_id, kept)) if on_interrupt is not None else None
    with lifecycle.tracked(store, run_id, on_interrupt=said, before_finish=record_hosts) as outcome:
        session.preflight()
        metadata["fleet"] = preflight_json(session)
        store.update_metadata(run_id, metadata)
        session.progress = progress
        try:
            results = session.run()
        except FleetHostFailed as exc:
            outcome.mark_partial(str(exc))
            failure = exc
            results = list(session.results.values())
    return FleetRun(run_id, outcome.status, session, results, failure)


def options_json(options: FleetOptions, seed: int) -> FleetOptionsJson:
    """The run's options as its metadata records them (workloads by name, the seed drawn)."""
    return {"workloads": [w.name for w in options.workloads], "size": options.size,
            "compressibility": options.compressibility, "runtime_s": options.runtime_s,
            "iodepth": options.iodepth, "numjobs": options.numjobs,
            "stop": stop_json(options.stop), "seed": seed}  # fmt: skip


def preflight_json(session: FleetSession) -> FleetJson:
    """The run metadata's `fleet` section as the preflight leaves it: the controller, each
    host as probed, what cannot be applied there, the notes, the options."""
    return {
        "controller_fio": session.controller_fio,
        "hosts": [i.as_dict() for i in session.infos.values()],
        "notes": session.notes,
        "not_applied": session.not_applied,
        "options": options_json(session.options, session.seed),
        "started_together": "one fio controller process per measurement",
    }
