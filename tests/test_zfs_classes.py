"""Log, cache, spare (and, on OpenZFS, special/dedup) vdevs through the zfs backend: the
`zpool create` argv, the refusal of special on zfs-fuse, and real zfs-fuse pools on loop
devices whose `zpool list` / `zfs list` / `zdb` equal the planner to the byte."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from poolbench.backends import sources
from poolbench.backends.base import PoolSpec
from poolbench.backends.zfs import ZfsBackend
from poolbench.errors import UsageError
from poolbench.planner.capacity import nicenum, plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import V23
from poolbench.safety.journal import Journal
from poolbench.system.runner import CommandResult, LocalRunner, RecordingRunner
from poolbench.zfs import parse

pytestmark = pytest.mark.untimed

MiB = 1 << 20
# Device names no machine has: whether `zpool create` needs -f depends on the members' sizes,
# and /dev/loopN may exist here with any size (another test's loop device).
NO_DEVICE = "/dev/pbcls-none"


def _openzfs() -> RecordingRunner:
    return RecordingRunner(responses={
        ("zpool", "version"): "zfs-2.3.2-1\nzfs-kmod-2.3.2-1\n",
        ("zpool", "list", "-H"): "",
    })  # fmt: skip


def _fuse() -> RecordingRunner:
    return RecordingRunner(responses={
        ("zpool", "version"): CommandResult(("zpool",), 2, "", "unrecognized command", 0),
        ("zpool", "upgrade", "-v"): "This system is currently running ZFS pool version 23.\n",
        ("zpool", "list", "-H"): "",
    })  # fmt: skip


def _spec(layout: str, n: int) -> PoolSpec:
    devices = tuple(f"{NO_DEVICE}{i}" for i in range(n))
    return PoolSpec("zfs", layout, devices, "pbcls", Path("/var/tmp/pb"), {"ashift": "12"})


def test_argv_puts_each_class_word_once_after_the_data_vdevs() -> None:
    b = ZfsBackend(_openzfs())
    spec = _spec("raidz2:6 + log mirror:2 + special mirror:2 + spare 2 + cache 1 + log mirror:2",
                 16)  # fmt: skip
    b.validate(spec)
    d = [f"{NO_DEVICE}{i}" for i in range(16)]
    assert b.create_argv(spec) == [
        "zpool", "create", "-f", "-o", "cachefile=/var/tmp/pb/pbcls.cache", "-o", "ashift=12",
        "-m", "/var/tmp/pb/pbcls", "pbcls",
        "raidz2", *d[0:6],
        "log", "mirror", d[6], d[7], "mirror", d[13], d[14],
        "special", "mirror", d[8], d[9],
        "spare", d[10], d[11],
        "cache", d[12],
    ]  # fmt: skip
    # a mirror with a mirror log and a spare of equal devices needs no -f
    plain = _spec("mirror:2 + log mirror:2 + spare 1", 5)
    assert "-f" not in ZfsBackend(_openzfs()).create_argv(plain)
    assert ZfsBackend(_openzfs()).create_argv(plain)[-9:] == [
        "mirror", d[0], d[1], "log", "mirror", d[2], d[3], "spare", d[4]]  # fmt: skip


def test_zfs_fuse_refuses_special_and_dedup_and_takes_log_cache_spare() -> None:
    for cls in ("special", "dedup"):
        with pytest.raises(UsageError, match=f"has no {cls} vdevs"):
            ZfsBackend(_fuse()).validate(_spec(f"raidz1:3 + {cls} mirror:2", 5))
    ZfsBackend(_fuse()).validate(_spec("raidz1:3 + log mirror:2 + cache 1 + spare 1", 7))
    with pytest.raises(UsageError, match="a spare device is one disk"):
        ZfsBackend(_fuse()).validate(_spec("raidz1:3 + spare mirror:2", 5))


def test_special_small_blocks_needs_a_special_vdev_and_0_is_never_passed() -> None:
    # OpenZFS 2.3.2 refuses the property on a pool without a special vdev, even at 0 (its
    # default): "special_small_blocks property requires a special vdev".
    b = ZfsBackend(_openzfs())
    three = tuple(f"{NO_DEVICE}{i}" for i in range(3))
    alone = PoolSpec("zfs", "raidz1:3", three, "pbcls", Path("/var/tmp/pb"), {"ashift": "12"},
                     {"special_small_blocks": "0"})  # fmt: skip
    b.validate(alone)
    assert not [w for w in b.create_argv(alone) if w.startswith("special_small_blocks")]
    small = PoolSpec("zfs", "raidz1:3", alone.devices, "pbcls", Path("/var/tmp/pb"),
                     {"ashift": "12"}, {"special_small_blocks": "16K"})  # fmt: skip
    with pytest.raises(UsageError, match="refuses it on a pool without a special vdev"):
        b.validate(small)
    with_special = PoolSpec("zfs", "raidz1:3 + special mirror:2",
                            tuple(f"{NO_DEVICE}{i}" for i in range(5)), "pbcls",
                            Path("/var/tmp/pb"), {"ashift": "12"},
                            {"special_small_blocks": "16K"})  # fmt: skip
    b.validate(with_special)
    assert "special_small_blocks=16K" in b.create_argv(with_special)
    for bad in ("24K", "32M"):
        with pytest.raises(UsageError, match="0 or a power of two from 512 to 16M"):
            b.validate(PoolSpec("zfs", "raidz1:3 + special mirror:2", with_special.devices,
                                "pbcls", Path("/var/tmp/pb"), {"ashift": "12"},
                                {"special_small_blocks": bad}))  # fmt: skip


def test_status_sections_name_the_class_leaves() -> None:
    text = """  pool: p
 state: ONLINE
config:

\tNAME        STATE     READ WRITE CKSUM
\tp           ONLINE       0     0     0
\t  mirror-0  ONLINE       0     0     0
\t    loop0   ONLINE       0     0     0
\t    loop1   ONLINE       0     0     0
\tspecial
\t  mirror-1  ONLINE       0     0     0
\t    loop2   ONLINE       0     0     0
\t    loop3   ONLINE       0     0     0
\tlogs
\t  mirror-2  ONLINE       0     0     0
\t    loop4   ONLINE       0     0     0
\t    loop5   ONLINE       0     0     0
\tcache
\t  loop6     ONLINE       0     0     0
\tspares
\t  loop7     AVAIL

errors: No known data errors
"""
    s = parse.read_status(text, "p")
    assert [(t.kind, t.leaves) for t in s.tops] == [("mirror", ("loop0", "loop1"))]
    assert s.class_leaves == {"special": ["loop2", "loop3"], "logs": ["loop4", "loop5"],
                              "cache": ["loop6"], "spares": ["loop7"]}  # fmt: skip


# --- real zfs-fuse pools on loop devices -------------------------------------------------------

# (layout with sizes for the planner, the same with widths for the backend)
REAL_CASES = [
    ("mirror:2x256M + log 128M + cache 128M + spare 256M", "mirror:2 + log 1 + cache 1 + spare 1"),
    ("raidz1:3x192M + log mirror:2x96M + spare 192M", "raidz1:3 + log mirror:2 + spare 1"),
]


@pytest.fixture
def lab(zfs_fuse: None) -> Iterator[tuple[LocalRunner, Journal, Path]]:
    base = Path(tempfile.mkdtemp(prefix="pbcls-zfs-", dir="/var/tmp"))
    runner = LocalRunner()
    journal = Journal(runner)
    try:
        yield runner, journal, base
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
        assert left == []
        assert not [ln for ln in runner.run(["losetup", "-a"], mutates=False).stdout.splitlines()
                    if str(base) in ln]  # fmt: skip


@pytest.mark.parametrize(("sized", "widths"), REAL_CASES)
def test_zfs_fuse_pool_with_classes_is_the_plan(
    lab: tuple[LocalRunner, Journal, Path], sized: str, widths: str
) -> None:
    runner, journal, base = lab
    layout = parse_layout(sized)
    plan = plan_pool(layout, 12, V23)
    sizes = [d for v in layout.vdevs for d in v.devices]
    sizes += [d for c in layout.classes for d in c.vdev.devices]
    devices = sources.provide(runner, journal, source="loop", scratch=base / "disks",
                              sizes=sizes).devices  # fmt: skip
    backend = ZfsBackend(runner)
    spec = PoolSpec("zfs", widths, tuple(devices), f"pbcls{REAL_CASES.index((sized, widths))}",
                    base, {"ashift": "12"})  # fmt: skip
    pool = backend.create(spec, journal)
    assert backend.verify(pool) == []
    d = pool.described
    assert d["usable_bytes"] == plan.usable_bytes
    size_h = runner.run(["zpool", "list", "-H", "-o", "size", spec.name], mutates=False).stdout
    assert size_h.strip() == nicenum(plan.size_bytes)
    # the pool is in its own cache file only, never the system's (a boot would import it)
    own = ["-U", str(backend.cache_file(spec))]
    assert runner.run(["zdb", "-C", spec.name], check=False, mutates=False).returncode != 0
    zdb_c = runner.run(["zdb", *own, "-C", spec.name], mutates=False).stdout
    asizes = [int(x) for x in re.findall(r"^\s*asize: (\d+)$", zdb_c, re.M)]
    shifts = [int(x) for x in re.findall(r"^\s*metaslab_shift: (\d+)$", zdb_c, re.M)]
    tops = [*plan.vdevs, *(c.plan for c in plan.classes if c.plan)]
    assert list(zip(asizes, shifts, strict=True)) == [(v.asize, v.ms_shift) for v in tops]
    zdb_m = runner.run(["zdb", *own, "-m", spec.name], mutates=False).stdout
    counts = [int(x) for x in re.findall(r"^\s*metaslabs\s+(\d+)\s+offset", zdb_m, re.M)]
    assert counts == [v.ms_count for v in tops]
    # SIZE = the data vdevs' whole metaslabs; the log's are not in it (spa_prop_get_config)
    assert sum(c << s for c, s in list(zip(counts, shifts, strict=True))[: len(plan.vdevs)]) == (
        plan.size_bytes
    )
    # export + import from the pool's link directory brings back the log, cache and spare
    assert backend.drop_cache(pool)["verified"]
    assert backend.verify(pool) == []
    classes = {k: len(v) for k, v in pool.described["class_leaves"].items()}
    want = {"logs": len(layout.of_class("log")[0].devices) if "log mirror" in sized else 1}
    want |= {"spares": 1} | ({"cache": 1} if "cache" in sized else {})
    assert classes == want
    # ... and into its own cache file again, not the system's
    assert runner.run(["zdb", "-C"], check=False, mutates=False).stdout.count(spec.name) == 0
    assert spec.name in runner.run(["zdb", *own, "-C"], mutates=False).stdout
    backend.destroy(pool, journal)
