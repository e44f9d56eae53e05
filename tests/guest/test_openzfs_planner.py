"""The planner's OpenZFS 2.x rule set against real OpenZFS pools, to the byte (guest tier).

Runs only in the QEMU guest of ``vm/run-openzfs-tier.sh`` (real OpenZFS 2.3 kernel module).
Each case creates a pool, then compares with `poolbench.planner`:

- ``size_bytes`` with ``zpool list -Hp -o size`` (OpenZFS has ``-p``: exact bytes);
- ``usable_bytes`` with USED + AVAIL of the root dataset (``zfs get -Hp used,available``);
- each top-level vdev's ``asize`` and metaslab shift with ``zdb -C``, and (only to explain a
  mismatch) the metaslab counts with ``zdb -m``.

File vdevs are sparse files under a fresh directory on the guest's root filesystem, so
multi-TiB members cost nothing and exercise the large-vdev rules: the metaslab shift cap
(34), the embedded log metaslab of vdevs with more than 64 metaslabs, and the 128 GiB slop cap
(dspace over 4 TiB: raidz2:8x2T). Whole-disk cases use the guest's scratch disks
(``OZVM_DISKS``) through ``zpool create`` on ``/dev/vdX``, which partitions them; the planner
gets each disk's real size.

Vdev classes (log, special, dedup, spare, cache) are checked the same way, and RAIDZ
expansion: a raidz pool of files grown with `zpool attach -w` against
`poolbench.planner.expansion`, then a file written after the expansion against the charge
per 128 KiB record the planner says `zfs list` makes (the original width's deflate ratio).

Every comparison is also written to ``$OZVM_OUT/planner-openzfs.jsonl`` (seen by the host).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from poolbench.planner.capacity import PoolPlan, VdevPlan, plan_pool
from poolbench.planner.expansion import plan_expansion
from poolbench.planner.layout import Layout, VdevSpec, parse_layout
from poolbench.planner.rules import RuleSet, parse_zfs_version

pytestmark = pytest.mark.openzfs


@dataclass(frozen=True)
class Case:
    layout: str  # planner grammar; for whole disks, sizes are replaced by the real disks'
    ashift: int


# File-vdev cases: stripes, mirrors (2/3/4-way, mixed sizes), raidz1/2/3 at several widths
# and mixed member sizes, two and three top-level vdevs, dRAID; from the 64 MiB minimum to
# multi-TiB sparse members (metaslab shift 24 … 34, embedded log metaslab); ashift 9, 12, 13.
FILE_CASES: tuple[Case, ...] = (
    Case("stripe:64M", 9),
    Case("stripe:100M", 12),
    Case("stripe:1G", 9),
    Case("stripe:1G", 13),
    Case("stripe:1x3145728777", 12),  # 3 GiB + 777 bytes: not a 256 KiB multiple
    Case("stripe:3x1G", 9),
    Case("stripe:2x1G,2G", 12),
    Case("stripe:40G", 12),  # 79 metaslabs: one becomes the embedded log metaslab
    Case("stripe:4T", 12),  # metaslab shift capped at 34
    Case("mirror:2x1G", 9),
    Case("mirror:2x1G", 12),
    Case("mirror:3x512M", 13),
    Case("mirror:1G,1536M", 12),
    Case("mirror:4x5G", 9),
    Case("mirror:2x100G", 12),
    Case("raidz1:3x1G", 9),
    Case("raidz1:3x1G", 12),
    Case("raidz1:3x1G", 13),
    Case("raidz1:4x1G", 12),
    Case("raidz1:5x2G", 9),
    Case("raidz1:2x1G,1536M", 12),
    Case("raidz1:9x3G", 13),
    Case("raidz2:4x1G", 9),
    Case("raidz2:5x700M", 12),
    Case("raidz2:6x1G", 12),
    Case("raidz2:6x16G", 13),
    Case("raidz2:10x2G", 9),
    Case("raidz2:8x2T", 12),
    Case("raidz3:5x1G", 13),
    Case("raidz3:8x1G", 12),
    Case("raidz3:11x2G", 9),
    Case("raidz3:6x1G,1200M", 12),
    Case("raidz1:3x1G + raidz1:3x1G", 12),
    Case("mirror:2x1G + mirror:2x2G", 9),
    Case("raidz2:6x1G + mirror:2x1G", 12),
    Case("stripe:1G + mirror:2x2G", 13),
    Case("raidz1:3x2G + raidz2:5x1G", 9),
    Case("raidz3:7x3G + raidz1:4x1500M", 12),
    Case("mirror:2x1G + mirror:2x1G + mirror:2x1G", 12),
    Case("raidz1:3x50G + raidz1:3x50G", 12),  # embedded log metaslab in each vdev
    Case("draid1:2d:0s:5x1G", 12),
    Case("draid2:3d:1s:8x2G", 12),
    Case("draid1:4d:1s:11x3G", 9),
)

# Whole-disk cases: DEVICES are indices into $OZVM_DISKS (d0 = the first scratch disk); the
# planner is given the disks' real sizes. vm/run-openzfs-tier.sh gives 8 disks: 6 of 2 GiB,
# one of 3 GiB and one of 5 GiB, so d6/d7 make mixed sizes.
WHOLE_DISK_CASES: tuple[tuple[str, int], ...] = (
    ("stripe:d0", 9),
    ("stripe:d0", 12),
    ("stripe:d7", 13),
    ("stripe:d0,d6,d7", 12),
    ("mirror:d0,d1", 12),
    ("mirror:d0,d6", 9),  # mixed sizes: the smaller one counts
    ("raidz1:d0,d1,d2", 12),
    ("raidz1:d0,d1,d2", 9),
    ("raidz2:d0,d1,d2,d3,d4,d5", 12),
    ("raidz3:d0,d1,d2,d3,d6,d7", 13),
    ("raidz1:d0,d1,d2 + mirror:d6,d7", 12),
)


def sh(*argv: str) -> str:
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


def kmod_version() -> str:
    return Path("/sys/module/zfs/version").read_text().strip()


@pytest.fixture(scope="module")
def rules() -> RuleSet:
    if not Path("/dev/zfs").exists():
        pytest.fail("the guest has no /dev/zfs: the zfs module did not load")
    version = kmod_version()  # e.g. 2.3.2-1~bpo12+1
    assert re.match(r"^2\.\d+", version), f"expected OpenZFS 2.x in the guest, got {version}"
    return parse_zfs_version(version.split("-")[0])


@pytest.fixture()
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pb-oz-planner-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def guest_disks() -> list[str]:
    return os.environ.get("OZVM_DISKS", "").split()


def disk_bytes(dev: str) -> int:
    return int(sh("blockdev", "--getsize64", dev).strip())


def vdev_args(layout: Layout, members: list[str]) -> list[str]:
    """`zpool create` vdev arguments for the layout, members in layout order; class vdevs
    after the data vdevs, each class word once (zpool refuses a second 'log')."""
    args: list[str] = []
    i = 0
    placed: list[tuple[str, VdevSpec, list[str]]] = []
    for cls, v in [("", v) for v in layout.vdevs] + [(c.cls, c.vdev) for c in layout.classes]:
        placed.append((cls, v, members[i : i + v.width]))
        i += v.width
    for cls in ["", *dict.fromkeys(c for c, _, _ in placed if c)]:
        if cls:
            args.append(cls)
        for _, v, group in (p for p in placed if p[0] == cls):
            args += _vdev_words(v, group)
    return args


def _vdev_words(v: VdevSpec, group: list[str]) -> list[str]:
    if v.kind == "disk":
        return group
    if v.kind == "mirror":
        return ["mirror", *group]
    if v.kind == "raidz":
        return [f"raidz{v.parity}", *group]
    return [f"draid{v.parity}:{v.draid_data}d:{v.width}c:{v.draid_spares}s", *group]


def top_plans(plan: PoolPlan) -> list[VdevPlan]:
    """The top-level vdevs zdb -C lists, in `vdev_args` order: data, then log/special/dedup
    grouped by class (spares and cache devices are no top-level vdevs)."""
    classes = list(dict.fromkeys(c.cls for c in plan.classes))
    extra = [c.plan for cls in classes for c in plan.classes if c.cls == cls and c.plan]
    return [*plan.vdevs, *extra]


def parse_zdb_config(text: str) -> list[tuple[int, int]]:
    """(asize, metaslab_shift) of each top-level vdev, in order, from `zdb -C`."""
    shifts = [int(x) for x in re.findall(r"^\s*metaslab_shift: (\d+)$", text, re.M)]
    asizes = [int(x) for x in re.findall(r"^\s*asize: (\d+)$", text, re.M)]
    return list(zip(asizes, shifts, strict=False))


def parse_zdb_metaslab_counts(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"^\s*metaslabs\s+(\d+)\s+offset", text, re.M)]


@dataclass
class Observed:
    size: int
    usable: int
    used: int
    vdevs: list[tuple[int, int]]  # (asize, metaslab_shift) per top-level vdev
    ms_counts: list[int] | None = None


def build_and_read(pool: str, ashift: int, members: list[str], plan: PoolPlan) -> Observed:
    layout = plan.layout
    sh("zpool", "create", "-f", "-m", "none", "-o", f"ashift={ashift}", pool,
       *vdev_args(layout, members))  # fmt: skip
    try:
        size = int(sh("zpool", "list", "-Hp", "-o", "size", pool).strip())
        props = sh("zfs", "get", "-Hp", "-o", "property,value", "used,available", pool)
        values = {k: int(v) for k, v in (line.split("\t") for line in props.splitlines())}
        config = parse_zdb_config(sh("zdb", "-C", pool))
        obs = Observed(size, values["used"] + values["available"], values["used"], config)
        if obs.size != plan.size_bytes or [a for a, _ in config] != [
            v.asize for v in top_plans(plan)
        ]:
            # only to explain a mismatch: zdb -m imports the pool in user space (slow in TCG)
            obs.ms_counts = parse_zdb_metaslab_counts(sh("zdb", "-m", pool))
        return obs
    finally:
        sh("zpool", "destroy", "-f", pool)


def compare(label: str, plan: PoolPlan, obs: Observed) -> list[str]:
    problems: list[str] = []
    if obs.size != plan.size_bytes:
        problems.append(
            f"zpool SIZE {obs.size} != planned {plan.size_bytes} "
            f"(diff {obs.size - plan.size_bytes:+d})"
        )
    if obs.usable != plan.usable_bytes:
        problems.append(
            f"USED+AVAIL {obs.usable} != planned {plan.usable_bytes} "
            f"(diff {obs.usable - plan.usable_bytes:+d}; planned slop {plan.slop_bytes}, "
            f"dspace {plan.dspace})"
        )
    tops = top_plans(plan)
    want = [(v.asize, v.ms_shift) for v in tops]
    if obs.vdevs != want:
        problems.append(f"zdb (asize, metaslab_shift) {obs.vdevs} != planned {want}")
    if obs.ms_counts is not None and obs.ms_counts != [v.ms_count for v in tops]:
        problems.append(
            f"zdb -m metaslab counts {obs.ms_counts} != planned {[v.ms_count for v in tops]}"
        )
    record(label, plan, obs, problems)
    return problems


def record(label: str, plan: PoolPlan, obs: Observed, problems: list[str]) -> None:
    out = os.environ.get("OZVM_OUT")
    if not out:
        return
    row = {
        "case": label,
        "zfs": kmod_version(),
        "size": obs.size,
        "planned_size": plan.size_bytes,
        "usable": obs.usable,
        "planned_usable": plan.usable_bytes,
        "used": obs.used,
        "vdevs": obs.vdevs,
        "planned_vdevs": [(v.asize, v.ms_shift) for v in top_plans(plan)],
        "ms_counts": obs.ms_counts,
        "planned_ms_counts": [v.ms_count for v in top_plans(plan)],
        "match": not problems,
        "problems": problems,
    }
    with open(os.path.join(out, "planner-openzfs.jsonl"), "a") as fh:
        fh.write(json.dumps(row) + "\n")


def test_case_lists_are_broad() -> None:
    cases = [parse_layout(c.layout) for c in FILE_CASES]
    assert len(FILE_CASES) + len(WHOLE_DISK_CASES) >= 20
    assert {c.ashift for c in FILE_CASES} == {9, 12, 13}
    kinds = {(v.kind, v.parity) for layout in cases for v in layout.vdevs}
    assert {("disk", 0), ("mirror", 0), ("raidz", 1), ("raidz", 2), ("raidz", 3)} <= kinds


@pytest.mark.parametrize("case", FILE_CASES, ids=lambda c: f"{c.layout}@ashift{c.ashift}")
def test_file_vdev_pool_matches_plan(case: Case, rules: RuleSet, workdir: Path) -> None:
    check_files(case, f"pbozp{FILE_CASES.index(case):02d}", rules, workdir)


# Class vdevs on files: special and dedup count in SIZE but not in AVAIL; a log counts in
# neither; a spare or cache device in nothing. Large members put more than 64 metaslabs in
# special/log vdevs (no embedded log metaslab: only the normal class gives one).
CLASS_CASES: tuple[Case, ...] = (
    Case("raidz2:6x1G + special mirror:2x512M", 12),
    Case("raidz2:6x4T + special mirror:2x500G", 12),
    Case("mirror:2x40G + special mirror:2x40G", 12),
    Case("raidz1:3x1G + log mirror:2x256M", 9),
    Case("raidz2:6x16G + log 1x40G", 12),
    Case("mirror:2x1G + spare 1x1G", 12),
    Case("raidz1:4x1G + cache 1x1G", 12),
    Case("raidz1:3x2G + dedup mirror:2x1G", 12),
    Case("mirror:2x100G + special mirror:2x1G + log mirror:2x1G + cache 1G + spare 2x100G", 12),
)


@pytest.mark.parametrize("case", CLASS_CASES, ids=lambda c: f"{c.layout}@ashift{c.ashift}")
def test_class_vdev_pool_matches_plan(case: Case, rules: RuleSet, workdir: Path) -> None:
    check_files(case, f"pbozc{CLASS_CASES.index(case):02d}", rules, workdir)


def check_files(case: Case, pool: str, rules: RuleSet, workdir: Path) -> None:
    layout = parse_layout(case.layout)
    plan = plan_pool(layout, case.ashift, rules)
    files = make_files(workdir, [d for v in all_vdevs(layout) for d in v.devices])
    label = f"{case.layout} @ashift {case.ashift} (files)"
    obs = build_and_read(pool, case.ashift, files, plan)
    problems = compare(label, plan, obs)
    assert not problems, f"{label}: " + "; ".join(problems)


def make_files(workdir: Path, sizes: list[int], first: int = 0) -> list[str]:
    files: list[str] = []
    for n, size in enumerate(sizes, start=first):
        path = workdir / f"d{n:02d}"
        with open(path, "wb") as fh:
            fh.truncate(size)  # sparse
        files.append(str(path))
    return files


# RAIDZ expansion: (layout, width after, ashift). raidz1:3x10G has 59 metaslabs before and
# 79 after: the expansion makes an embedded log metaslab of a new one.
EXPANSION_CASES: tuple[tuple[str, int, int], ...] = (
    ("raidz1:3x1G", 4, 12),
    ("raidz2:6x1G", 8, 12),
    ("raidz1:3x10G", 4, 12),
    ("raidz2:5x4T", 6, 12),
)


@pytest.mark.parametrize(
    ("text", "width", "ashift"), EXPANSION_CASES, ids=[f"{t}->{w}" for t, w, _ in EXPANSION_CASES]
)
def test_raidz_expansion_matches_plan(
    text: str, width: int, ashift: int, rules: RuleSet, workdir: Path
) -> None:
    layout = parse_layout(text)
    spec = layout.vdevs[0]
    exp = plan_expansion(plan_pool(layout, ashift, rules), width)
    files = make_files(workdir, list(spec.devices))
    added = make_files(workdir, [spec.devices[0]] * (width - spec.width), first=len(files))
    pool = f"pboze{EXPANSION_CASES.index((text, width, ashift)):02d}"
    mnt = workdir / "mnt"
    sh("zpool", "create", "-f", "-m", str(mnt), "-o", f"ashift={ashift}", "-O",
       "compression=off", "-O", "recordsize=128K", pool, f"raidz{spec.parity}", *files)  # fmt: skip
    try:
        for f in added:
            sh("zpool", "attach", "-w", pool, f"raidz{spec.parity}-0", f)
        # `attach -w` returns when the reflow is done; the new metaslabs (SIZE) arrive in a
        # later txg: read before a sync, SIZE is still the old width's (seen in 2.3.2).
        sh("zpool", "sync", pool)
        sh("zpool", "sync", pool)
        # (no zdb here: right after an expansion zdb's user-space import of the live pool
        # fails with EIO and an assertion in 2.3; SIZE is the metaslab sum anyway)
        size = int(sh("zpool", "list", "-Hp", "-o", "size", pool).strip())
        used0, usable = used_and_usable(pool)
        # 64 MiB of incompressible 128 KiB records written after the expansion
        sh("dd", "if=/dev/urandom", f"of={mnt}/f", "bs=1M", "count=64", "conv=fsync", "status=none")
        sh("zpool", "sync", pool)
        used1, _ = used_and_usable(pool)
    finally:
        sh("zpool", "destroy", "-f", pool)
    label = f"{text} expanded to {width} @ashift {ashift}"
    assert size == exp.size_bytes, f"{label}: SIZE {size} != {exp.size_bytes}"
    assert usable == exp.usable_bytes, f"{label}: USED+AVAIL {usable} != {exp.usable_bytes}"
    # `zfs list` charges each new record at the old width's ratio: record_charge_new, not
    # 128 KiB (and not record_charge_old); 2% leaves room for the indirect blocks.
    want = 512 * exp.record_charge_new
    assert exp.record_charge_new < exp.record_charge_old and want < 0.97 * (64 << 20)
    assert abs((used1 - used0) - want) < 0.02 * want, (label, used1 - used0, want)


def used_and_usable(pool: str) -> tuple[int, int]:
    props = sh("zfs", "get", "-Hp", "-o", "property,value", "used,available", pool)
    values = {k: int(v) for k, v in (line.split("\t") for line in props.splitlines())}
    return values["used"], values["used"] + values["available"]


def all_vdevs(layout: Layout) -> list[VdevSpec]:
    return [*layout.vdevs, *(c.vdev for c in layout.classes)]


def _whole_disk_layout(spec: str, disks: list[str]) -> tuple[Layout, list[str]]:
    """``raidz1:d0,d1,d2 + mirror:d6,d7`` → a Layout with the disks' real sizes, members."""
    text_parts: list[str] = []
    members: list[str] = []
    for part in spec.split("+"):
        head, devs = part.strip().split(":", 1)
        idx = [int(d.strip().removeprefix("d")) for d in devs.split(",")]
        if max(idx) >= len(disks):
            pytest.skip(f"needs {max(idx) + 1} scratch disks, the guest has {len(disks)}")
        members += [disks[i] for i in idx]
        sizes = [str(disk_bytes(disks[i])) for i in idx]
        # one member is "1xN": a bare "stripe:N" is N disks in the layout grammar
        text_parts.append(f"{head}:" + (f"1x{sizes[0]}" if len(sizes) == 1 else ",".join(sizes)))
    return parse_layout(" + ".join(text_parts)), members


def _wipe(devices: list[str]) -> None:
    for dev in devices:
        subprocess.run(["wipefs", "-a", "-q", dev], capture_output=True)
    subprocess.run(["udevadm", "settle"], capture_output=True)


@pytest.mark.parametrize(
    ("spec", "ashift"), WHOLE_DISK_CASES, ids=[f"{s}@ashift{a}" for s, a in WHOLE_DISK_CASES]
)
def test_whole_disk_pool_matches_plan(spec: str, ashift: int, rules: RuleSet) -> None:
    layout, members = _whole_disk_layout(spec, guest_disks())
    plan = plan_pool(layout, ashift, rules, whole_disk=True)
    label = f"{spec} = {layout.spec()} @ashift {ashift} (--whole-disk)"
    _wipe(members)
    try:
        obs = build_and_read(f"pbozw{WHOLE_DISK_CASES.index((spec, ashift)):02d}", ashift,
                             members, plan)  # fmt: skip
    finally:
        _wipe(members)
    problems = compare(label, plan, obs)
    assert not problems, f"{label}: " + "; ".join(problems)


@pytest.mark.parametrize(
    ("layout_text", "ashift", "whole_disk"),
    [("raidz2:6x4T", 12, False), ("mirror:2x4TB + raidz1:3x1G,2x1536M", 9, False),
     ("raidz1:3x2G", 12, True)],
)  # fmt: skip
def test_cli_plan_json_is_the_planner(
    layout_text: str, ashift: int, whole_disk: bool, rules: RuleSet
) -> None:
    """`poolbench plan --layout … --zfs-version 2.3 --json` is what the tests above check."""
    argv = [sys.executable, "-m", "poolbench", "plan", "--layout", layout_text,
            "--ashift", str(ashift), "--zfs-version", "2.3", "--json"]  # fmt: skip
    if whole_disk:
        argv.append("--whole-disk")
    data = json.loads(sh(*argv))
    plan = plan_pool(parse_layout(layout_text), ashift, rules, whole_disk=whole_disk)
    assert (data["size_bytes"], data["usable_bytes"]) == (plan.size_bytes, plan.usable_bytes)
