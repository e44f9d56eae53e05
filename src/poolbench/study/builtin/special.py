"""special: what a special vdev (a mirror of its own for metadata and, with
`special_small_blocks`, small blocks) does for metadata, small files and untar, and how full
it gets: the pool alone beside the same pool + `special mirror:2`, at special_small_blocks
0/16K/64K.

A special vdev cannot be removed from a pool with raidz vdevs, and when it fills up new
metadata spills to the data vdevs: OpenZFS's own advice is to measure the pool you have. The
figure to size one by is how much the special class holds per GiB of data, read back from
`zpool iostat -v` after every workload (guards pool.class_alloc).

zfs-fuse (pool version 23) has no allocation classes: the study refuses there before anything
is created, and runs on OpenZFS (the guest tier).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from poolbench.errors import UsageError
from poolbench.study.builtin.base import (
    Builtin,
    MiB,
    StudyFile,
    WorkloadsTable,
    need,
    refuse_on_zfs_fuse,
    study_file,
)
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.headline import compared, mean
from poolbench.units import parse_special_small
from poolbench.workloads import library

if TYPE_CHECKING:
    from poolbench.store.facts import ConfigFacts, StudyFacts

GiB = 1 << 30
PER_GIB_FLOOR = 1 << 20  # below this on the data vdevs, special-per-GiB is not a figure
SMALL_BLOCKS = ["0", "16K", "64K"]
# 8K files fit every threshold above 0; 32K files only 64K: the threshold's effect shows.
WORKLOADS = ["meta-create-seq", "meta-stat-seq", "smallfile-write-8k", "smallfile-read-8k",
             "smallfile-write-32k", "smallfile-read-32k"]  # fmt: skip
SPECIAL = "special mirror:2"
# Past this share full, OpenZFS puts small data blocks on the data vdevs again
# (zfs_special_class_metadata_reserve_pct = 25 keeps the rest for metadata).
FILL_WARNING = 0.75


def with_special(base: str) -> str:
    return f"{base} + {SPECIAL}"


def _small_blocks(ctx: Context) -> list[str]:
    levels = [s.upper() for s in ctx.opt_list("levels", SMALL_BLOCKS)]
    for s in levels:
        parse_special_small(s)
    return levels


def build(ctx: Context) -> StudyFile:
    refuse_on_zfs_fuse(
        ctx,
        "special",
        "special vdevs and special_small_blocks",
        "allocation classes",
        "they came with ZFS on Linux 0.8",
        "special-vdevs",
    )
    need(ctx, 5, "special study (raidz1 of 3 and a special mirror of 2)")
    base = ctx.options.get("base", f"raidz1:{ctx.n - 2}")
    levels = _small_blocks(ctx)
    names = list(WORKLOADS)
    files = ctx.opt_int("files", 2000)
    workloads: WorkloadsTable = {"names": names, "size": "16M", "metadata_files": files}
    if "tarball" in ctx.options:
        names.insert(0, "untar")
        workloads["tarball"] = ctx.options["tarball"]
    # Without a special vdev special_small_blocks does nothing: measure that pool once.
    exclude = [{"layout": base, "special_small_blocks": s} for s in levels if s != levels[0]]
    return study_file(
        ctx,
        "special",
        "a special vdev for metadata and small blocks: the pool alone vs with a special "
        f"mirror, special_small_blocks {', '.join(levels)}; metadata, small files"
        + (", untar" if "tarball" in ctx.options else "")
        + "; how full the special class gets per GiB of data",
        {
            "backend": ["zfs"],
            "layout": [base, with_special(base)],
            "ashift": [12],
            "recordsize": ["128K"],
            "special_small_blocks": levels,
        },
        workloads,
        exclude=exclude,
    )


def _value_text(workload: str, values: tuple[float, ...]) -> str:
    m = mean(values)
    if m is None:
        return "n/a"
    unit = ""
    with contextlib.suppress(UsageError):  # a workload this build does not know: no unit
        unit = str(library.get(workload).unit)
    return f"{m:,.1f} {unit}".strip()


def _baseline(facts: StudyFacts) -> ConfigFacts | None:
    return next((c for c in facts.configs if "special" not in c.level("layout")), None)


def _versus(facts: StudyFacts) -> list[str]:
    """Each workload with a special vdev against the pool alone."""
    base = _baseline(facts)
    if base is None:
        return []
    lines = []
    for c in facts.configs:
        if c is base:
            continue
        ssb = c.level("special_small_blocks", "0")
        for w, values in c.figures.items():
            a, b = mean(values), mean(base.figures.get(w, ()))
            if a is None or b is None:
                continue
            lines.append(
                f"  special_small_blocks={ssb}, {w}: {_value_text(w, values)} vs "
                f"{_value_text(w, base.figures[w])} without: " + _verdict(base.figures[w], values)
            )
    head = "with a special mirror against the pool alone (ratio of means, 95% Fieller CI):"
    return [head, *lines] if lines else []


def _verdict(without: tuple[float, ...], with_special: tuple[float, ...]) -> str:
    """The ratio, and whether the replicates show it is not noise."""
    return compared(without, with_special)[0]


def _fill_line(c: ConfigFacts, workload: str, alloc: Mapping[str, int]) -> str:
    special, normal = alloc.get("special", 0), alloc.get("normal", 0)
    ssb = c.level("special_small_blocks", "0")
    text = f"  special_small_blocks={ssb}, after {workload}: special {special / MiB:.1f} MiB"
    free = c.class_free.get(workload, {}).get("special")
    if free is not None and special + free > 0:
        full = special / (special + free)
        text += f" ({full:.1%} of its {(special + free) / MiB:,.0f} MiB"
        text += ", past the threshold: new small blocks go to the data vdevs)" if (
            full >= FILL_WARNING) else ")"  # fmt: skip
    text += f", data vdevs {normal / MiB:.1f} MiB"
    if normal >= PER_GIB_FLOOR:
        text += f": {special / (normal / GiB) / MiB:,.0f} MiB of special per GiB on the data vdevs"
    else:  # empty files, or every block went to the special vdev: a ratio would mislead
        text += " (too little on the data vdevs for a per-GiB figure)"
    return text


def _fill(facts: StudyFacts) -> list[str]:
    lines = [
        _fill_line(c, w, alloc)
        for c in facts.configs
        for w, alloc in c.class_alloc.items()
        if "special" in c.level("layout") and isinstance(alloc.get("special"), int)
    ]
    if not lines:
        return [
            "how full the special class got: not recorded (it is read from `zpool iostat -v` "
            "on OpenZFS after each workload)."
        ]
    return [
        "how full the special class got (allocated bytes, `zpool iostat -v`: one copy of "
        "the special mirror, the data vdevs with their parity; they hold the files of every "
        "workload so far):",
        *lines,
        "Size a special vdev by the figure for data like yours: past "
        f"{FILL_WARNING:.0%} full OpenZFS sends small blocks to the data vdevs again, and "
        "once it is full, metadata too; a special vdev cannot be removed from a pool with "
        "raidz.",
    ]


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    return _versus(facts) + _fill(facts)


BUILTIN = Builtin(
    "special",
    "What does a special vdev do for metadata and small files, and how full does it get?",
    (5, "1G"),
    build,
    {
        "levels": "special_small_blocks values, e.g. 0,16K,64K",
        "files": "files per metadata and small-file workload (default 2000)",
        "base": "the pool's layout without its special vdev, e.g. raidz1:3",
        "tarball": "a source tree to untar as well (e.g. /usr/src/linux-source-6.1.tar.xz)",
    },
    notes=notes,
)
