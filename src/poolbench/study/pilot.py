"""A pilot from the store: how noisy this machine measured before (reads the store only).

`--dry-run` states the difference a study's planned replicates can detect; that depends on
the run-to-run CV, which only a measurement can tell. The newest finished run on this machine
(same hostname) that measured any of the study's workloads with ≥ 2 replicates is the pilot:
its CV is the median over its (configuration, workload) cells of sd / mean.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Collection
from dataclasses import dataclass

from poolbench.store.db import Store


@dataclass(frozen=True)
class Pilot:
    run_id: int
    cv: float  # median run-to-run CV of its cells
    cells: int  # how many cells it is the median of


def _hostname(metadata: object) -> str | None:
    try:
        meta = json.loads(str(metadata or "{}"))
    except ValueError:
        return None
    machine = meta.get("machine") if isinstance(meta, dict) else None
    host = machine.get("hostname") if isinstance(machine, dict) else None
    return host if isinstance(host, str) else None


def find(store: Store, workloads: Collection[str], hostname: str) -> Pilot | None:
    """The newest finished run on `hostname` with replicated cells of `workloads`, or None."""
    for row in reversed(store.runs()):
        if row["status"] != "finished" or _hostname(row["metadata"]) != hostname:
            continue
        per: dict[tuple[str, str], list[float]] = {}
        for m in store.measurement_records(int(row["id"])):
            if m.workload in workloads:
                per.setdefault((m.config, m.workload), []).append(m.value)
        cvs = [
            statistics.stdev(v) / statistics.fmean(v)
            for v in per.values()
            if len(v) >= 2 and all(math.isfinite(x) for x in v) and statistics.fmean(v) > 0
        ]
        if cvs:
            return Pilot(int(row["id"]), statistics.median(cvs), len(cvs))
    return None
