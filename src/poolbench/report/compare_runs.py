"""`poolbench compare RUN_A RUN_B`: matching workloads of two runs, side by side (pure).

Two runs are comparable only when they asked the same question: the same workload
definition, the same declared data compressibility and the same working set. Anything else
is apples against oranges and is refused with the list of what differs, unless forced.
Differences that are the *point* of a comparison (another machine, kernel, fio, poolbench or
ZFS version, another date) are shown, not refused — as pyperf shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from poolbench.errors import UsageError
from poolbench.records.run_metadata import Backend
from poolbench.report.data import Cell, RunData, fmt_bytes
from poolbench.report.metrics import VALUE, Metric
from poolbench.report.tables import cell_warnings
from poolbench.stats.compare import Ratio


@dataclass
class Pair:
    workload: str
    cell_a: Cell
    cell_b: Cell
    change: Ratio
    warnings_a: list[str] = field(default_factory=list)
    warnings_b: list[str] = field(default_factory=list)


@dataclass
class RunComparison:
    a: RunData
    b: RunData
    pairs: list[Pair]
    problems: list[str]  # why the runs are not comparable (empty, or forced past)
    metadata_differences: list[tuple[str, str, str]]  # (what, in A, in B)
    only_a: list[tuple[str, str]]  # (config, workload) measured only in A
    only_b: list[tuple[str, str]]
    metric: Metric = VALUE  # the figure compared (a latency percentile: on the log scale)


def _flatten(d: object, prefix: str = "") -> dict[str, object]:
    """Every leaf of a JSON tree by its dotted path: the two definitions are compared leaf
    by leaf, whatever their keys (a workload's fio options are its own)."""
    if isinstance(d, dict):
        out: dict[str, object] = {}
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): d}


def dict_differences(a: Mapping[str, object], b: Mapping[str, object]) -> list[str]:
    fa, fb = _flatten(a), _flatten(b)
    out = []
    for k in sorted(set(fa) | set(fb)):
        if fa.get(k, "(absent)") != fb.get(k, "(absent)"):
            out.append(f"{k} {fa.get(k, '(absent)')!r} vs {fb.get(k, '(absent)')!r}")
    return out


def _matched_configs(a: RunData, b: RunData) -> list[tuple[str, str]]:
    if len(a.configs) == 1 and len(b.configs) == 1:
        return [(a.configs[0], b.configs[0])]  # e.g. two bench runs of different targets
    return [(c, c) for c in a.configs if c in b.configs]


def _backends(backends: tuple[Backend, ...]) -> str:
    return ", ".join(b.text() for b in backends) or "none recorded"


def _metadata_differences(a: RunData, b: RunData) -> list[tuple[str, str, str]]:
    out = []
    ma, mb = a.metadata.machine, b.metadata.machine
    for key in ("hostname", "poolbench_version", "kernel", "ram_bytes", "arc_max_bytes", "cpus"):
        va, vb = getattr(ma, key), getattr(mb, key)
        if va != vb:
            fa = fmt_bytes(va) if key.endswith("_bytes") and isinstance(va, int) else str(va)
            fb = fmt_bytes(vb) if key.endswith("_bytes") and isinstance(vb, int) else str(vb)
            out.append((key, fa, fb))
    if a.fio_versions() != b.fio_versions():
        out.append(("fio", ", ".join(a.fio_versions()), ", ".join(b.fio_versions())))
    ba, bb = a.metadata.backends, b.metadata.backends
    if ba != bb:
        out.append(("backends", _backends(ba), _backends(bb)))
    return out


def _match(
    a: RunData, b: RunData, metric: Metric, problems: list[str]
) -> list[tuple[str, Cell, Cell]]:
    """(workload, cell in A, cell in B) for every workload both measured on a matching
    configuration with `metric` recorded; what differs in their definitions is a problem."""
    matched: list[tuple[str, Cell, Cell]] = []
    for wl in a.workloads:
        if wl not in b.workloads:
            continue
        for cfg_a, cfg_b in _matched_configs(a, b):
            cell_a, cell_b = a.cell(cfg_a, wl), b.cell(cfg_b, wl)
            if cell_a is None or cell_b is None:
                continue
            if not (cell_a.has(metric) and cell_b.has(metric)):
                continue
            diff = dict_differences(cell_a.workload_def, cell_b.workload_def)
            if diff:
                problems.append(f"workload {wl}: definition differs: {'; '.join(diff)}")
            elif cell_a.unit != cell_b.unit:
                problems.append(f"workload {wl}: unit {cell_a.unit} vs {cell_b.unit}")
            matched.append((wl, cell_a, cell_b))
    return matched


def compare(
    a: RunData, b: RunData, *, force: bool = False, metric: Metric = VALUE
) -> RunComparison:
    problems: list[str] = []
    ca, cb = a.compressibility(), b.compressibility()
    if ca != cb:
        problems.append(f"data compressibility differs: {ca}% in run {a.id}, {cb}% in run {b.id}")
    wa, wb = a.working_set_bytes(), b.working_set_bytes()
    if wa != wb:
        problems.append(
            f"working set differs: {fmt_bytes(wa)} in run {a.id}, {fmt_bytes(wb)} in run {b.id}"
        )
    matched = _match(a, b, metric, problems)
    problems = list(dict.fromkeys(problems))  # once per workload, not once per configuration
    if not matched:
        raise UsageError(
            f"Runs {a.id} and {b.id} have no workload measured on a matching configuration"
            + (f" with a recorded {metric.key}." if metric.is_latency else "."),
            "Compare runs of the same study or of the same bench workloads"
            + (" (latency is recorded by fio workloads since poolbench stored it)."
               if metric.is_latency else "."),
        )  # fmt: skip
    if problems and not force:
        raise UsageError(
            f"Runs {a.id} and {b.id} are not comparable: " + "; ".join(problems) + ".",
            "Re-run one of them with the same settings, or pass --force to compare anyway "
            "(the differences are then printed above the table).",
        )
    # Stage one of the run with the smaller minimum: both sds then have at least its df.
    stage = min(a.policy().min_runs, b.policy().min_runs)
    ratios = metric.compare(
        [(x.metric_values(metric), y.metric_values(metric)) for _w, x, y in matched], stage
    )
    pairs = [
        Pair(
            w,
            ca_,
            cb_,
            r,
            cell_warnings(ca_, a.ci_target(), metric),
            cell_warnings(cb_, b.ci_target(), metric),
        )  # fmt: skip
        for (w, ca_, cb_), r in zip(matched, ratios, strict=True)
    ]
    seen_a = {(p.cell_a.config, p.workload) for p in pairs}
    seen_b = {(p.cell_b.config, p.workload) for p in pairs}
    only_a = [k for k, c in a.cells.items() if k not in seen_a and c.has(metric)]
    only_b = [k for k, c in b.cells.items() if k not in seen_b and c.has(metric)]
    return RunComparison(a, b, pairs, problems, _metadata_differences(a, b), only_a, only_b, metric)
