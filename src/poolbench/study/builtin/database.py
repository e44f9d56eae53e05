"""database: which recordsize, full_page_writes and logbias suit PostgreSQL on ZFS?

The question of the OpenZFS docs' PostgreSQL advice (8K vs 16K vs 128K records; turn
full_page_writes off because copy-on-write never tears a page; logbias=throughput for the
data): recordsize × full_page_writes × logbias on a mirror and a raidz, measured with
pgbench's read-write (TPC-B-like) and read-only (select) transactions on a fresh cluster per
trial. The notes name the winner per pgbench mode and layout with its interval, and what
each setting costs in device bytes written per transaction.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    default_left_out,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.headline import compared, mean
from poolbench.workloads.workload import parse_record_size

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

RECORDSIZES = ["8K", "16K", "128K"]
FPW = ["on", "off"]
LOGBIAS = ["latency", "throughput"]
MODES = ["tpcb", "select"]
# Dataset properties the study varies that zfs-fuse (pool version 23) lacks: none, as
# `zfs get logbias` answers there (tests/test_pgbench_real.py checks it on every run).
ZFS_FUSE_LACKS: tuple[str, ...] = ()


def _factors(ctx: Context) -> dict[str, list[str | int]]:
    sizes = [x.upper() for x in ctx.opt_list("levels", RECORDSIZES)]
    for r in sizes:
        parse_record_size(r)
    fpw, bias = ctx.opt_list("fpw", FPW), ctx.opt_list("logbias", LOGBIAS)
    for name, got, allowed in (("fpw", fpw, FPW), ("logbias", bias, LOGBIAS)):
        bad = [x for x in got if x not in allowed]
        if bad:
            raise UsageError(f"--{name} {bad[0]} is not one of {', '.join(allowed)}.",
                             f"e.g. --{name} {','.join(allowed)}")  # fmt: skip
    factors: dict[str, list[str | int]] = {"backend": ["zfs"], "layout": [*_layouts(ctx)]}
    factors |= {"recordsize": [*sizes], "full_page_writes": [*fpw]}
    if ctx.dialect == "zfs-fuse" and "logbias" in ZFS_FUSE_LACKS:
        ctx.announce("no logbias levels: zfs-fuse has no logbias property; OpenZFS has it.")
    else:
        factors["logbias"] = list(bias)
    return factors


def _layouts(ctx: Context) -> list[str]:
    if ctx.n > 3:
        default_left_out(ctx, f"mirror:2 and raidz1:3 use 2 and 3 of the {ctx.n} disks.")
    elif ctx.n == 3:
        default_left_out(ctx, "mirror:2 leaves disk 3 out; raidz1:3 uses every disk.")
    return ctx.opt_list("layouts", ["mirror:2", "raidz1:3"])


def build(ctx: Context) -> StudyFile:
    if ctx.options.get("layouts") is None:  # given layouts are checked as any layout is
        need(ctx, 3, "database study (a mirror and a raidz1)")
    modes = ctx.opt_list("modes", MODES)
    if any(m not in MODES for m in modes):
        raise UsageError("--modes takes tpcb and select.", "e.g. --modes tpcb,select")
    clients = ctx.opt_int("clients", 4)
    if not 1 <= clients <= 256:
        raise UsageError(f"--clients {clients}: give 1 to 256 clients.", "e.g. --clients 4")
    return study_file(
        ctx,
        "database",
        "PostgreSQL (pgbench, a fresh cluster per trial): recordsize × full_page_writes × "
        "logbias on a mirror and a raidz; TPS, latency and device bytes per transaction",
        _factors(ctx) | {"ashift": [12]},
        {
            "names": [f"pgbench-{m}-c{clients}" for m in modes],
            "size": working_set(ctx, 0.25, cap="1G", floor="16M"),
            "runtime": 10,
        },
        max_replicates=4,  # 24 configurations: the family rule's maximum stays near 2 h
    )


# -- notes ------------------------------------------------------------------------------------
def _setting(c: ConfigFacts) -> str:
    return " ".join(
        f"{k}={c.level(k)}" for k in ("recordsize", "full_page_writes", "logbias") if c.level(k)
    )


def _interval(values: tuple[float, ...]) -> str:
    from poolbench.stats.summary import summarize  # scipy: imported when a note needs it

    s = summarize(values)
    if not math.isfinite(s.ci_low):
        return f"{s.mean:,.0f} TPS ({s.n} run, no interval)"
    return f"{s.mean:,.0f} TPS (95% CI {s.ci_low:,.0f}–{s.ci_high:,.0f}, {s.n} runs)"


def _winners(facts: StudyFacts, workload: str) -> list[str]:
    lines = []
    for layout in dict.fromkeys(c.level("layout") for c in facts.configs):
        ranked = sorted(
            (c for c in facts.configs if c.level("layout") == layout and c.figures.get(workload)),
            key=lambda c: mean(c.figures[workload]) or 0.0,
            reverse=True,
        )
        if not ranked:
            continue
        best = ranked[0]
        warm = " [warm: RAM caches the database]" if workload in best.warm else ""
        line = f"  {layout}: {_setting(best)}, {_interval(best.figures[workload])}{warm}"
        if len(ranked) > 1:
            text, _sig = compared(ranked[1].figures[workload], best.figures[workload])
            line += f"; against the next best ({_setting(ranked[1])}): {text}"
        lines.append(line)
    return lines


def _bytes_per_txn(facts: StudyFacts, workload: str) -> list[str]:
    lines = []
    for c in facts.configs:
        got = c.bytes_per_txn.get(workload, ())
        if got:
            m = sum(got) / len(got)
            lines.append(f"  {c.level('layout')} {_setting(c)}: {m / 1024:,.1f} KiB/txn "
                         f"(mean of {len(got)} runs, {min(got) / 1024:,.1f}–"
                         f"{max(got) / 1024:,.1f})")  # fmt: skip
    return lines


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    out: list[str] = []
    workloads = dict.fromkeys(w for c in facts.configs for w in c.figures)
    for w in workloads:
        out += [f"{w}: the winner per layout (highest mean TPS; 95% t-interval; the ratio to "
                "the next best with its 95% Fieller CI):", *_winners(facts, w)]  # fmt: skip
        cost = _bytes_per_txn(facts, w)
        if cost:
            head = (
                f"{w}: device bytes written per transaction (all members, over the "
                "window and the CHECKPOINT after it: WAL and data pages together):"
            )
            out += [head, *cost]
    if any(c.warm for c in facts.configs):
        out.append(
            "warm: the database was smaller than what RAM caches, so reads came from memory; "
            "the figures rank commit and write costs. A larger working set (--size) makes "
            "reads reach the disks."
        )
    return out


BUILTIN = Builtin(
    "database",
    "Which recordsize, full_page_writes and logbias suit PostgreSQL (pgbench) on ZFS?",
    (3, "1G"),
    build,
    {
        "levels": "dataset recordsizes, e.g. 8K,16K,128K",
        "fpw": "full_page_writes settings, e.g. on,off",
        "logbias": "logbias settings, e.g. latency,throughput",
        "modes": "pgbench modes: tpcb (read-write), select (read-only)",
        "clients": "pgbench clients (connections), e.g. 4",
        "layouts": "layouts, e.g. mirror:2,raidz1:3",
    },
    notes=notes,
)
