"""resilver: how slow is a degraded pool, and how long does a resilver take, per layout?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyDict,
    default_left_out,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import Resilver, StudyFacts


def build(ctx: Context) -> StudyDict:
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
    return study_file(
        ctx,
        "resilver",
        "read while degraded (one member offline), then the time to resilver after replacing "
        "it with a spare; resilvered bytes and rate",
        {"backend": ["zfs"], "layout": ctx.opt_list("layouts", default)},
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
    return ["resilver: bytes and time per trial", *lines] if lines else []


BUILTIN = Builtin(
    "resilver",
    "How slow is a degraded pool, and how long does a resilver take, per layout?",
    (5, "1G"),
    build,
    {
        "layouts": "layouts (one disk is kept as the spare; a dRAID with a distributed "
        "spare rebuilds onto it), e.g. mirror:2,raidz1:4,draid1:2d:5c:1s"
    },
    notes=notes,
)
