"""compression: does compression help or hurt, on data of a declared compressibility?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.study.builtin.base import Builtin, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

ZFS_FUSE_COMPRESSION = ["off", "lzjb", "gzip"]
OPENZFS_COMPRESSION = ["off", "lz4", "gzip", "zstd"]


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "compression study")
    default = ZFS_FUSE_COMPRESSION if ctx.dialect == "zfs-fuse" else OPENZFS_COMPRESSION
    if ctx.dialect == "zfs-fuse" and "levels" not in ctx.options:
        ctx.announce(
            f"compression {','.join(default)}: zfs-fuse has no lz4 or zstd (OpenZFS's "
            f"default set is {','.join(OPENZFS_COMPRESSION)})."
        )
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
    """The compressratio ZFS reported after each write, and what each configuration cost
    in CPU per GiB (compression trades CPU for I/O)."""
    return ratio_notes(facts) + cpu_notes(facts)


def cpu_notes(facts: StudyFacts) -> list[str]:
    """Mean CPU seconds per GiB of each workload, per configuration (guards/cpu.py)."""
    lines, scopes = [], set()
    for c in facts.configs:
        parts = [f"{w} {sum(v) / len(v):.2f}" for w, v in c.cpu_s_per_gib.items() if v]
        if parts:
            lines.append(f"  {c.key}: {', '.join(parts)}")
            scopes.add(c.cpu_scope or "not readable")
    if not lines:
        return []
    return [
        "CPU seconds per GiB moved (fio's user + system, plus the filesystem's own: "
        + "; ".join(sorted(scopes))
        + "): compression trades CPU for I/O, so a faster compressed pool costs CPU here:",
        *lines,
    ]


def ratio_notes(facts: StudyFacts) -> list[str]:
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
