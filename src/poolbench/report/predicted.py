"""Predicted beside measured: the speed model's figure for each configuration of a study,
on the disks the study used, and the ratio measured ÷ predicted.

The disk figures come from a `poolbench bench` run of one such disk in the same store
(`--disk-speed-from RUN` or `model:NAME`); without them the report says so in one line
instead of printing a guess. Figures the model does not predict (random writes under
copy-on-write, workloads it has no rule for) say "not predicted", and figures outside the
model's validated range say so (the basis comes from `predict_detailed`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from poolbench.errors import PoolbenchError
from poolbench.planner.layout import Layout, parse_layout
from poolbench.planner.performance import (
    RECORDSIZE,
    VALIDATED,
    DiskSpeed,
    Prediction,
    outstanding_for,
    predict_detailed,
)
from poolbench.planner.screened import fit_screen
from poolbench.report.data import RunData, fmt_value
from poolbench.report.measured_disk import disk_speed_from_store
from poolbench.report.seek_span import span_share
from poolbench.report.svg import Safe, fmt, join
from poolbench.store.db import Store
from poolbench.study.matrix import DEFAULT_BACKEND
from poolbench.study.model import BASELINE_LAYOUT
from poolbench.units import parse_size
from poolbench.workloads.library import get as get_workload
from poolbench.workloads.workload import Workload

MiB = 1024 * 1024
NAN = float("nan")
# Workload → (the prediction's figure, bytes/s or IOPS per unit of the stored value).
FIGURES = {
    "seq-read": ("read_bps", MiB),
    "seq-write": ("write_bps", MiB),
    "rand-read-4k": ("read_iops", 1),
    "rand-write-4k": ("write_iops", 1),
}
NOT_MEASURED = DiskSpeed(NAN, NAN, NAN, NAN, "not measured", "transfer")
HOW = (
    "give --disk-speed-from BENCH_RUN|model:NAME, or [planner] disk_baseline = true, or screen "
    "the disks: poolbench disks --screen"
)
BASELINE_ROW = "the single-disk baseline itself: its measured figures are the disk's"
NO_DISK = "not predicted: no disk figures for this configuration (no baseline of its levels)"


@dataclass(frozen=True)
class PredictedRow:
    config: str  # the configuration's label (run.label)
    workload: str
    unit: str
    measured: float
    predicted: float | None  # None: not predicted (the basis says why)
    basis: str
    key: str = ""  # the configuration's key in the store

    @property
    def ratio(self) -> float | None:
        if self.predicted is None or self.predicted <= 0:
            return None
        return self.measured / self.predicted

    @property
    def tag(self) -> str:
        """The basis in a word or three, for the table cell."""
        if self.basis == BASELINE_ROW:
            return "disk baseline"
        if self.predicted is None:
            return "not predicted"
        if self.basis.startswith("outside"):
            return "beyond validated"
        if self.basis.startswith("model"):
            return "model, not validated"
        return "validated" if self.basis == VALIDATED else "see note"

    def predicted_text(self) -> str:
        return "not predicted" if self.predicted is None else fmt_value(self.predicted)

    def ratio_text(self) -> str:
        r = self.ratio
        return "" if r is None else f"{r:.2f}"


def report_disk(store: Store, ref: str) -> DiskSpeed:
    """The disk figures for a report: a bench run's, with figures it did not measure left
    unknown (never a class default). Loop devices and files have no seek: transfer-bound.
    A screen's disk is its median disk: the study's disks are not the screen's in order."""
    return fit_screen(disk_speed_from_store(store, ref, NOT_MEASURED), None)


def study_layout(run: RunData, levels: dict[str, str]) -> Layout | None:
    """The ZFS layout a configuration built, on the study's disk count; None if it has none."""
    if levels.get("backend", DEFAULT_BACKEND) != "zfs" or "layout" not in levels:
        return None
    disks = run.study.disks
    count = (disks.count or len(disks.devices)) if disks is not None else 0
    try:
        return parse_layout(levels["layout"], (1 << 30,) * count)
    except (PoolbenchError, ValueError, TypeError):
        return None


def _recordsize(levels: dict[str, str]) -> int:
    try:
        return int(parse_size(levels.get("recordsize", "")))
    except (PoolbenchError, ValueError):
        return RECORDSIZE


def _prediction(
    run: RunData, layout: Layout, levels: dict[str, str], disk: DiskSpeed, workload: str
) -> Prediction:
    """The planner's figures for this configuration under this workload's load: on disks
    that seek, its requests in flight (jobs × queue depth, the study's where the name gives
    none) set how many members are busy."""
    load = random_io(workload)
    outstanding, size = None, 4096
    if load is not None:
        size = int(load.fio.get("bs", "4096"))
        params = run.study.workloads
        depth = load.iodepth or params.iodepth or 1
        jobs = load.jobs or params.jobs or 1
        outstanding = outstanding_for(disk, depth, jobs)
    return predict_detailed(layout, disk, _recordsize(levels), _ashift(levels), outstanding, size)


def _ashift(levels: dict[str, str]) -> int:
    return int(levels.get("ashift", "12") or 12)


def random_io(workload: str) -> Workload | None:
    """The workload if it is a random read or write of the model's kind
    (rand-{read|write}-SIZE[-qdN][-jN]), else None."""
    if not workload.startswith(("rand-read-", "rand-write-")):
        return None
    try:
        return get_workload(workload)
    except PoolbenchError:
        return None


def random_read(workload: str) -> Workload | None:
    """The workload if it is a random read (rand-read-SIZE[-qdN][-jN]), else None."""
    return random_io(workload) if workload.startswith("rand-read-") else None


def seeks(run: RunData) -> bool:
    """The study's disks have a head (`[disks] model`): every random I/O costs a seek."""
    disks = run.study.disks
    return disks is not None and bool(disks.model)


def baseline_disk(run: RunData, config: str, workload: str = "") -> DiskSpeed | None:
    """The disk as the study measured it: the configuration with the same levels but the
    single-disk layout (`[planner] disk_baseline`); None when the study has none. Its random
    reads are its figure for `workload` when that is a random read (one disk under the
    same load), else for rand-read-4k."""
    levels = run.levels(config)
    if "layout" not in levels:
        return None
    levels["layout"] = BASELINE_LAYOUT
    partner = next((c for c in run.configs if run.levels(c) == levels), None)
    if partner is None:
        return None
    figs = {}
    for w, (name, unit) in FIGURES.items():
        cell = run.cell(partner, w)
        if name == "read_iops" and random_io(workload) is not None:
            # a write's bound is the random reads under the same load
            cell = run.cell(partner, workload.replace("rand-write-", "rand-read-", 1))
        figs[name] = cell.summary.mean * unit if cell is not None and cell.values else NAN
    if all(math.isnan(v) for v in figs.values()):
        return None
    source = f"the study's single-disk baseline ({run.label(partner)})"
    disk = DiskSpeed.of(figs, source, "media" if seeks(run) else "transfer")
    return replace(disk, iops_size=_recordsize(levels))  # its random reads read whole records


def has_baseline(run: RunData) -> bool:
    return any(baseline_disk(run, c) is not None for c in run.configs)


def predicted_rows(run: RunData, disk: DiskSpeed | None) -> list[PredictedRow]:
    """Every measured figure with its prediction; `disk` None: each configuration's own
    single-disk baseline."""
    rows: list[PredictedRow] = []
    for config in run.configs:
        levels = run.levels(config)
        layout = study_layout(run, levels)
        own = disk is None and levels.get("layout") == BASELINE_LAYOUT
        for w in run.workloads:
            cell = run.cell(config, w)
            if cell is None or not cell.values:
                continue
            d = disk or baseline_disk(run, config, w)
            if d is not None and seeks(run):
                d = replace(d, medium="media")  # the study's disks seek, whatever measured one
            if d is not None and disk is None and layout is not None and seeks(run):
                # the baseline's one disk held the whole working set, a member holds less
                share = span_share(run, layout, _recordsize(levels), _ashift(levels))
                d = replace(d, read_iops=d.read_iops * share)
            pred = None
            if layout is not None and d is not None:
                pred = _prediction(run, layout, levels, d, w)
            value, basis = _figure(pred, w, layout is not None, _recordsize(levels))
            if own:
                value, basis = None, BASELINE_ROW
            elif layout is not None and d is None:
                basis = NO_DISK
            rows.append(PredictedRow(run.label(config), w, cell.unit, cell.summary.mean,
                                     value, basis, config))  # fmt: skip
    return rows


def _figure(
    pred: Prediction | None, workload: str, has_layout: bool, recordsize: int = RECORDSIZE
) -> tuple[float | None, str]:
    """The predicted value in the workload's unit, and its basis (or why there is none)."""
    if not has_layout or pred is None:
        return None, "not predicted: the configuration has no ZFS layout the planner models"
    read = random_read(workload)
    if read is not None and int(read.fio.get("bs", "0")) > recordsize:
        return None, f"not predicted: {workload} reads more than one record at a time"
    if read is not None:
        name, unit = "read_iops", 1
    elif random_io(workload) is not None:
        name, unit = "write_iops", 1  # rand-write-SIZE[-qdN][-jN]: the bound, in words
    elif workload in FIGURES:
        name, unit = FIGURES[workload]
    else:
        return None, f"not predicted: the model has no rule for {workload}"
    figure = getattr(pred, name)
    if name == "write_iops":
        return None, figure.basis  # copy-on-write: "not predicted: ..."
    if math.isnan(figure.value):
        return None, f"not predicted: the bench run did not measure the disk's {workload}"
    return figure.value / unit, figure.basis


def has_layouts(run: RunData) -> bool:
    return any(study_layout(run, run.levels(c)) is not None for c in run.configs)


def heading(disk: DiskSpeed | None, seeking: bool = False) -> str:
    source = disk.source if disk else f"each configuration's {BASELINE_LAYOUT} baseline"
    if seeking:
        return (
            f"predicted vs measured (disk figures: {source}; disks that seek: random reads "
            "by the queue-depth rule, with each workload's requests in flight)"
        )
    return f"predicted vs measured (disk figures: {source}; treated as transfer-bound, no seek)"


@dataclass(frozen=True)
class PredictedTable:
    """The table every medium shows: its heading, the rows, and the notes their bases
    point to (a row's note is `notes.index(row.basis) + 1`)."""

    heading: str
    rows: list[PredictedRow]
    notes: list[str]

    def note(self, row: PredictedRow) -> int:
        return self.notes.index(row.basis) + 1


def predicted_table(run: RunData, disk: DiskSpeed | None) -> PredictedTable | None:
    """The table of predicted beside measured, or None where the report shows none: no
    ZFS layout, or no disk figures known (a study's cap counts; the next step says how)."""
    disk = disk or capped_disk(run)
    if not has_layouts(run) or (disk is None and not has_baseline(run)):
        return None
    rows = predicted_rows(run, disk)
    return PredictedTable(
        heading(disk, seeks(run)), rows, list(dict.fromkeys(r.basis for r in rows))
    )


def as_json(table: PredictedTable | None, run: RunData) -> dict[str, object] | None:
    """`report --json`'s `predicted` (docs/export.md): the very rows and texts printed."""
    if table is None:
        return None
    rows = [
        {"config": r.key, "label": r.config, "short_label": short_label(run, r.config),
         "workload": r.workload, "unit": r.unit, "measured": r.measured,
         "measured_text": f"{fmt_value(r.measured)} {r.unit}", "predicted": r.predicted,
         "predicted_text": r.predicted_text(), "ratio": r.ratio, "ratio_text": r.ratio_text(),
         "basis": r.basis, "tag": r.tag, "note": table.note(r)}
        for r in table.rows
    ]  # fmt: skip
    return {"heading": table.heading, "rows": rows, "notes": table.notes}


def capped_disk(run: RunData) -> DiskSpeed | None:
    """The disk a study with capped loop devices ran on ([disks] cap, MiB/s each way): its
    streaming figures are the cap; random IOPS are not known from it."""
    cap = run.study.disks.cap if run.study.disks is not None else None
    if cap is None:
        return None
    return DiskSpeed(
        cap * MiB, cap * MiB, NAN, NAN, f"the study's disk cap, {cap:g} MiB/s each way", "transfer"
    )


def next_steps(run: RunData, disk: DiskSpeed | None) -> list[str]:
    """What would put the model beside the figures, when nothing can: no disk figures."""
    disk = disk or capped_disk(run)
    if not has_layouts(run) or disk is not None or has_baseline(run):
        return []
    return [f"to see the planner's prediction beside each figure: poolbench report "
            f"{run.id} --disk-speed-from BENCH_RUN|model:NAME, or measure one disk in the "
            "study with [planner] disk_baseline = true"]  # fmt: skip


def render_terminal(console: Console, run: RunData, disk: DiskSpeed | None) -> list[str]:
    """The table after a study's report. Without disk figures nothing is printed here: the
    next step that would give them is returned, for the end of the report."""
    hint = next_steps(run, disk)
    table = predicted_table(run, disk)
    if hint or table is None:
        return hint
    t = Table(title=Text(table.heading), title_justify="left", box=box.SIMPLE_HEAD)
    first = next(iter(run.factors())) if len(run.factors()) == 1 else "configuration"
    for name in (first, "workload", "measured", "predicted", "measured ÷ predicted"):
        t.add_column(name, justify="left" if name in (first, "workload") else "right",
                     no_wrap=name in ("workload", "measured"))  # fmt: skip
    t.add_column("basis")
    for r in table.rows:
        t.add_row(
            Text(short_label(run, r.config)), Text(r.workload),
            Text(f"{fmt_value(r.measured)} {r.unit}"), Text(r.predicted_text()),
            Text(r.ratio_text()), Text(f"{r.tag} †{table.note(r)}"),
        )  # fmt: skip
    console.print(t)
    for i, n in enumerate(table.notes, 1):
        console.print(Text(f"†{i} {n}", style="dim"))
    return []


def short_label(run: RunData, label: str) -> str:
    """'raidz1' for 'layout=raidz1' when the layout is the one factor that varies: the
    terminal's table has no room to repeat the factor's name on every row."""
    levels = run.levels(label)
    if len(levels) == 1 and len(run.factors()) == 1:
        return next(iter(levels.values()))
    return label


def html_section(run: RunData, disk: DiskSpeed | None) -> list[Safe]:
    """The same table for the HTML report (escaped by `fmt`); [] for runs without layouts."""
    if not has_layouts(run):
        return []
    head = Safe('<h2 id="predicted">Predicted vs measured</h2>')
    table = predicted_table(run, disk)
    if table is None:
        return [head, fmt('<p class="warn">no disk figures known for run {} ({})</p>', run.id, HOW)]
    cols = ("configuration", "workload", "measured", "predicted", "measured ÷ predicted", "basis")
    trs = [fmt("<tr>{}</tr>", join([fmt("<th>{}</th>", c) for c in cols]))]
    for r in table.rows:
        trs.append(
            fmt(
                '<tr class="pred"><td>{}</td><td>{}</td><td class="num">{} {}</td>'
                '<td class="num">{}</td><td class="num ratio">{}</td>'
                '<td>{} <a href="#pred-note-{}">†{}</a></td></tr>',
                r.config,
                r.workload,
                fmt_value(r.measured),
                r.unit,
                r.predicted_text(),
                r.ratio_text(),
                r.tag,
                table.note(r),
                table.note(r),
            )  # fmt: skip
        )
    items = [fmt('<li id="pred-note-{}">{}</li>', i, n) for i, n in enumerate(table.notes, 1)]
    return [
        head,
        fmt("<p>{}</p>", table.heading),
        fmt('<table id="predicted-table">{}</table>', join(trs, "\n")),
        fmt("<ol>{}</ol>", join(items)),
    ]
