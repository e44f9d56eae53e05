"""The ZFS backend on real zfs-fuse pools (sparse files and loop devices), and its parsing and
command lines for both dialects through a recording runner.

Every pool is named pbbk*, built under /var/tmp/pbbk-zfs-*, and removed through the journal in
a finally block; each test checks that no pool, mount, loop device or file of it remains.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from poolbench.backends import sources
from poolbench.backends.base import Pool, PoolSpec, parse_topology
from poolbench.backends.zfs import ZfsBackend, expected_shape
from poolbench.errors import UsageError
from poolbench.guards import cache
from poolbench.safety.inventory import scan
from poolbench.safety.journal import Journal
from poolbench.system.runner import CommandResult, LocalRunner, RecordingRunner
from poolbench.workloads import fio, fiojob, library
from poolbench.zfs.label import read_labels
from poolbench.zfs.parse import parse_status, parse_zdb_ashift

pytestmark = pytest.mark.untimed

MiB = 1 << 20


def sh(*argv: str) -> str:
    return subprocess.run(list(argv), capture_output=True, text=True).stdout


def pools() -> list[str]:
    return [p for p in sh("zpool", "list", "-H", "-o", "name").split() if p.startswith("pbbk")]


@dataclass
class Lab:
    runner: LocalRunner
    journal: Journal
    base: Path
    backend: ZfsBackend

    def spec(self, layout: str, devices: list[str], pool_options: dict[str, str] | None = None,
             **fs: str) -> PoolSpec:  # fmt: skip
        name = f"pbbk{uuid.uuid4().hex[:8]}"
        return PoolSpec("zfs", layout, tuple(devices), name, self.base, pool_options or {}, fs)

    def disks(self, n: int, source: str = "files", size: int = 128 * MiB) -> list[str]:
        return sources.provide(self.runner, self.journal, source=source,
                               scratch=self.base / "disks", sizes=[size] * n).devices  # fmt: skip


@pytest.fixture
def lab(zfs_fuse: None) -> Iterator[Lab]:
    base = Path(tempfile.mkdtemp(prefix="pbbk-zfs-", dir="/var/tmp"))
    runner = LocalRunner()
    journal = Journal(runner)
    try:
        yield Lab(runner, journal, base, ZfsBackend(runner))
    finally:
        left = journal.teardown()
        shutil.rmtree(base, ignore_errors=True)
        assert left == []
        assert not [line for line in sh("losetup", "-a").splitlines() if str(base) in line]
        assert str(base) not in Path("/proc/self/mountinfo").read_text()


def short_fio(runner: LocalRunner, pool: Pool, backend: ZfsBackend) -> None:
    """A 16 MiB durable write, a cold cache, a read of it: real I/O through the pool."""
    params = fiojob.JobParams(directory=str(pool.mountpoint), size_bytes=16 * MiB)
    job = pool.spec.mount_root / f"{pool.spec.name}.fio"
    w = fio.run_job(runner, fiojob.render(library.streaming("write"), params), job, "write")
    assert w.io_bytes == 16 * MiB
    drop = backend.drop_cache(pool)
    # The ARC decides: its data once the pool is exported (zfs-fuse's /zfs-kstat counters);
    # data of other imported pools can leave it undecided, then the read's counters decide.
    assert drop["verified"] is not False, drop
    if cache.read_arcstats(cache.FUSE_ARCSTATS) is None:
        assert drop["verified"] is None and drop["arc"] == cache.UNOBSERVABLE, drop
    elif drop["verified"] is None:
        assert "other imported pool" in drop["arc"], drop
    else:
        assert drop["arc_data_bytes_exported"] <= cache.ARC_EMPTY_SLACK, drop
    assert drop["exported"] and drop["imported_guid"] == pool.described["guid"]
    r = fio.run_job(runner, fiojob.render(library.streaming("read"), params), job, "read")
    assert r.io_bytes == 16 * MiB and r.bw_bytes > 0
    job.unlink()


CASES = [
    # layout, disks, source, ashift, dataset properties
    ("stripe", 2, "files", "9", {}),
    ("mirror", 2, "loop", "12", {"recordsize": "64K"}),
    ("raidz1", 3, "files", "12", {"compression": "gzip", "atime": "off"}),
    ("raidz2", 4, "loop", "9", {"primarycache": "metadata"}),
    (
        "raidz3",
        4,
        "files",
        "12",
        {"recordsize": "16K", "compression": "lzjb", "logbias": "throughput"},
    ),
    ("raidz1:3+raidz1:3", 6, "loop", "12", {}),
    ("raidz1:3+mirror:2", 5, "files", "9", {"compression": "zle"}),  # uneven top-level vdevs
]


@pytest.mark.parametrize(("layout", "n", "source", "ashift", "props"), CASES)
def test_pool_is_built_verified_measured_and_destroyed(
    lab: Lab, layout: str, n: int, source: str, ashift: str, props: dict[str, str]
) -> None:
    devices = lab.disks(n, source)
    spec = lab.spec(layout, devices, {"ashift": ashift}, **props)
    pool = lab.backend.create(spec, lab.journal)
    assert lab.backend.verify(pool) == []
    d = pool.described
    assert d["dialect"] == "zfs-fuse" and d["pool_version"] == "23"
    want = expected_shape(parse_topology(layout, n))
    assert [(t["kind"], t["width"]) for t in d["topology"]] == want
    assert d["vdev_ashift"] == [int(ashift)] * len(want)
    for key, value in props.items():
        got = d["properties"][key]["value"]
        assert got == (str(int(value[:-1]) * 1024) if key == "recordsize" else value)
    if source == "loop":
        assert sorted(pool.block_devices) == sorted(os.path.basename(x) for x in devices)
    else:
        assert pool.block_devices == []
    short_fio(lab.runner, pool, lab.backend)
    assert lab.backend.verify(pool) == []  # the import brought back the same pool
    lab.backend.destroy(pool, lab.journal)
    assert spec.name not in pools()
    assert not pool.mountpoint.exists()
    assert not any(e.get("name") == spec.name for e in lab.journal.entries)


def test_a_silently_different_ashift_and_property_are_reported(lab: Lab) -> None:
    devices = lab.disks(2)
    made = lab.backend.create(lab.spec("mirror", devices, {"ashift": "9"}), lab.journal)
    asked = PoolSpec("zfs", "raidz1", made.spec.devices, made.spec.name, lab.base,
                     {"ashift": "12"}, {"recordsize": "32K"})  # fmt: skip
    problems = lab.backend.verify(Pool(asked, made.mountpoint, [], made.described))
    text = "\n".join(problems)
    assert "top-level vdev 0 has ashift 9, not 12 as asked" in text
    assert "(512-byte instead of 4096-byte blocks)" in text
    assert "layout is mirror:2, not raidz1:2 as asked" in text
    assert "recordsize is 131072, not 32K as asked" in text
    lab.backend.destroy(made, lab.journal)


def test_a_crash_during_the_cache_drop_is_cleaned_up_from_the_member_links(lab: Lab) -> None:
    pool = lab.backend.create(lab.spec("stripe", lab.disks(1)), lab.journal)
    subprocess.run(["zpool", "export", pool.spec.name], check=True)  # ... and poolbench dies
    assert pool.spec.name not in pools()
    assert lab.journal.teardown() == []
    assert pool.spec.name not in pools()


def test_pool_intent_destroys_only_a_pool_on_exactly_its_members(lab: Lab) -> None:
    a, b = lab.disks(2)
    name = f"pbbk{uuid.uuid4().hex[:8]}"
    mine = Journal(lab.runner)
    mine.pool_intent(name, [a])  # recorded, then poolbench died after `zpool create`
    other = Journal(lab.runner)
    other.pool_intent(name, [b])  # an intent for other members: not this pool
    subprocess.run(["zpool", "create", "-m", "none", name, a], check=True)
    try:
        (note,) = other.teardown()
        assert "never destroyed" in note and name in pools()
        assert mine.teardown() == []
        assert name not in pools()
    finally:
        subprocess.run(["zpool", "destroy", name], capture_output=True)


def test_impossible_or_unsupported_specs_are_refused_before_anything_exists(lab: Lab) -> None:
    files = [str(lab.base / f"never{i}") for i in range(7)]
    refused = {
        "raidz3 of 3 disks is impossible": lab.spec("raidz3", files[:3]),
        "dRAID needs OpenZFS 2.1": lab.spec("draid1:2d:1s", files[:4]),
        "must be a power of two from 512 to 128K": lab.spec("stripe", files[:1], recordsize="1M"),
        "power of two": lab.spec("stripe", files[:1], recordsize="96K"),
        "It offers: on, off, lzjb, gzip": lab.spec("stripe", files[:1], compression="lz4"),
        "has no 'sync' property": lab.spec("stripe", files[:1], sync="disabled"),
        "has no 'special_small_blocks' property": lab.spec(
            "stripe", files[:1], special_small_blocks="16K"
        ),
        "ashift=14 is not possible": lab.spec("stripe", files[:1], {"ashift": "14"}),
        "Unknown ZFS dataset property 'dedup'": lab.spec("stripe", files[:1], dedup="on"),
    }
    for message, spec in refused.items():
        with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
            lab.backend.create(spec, lab.journal)
    dup = lab.spec("mirror", [files[0], files[0]])
    with pytest.raises(UsageError, match="given twice"):
        lab.backend.validate(dup)
    assert lab.journal.entries == [] and pools() == [] and sorted(os.listdir(lab.base)) == []


# --- without root: parsing and command lines ---------------------------------------------

OPENZFS_STATUS = """\
  pool: tank
 state: ONLINE
config:

\tNAME                  STATE     READ WRITE CKSUM
\ttank                  ONLINE       0     0     0
\t  draid2:4d:7c:1s-0   ONLINE       0     0     0
\t    /dev/loop0p1      ONLINE       0     0     0
\t    /dev/loop1p1      ONLINE       0     0     0
\t    /dev/loop2p1      ONLINE       0     0     0
\t    /dev/loop3p1      ONLINE       0     0     0
\t    /dev/loop4p1      ONLINE       0     0     0
\t    /dev/loop5p1      ONLINE       0     0     0
\t    /dev/loop6p1      ONLINE       0     0     0
\t  loop7               ONLINE       0     0     0
\tlogs
\t  loop8               ONLINE       0     0     0
\tspares
\t  draid2-0-0          AVAIL

errors: No known data errors
"""


def test_parse_status_reads_draid_stripe_members_and_skips_logs_and_spares() -> None:
    tops, health = parse_status(OPENZFS_STATUS, "tank")
    assert health == "ONLINE"
    assert [(t.kind, t.width) for t in tops] == [("draid2:4d:7c:1s", 7), ("stripe", 1)]
    assert expected_shape(parse_topology("draid2:4d:1s:7+stripe:1", 8)) == [
        ("draid2:4d:7c:1s", 7),
        ("stripe", 1),
    ]


def test_parse_zdb_ashift_takes_one_per_top_level_vdev() -> None:
    text = "vdev_tree:\n  children[0]:\n    ashift: 12\n  children[1]:\n    ashift: 9\n"
    assert parse_zdb_ashift(text) == [12, 9]


def _openzfs(version: str = "zfs-2.2.3-1") -> RecordingRunner:
    return RecordingRunner(responses={
        ("zpool", "version"): f"{version}\nzfs-kmod-{version[4:]}\n",
        ("zpool", "list", "-H"): "",
    })  # fmt: skip


def test_dialects_are_detected_and_openzfs_command_lines_use_its_options() -> None:
    b = ZfsBackend(_openzfs())
    a = b.check()
    assert (a.ok, a.dialect, a.version) == (True, "openzfs", "zfs-2.2.3-1")
    spec = PoolSpec("zfs", "raidz1:3+raidz1:4", tuple(f"/dev/loop{i}" for i in range(7)),
                    "pbbkx", Path("/var/tmp/pb"), {"ashift": "12"},
                    {"recordsize": "1M", "compression": "zstd-3", "sync": "disabled"})  # fmt: skip
    b.validate(spec)
    assert b.create_argv(spec) == [
        "zpool", "create", "-f", "-o", "cachefile=/var/tmp/pb/pbbkx.cache", "-o", "ashift=12",
        "-O", "recordsize=1M",
        "-O", "compression=zstd-3", "-O", "sync=disabled", "-m", "/var/tmp/pb/pbbkx", "pbbkx",
        "raidz1", "/dev/loop0", "/dev/loop1", "/dev/loop2",
        "raidz1", "/dev/loop3", "/dev/loop4", "/dev/loop5", "/dev/loop6",
    ]  # fmt: skip
    draid = PoolSpec("zfs", "draid2:4d:1s", tuple(f"/dev/loop{i}" for i in range(7)), "pbbkd",
                     Path("/var/tmp/pb"))  # fmt: skip
    b.validate(draid)
    assert b.create_argv(draid)[-8:] == ["draid2:4d:7c:1s", *[f"/dev/loop{i}" for i in range(7)]]
    old = ZfsBackend(_openzfs("zfs-2.0.7-1"))
    with pytest.raises(UsageError, match="dRAID needs OpenZFS 2.1"):
        old.validate(draid)


def test_zfs_fuse_without_a_daemon_is_unavailable_with_the_fix() -> None:
    rec = RecordingRunner(responses={
        ("zpool", "version"): CommandResult(("zpool",), 2, "", "unrecognized command", 0),
        ("zpool", "upgrade", "-v"): "This system is currently running ZFS pool version 23.\n",
        ("zpool", "list", "-H"): CommandResult(("zpool",), 1, "", "connect: No such file", 0),
    })  # fmt: skip
    a = ZfsBackend(rec).check()
    assert not a.ok and a.dialect == "zfs-fuse" and "daemon is not running" in a.reason
    missing = ZfsBackend(RecordingRunner(installed=set())).check()
    assert not missing.ok and "not installed" in missing.reason


def test_dry_run_prints_the_commands_and_creates_nothing(tmp_path: Path) -> None:
    rec = RecordingRunner(responses={
        ("zpool", "version"): CommandResult(("zpool",), 2, "", "", 0),
        ("zpool", "upgrade", "-v"): "running ZFS pool version 23",
    }, dry_run=True)  # fmt: skip
    b = ZfsBackend(rec)
    j = Journal(rec)
    spec = PoolSpec("zfs", "mirror", ("/x/a", "/x/b"), "pbbkdry", tmp_path / "m", {"ashift": "9"})
    pool = b.create(spec, j)
    assert b.verify(pool) == [] and b.drop_cache(pool)["verified"] is False
    b.destroy(pool, j)
    argvs = [a for a in rec.argvs if a[0] == "zpool" and a[1] in ("create", "destroy")]
    cachefile = f"cachefile={tmp_path / 'm' / 'pbbkdry.cache'}"  # never the system's
    assert argvs[0][:7] == ("zpool", "create", "-o", cachefile, "-o", "ashift=9", "-m")
    # the cold read's import gives it the same file again (an import puts a pool in the
    # system's cache file otherwise)
    imports = [a for a in rec.argvs if a[:2] == ("zpool", "import")]
    assert imports == [("zpool", "import", "-o", cachefile, "-d", str(tmp_path / "m" /
                        "pbbkdry.members"), "pbbkdry")]  # fmt: skip
    assert argvs[-1] == ("zpool", "destroy", "pbbkdry")
    assert not (tmp_path / "m").exists()


# --- teardown gives the devices back as found (issue 17) ----------------------------------


def _free(devices: list[str]) -> dict[str, list[tuple[str, str]]]:
    """Reasons the inventory gives for each device (empty: free), and no ZFS label on it."""
    inv = scan(LocalRunner(), protect={})
    out: dict[str, list[tuple[str, str]]] = {}
    for dev in devices:
        d = inv.get(os.path.basename(dev))
        assert d is not None, dev
        assert read_labels(Path(dev)) is None, dev
        out[dev] = [r.key for r in d.reasons]
    return out


def test_after_a_resilver_trial_every_member_and_the_spare_hold_no_label(lab: Lab) -> None:
    devices = lab.disks(3, "loop")  # a mirror of two and the spare that replaces one of them
    pool = lab.backend.create(lab.spec("mirror:2", devices), lab.journal)
    old = pool.described["leaves"][1]
    lab.backend.offline(pool, old)
    lab.backend.replace(pool, old, devices[2])
    assert lab.backend.wait_resilver(pool, timeout=120).done
    assert all(read_labels(Path(d)) is not None for d in devices)  # zpool left them all
    lab.backend.destroy(pool, lab.journal)
    assert _free(devices) == {d: [] for d in devices}


def test_the_gpt_zpool_wrote_on_a_whole_disk_is_wiped_with_its_labels(lab: Lab) -> None:
    """OpenZFS partitions a whole disk (part1 for the pool, part9 reserved); zfs-fuse never
    does, so the disk is partitioned here as OpenZFS would and the pool built on part1."""
    img = lab.base / "whole.img"
    img.write_bytes(b"")
    os.truncate(img, 160 * MiB)
    lab.journal.path_created(str(img))
    disk = sh("losetup", "--find", "--show", "--partscan", str(img)).strip()
    lab.journal.loop_created(disk, str(img))
    table = f"label: gpt\n{disk}p1 : start=2048, size=128MiB\n{disk}p9 : size=8MiB\n"
    subprocess.run(["sfdisk", "--quiet", disk], input=table, text=True, check=True)
    part1 = f"{disk}p1"
    for i in range(100):  # devtmpfs makes the partition nodes as the kernel reads the table
        if os.path.exists(f"{disk}p9") and os.path.exists(part1):
            break
        if i % 20 == 0:  # with no udev the kernel may need asking (as backends/sources does)
            subprocess.run(["partx", "--add", disk], capture_output=True, check=False)
        time.sleep(0.1)
    assert os.path.exists(part1) and os.path.exists(f"{disk}p9")
    name = f"pbbk{uuid.uuid4().hex[:8]}"
    subprocess.run(["zpool", "create", "-m", "none", name, part1], check=True)
    lab.journal.pool_created(name, [disk])  # recorded as OpenZFS records a whole disk
    assert lab.journal.teardown(only=lambda e: e["kind"] == "pool") == []
    assert name not in pools()
    assert read_labels(Path(disk)) is None and not os.path.exists(part1)
    base = os.path.basename(disk)
    assert not [p for p in os.listdir(f"/sys/class/block/{base}") if p.startswith(base)]
    assert sh("wipefs", "--no-act", disk).strip() == ""  # no GPT, no protective MBR
    assert _free([disk]) == {disk: []}


def test_the_read_back_after_a_measurement_writes_the_open_txg_first_on_openzfs() -> None:
    """What a workload fsync'd is in the ZIL, not yet in iostat's alloc or a zvol's
    referenced: OpenZFS's `zpool sync` comes before them; zfs-fuse has no `zpool sync`."""
    from poolbench.backends.base import Pool
    from poolbench.engine.pool_hooks import PoolHooks
    from poolbench.workloads.library import get

    rec = _openzfs("zfs-2.3.2-2")
    spec = PoolSpec("zfs", "raidz1:3", ("/dev/a", "/dev/b", "/dev/c"), "pbsy", Path("/mnt"))
    PoolHooks(rec, ZfsBackend(rec), Pool(spec, Path("/mnt/pbsy"), [])).after(get("seq-write"))
    argvs = [c.argv for c in rec.calls]
    sync = argvs.index(("zpool", "sync", "pbsy"))
    reads = [i for i, a in enumerate(argvs) if a[:2] in (("zfs", "get"), ("zpool", "iostat"))]
    assert reads and sync < min(reads), argvs
    fuse = RecordingRunner(responses={
        ("zpool", "version"): CommandResult(("zpool",), 2, "", "unrecognized command", 0),
        ("zpool", "upgrade", "-v"): "This system is currently running ZFS pool version 23.\n",
        ("zpool", "list", "-H"): "",
    })  # fmt: skip
    PoolHooks(fuse, ZfsBackend(fuse), Pool(spec, Path("/mnt/pbsy"), [])).after(get("seq-write"))
    assert not any(c.argv[:2] == ("zpool", "sync") for c in fuse.calls)
