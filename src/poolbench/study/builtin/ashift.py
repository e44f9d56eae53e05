"""ashift: what do ashift 9, 12 and 13 cost in speed and in usable space, especially on drives
with 4 KiB physical sectors that report 512-byte logical sectors (512e)?"""

from __future__ import annotations

from typing import TYPE_CHECKING

from poolbench.study.builtin import capacity
from poolbench.study.builtin.base import (
    Builtin,
    StudyFile,
    default_left_out,
    default_pairs,
    need,
    study_file,
    working_set,
)
from poolbench.study.builtin.context import Context

if TYPE_CHECKING:
    from poolbench.store.facts import StudyFacts

E512 = (
    "512e drives ({names}): they report 512-byte logical sectors but write 4 KiB physical "
    "sectors. ashift=9 lets ZFS write 512-byte blocks, which such a drive must "
    "read-modify-write (read the 4K sector, change 512 bytes, write it back), so small and "
    "unaligned writes slow down badly; ashift=12 writes whole 4 KiB sectors. ZFS picks the "
    "ashift from the *reported* logical size, i.e. 9 — set ashift=12 explicitly. The price: "
    "with ashift=12 small blocks take more space (raidz pads each block to whole 4 KiB "
    "sectors), visible in the capacity table."
)
NOT_512E = (
    "These disks report logical/physical sectors of {kinds} bytes: not 512e, so the 512e "
    "read-modify-write penalty of ashift=9 does not show here. On drives with 4 KiB physical "
    "sectors that report 512-byte logical sectors (most large SATA disks) ashift=9 costs much "
    "more."
)
NO_SECTORS = (
    "The members are plain files (no sector sizes to read): the 512e question — drives that "
    "report 512-byte logical but write 4 KiB physical sectors, where ashift=9 forces "
    "read-modify-write — cannot show here; run on the real disks."
)
NOT_RECORDED = (
    "This run did not record its disks' sector sizes, so whether they are 512e (512-byte "
    "logical, 4 KiB physical sectors, where ashift=9 forces read-modify-write) is not known "
    "here; `poolbench disks` shows them."
)


def build(ctx: Context) -> StudyFile:
    need(ctx, 3, "ashift study")
    layouts = ctx.opt_list(
        "layouts", ["raidz1"] + ([default_pairs(ctx)] if ctx.n >= 4 else ["mirror:2"])
    )
    if ctx.n < 4:
        default_left_out(ctx, f"mirror:2 uses 2 of the {ctx.n} disks (raidz1 uses all {ctx.n}).")
    levels = ctx.opt_ints("levels", [9, 12, 13])
    return study_file(
        ctx,
        "ashift",
        "ashift 9 vs 12 vs 13: speed, and usable space as the pool reports it",
        {"backend": ["zfs"], "layout": layouts, "ashift": levels},
        {"names": ["seq-write", "seq-read", "capacity"], "size": working_set(ctx, 0.25)},
    )


def sector_note(facts: StudyFacts) -> str:
    """The 512e explanation, told from the sector sizes the run recorded."""
    if facts.sectors is None:
        return NOT_RECORDED
    e512 = [d.name for d in facts.sectors if d.is_512e]
    if e512:
        return E512.format(names=", ".join(e512))
    if facts.sectors:
        kinds = sorted({f"{d.logical}/{d.physical}" for d in facts.sectors})
        return NOT_512E.format(kinds=", ".join(kinds))
    return NO_SECTORS


def notes(ctx: Context, facts: StudyFacts) -> list[str]:
    return [sector_note(facts), *capacity.notes(ctx, facts)]


BUILTIN = Builtin(
    "ashift",
    "What do ashift 9, 12 and 13 cost in speed and in usable space (512e drives)?",
    (4, "1G"),
    build,
    {"levels": "ashift values, e.g. 9,12,13", "layouts": "layouts, e.g. raidz1,mirror:2"},
    notes=notes,
)
