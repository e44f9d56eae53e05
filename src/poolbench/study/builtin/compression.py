"""compression: does compression help or hurt, on data of a declared compressibility?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.study.builtin.base import Builtin, StudyDict, need, study_file, working_set
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

ZFS_FUSE_COMPRESSION = ["off", "lzjb", "gzip"]
OPENZFS_COMPRESSION = ["off", "lz4", "gzip", "zstd"]


def build(ctx: Context) -> StudyDict:
    need(ctx, 3, "compression study")
    default = ZFS_FUSE_COMPRESSION if ctx.dialect == "zfs-fuse" else OPENZFS_COMPRESSION
    return study_file(
        ctx,
        "compression",
        "compression algorithms this ZFS offers × declared data compressibility, with the "
        "achieved compressratio",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["raidz1"]),
            "compression": ctx.opt_list("levels", default),
            "compressibility": ctx.opt_ints("compressibility", [0, 50, 75]),
        },
        {"names": ["seq-write", "seq-read"], "size": working_set(ctx, 0.25)},
    )


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    """The compressratio ZFS reported after each write workload, per configuration."""
    lines = []
    for c in facts.configs:
        got = {r for w, ratios in c.compressratios.items() if w.endswith("write") for r in ratios}
        if got:
            lines.append(f"  {c.key}: {', '.join(f'{r:.2f}x' for r in sorted(got))}")
    if not lines:
        return []
    return [
        "achieved compressratio after the writes (zfs get compressratio):",
        *lines,
        "  compressibility is fio's buffer_compress_percentage: each 4 KiB chunk is that "
        "percent compressible; there is no mixed-file model beyond that.",
    ]


BUILTIN = Builtin(
    "compression",
    "Does compression help or hurt, on data of a declared compressibility?",
    (3, "1G"),
    build,
    {
        "levels": "compression algorithms (default: what this ZFS offers)",
        "compressibility": "data compressibility percentages, e.g. 0,50,75",
        "layouts": "layouts, e.g. raidz1",
    },
    notes=notes,
)
