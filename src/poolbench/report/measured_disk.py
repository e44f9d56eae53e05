"""One disk's speed as the result store measured it: a `poolbench bench` run of one disk,
chosen by run id, 'latest', or the disk's model (`model:NAME`).

Used by `plan --disk-speed-from` and by the reports' predicted-vs-measured table, so a
prediction rests on a figure this machine measured rather than a class default.
"""

from __future__ import annotations

import json
from typing import Any

from poolbench.errors import UsageError
from poolbench.planner.performance import DiskSpeed
from poolbench.store.db import Store

MiB = 1024 * 1024
# The bench workload each figure comes from, and its unit in bytes/s or IOPS.
SOURCES = {
    "read_bps": ("seq-read", MiB),
    "write_bps": ("seq-write", MiB),
    "read_iops": ("rand-read-4k", 1),
    "write_iops": ("rand-write-4k", 1),
}


def disk_speed_from_store(store: Store, ref: str, fallback: DiskSpeed) -> DiskSpeed:
    """`ref` is a run id, 'latest', model:NAME (see `disk_speed_from_run`), or screen:ID or
    screen:latest, a disk screen (report/screened_disk.py `disk_speed_from_screen`)."""
    kind, sep, name = ref.partition(":")
    if sep and kind.strip().lower() == "model":
        return disk_speed_from_run(store, str(run_of_model(store, name.strip())), fallback)
    if sep and kind.strip().lower() == "screen":
        from poolbench.report.screened_disk import disk_speed_from_screen

        return disk_speed_from_screen(store, name, fallback)
    return disk_speed_from_run(store, ref, fallback)


def _models(metadata: Any) -> list[str]:
    """The device models a bench run recorded (its target's devices)."""
    try:
        meta = json.loads(metadata) if isinstance(metadata, str) else {}
    except ValueError:
        return []
    devices = meta.get("devices") if isinstance(meta, dict) else None
    if not isinstance(devices, list):
        return []
    return [str(d["model"]).strip() for d in devices if isinstance(d, dict) and d.get("model")]


def run_of_model(store: Store, model: str) -> int:
    """The latest finished bench run whose device model is `model` (case and surrounding
    spaces ignored); a run over several devices counts only if they are all that model."""
    seen: list[str] = []
    found: int | None = None
    for r in store.runs():
        if r["kind"] != "bench" or r["status"] != "finished":
            continue
        models = _models(r["metadata"])
        seen += [m for m in models if m not in seen]
        if models and all(m.lower() == model.lower() for m in models):
            found = int(r["id"])
    if not model or found is None:
        known = ", ".join(seen) if seen else "none recorded"
        raise UsageError(
            f"No finished bench run in {store.path} measured a disk of model '{model}'.",
            f"Models measured so far: {known}. Run `poolbench bench PATH` on such a disk, or "
            "give a run id (`poolbench runs` lists them).",
        )
    return found


def disk_speed_from_run(store: Store, run: str, fallback: DiskSpeed) -> DiskSpeed:
    """One disk's speed as a `poolbench bench` run of it measured (the means of its
    replicates); figures the run did not measure come from `fallback`, and the source says
    which is which."""
    rows = store.runs()
    if run == "latest":
        rows = [r for r in rows if r["kind"] == "bench"][-1:]
    else:
        rows = [r for r in rows if str(r["id"]) == run]
    if not rows or rows[0]["kind"] != "bench":
        raise UsageError(
            f"No bench run '{run}' in {store.path}.",
            "Measure one disk with `poolbench bench PATH` first; `poolbench runs` lists runs.",
        )
    run_id = int(rows[0]["id"])
    values: dict[str, list[float]] = {}
    for m in store.measurement_records(run_id):
        values.setdefault(m.workload, []).append(m.value)
    got = {k: _mean(values.get(w)) for k, (w, _) in SOURCES.items()}
    if all(v is None for v in got.values()):
        raise UsageError(
            f"Bench run {run_id} measured none of seq-read, seq-write, rand-read-4k, "
            "rand-write-4k.",
            "Run `poolbench bench PATH --workloads seq-write,seq-read,rand-read-4k,rand-write-4k`.",
        )
    figures = {
        k: (v * SOURCES[k][1] if v is not None else getattr(fallback, k)) for k, v in got.items()
    }
    measured = [SOURCES[k][0] for k, v in got.items() if v is not None]
    return DiskSpeed(
        figures["read_bps"],
        figures["write_bps"],
        figures["read_iops"],
        figures["write_iops"],
        f"bench run {run_id} ({', '.join(measured)}; the rest {fallback.source})",
        fallback.medium,
    )


def _mean(values: list[float] | None) -> float | None:
    return sum(values) / len(values) if values else None
