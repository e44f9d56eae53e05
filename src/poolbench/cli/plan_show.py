"""`poolbench plan`'s tables: the terminal form of what plan_cmd computes (rich is loaded
only here, so `plan --json` does not import it)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.planner.capacity import PoolPlan, nicenum
from poolbench.planner.expansion import ExpansionPlan
from poolbench.planner.layout import format_devices
from poolbench.planner.performance import DiskSpeed, Prediction
from poolbench.planner.resilience import PoolRisk
from poolbench.planner.rules import RuleSet
from poolbench.planner.search import Candidate


def show_layout(
    result: PoolPlan,
    grown: ExpansionPlan | None,
    detail: Prediction,
    disk: DiskSpeed,
    risk: PoolRisk,
    notes: list[str],
) -> None:
    """One layout: capacity, class vdevs, expansion, block costs, speed, resilience."""
    console = _console()
    _print_capacity(console, result)
    _print_classes(console, result)
    if grown is not None:
        _print_expansion(console, grown)
    _print_allocation(console, result)
    _print_speed(console, detail, disk)
    _print_risk(console, risk)
    for note in notes:
        console.print(f"  {escape(note)}")


def show_candidates(cands: list[Candidate], disk: DiskSpeed, rules: RuleSet, total: int) -> None:
    _print_candidates(_console(), cands, disk, rules, total)


def _console() -> Console:
    # Wide enough for layout strings even when stdout is not a terminal (rich uses 80).
    return Console(width=max(Console().width, 130))


def _fmt_bps(bps: float) -> str:
    return f"{nicenum(int(bps))}/s"


def _print_speed(console: Console, detail: Prediction, disk: DiskSpeed) -> None:
    speed = detail.speed
    t = Table(
        title=f"Predicted speed (model; one disk: {escape(disk.source)})", title_justify="left"
    )
    for col in ("stream read", "stream write", "random read", "random write"):
        t.add_column(col, justify="right")
    t.add_row(
        _fmt_bps(speed.read_bps),
        _fmt_bps(speed.write_bps),
        f"{speed.read_iops:,.0f} IOPS",
        f"({speed.write_iops:,.0f} IOPS)*",
    )
    console.print(t)
    console.print(f"stream write: {detail.write_bps.basis}")
    console.print(f"stream read: {detail.read_bps.basis}")
    console.print(f"random read: {detail.read_iops.basis}")
    console.print(f"* random write: {detail.write_iops.basis}")
    for note in detail.notes:
        console.print(f"  {note}")


def _print_classes(console: Console, p: PoolPlan) -> None:
    if not p.classes:
        return
    t = Table(title="Class vdevs", title_justify="left")
    for col in ("class", "vdev", "devices", "metaslabs", "in SIZE", "in AVAIL"):
        t.add_column(col, justify="left" if col in ("class", "vdev") else "right")
    for c in p.classes:
        ms = f"{c.plan.ms_count} x {nicenum(c.plan.ms_size)}" if c.plan else "-"
        t.add_row(
            c.cls,
            c.spec.type_name,
            format_devices(c.spec.devices),
            ms,
            nicenum(c.plan.space) if c.in_size and c.plan else "no",
            "no",
        )
    console.print(t)


def _print_expansion(console: Console, e: ExpansionPlan) -> None:
    before = e.before
    t = Table(
        title=f"After RAIDZ expansion to {e.spec_after.width} disks (zpool attach; OpenZFS >= 2.3)",
        title_justify="left",
    )
    for col in ("", "before", "after"):
        t.add_column(col, justify="right" if col else "left")
    t.add_row("zpool list SIZE", f"{before.size_bytes:,}", f"{e.size_bytes:,}")
    t.add_row("zfs list AVAIL+USED", f"{before.usable_bytes:,}", f"{e.usable_bytes:,}")
    t.add_row("a 128K record is charged", f"{e.record_charge_old:,}", f"{e.record_charge_new:,}")
    console.print(t)
    console.print(
        f"  The deflate ratio stays the original width's ({e.deflate_ratio}/512; a pool made "
        f"{e.spec_after.width} wide has {e.new_width_ratio}/512), so AVAIL understates new "
        f"data: {nicenum(e.new_record_bytes)} of 128K records written after the expansion "
        "fit in the AVAIL above. Blocks written before it keep their old data:parity ratio "
        "until they are rewritten."
    )


def _print_capacity(console: Console, p: PoolPlan) -> None:
    where = "whole disks partitioned by zpool create" if p.whole_disk else "devices used as is"
    console.print(
        f"[bold]{escape(p.layout.spec())}[/bold]  ({p.rules.label}; ashift {p.ashift}; {where})"
    )
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column()
    t.add_column(justify="right")
    t.add_column(justify="right")
    t.add_row("raw device bytes", nicenum(p.raw_bytes), f"{p.raw_bytes:,}")
    t.add_row("zpool list SIZE", nicenum(p.size_bytes), f"{p.size_bytes:,}")
    t.add_row("zfs list AVAIL+USED (usable)", nicenum(p.usable_bytes), f"{p.usable_bytes:,}")
    t.add_row("slop (held back)", nicenum(p.slop_bytes), f"{p.slop_bytes:,}")
    t.add_row("deflate ratio", f"{p.deflate_ratio:.6f}", "")
    t.add_row("disk failures survived", str(p.failures_tolerated), "")
    console.print(t)
    v = Table(title="Top-level vdevs", title_justify="left")
    for col in ("vdev", "devices", "asize", "metaslabs", "SIZE part", "usable part", "deflate"):
        v.add_column(col, justify="right" if col != "vdev" else "left")
    for vd in p.vdevs:
        ms = f"{vd.ms_count} x {nicenum(vd.ms_size)}"
        if vd.embedded_log_space:
            ms += " (1 embedded log)"
        v.add_row(
            vd.spec.type_name,
            format_devices(vd.spec.devices),
            nicenum(vd.asize),
            ms,
            nicenum(vd.space),
            nicenum(vd.dspace),
            f"{vd.deflate_ratio}/512",
        )
    console.print(v)


def _print_allocation(console: Console, p: PoolPlan) -> None:
    seen: set[str] = set()
    for vd in p.vdevs:
        key = f"{vd.spec.type_name}/{vd.spec.width}"
        if key in seen:
            continue
        seen.add(key)
        t = Table(
            title=f"What one block costs on {vd.spec.type_name} of {vd.spec.width} "
            f"(ashift {vd.ashift})",
            title_justify="left",
        )
        for col in ("block", "allocated", "raw on disks", "charged in zfs list", "efficiency"):
            t.add_column(col, justify="right")
        for b in vd.blocks:
            t.add_row(
                nicenum(b.psize),
                nicenum(b.asize),
                nicenum(b.raw_bytes),
                nicenum(b.charged_bytes),
                f"{b.efficiency:.1%}",
            )
        console.print(t)


def _print_risk(console: Console, risk: PoolRisk) -> None:
    t = Table(
        title="Resilience (resilver time and risk are a MODEL: "
        f"AFR {risk.inputs.afr:g}, URE {risk.inputs.ure_per_bit:g}/bit, "
        f"fill {risk.inputs.fill:g})",
        title_justify="left",
    )
    for col in ("vdev", "failures survived", "resilver", "P(lose pool)", "P(damaged files)"):
        t.add_column(col, justify="right" if col != "vdev" else "left")
    for v in risk.vdevs:
        t.add_row(
            v.label,
            str(v.failures_tolerated),
            f"{v.resilver_hours:.1f} h",
            f"{v.p_loss_during_resilver:.2e}",
            f"{v.p_data_error_during_resilver:.2e}",
        )
    console.print(t)


def _print_candidates(
    console: Console, cands: list[Candidate], disk: DiskSpeed, rules: RuleSet, total: int
) -> None:
    t = Table(
        title=f"Layouts ({rules.label}); * = Pareto front (no other layout has more "
        "space, survives more failures and is faster); speed is a model "
        f"({escape(disk.source)})",
        title_justify="left",
    )
    for col in ("", "layout", "usable", "fails", "read", "write", "rand r IOPS", "rand w IOPS"):
        t.add_column(col, justify="left" if col in ("", "layout") else "right")
    for c in cands:
        t.add_row(
            "*" if c.pareto else "",
            f"{escape(c.name)}\n[dim]{escape(c.spec())}[/dim]",
            nicenum(c.usable_bytes),
            str(c.failures_tolerated),
            _fmt_bps(c.speed.read_bps),
            _fmt_bps(c.speed.write_bps),
            f"{c.speed.read_iops:,.0f}",
            f"{c.speed.write_iops:,.0f}",
        )
    console.print(t)
    if total > len(cands):
        console.print(f"({total - len(cands)} more; --top N shows more, --json shows all)")
