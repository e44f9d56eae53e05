"""fs-compare: ZFS raidz/raidz2 vs btrfs raid5/raid6 vs md raid5/raid6 with ext3, ext4 and xfs,
on the same disks: untar of a real source tree, streaming, metadata. (ext3 on md raid5 is
what the seeds compared ZFS with.)"""

from __future__ import annotations

from poolbench.study.builtin.base import Builtin, StudyFile, need, study_file, working_set
from poolbench.study.builtin.context import Context

DEFAULT_TARBALL = "/usr/src/linux-source-6.1.tar.xz"
MD_FILESYSTEMS = ["ext3", "ext4", "xfs"]
WORKLOADS = ["untar", "seq-write", "seq-read", "meta-create-seq", "meta-stat-seq",
             "meta-delete-seq"]  # fmt: skip


def _exclude(backends: list[str], filesystems: list[str]) -> list[dict[str, str]]:
    """md carries ext3/ext4/xfs; ZFS and btrfs carry only themselves."""
    others = [b for b in backends if b != "md"]
    out: list[dict[str, str]] = []
    for b in others:
        out += [{"backend": b, "fs": f} for f in filesystems if f != b]
    return out + [{"backend": "md", "fs": b} for b in others]


def build(ctx: Context) -> StudyFile:
    need(ctx, 4, "fs-compare study (raidz2 / raid6)")
    backends = ["zfs", "btrfs"] + (["md"] if ctx.has_md else [])
    factors: dict[str, list[str]] = {
        "backend": ctx.opt_list("backends", backends),
        "layout": ctx.opt_list("levels", ["parity1", "parity2"]),
    }
    exclude: list[dict[str, str]] = []
    if "md" in factors["backend"]:
        factors["fs"] = [b for b in factors["backend"] if b != "md"] + MD_FILESYSTEMS
        exclude = _exclude(factors["backend"], factors["fs"])
    return study_file(
        ctx,
        "fs-compare",
        "ZFS raidz/raidz2 vs btrfs raid5/raid6"
        + (" vs md raid5/raid6 with ext3, ext4 and xfs" if "md" in factors["backend"] else "")
        + " on the same disks: untar of a real source tree, streaming, metadata",
        factors,
        {
            "names": list(WORKLOADS),
            "size": working_set(ctx, 0.25),
            "metadata_files": 2000,
            "tarball": ctx.options.get("tarball", DEFAULT_TARBALL),
        },
        exclude=exclude,
    )


def pre_notes(ctx: Context) -> list[str]:
    if ctx.has_md:
        return []
    return [
        "md raid5/raid6 with ext3, ext4 and xfs is left out: "
        + (ctx.md_reason or "this kernel has no md driver")
        + ". The ZFS and btrfs stacks run."
    ]


BUILTIN = Builtin(
    "fs-compare",
    "ZFS raidz/raidz2 vs btrfs raid5/raid6 vs md raid5/raid6 + ext3/ext4/xfs?",
    (4, "1G"),
    build,
    {
        "levels": "generic layouts: parity1 (raidz1/raid5), parity2 (raidz2/raid6)",
        "backends": "stacks, e.g. zfs,btrfs (md is added where the kernel has md)",
        "tarball": f"the source tree to untar (default {DEFAULT_TARBALL})",
    },
    needs_loop=True,
    pre_notes=pre_notes,
)
