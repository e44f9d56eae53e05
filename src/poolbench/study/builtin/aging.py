"""aging: how does each layout fall at 0 / 1 / 3 aging rounds at 80% fill, and does the
ranking change?

Each trial's pool is aged before the workloads by factors/aging.py's recipe (files of a size
distribution created, overwritten in part and deleted, round by round, back to the fill
level each time), seeded by the run's seed so every layout goes through the same operations.
`aging = 0` is the same recipe's first fill alone: files created one after another, nothing
deleted. The notes say how far each layout fell from its fresh figure, with the interval of
the ratio, and whether the ranking of the layouts changed beyond the run-to-run noise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from poolbench import capabilities
from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyFile,
    default_pairs,
    need,
    study_file,
)
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

WORKLOADS = ["seq-write", "seq-read", "rand-write-4k"]


def _fill(ctx: Context) -> int:
    fill = ctx.opt_int("fill", 80)
    if not 1 <= fill <= 95:
        raise UsageError(f"--fill {fill}: a fill level is 1..95 percent.", "e.g. --fill 80")
    return fill


def _frag(ctx: Context) -> list[int]:
    """--frag: a fragmentation target (OpenZFS only), announced where it cannot be read."""
    if "frag" not in ctx.options:
        if ctx.dialect == "zfs-fuse":
            ctx.announce(
                "free-space fragmentation is not recorded: zfs-fuse (pool version 23) has no "
                "fragmentation property (OpenZFS 2.x: `zpool list -o frag`); each trial's "
                "rounds and fill are."
            )
        return []
    target = ctx.opt_int("frag", 0)
    if not 1 <= target <= 100:
        raise UsageError(f"--frag {target}: a fragmentation target is 1..100 percent.",
                         "e.g. --frag 30")  # fmt: skip
    if ctx.dialect == "zfs-fuse":
        raise capabilities.unsupported(
            "fragmentation",
            f"--frag {target} needs the pool's fragmentation property, which zfs-fuse (pool "
            "version 23) does not have; nothing was created.",
            "Drop --frag (rounds and fill are still recorded), or run on OpenZFS 2.x.",
        )
    return [target]


def build(ctx: Context) -> StudyFile:
    if "layouts" in ctx.options:
        need(ctx, 2, "aging study")
    else:
        need(ctx, 3, "aging study (mirror pairs and raidz1)")
    rounds = ctx.opt_ints("levels", [0, 1, 3])
    if max(rounds) > 50:
        raise UsageError(f"--levels {max(rounds)}: at most 50 aging rounds.", "e.g. --levels 0,1,3")
    fill = _fill(ctx)
    layouts = ctx.opt_list("layouts", [default_pairs(ctx), "raidz1"])
    # The working set must fit on top of the fill (the smallest default layout: mirror pairs
    # hold half the disks' space), rewritten copy-on-write (factors/fill.check_room).
    usable = ctx.disk_bytes * (ctx.n // 2) * 0.9
    room = (usable * (0.97 - fill / 100) - 16 * MiB) / 2.5
    ws = f"{max(8, min(1024, int(room) // MiB))}M"
    if "size" not in ctx.options and not 8 <= int(room) // MiB <= 1024:
        ctx.announce(
            f"working set {ws}: it must fit on top of the {fill}% fill (mirror pairs over "
            f"{ctx.n} disks have about {usable / MiB:.0f}M usable), held between 8M and 1024M "
            "(--size sets it)."
        )
    factors: dict[str, list[Any]] = {
        "backend": ["zfs"], "layout": layouts, "aging": rounds, "fill": [fill],
    }  # fmt: skip
    frag = _frag(ctx)
    if frag:
        factors["frag_target"] = frag
    return study_file(
        ctx,
        "aging",
        f"layouts aged {', '.join(map(str, rounds))} rounds (files of a size distribution "
        f"created, partly overwritten and deleted, seeded) at {fill}% fill before streaming "
        "write, cold read and 4K random write",
        factors,
        {"names": WORKLOADS, "size": ws},
    )


# -- notes ------------------------------------------------------------------------------------
def _age_line(c: ConfigFacts) -> str:
    """One configuration's age over its replicates: rounds, fill reached, fragmentation."""
    ages = c.ages
    rounds = sorted({a.rounds for a in ages})
    fills = [a.fill_achieved for a in ages if a.fill_achieved is not None]
    frags = [a.frag_percent for a in ages if a.frag_percent is not None]
    asked = ages[0].rounds_asked
    done = "/".join(map(str, rounds)) + (f" (asked {asked}: more to reach the frag target)"
                                          if rounds != [asked] else "")  # fmt: skip
    line = f"  {_layout(c)} aging={c.level('aging')}: {done} round(s); fill "
    line += f"{ages[0].fill_asked:g}% asked, " + (
        f"{min(fills):g}–{max(fills):g}% reached (statfs)" if fills else "not read"
    )
    if frags:
        line += f"; free-space fragmentation {min(frags):g}–{max(frags):g}%"
    return line + f" ({len(ages)} trial(s))"


def _layout(c: ConfigFacts) -> str:
    """The configuration without its age: what is compared across aging levels."""
    return " ".join(
        v if k == "layout" else f"{k}={v}"
        for k, v in c.levels.items()
        if k not in ("aging", "backend", "fill")
    )


def _falls(configs: Sequence[ConfigFacts], workload: str) -> list[str]:
    from poolbench.study.builtin.headline import compared

    lines = []
    by: dict[str, dict[int, ConfigFacts]] = {}
    for c in configs:
        by.setdefault(_layout(c), {})[int(c.level("aging", "0"))] = c
    for layout, ages in by.items():
        fresh = ages.get(min(ages))
        for n in sorted(ages)[1:]:
            assert fresh is not None
            if not (fresh.figures.get(workload) and ages[n].figures.get(workload)):
                continue
            text, _shown = compared(fresh.figures.get(workload, ()),
                                    ages[n].figures.get(workload, ()))  # fmt: skip
            lines.append(f"  {layout}: aged {n} round(s) vs {min(ages)}: {text}")
    return lines


def _ranking(configs: Sequence[ConfigFacts], workload: str) -> list[str]:
    """Per aging level the first layout against the second; and whether the first changed
    from the least aged level beyond the replicates' noise: the two layouts' ratio excludes 1
    on opposite sides at both levels."""
    from poolbench.study.builtin.headline import compared, mean

    at: dict[int, dict[str, ConfigFacts]] = {}
    for c in configs:
        if c.figures.get(workload):
            at.setdefault(int(c.level("aging", "0")), {})[_layout(c)] = c
    levels = sorted(n for n in at if len(at[n]) > 1)
    if len(levels) < 2:
        return []

    def order(n: int) -> list[str]:
        return sorted(at[n], key=lambda k: -(mean(at[n][k].figures[workload]) or 0.0))

    def versus(n: int, a: str, b: str) -> tuple[str, bool]:  # a against b at level n
        return compared(at[n][b].figures[workload], at[n][a].figures[workload])

    lines = []
    fresh = order(levels[0])[0]
    for n in levels:
        top, second = order(n)[:2]
        text, shown = versus(n, top, second)
        lines.append(f"  aged {n}: {top} first, vs {second}: {text}")
        if n != levels[0] and top != fresh and fresh in at[n]:
            real = shown and versus(levels[0], fresh, top)[1] and versus(n, top, fresh)[1]
            lines.append(
                f"  ranking changed at {n} round(s): {top} overtook {fresh}"
                + (
                    ""
                    if real
                    else ", but the replicates do not tell the two apart at both "
                    "levels: not a change they show"
                )  # fmt: skip
            )
        elif n != levels[0]:
            lines.append(f"  ranking at {n} round(s): {fresh} still first")
    return lines


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Each trial's age, each layout's fall from fresh, and the ranking per aging level."""
    aged = [c for c in facts.configs if c.ages]
    if not aged:
        return []
    hows = sorted({a.frag_how for c in aged for a in c.ages if a.frag_how})
    out = ["aging: each pool aged before measuring (factors/aging.py; the run's seed, so the "
           "same operations on every layout; untimed); fragmentation: "
           + ("; ".join(hows) or "not read"), *(_age_line(c) for c in aged)]  # fmt: skip
    for w in WORKLOADS + sorted({w for c in facts.configs for w in c.figures} - set(WORKLOADS)):
        falls = _falls(facts.configs, w)
        ranks = _ranking(facts.configs, w)
        if falls or ranks:
            out += [f"{w}: mean of the replicates, ratio with its 95% CI (Fieller):",
                    *falls, *ranks]  # fmt: skip
    return out


BUILTIN = Builtin(
    "aging",
    "How does each layout fall at 0 / 1 / 3 aging rounds at 80% fill; does the ranking change?",
    (4, "1G"),
    build,
    {
        "levels": "aging rounds, e.g. 0,1,3",
        "layouts": "layouts, e.g. mirror:2+mirror:2,raidz1",
        "fill": "fill level the recipe ages at, percent (default 80)",
        "frag": "OpenZFS: more rounds (at most 10) until the pool's fragmentation reaches "
        "this percent",
    },
    notes=notes,
)
