"""concurrency: does throughput scale with concurrent streams (1, 2, 6, ...)?"""

from __future__ import annotations

from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    default_pairs,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "concurrency study")
    streams = ctx.opt_ints("streams", [1, 2, 6])
    layouts = ctx.opt_list("layouts", ["raidz1"] + ([default_pairs(ctx)] if ctx.n >= 4 else []))
    return study_file(
        ctx,
        "concurrency",
        f"aggregate throughput of {', '.join(map(str, streams))} concurrent sequential "
        "writers and readers, per layout",
        {"backend": ["zfs"], "layout": layouts},
        {
            "names": [f"streams-write-{n}" for n in streams]
            + [f"streams-read-{n}" for n in streams],
            "size": working_set(ctx, 0.3),
        },
    )


BUILTIN = Builtin(
    "concurrency",
    "Does throughput scale with concurrent streams?",
    (4, "1G"),
    build,
    {"streams": "stream counts, e.g. 1,2,6", "layouts": "layouts, e.g. raidz1"},
)
