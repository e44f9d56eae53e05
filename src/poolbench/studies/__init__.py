"""The built-in studies: the experiments storage builders run, one command each.

Each study is a function from its parameters (the disks, the ZFS dialect in use, the study's
own options) to a study file — the same TOML `poolbench run` takes, so everything a built-in
study does, an edited copy of `examples/<name>.toml` can do. Nothing here runs anything: the
study file goes through the one engine (orchestrate.StudyRun).

`poolbench study NAME --disks 5x512M [--levels ...]` builds the file, runs it, prints the
comparison table (report.terminal) and the study's own notes (`Builtin.notes`: the 512e
explanation, the planner's prediction beside each pool's reported space, ...).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from poolbench.errors import UsageError
from poolbench.units import parse_size
from poolbench.workloads.library import IOZONE_TESTS, parse_record_size

MiB = 1 << 20
GiB = 1 << 30

ZFS_FUSE_COMPRESSION = ["off", "lzjb", "gzip"]
OPENZFS_COMPRESSION = ["off", "lz4", "gzip", "zstd"]
ZFS_FUSE_RECORDSIZES = ["8K", "32K", "128K"]  # zfs-fuse: at most 128K
OPENZFS_RECORDSIZES = ["16K", "128K", "1M"]
MIRROR_RECORDS = ["64k", "128k", "256k", "512k", "1m", "2m", "4m", "8m"]
DEFAULT_TARBALL = "/usr/src/linux-source-6.1.tar.xz"


@dataclass(frozen=True)
class Context:
    """What a study is built for: the disks and what this machine offers."""

    disk_count: int
    disk_size: str  # for sparse files; ignored for devices
    devices: tuple[str, ...] = ()  # real devices (the safety layer claims them)
    dialect: str = "openzfs"  # zfs-fuse | openzfs (the ZFS in use; levels come from it)
    has_md: bool = True
    md_reason: str = ""
    options: dict[str, str] = field(default_factory=dict)  # study options, raw text

    @property
    def n(self) -> int:
        return len(self.devices) or self.disk_count

    @property
    def disk_bytes(self) -> int:
        return parse_size(self.disk_size)

    def opt_list(self, key: str, default: Sequence[str]) -> list[str]:
        raw = self.options.get(key)
        if raw is None:
            return list(default)
        items = [x.strip() for x in raw.split(",") if x.strip()]
        if not items:
            raise UsageError(f"--{key} is empty.", f"Give a list, e.g. --{key} 1,2.")
        return items

    def opt_ints(self, key: str, default: Sequence[int]) -> list[int]:
        out = []
        for x in self.opt_list(key, [str(d) for d in default]):
            if not x.isdigit():
                raise UsageError(f"--{key}: '{x}' is not a whole number.", f"e.g. --{key} 1,2,6")
            out.append(int(x))
        return out


@dataclass(frozen=True)
class Builtin:
    name: str
    question: str
    default_disks: tuple[int, str]  # (count, size)
    build: Callable[[Context], dict[str, Any]]
    options: dict[str, str]  # study-specific CLI options → help
    needs_loop: bool = False  # partitions need block devices
    notes: Callable[[Context, list[dict[str, Any]]], list[str]] | None = None
    pre_notes: Callable[[Context], list[str]] | None = None


# -- helpers ----------------------------------------------------------------------------------
def _study(
    ctx: Context,
    name: str,
    description: str,
    factors: dict[str, list[Any]],
    workloads: dict[str, Any],
    *,
    replicates: int = 3,
    max_replicates: int = 6,
    disks: dict[str, Any] | None = None,
    exclude: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if ctx.devices:
        d = {"source": "devices", "devices": list(ctx.devices)}
    else:
        d = {"count": ctx.n, "size": ctx.disk_size, "source": "loop"}
    d.update(disks or {})
    if ctx.devices:
        d.pop("count", None)
        d.pop("size", None)
    reps = int(ctx.options.get("replicates", replicates))
    out: dict[str, Any] = {
        "name": name,
        "description": description,
        "replicates": reps,
        "max_replicates": max(reps, int(ctx.options.get("max_replicates", max_replicates))),
        "ci_target": 5.0,
        "disks": d,
        "factors": factors,
        "workloads": {**workloads},
    }
    if exclude:
        out["exclude"] = exclude
    if "workloads" in ctx.options:
        out["workloads"]["names"] = ctx.opt_list("workloads", [])
    if "size" in ctx.options:
        out["workloads"]["size"] = ctx.options["size"].upper()
    if "runtime" in ctx.options:
        out["workloads"]["runtime"] = int(ctx.options["runtime"])
    return out


def _ws(ctx: Context, fraction: float, cap: str = "1G", floor: str = "8M") -> str:
    """A working set: `fraction` of one disk, between floor and cap, whole MiB."""
    n = min(parse_size(cap), max(parse_size(floor), int(ctx.disk_bytes * fraction)))
    return f"{n // MiB}M"


def _need(ctx: Context, n: int, what: str) -> None:
    if ctx.n < n:
        raise UsageError(
            f"The {what} needs at least {n} disks; --disks gives {ctx.n}.",
            f"Give more disks, e.g. --disks {n}x1G.",
        )


def _mirror_pairs(n: int) -> str:
    pairs = n // 2
    return "+".join(["mirror:2"] * pairs)


def power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


# -- the studies ------------------------------------------------------------------------------
def parity(ctx: Context) -> dict[str, Any]:
    widths = ctx.opt_ints("widths", [ctx.n])
    layouts: list[str] = []
    for w in widths:
        if w > ctx.n:
            raise UsageError(f"--widths {w} is wider than the {ctx.n} disks given.", "")
        layouts += [f"raidz{p}:{w}" for p in (1, 2, 3) if w >= p + 2]
    if not layouts:
        raise UsageError("No raidz layout fits these widths.", "Use widths of 3 or more.")
    return _study(
        ctx,
        "parity",
        "raidz1 vs raidz2 vs raidz3 on the same disks, at each width: streaming write and "
        "cold read",
        {"backend": ["zfs"], "layout": layouts, "ashift": [12]},
        {"names": ["seq-write", "seq-read"], "size": _ws(ctx, 0.5)},
        disks={"count": max(widths)} if not ctx.devices else None,
    )


def ashift(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "ashift study")
    layouts = ctx.opt_list(
        "layouts", ["raidz1"] + ([_mirror_pairs(ctx.n)] if ctx.n >= 4 else ["mirror:2"])
    )
    levels = ctx.opt_ints("levels", [9, 12, 13])
    return _study(
        ctx,
        "ashift",
        "ashift 9 vs 12 vs 13: speed, and usable space as the pool reports it",
        {"backend": ["zfs"], "layout": layouts, "ashift": levels},
        {"names": ["seq-write", "seq-read", "capacity"], "size": _ws(ctx, 0.25)},
    )


def vdev_source(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "vdev-source study")
    slice_bytes = ctx.options.get("slice_size") or f"{max(64, ctx.disk_bytes // 2 // MiB)}M"
    return _study(
        ctx,
        "vdev-source",
        "whole disks vs a partition spanning each disk vs a smaller slice per disk",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["raidz1"]),
            "vdev_source": ctx.opt_list("levels", ["whole", "partition", "slice"]),
        },
        {"names": ["seq-write", "seq-read"], "size": _ws(ctx, 0.2)},
        disks={"slice_size": slice_bytes.upper()},
    )


def mirror(ctx: Context) -> dict[str, Any]:
    widths = ctx.opt_ints("levels", [1, 2, 3])
    _need(ctx, max(widths), "mirror study")
    layouts = ["stripe:1" if w == 1 else f"mirror:{w}" for w in widths]
    records = ctx.opt_list("records", MIRROR_RECORDS)
    for r in records:
        parse_record_size(r)
    tests = ctx.opt_list("tests", IOZONE_TESTS)
    bad = [t for t in tests if t not in IOZONE_TESTS]
    if bad:
        raise UsageError(f"--tests: '{bad[0]}' is not an iozone test.", ", ".join(IOZONE_TESTS))
    rs = "128K" if ctx.dialect == "zfs-fuse" else "1M"
    return _study(
        ctx,
        "mirror",
        f"single disk vs 2-way vs 3-way mirror, application records {records[0]}…{records[-1]} "
        f"against the dataset recordsize {rs}, the iozone set",
        {"backend": ["zfs"], "layout": layouts, "recordsize": [rs]},
        {
            "names": [f"iozone-{t}-{r.lower()}" for r in records for t in tests],
            "size": _ws(ctx, 0.25),
        },
        disks={"count": max(widths)} if not ctx.devices else None,
    )


def recordsize(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "recordsize study")
    default = ZFS_FUSE_RECORDSIZES if ctx.dialect == "zfs-fuse" else OPENZFS_RECORDSIZES
    sizes = ctx.opt_list("records", ["4k", "64k", "1m"])
    names: list[str] = []
    for r in sizes:
        parse_record_size(r)
        names += [f"iozone-write-{r}", f"iozone-read-{r}", f"rand-read-{r}", f"rand-write-{r}"]
    return _study(
        ctx,
        "recordsize",
        "dataset recordsize × application I/O size, sequential and random",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", ["raidz1"]),
            "recordsize": [x.upper() for x in ctx.opt_list("levels", default)],
        },
        {"names": names, "size": _ws(ctx, 0.25), "runtime": 10},
    )


def compression(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "compression study")
    default = ZFS_FUSE_COMPRESSION if ctx.dialect == "zfs-fuse" else OPENZFS_COMPRESSION
    return _study(
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
        {"names": ["seq-write", "seq-read"], "size": _ws(ctx, 0.25)},
    )


def fs_compare(ctx: Context) -> dict[str, Any]:
    _need(ctx, 4, "fs-compare study (raidz2 / raid6)")
    backends = ["zfs", "btrfs"] + (["md"] if ctx.has_md else [])
    factors: dict[str, list[Any]] = {
        "backend": ctx.opt_list("backends", backends),
        "layout": ctx.opt_list("levels", ["parity1", "parity2"]),
    }
    exclude: list[dict[str, Any]] = []
    if "md" in factors["backend"]:
        others = [b for b in factors["backend"] if b != "md"]
        factors["fs"] = others + ["ext4", "xfs"]
        for b in others:
            exclude += [{"backend": b, "fs": f} for f in factors["fs"] if f != b]
        exclude += [{"backend": "md", "fs": b} for b in others]
    return _study(
        ctx,
        "fs-compare",
        "ZFS raidz/raidz2 vs btrfs raid5/raid6"
        + (" vs md raid5/raid6 with ext4 and xfs" if "md" in factors["backend"] else "")
        + " on the same disks: untar of a real source tree, streaming, metadata",
        factors,
        {
            "names": [
                "untar",
                "seq-write",
                "seq-read",
                "meta-create-seq",
                "meta-stat-seq",
                "meta-delete-seq",
            ],
            "size": _ws(ctx, 0.25),
            "metadata_files": 2000,
            "tarball": ctx.options.get("tarball", DEFAULT_TARBALL),
        },
        exclude=exclude,
    )


def concurrency(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "concurrency study")
    streams = ctx.opt_ints("streams", [1, 2, 6])
    layouts = ctx.opt_list("layouts", ["raidz1"] + ([_mirror_pairs(ctx.n)] if ctx.n >= 4 else []))
    return _study(
        ctx,
        "concurrency",
        f"aggregate throughput of {', '.join(map(str, streams))} concurrent sequential "
        "writers and readers, per layout",
        {"backend": ["zfs"], "layout": layouts},
        {
            "names": [f"streams-write-{n}" for n in streams]
            + [f"streams-read-{n}" for n in streams],
            "size": _ws(ctx, 0.3),
        },
    )


def fill(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "fill study")
    levels = ctx.opt_ints("levels", [10, 25, 50, 75, 90])
    # The working set must fit on top of the highest fill level (raidz1: n-1 data disks).
    usable = ctx.disk_bytes * (ctx.n - 1) * 0.9
    room = usable * (0.97 - max(levels) / 100) / 2.5
    ws = f"{max(8, min(1024, int(room) // MiB))}M"
    return _study(
        ctx,
        "fill",
        f"streaming write and cold read as the pool fills to {', '.join(map(str, levels))}% "
        "(incompressible filler, written untimed before the workloads)",
        {"backend": ["zfs"], "layout": ctx.opt_list("layouts", ["raidz1"]), "fill": levels},
        {"names": ["seq-write", "seq-read"], "size": ws},
    )


def resilver(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "resilver study (a mirror and a spare)")
    w = ctx.n - 1  # one disk stays out of the pool: the replacement
    default = ["mirror:2"] + [f"raidz{p}:{w}" for p in (1, 2) if w >= p + 2]
    return _study(
        ctx,
        "resilver",
        "read while degraded (one member offline), then the time to resilver after replacing "
        "it with a spare; resilvered bytes and rate",
        {"backend": ["zfs"], "layout": ctx.opt_list("layouts", default)},
        {"names": ["seq-write", "seq-read", "degraded-read", "resilver"], "size": _ws(ctx, 0.3)},
    )


def width_layouts(n: int, parities: Sequence[int], widths: Sequence[int] | None) -> list[str]:
    out: list[str] = []
    for p in parities:
        ws = widths or [p + 2, p + 3, p + 4]  # 2, 3, 4 data disks: on, off, on the rule
        out += [f"raidz{p}:{w}" for w in ws if p + 2 <= w <= n]
    if n >= 10 and 2 in parities and widths is None:
        out.append("raidz2:6+raidz2:4")  # uneven top-level vdevs: a wide and a narrow raidz2
    return out


def width(ctx: Context) -> dict[str, Any]:
    _need(ctx, 3, "width study")
    parities = ctx.opt_ints("levels", [1, 2])
    widths = ctx.opt_ints("widths", []) if "widths" in ctx.options else None
    layouts = ctx.opt_list("layouts", width_layouts(ctx.n, parities, widths))
    if not layouts:
        raise UsageError("No raidz width fits these disks.", "Give more disks.")
    return _study(
        ctx,
        "width",
        "raidz widths on and off the 2^n data disks + parity rule, and uneven top-level vdevs: "
        "speed and usable space",
        {"backend": ["zfs"], "layout": layouts, "ashift": [12]},
        {"names": ["seq-write", "seq-read", "capacity"], "size": _ws(ctx, 0.2)},
    )


def capacity(ctx: Context) -> dict[str, Any]:
    _need(ctx, 4, "capacity study")
    n = ctx.n
    default = [f"stripe:{n}", _mirror_pairs(n)] + [f"raidz{p}" for p in (1, 2, 3) if n >= p + 2]
    return _study(
        ctx,
        "capacity",
        "usable space per layout × ashift as the pool reports it, beside the planner's "
        "prediction (no I/O beyond creating the pools)",
        {
            "backend": ["zfs"],
            "layout": ctx.opt_list("layouts", default),
            "ashift": ctx.opt_ints("levels", [9, 12]),
        },
        {"names": ["capacity"], "size": "8M"},
        replicates=2,
        max_replicates=2,
    )


# -- notes printed after a study ----------------------------------------------------------------
def _sector_sizes(ctx: Context, rows: list[dict[str, Any]]) -> list[tuple[str, int, int]]:
    import os
    from pathlib import Path

    found: list[tuple[str, int, int]] = []
    seen: set[str] = set()
    for r in rows:
        for dev in r.get("pool", {}).get("leaves", []) or []:
            name = os.path.basename(os.path.realpath(dev))
            if name in seen:
                continue
            seen.add(name)
            q = Path(f"/sys/class/block/{name}")
            if (q / "partition").exists():
                q = q.parent
            try:
                lo = int((q / "queue/logical_block_size").read_text())
                ph = int((q / "queue/physical_block_size").read_text())
            except OSError:
                continue
            found.append((name, lo, ph))
    return found


def ashift_notes(ctx: Context, rows: list[dict[str, Any]]) -> list[str]:
    sectors = _sector_sizes(ctx, rows)
    e512 = [n for n, lo, ph in sectors if lo == 512 and ph >= 4096]
    notes = []
    if e512:
        notes.append(
            f"512e drives ({', '.join(e512)}): they report 512-byte logical sectors but write "
            "4 KiB physical sectors. ashift=9 lets ZFS write 512-byte blocks, which such a "
            "drive must read-modify-write (read the 4K sector, change 512 bytes, write it "
            "back), so small and unaligned writes slow down badly; ashift=12 writes whole "
            "4 KiB sectors. ZFS picks the ashift from the *reported* logical size, i.e. 9 — "
            "set ashift=12 explicitly. The price: with ashift=12 small blocks take more space "
            "(raidz pads each block to whole 4 KiB sectors), visible in the capacity table."
        )
    elif sectors:
        kinds = sorted({f"{lo}/{ph}" for _n, lo, ph in sectors})
        notes.append(
            f"These disks report logical/physical sectors of {', '.join(kinds)} bytes: not "
            "512e, so the 512e read-modify-write penalty of ashift=9 does not show here. On "
            "drives with 4 KiB physical sectors that report 512-byte logical sectors (most "
            "large SATA disks) ashift=9 costs much more."
        )
    else:
        notes.append(
            "The members are plain files (no sector sizes to read): the 512e question — drives "
            "that report 512-byte logical but write 4 KiB physical sectors, where ashift=9 "
            "forces read-modify-write — cannot show here; run on the real disks."
        )
    return notes + capacity_notes(ctx, rows)


def capacity_notes(ctx: Context, rows: list[dict[str, Any]]) -> list[str]:
    """Usable space as each pool reported it, beside the planner's prediction."""
    from poolbench.planner.capacity import predicted_usable

    seen: dict[str, tuple[int, str]] = {}
    for r in rows:
        pool = r.get("pool") or {}
        usable = (r.get("guards") or {}).get("capacity", {}).get("usable_bytes") or pool.get(
            "usable_bytes"
        )
        if isinstance(usable, int) and r["config"] not in seen:
            seen[r["config"]] = (usable, str(pool.get("zfs_version") or ""))
    if not seen:
        return []
    lines = ["usable space as the pool reports it (zfs USED+AVAIL) vs the planner's prediction:"]
    for cfg, (usable, version) in sorted(seen.items()):
        levels = dict(kv.split("=", 1) for kv in cfg.split())
        try:
            p = predicted_usable(
                levels["layout"], int(levels.get("ashift", "12") or 12), ctx.n,
                ctx.disk_bytes, version,
            )  # fmt: skip
            diff = (usable - p) / p * 100 if p else 0.0
            predicted = f"{p / MiB:,.1f} MiB (reported {diff:+.2f}%)"
        except Exception as exc:  # the planner does not model this layout/version
            predicted = f"n/a ({exc})"
        lines.append(f"  {cfg}: {usable / MiB:,.1f} MiB; planner {predicted}")
    return lines


def width_notes(ctx: Context, rows: list[dict[str, Any]]) -> list[str]:
    lines = ["the 2^n rule: a raidz vdev with a power-of-two number of data disks"]
    seen = set()
    for r in rows:
        layout = dict(kv.split("=", 1) for kv in r["config"].split()).get("layout", "")
        if layout in seen:
            continue
        seen.add(layout)
        verdicts = []
        for part in layout.split("+"):
            kind, _, w = part.partition(":")
            if kind.startswith("raidz") and w:
                data = int(w) - int(kind[-1])
                rule = "on" if power_of_two(data) else "off"
                verdicts.append(f"{part}: {data} data disks, {rule}")
        lines.append(f"  {layout}: " + "; ".join(verdicts))
    return lines + capacity_notes(ctx, rows)


def fs_compare_pre(ctx: Context) -> list[str]:
    if ctx.has_md:
        return []
    return [
        "md raid5/raid6 with ext4 and xfs is left out: "
        + (ctx.md_reason or "this kernel has no md driver")
        + ". The ZFS and btrfs stacks run."
    ]


def compression_notes(ctx: Context, rows: list[dict[str, Any]]) -> list[str]:
    got: dict[str, set[str]] = {}
    for r in rows:
        ratio = (r.get("pool") or {}).get("compressratio")
        if ratio and r["workload"].endswith("write"):
            got.setdefault(r["config"], set()).add(str(ratio))
    if not got:
        return []
    lines = ["achieved compressratio after the writes (zfs get compressratio):"]
    lines += [f"  {cfg}: {', '.join(sorted(v))}" for cfg, v in sorted(got.items())]
    lines.append(
        "  compressibility is fio's buffer_compress_percentage: each 4 KiB chunk is that "
        "percent compressible; there is no mixed-file model beyond that."
    )
    return lines


def resilver_notes(ctx: Context, rows: list[dict[str, Any]]) -> list[str]:
    lines = []
    for r in rows:
        rs = (r.get("guards") or {}).get("resilver")
        if isinstance(rs, dict):
            nbytes = rs.get("resilvered_bytes") or 0
            lines.append(
                f"  {r['config']} (replicate {r['replicate'] + 1}): {nbytes / MiB:.1f} MiB "
                f"resilvered in {rs.get('seconds')} s"
            )
    return (["resilver: bytes and time per trial"] + lines) if lines else []


def fill_notes(ctx: Context, rows: list[dict[str, Any]]) -> list[str]:
    got: dict[str, str] = {}
    for r in rows:
        f = (r.get("guards") or {}).get("fill")
        if isinstance(f, dict) and r["config"] not in got:
            got[r["config"]] = (
                f"asked {f.get('asked_percent')}%, achieved {f.get('achieved_percent')}% "
                f"({(f.get('filler_bytes') or 0) / MiB:.0f} MiB of filler)"
            )
    return (["fill levels reached before measuring:"] + [
        f"  {c}: {t}" for c, t in sorted(got.items())
    ]) if got else []  # fmt: skip


COMMON_OPTIONS = ("replicates", "max_replicates", "workloads", "size", "runtime")

STUDIES: dict[str, Builtin] = {
    b.name: b
    for b in (
        Builtin(
            "parity",
            "How much slower is raidz2 (raidz3) than raidz1 on the same disks?",
            (6, "1G"),
            parity,
            {"widths": "disk counts to compare at (default: all disks), e.g. 4,6"},
        ),
        Builtin(
            "ashift",
            "What do ashift 9, 12 and 13 cost in speed and in usable space (512e drives)?",
            (4, "1G"),
            ashift,
            {"levels": "ashift values, e.g. 9,12,13", "layouts": "layouts, e.g. raidz1,mirror:2"},
            notes=ashift_notes,
        ),
        Builtin(
            "vdev-source",
            "Whole disks vs a partition spanning each disk vs a smaller slice per disk?",
            (3, "1G"),
            vdev_source,
            {
                "levels": "vdev sources: whole,partition,slice",
                "layouts": "layouts, e.g. raidz1",
                "slice_size": "size of the slice per disk (default: half a disk)",
            },
            needs_loop=True,
        ),
        Builtin(
            "mirror",
            "Single disk vs 2-way vs 3-way mirror across application record sizes 64K…8M?",
            (3, "1G"),
            mirror,
            {
                "levels": "mirror widths (1 = a single disk), e.g. 1,2,3",
                "records": "application record sizes, e.g. 64k,1m,8m",
                "tests": f"iozone tests (default all: {','.join(IOZONE_TESTS)})",
            },
        ),
        Builtin(
            "recordsize",
            "Which dataset recordsize suits my application's I/O size?",
            (3, "1G"),
            recordsize,
            {
                "levels": "dataset recordsizes (default: what this ZFS offers)",
                "records": "application I/O sizes, e.g. 4k,64k,1m",
                "layouts": "layouts, e.g. raidz1",
            },
        ),
        Builtin(
            "compression",
            "Does compression help or hurt, on data of a declared compressibility?",
            (3, "1G"),
            compression,
            {
                "levels": "compression algorithms (default: what this ZFS offers)",
                "compressibility": "data compressibility percentages, e.g. 0,50,75",
                "layouts": "layouts, e.g. raidz1",
            },
            notes=compression_notes,
        ),
        Builtin(
            "fs-compare",
            "ZFS raidz/raidz2 vs btrfs raid5/raid6 vs md raid5/raid6 + ext4/xfs?",
            (4, "1G"),
            fs_compare,
            {
                "levels": "generic layouts: parity1 (raidz1/raid5), parity2 (raidz2/raid6)",
                "backends": "stacks, e.g. zfs,btrfs (md is added where the kernel has md)",
                "tarball": f"the source tree to untar (default {DEFAULT_TARBALL})",
            },
            needs_loop=True,
            pre_notes=fs_compare_pre,
        ),
        Builtin(
            "concurrency",
            "Does throughput scale with concurrent streams?",
            (4, "1G"),
            concurrency,
            {"streams": "stream counts, e.g. 1,2,6", "layouts": "layouts, e.g. raidz1"},
        ),
        Builtin(
            "fill",
            "How does throughput fall as the pool fills up to 90%?",
            (4, "1G"),
            fill,
            {"levels": "fill percentages, e.g. 10,50,90", "layouts": "layouts, e.g. raidz1"},
            notes=fill_notes,
        ),
        Builtin(
            "resilver",
            "How slow is a degraded pool, and how long does a resilver take, per layout?",
            (5, "1G"),
            resilver,
            {"layouts": "layouts (one disk is kept as the spare), e.g. mirror:2,raidz1:4"},
            notes=resilver_notes,
        ),
        Builtin(
            "width",
            "raidz widths on and off the 2^n+parity rule, and uneven top-level vdevs?",
            (10, "1G"),
            width,
            {
                "levels": "parities, e.g. 1,2",
                "widths": "raidz widths, e.g. 3,4,5",
                "layouts": "explicit layouts, e.g. raidz2:6+raidz2:4",
            },
            notes=width_notes,
        ),
        Builtin(
            "capacity",
            "How much usable space does each layout × ashift give (no I/O)?",
            (6, "1G"),
            capacity,
            {"levels": "ashift values, e.g. 9,12", "layouts": "layouts, e.g. raidz1,raidz2"},
            notes=capacity_notes,
        ),
    )
}


def get(name: str) -> Builtin:
    if name not in STUDIES:
        raise UsageError(
            f"There is no built-in study '{name}'.",
            f"Run `poolbench study --list`; the studies are {', '.join(STUDIES)}.",
        )
    return STUDIES[name]


def build(name: str, ctx: Context) -> dict[str, Any]:
    b = get(name)
    allowed = set(b.options) | set(COMMON_OPTIONS)
    extra = sorted(set(ctx.options) - allowed)
    if extra:
        raise UsageError(
            f"The {name} study takes no --{extra[0].replace('_', '-')} option.",
            "Its options: " + ", ".join(f"--{k.replace('_', '-')}" for k in sorted(allowed)) + ".",
        )
    return b.build(ctx)


# -- TOML ---------------------------------------------------------------------------------------
def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(name: str, data: dict[str, Any]) -> str:
    """The study as an editable TOML file (what examples/<name>.toml holds)."""
    b = get(name)
    lines = [f"# {b.question}", f"# Built-in study: poolbench study {name} --disks ..."]
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    for k, v in data.items():
        if k not in tables and k != "exclude":
            lines.append(f"{k} = {_value(v)}")
    if "exclude" in data:
        lines.append("exclude = [")
        lines += [f"  {_value(e)}," for e in data["exclude"]]
        lines.append("]")
    for t, v in tables.items():
        lines += ["", f"[{t}]"] + [f"{k} = {_value(x)}" for k, x in v.items()]
    return "\n".join(lines) + "\n"


def example_context(name: str) -> Context:
    """The context examples/<name>.toml is written for: the default disks, OpenZFS, md."""
    count, size = get(name).default_disks
    return Context(count, size, dialect="openzfs", has_md=True)


def example_text(name: str) -> str:
    return to_toml(name, build(name, example_context(name)))
