"""width: raidz widths on and off the "2^n data disks + parity" rule, and uneven top-level
vdevs: speed and usable space."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from poolbench import is_digits
from poolbench.errors import UsageError
from poolbench.study.builtin import capacity
from poolbench.study.builtin.base import Builtin, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts


def power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def width_layouts(n: int, parities: Sequence[int], widths: Sequence[int] | None) -> list[str]:
    out: list[str] = []
    for p in parities:
        ws = widths or [p + 2, p + 3, p + 4]  # 2, 3, 4 data disks: on, off, on the rule
        out += [f"raidz{p}:{w}" for w in ws if p + 2 <= w <= n]
    if n >= 10 and 2 in parities and widths is None:
        out.append("raidz2:6+raidz2:4")  # uneven top-level vdevs: a wide and a narrow raidz2
    return out


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "width study")
    parities = ctx.opt_ints("levels", [1, 2])
    widths = ctx.opt_ints("widths", []) if "widths" in ctx.options else None
    layouts = ctx.opt_list("layouts", width_layouts(ctx.n, parities, widths))
    if not layouts:
        raise UsageError(
            f"No raidz width of parity {','.join(map(str, parities))} fits {ctx.n} disks"
            + (f" at --widths {','.join(map(str, widths))}" if widths else "")
            + ": raidz1 needs at least 3 disks, raidz2 4, raidz3 5.",
            "Give more disks (--disks 6x1G), or widths between parity+2 and the disk count.",
        )
    if "layouts" not in ctx.options:
        announce_dropped(ctx, parities, widths, layouts)
    return study_file(
        ctx,
        "width",
        "raidz widths on and off the 2^n data disks + parity rule, and uneven top-level vdevs: "
        "speed and usable space",
        {"backend": ["zfs"], "layout": layouts, "ashift": [12]},
        {"names": ["seq-write", "seq-read", "capacity"], "size": working_set(ctx, 0.2)},
    )


def announce_dropped(
    ctx: Context, parities: Sequence[int], widths: Sequence[int] | None, layouts: list[str]
) -> None:
    """Widths asked for (or a parity's defaults) that these disks cannot hold, said."""
    dropped = [w for w in widths or [] if w > ctx.n]
    if dropped:
        ctx.announce(
            f"--widths {','.join(map(str, dropped))} left out: wider than the {ctx.n} disks."
        )
    for p in parities:
        if not any(x.startswith(f"raidz{p}:") for x in layouts):
            ctx.announce(f"no raidz{p} layout: no width asked for is between {p + 2} (the "
                         f"least raidz{p} takes) and the {ctx.n} disks given.")  # fmt: skip


def rule_verdicts(layout: str) -> str:
    """Each raidz vdev of a study layout (`raidz1:4+raidz1:2`): data disks, on/off the rule."""
    verdicts = []
    for part in layout.split("+"):
        kind, _, w = part.partition(":")
        if kind.startswith("raidz") and is_digits(kind[5:]) and is_digits(w):
            data = int(w) - int(kind[5:])
            verdicts.append(f"{part}: {data} data disks, {'on' if power_of_two(data) else 'off'}")
    return "; ".join(verdicts)


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    lines = ["the 2^n rule: a raidz vdev with a power-of-two number of data disks"]
    layouts = dict.fromkeys(c.level("layout") for c in facts.configs if c.level("layout"))
    lines += [f"  {layout}: {rule_verdicts(layout) or 'no raidz vdev'}" for layout in layouts]
    return lines + capacity.notes(ctx, facts)


BUILTIN = Builtin(
    "width",
    "raidz widths on and off the 2^n+parity rule, and uneven top-level vdevs?",
    (10, "1G"),
    build,
    {
        "levels": "parities, e.g. 1,2",
        "widths": "raidz widths, e.g. 3,4,5",
        "layouts": "explicit layouts, e.g. raidz2:6+raidz2:4",
    },
    notes=notes,
)
