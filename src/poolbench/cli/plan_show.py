"""`poolbench plan`'s tables: the terminal form of what plan_cmd computes (rich is loaded
only here, so `plan --json` does not import it). Everything fits 80 columns: long
explanations are paragraphs under a table, not titles or cells."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.planner.capacity import PoolPlan, nicenum
from poolbench.planner.expansion import ExpansionPlan
from poolbench.planner.layout import Layout, VdevSpec
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
    rules_note: str = "",
) -> None:
    """One layout: capacity, class vdevs, expansion, block costs, speed, resilience."""
    console = _console()
    _print_capacity(console, result, rules_note)
    _print_classes(console, result)
    if grown is not None:
        _print_expansion(console, grown)
    _print_allocation(console, result)
    _print_speed(console, detail, disk)
    _print_risk(console, risk, result)
    for note in notes:
        console.print(f"  {escape(note)}")


def show_ashifts(plans: list[PoolPlan], rules_note: str) -> None:
    """One layout at several ashifts: SIZE, usable space and what a 4K and a 128K block cost."""
    console = _console()
    console.print(f"[bold]{escape(human_spec(plans[0].layout))}[/bold]")
    console.print(escape(rules_note))
    t = Table()
    for col in ("ashift", "SIZE", "usable", "usable (decimal)", "4K costs", "128K costs"):
        t.add_column(col, justify="right")
    for p in plans:
        costs = {b.psize: b for v in p.vdevs[:1] for b in v.blocks}
        t.add_row(
            str(p.ashift),
            nicenum(p.size_bytes),
            nicenum(p.usable_bytes),
            decimal(p.usable_bytes),
            nicenum(costs[4096].raw_bytes) if 4096 in costs else "-",
            nicenum(costs[131072].raw_bytes) if 131072 in costs else "-",
        )
    console.print(t)
    console.print(
        "  x costs: raw bytes one block of x takes on the first vdev's disks (parity and "
        "padding included); one --ashift shows the whole plan."
    )


def show_candidates(cands: list[Candidate], disk: DiskSpeed, rules: RuleSet, total: int) -> None:
    _print_candidates(_console(), cands, disk, rules, total)


def _console() -> Console:
    """The terminal's width (80 when output is not a terminal): every table fits in 80."""
    return Console()


def _fmt_bps(bps: float) -> str:
    return f"{nicenum(int(bps))}/s"


def decimal(num: int) -> str:
    """The decimal (vendor) form beside zfs's 1024-based one: 26.39 TB."""
    for unit, factor in (("PB", 10**15), ("TB", 10**12), ("GB", 10**9), ("MB", 10**6)):
        if num >= factor:
            return f"{num / factor:.2f} {unit}"
    return f"{num:,} B"


def vdev_label(spec: VdevSpec, index: int) -> str:
    """A top-level vdev as `zpool status` names it: its type and its index among the pool's
    top-level vdevs (mirror-0, raidz2-1, draid2:4d:7c:1s-2); a plain disk by its index."""
    if spec.kind == "mirror":
        head = "mirror"
    elif spec.kind == "disk":
        head = "disk"
    else:
        head = spec.type_name
    return f"{head}-{index}"


def _kind(spec: VdevSpec) -> str:
    """A vdev's shape in words: a 2-way mirror, raidz2 of 6, a single disk."""
    if spec.kind == "mirror":
        return f"a {spec.width}-way mirror"
    if spec.kind == "raidz":
        return f"raidz{spec.parity} of {spec.width}"
    return "a single disk" if spec.kind == "disk" else spec.type_name


def human_spec(layout: Layout) -> str:
    """The layout with sizes as zfs prints them (2x1.82T, not 2x1907339M), equal
    consecutive vdevs counted once (10 × raidz2:20x3.64T)."""
    parts: list[tuple[str, int]] = []
    for v in layout.vdevs:
        text = f"{v.head()}:{_human_devices(v.devices)}"
        if parts and parts[-1][0] == text:
            parts[-1] = (text, parts[-1][1] + 1)
        else:
            parts.append((text, 1))
    body = " + ".join(t if n == 1 else f"{n} × {t}" for t, n in parts)
    for c in layout.classes:
        body += f" + {c.head()} {_human_devices(c.vdev.devices)}"
    return body


def _human_devices(devices: tuple[int, ...]) -> str:
    out: list[str] = []
    i = 0
    while i < len(devices):
        j = i
        while j < len(devices) and devices[j] == devices[i]:
            j += 1
        size = nicenum(devices[i])
        out.append(f"{j - i}x{size}" if j - i > 1 else size)
        i = j
    return ",".join(out)


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
    for i, c in enumerate(p.classes, start=len(p.vdevs)):
        ms = f"{c.plan.ms_count} x {nicenum(c.plan.ms_size)}" if c.plan else "-"
        t.add_row(
            c.cls,
            vdev_label(c.spec, i),
            _human_devices(c.spec.devices),
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


def _print_capacity(console: Console, p: PoolPlan, rules_note: str = "") -> None:
    where = "whole disks partitioned by zpool create" if p.whole_disk else "devices used as is"
    console.print(f"[bold]{escape(human_spec(p.layout))}[/bold]")
    console.print(f"ashift {p.ashift}; {where}")
    console.print(escape(rules_note or f"space rules of {p.rules.label}"))
    t = Table(show_header=True, box=None, pad_edge=False)
    t.add_column("")
    for col in ("zfs", "decimal", "bytes"):
        t.add_column(col, justify="right")
    raw = "raw device bytes" + (", data vdevs" if p.classes else "")
    rows = [(raw, p.raw_bytes)]
    if p.class_raw_bytes:
        rows.append(("raw device bytes, class vdevs", p.class_raw_bytes))
    rows += [
        ("zpool list SIZE", p.size_bytes),
        ("zfs list AVAIL+USED (usable)", p.usable_bytes),
        ("slop (held back)", p.slop_bytes),
    ]
    for label, value in rows:
        t.add_row(label, nicenum(value), decimal(value), f"{value:,}")
    t.add_row("deflate ratio", f"{p.deflate_ratio:.6f}", "", "")
    t.add_row("disk failures survived", str(p.failures_tolerated), "", "")
    console.print(t)
    console.print(
        "  zfs prints 1024-based sizes (T = TiB); disks are sold in decimal (TB = 10^12)."
        + (" SIZE counts the special and dedup vdevs (one side of a mirror), which the data "
           "vdevs' raw bytes do not." if p.class_space("special", "dedup") else "")
    )  # fmt: skip
    _print_vdevs(console, p)


def _print_vdevs(console: Console, p: PoolPlan) -> None:
    v = Table(title="Top-level vdevs", title_justify="left")
    for col in ("vdev", "devices", "asize", "metaslabs", "SIZE", "usable", "deflate"):
        v.add_column(col, justify="right" if col != "vdev" else "left")
    for i, vd in enumerate(p.vdevs):
        ms = f"{vd.ms_count} x {nicenum(vd.ms_size)}"
        if vd.embedded_log_space:
            ms += " (1 log)"
        v.add_row(
            vdev_label(vd.spec, i),
            _human_devices(vd.spec.devices),
            nicenum(vd.asize),
            ms,
            nicenum(vd.space),
            nicenum(vd.dspace),
            f"{vd.deflate_ratio}/512",
        )
    console.print(v)
    if any(vd.embedded_log_space for vd in p.vdevs):
        console.print("  (1 log): one metaslab of the vdev goes to the embedded log class.")


def _print_allocation(console: Console, p: PoolPlan) -> None:
    seen: set[str] = set()
    for vd in p.vdevs:
        key = f"{vd.spec.type_name}/{vd.spec.width}"
        if key in seen:
            continue
        seen.add(key)
        t = Table(
            title=f"What one block costs on {_kind(vd.spec)} (ashift {vd.ashift})",
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


def _print_risk(console: Console, risk: PoolRisk, p: PoolPlan) -> None:
    console.print(
        f"Resilience: failures are exact; resilver time and risk are a MODEL (AFR "
        f"{risk.inputs.afr:g}, URE {risk.inputs.ure_per_bit:g}/bit, fill {risk.inputs.fill:g})"
    )
    t = Table(box=None if console.width < 60 else Table().box)
    for col in ("vdev", "survives", "resilver", "P(lose pool)", "P(damaged files)"):
        t.add_column(col, justify="right" if col != "vdev" else "left")
    labels = [vdev_label(v.spec, i) for i, v in enumerate(p.vdevs)]
    labels += [
        f"{c.cls} {vdev_label(c.spec, i)}"
        for i, c in enumerate(p.classes, start=len(p.vdevs))
        if c.cls in ("special", "dedup")
    ]
    for label, v in zip(labels, risk.vdevs, strict=True):
        t.add_row(
            label,
            f"{v.failures_tolerated} failed",
            f"{v.resilver_hours:.1f} h",
            f"{v.p_loss_during_resilver:.2e}",
            f"{v.p_data_error_during_resilver:.2e}",
        )
    console.print(t)
    console.print(
        "  P(lose pool) and P(damaged files) are per resilver: the chance that, while one "
        "failed disk is being rebuilt, more members fail than the vdev survives (or a read "
        "error hits a block with no redundancy left). Not per year."
    )


def _print_candidates(
    console: Console, cands: list[Candidate], disk: DiskSpeed, rules: RuleSet, total: int
) -> None:
    console.print(
        f"Layouts ({escape(rules.label)} space rules); * = Pareto front: no other layout has "
        f"more space, survives more failures and is faster. Speed is a model "
        f"({escape(disk.source)})."
    )
    # No vertical rules, and each layout in two lines cut to the column (--json has them
    # whole): the table fits 80 columns whatever the layout.
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1), collapse_padding=True)
    widths = {"": 1, "usable": 7, "fails": 5, "read": 8, "write": 8, "rand r": 6}
    for col in ("", "layout", "usable", "fails", "read", "write", "rand r"):
        if col == "layout":
            room = console.width - sum(widths.values()) - 2 * len(widths) - 1
            t.add_column(col, no_wrap=True, overflow="ellipsis", max_width=max(20, room))
        else:
            t.add_column(col, justify="left" if not col else "right", no_wrap=True,
                         width=widths[col])  # fmt: skip
    for c in cands:
        t.add_row(
            "*" if c.pareto else "",
            f"{escape(c.name)}\n[dim]{escape(' | '.join(human_spec(p) for p in c.pools))}[/dim]",
            nicenum(c.usable_bytes),
            str(c.failures_tolerated),
            _fmt_bps(c.speed.read_bps),
            _fmt_bps(c.speed.write_bps),
            f"{c.speed.read_iops:,.0f}",
        )
    console.print(t)
    if total > len(cands):
        console.print(f"({total - len(cands)} more; --top N shows more, --json shows all)")
    for note in candidate_notes(cands):
        console.print(f"  {escape(note)}")


def candidate_notes(cands: list[Candidate]) -> list[str]:
    """What the table cannot say in a cell: a first row that survives nothing, members
    larger than their vdev uses, what a tiered plan is, and the writes not predicted."""
    notes = []
    if cands and cands[0].failures_tolerated == 0:
        notes.append(
            f"Warning: the first layout ({cands[0].name}) survives no disk failure: one "
            "failed disk loses the pool. --min-failures 1 lists only layouts that survive one."
        )
    kinds_seen: set[str] = set()
    for c in cands:
        kind = c.pools[0].vdevs[0].kind
        waste = unused_by_members(c)
        if waste and not c.partitioned and kind not in kinds_seen:
            kinds_seen.add(kind)
            notes.append(f"{c.name}: {waste}")
    if any(c.name.startswith("tiered") for c in cands):
        notes.append(
            "tiered: every disk is cut into partitions at the smaller disks' sizes; the part "
            "all disks share is one vdev, the larger disks' leftovers make more vdevs, in the "
            "same pool ('one pool') or as a second pool ('leftovers as 2nd pool', so a failure "
            "in one tier does not take the other). The tiers share spindles: the speed shown "
            "is the first tier's."
        )
    notes.append(
        "Random writes are not predicted (copy-on-write: ZFS writes them as aggregated "
        "sequential writes); `plan --layout` shows the in-place rule for comparison."
    )
    return notes


def unused_by_members(c: Candidate) -> str:
    """A whole-disk mirror, raidz or dRAID uses each member only up to its smallest
    member's size: what that leaves unused, e.g. "leaves 931G of each of 3 disks unused"."""
    unused: dict[int, int] = {}
    for pool in c.pools:
        for v in pool.vdevs:
            if v.kind == "disk":
                continue
            low = min(v.devices)
            for d in v.devices:
                if d > low:
                    unused[d - low] = unused.get(d - low, 0) + 1
    if not unused:
        return ""
    parts = [
        f"{nicenum(size)} ({decimal(size)}) of each of {n} disks"
        if n > 1
        else f"{nicenum(size)} ({decimal(size)}) of 1 disk"
        for size, n in sorted(unused.items())
    ]
    return (
        "leaves "
        + ", ".join(parts)
        + " unused (a vdev uses every member only up to its smallest member's size)."
    )
