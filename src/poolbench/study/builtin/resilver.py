"""resilver: how slow is a degraded pool, and how long does a resilver take, per layout?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyFile,
    default_left_out,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.resilver_load import load_notes
from poolbench.workloads.library import parse_load

if TYPE_CHECKING:
    from poolbench.records.sections import Resilver
    from poolbench.store.facts import StudyFacts


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "resilver study (a mirror and a spare)")
    w = ctx.n - 1  # one disk stays out of the pool: the replacement
    default = ["mirror:2"] + [f"raidz{p}:{w}" for p in (1, 2) if w >= p + 2]
    for p in (1, 2):
        if w < p + 2:
            default_left_out(
                ctx,
                f"no raidz{p} layout: it needs {p + 2} disks besides the spare; --disks gives "
                f"{ctx.n} in all.",
            )
    factors: dict[str, list[str]] = {"backend": ["zfs"], "layout": ctx.opt_list("layouts", default)}
    load = ctx.options.get("load")
    if load is not None:
        parse_load(load)  # refused here, before anything is built
        factors["load"] = ["none", load]
        # The foreground reads its working set over and over for as long as the resilver
        # lasts: with data cached, the ARC would serve it and the disks' contention would
        # not show. With the data uncached, every read goes to the disks.
        factors["primarycache"] = ["metadata"]
        ctx.announce(
            f"with --load, every configuration runs with primarycache=metadata: the {load} "
            "foreground repeats its reads while the pool resilvers, and the ARC would "
            "otherwise serve them from RAM (its figures, and seq-read's, are uncached reads)."
        )
    return study_file(
        ctx,
        "resilver",
        "read while degraded (one member offline), then the time to resilver after replacing "
        "it with a spare; resilvered bytes and rate"
        + (f"; idle, and under a foreground {load} beside it alone" if load else ""),
        factors,
        {
            "names": ["seq-write", "seq-read", "degraded-read", "resilver"],
            "size": working_set(ctx, 0.3),
        },
    )


def _line(key: str, r: Resilver) -> str:
    line = (
        f"  {key} (replicate {r.replicate + 1}): {r.resilvered_bytes / MiB:.1f} MiB "
        f"resilvered in {'?' if r.seconds is None else f'{r.seconds:g}'} s"
    )
    if r.kind.startswith("sequential"):  # redundancy is back here; the scrub checks it after
        scrub = "none followed" if r.scrub_seconds is None else f"{r.scrub_seconds:g} s more"
        line += f" (sequential rebuild to a distributed spare; the verifying scrub: {scrub})"
    return line


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """Bytes resilvered and the time it took, per trial."""
    lines = [_line(c.key, r) for c in facts.configs for r in c.resilvers]
    out = ["resilver: bytes and time per trial", *lines] if lines else []
    return out + load_notes(facts)


BUILTIN = Builtin(
    "resilver",
    "How slow is a degraded pool, and how long does a resilver take, per layout?",
    (5, "1G"),
    build,
    {
        "layouts": "layouts (one disk is kept as the spare; a dRAID with a distributed "
        "spare rebuilds onto it), e.g. mirror:2,raidz1:4,draid1:2d:5c:1s",
        "load": "a foreground workload run while the pool resilvers (beside an idle resilver, "
        "and alone on the healthy pool), flat out or at a rate in MiB/s: e.g. seq-read, "
        "rand-read-4k, seq-read@20M",
    },
    notes=notes,
)
