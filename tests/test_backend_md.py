"""The md backend: unavailable on a kernel without the md driver (this machine's), with the
reason; its command lines, read-back and teardown through a recording runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.md import MdBackend, flush_stripe_cache
from poolbench.errors import PoolbenchError, UsageError
from poolbench.safety.journal import Journal
from poolbench.system.runner import RecordingRunner

LOOPS = ("/dev/loop0", "/dev/loop1", "/dev/loop2")


def spec(layout: str = "raid5", devices: tuple[str, ...] = LOOPS, root: Path = Path("/var/tmp/x"),
         pool: dict[str, str] | None = None, **fs: str) -> PoolSpec:  # fmt: skip
    return PoolSpec("md", layout, devices, "pbbkmd", root, pool or {}, fs)


@pytest.mark.skipif(Path("/proc/mdstat").exists(), reason="this kernel has the md driver")
def test_unavailable_here_with_the_reason() -> None:
    b = MdBackend(RecordingRunner())
    a = b.check()
    assert not a.ok
    assert f"the running kernel ({os.uname().release}) has no md driver" in a.reason
    assert "/proc/mdstat is absent and no md_mod module" in a.reason
    with pytest.raises(UsageError, match="The md backend is not available: the running kernel"):
        b.validate(spec())


def test_md_module_in_the_kernel_index_counts_as_available(tmp_path: Path) -> None:
    (tmp_path / "modules.dep").write_text("kernel/drivers/md/md-mod.ko.xz:\n")
    b = MdBackend(RecordingRunner(responses={"mdadm": "mdadm - v4.2 - 2021-12-30\n"}),
                  proc_mdstat=tmp_path / "absent", modules_dir=tmp_path)  # fmt: skip
    assert b.check().ok and b.check().version == "mdadm - v4.2 - 2021-12-30"
    no_tool = MdBackend(RecordingRunner(installed=set()), proc_mdstat=tmp_path / "modules.dep")
    assert "mdadm is not installed" in no_tool.check().reason


def test_command_lines() -> None:
    b = MdBackend(RecordingRunner())
    assert b.create_argvs(spec("raid5", pool={"chunk": "512K"})) == [
        ["mdadm", "--create", "/dev/md/pbbkmd", "--run", "--metadata=1.2", "--level=raid5",
         "--raid-devices=3", "--chunk=512K", *LOOPS],
        ["mdadm", "--wait", "/dev/md/pbbkmd"],
        ["mkfs.ext4", "-q", "-F", "-L", "pbbkmd", "-E", "lazy_itable_init=0,lazy_journal_init=0",
         "/dev/md/pbbkmd"],
    ]  # fmt: skip
    four = (*LOOPS, "/dev/loop3")
    assert b.create_argvs(spec("raid10", four, pool={"assume_clean": "yes"}, fs="xfs")) == [
        ["mdadm", "--create", "/dev/md/pbbkmd", "--run", "--metadata=1.2", "--level=raid10",
         "--raid-devices=4", "--assume-clean", *four],
        ["mkfs.xfs", "-f", "-q", "/dev/md/pbbkmd"],
    ]  # fmt: skip
    assert b.create_argvs(spec("raid0"))[1][0] == "mkfs.ext4"  # raid0 has nothing to resync
    assert b.mount_argv(spec(fs="xfs")) == ["mount", "-t", "xfs", "/dev/md/pbbkmd",
                                            "/var/tmp/x/pbbkmd"]  # fmt: skip


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (spec("raid6"), "raid6 needs at least 4 devices, not 3"),
        (spec("raid5", LOOPS[:2]), "raid5 needs at least 3 devices, not 2"),
        (spec("raidz2"), "'raidz2' is not an md level"),
        (spec(fs="btrfs"), "fs=btrfs is not supported on md"),
        (spec(pool={"chunk": "lots"}), "chunk=lots is not a chunk size"),
        (spec(devices=("/var/tmp/a", "/var/tmp/b", "/var/tmp/c")), "md arrays need block devices"),
    ],
)
def test_impossible_specs_are_refused(bad: PoolSpec, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        MdBackend.validate_spec(bad)


@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_create_verify_drop_and_destroy_through_a_recording_runner(tmp_path: Path) -> None:
    mdstat = tmp_path / "mdstat"
    mdstat.write_text("Personalities : [raid6] [raid5]\n")
    mountinfo = tmp_path / "mountinfo"
    root = tmp_path / "pools"
    mp = root / "pbbkmd"
    detail = "MD_LEVEL=raid5\nMD_DEVICES=3\n" + "".join(
        f"MD_DEVICE_loop{i}_ROLE={i}\nMD_DEVICE_loop{i}_DEV=/dev/loop{i}\n" for i in range(3)
    )

    def mount(argv: tuple[str, ...]) -> str:  # the recording "kernel" keeps mountinfo
        if argv[0] == "mount":
            mountinfo.write_text(f"40 1 9:127 / {mp} rw - ext4 /dev/md/pbbkmd rw\n")
        elif argv[0] == "umount":
            mountinfo.write_text("")
        return ""

    rec = RecordingRunner(responses={"mdadm": detail, "mount": mount, "umount": mount})
    b = MdBackend(rec, proc_mdstat=mdstat, mountinfo=mountinfo, node_exists=lambda _d: True)
    sys_block = tmp_path / "block"
    journal = Journal(rec, sys_block=sys_block, mountinfo=mountinfo)
    pool = b.create(spec(root=root), journal)
    assert pool.block_devices == [] or pool.block_devices == ["loop0", "loop1", "loop2"]
    assert b.verify(pool) == []
    assert pool.described["level"] == "raid5" and pool.described["fstype"] == "ext4"
    assert [e["kind"] for e in journal.entries] == ["path", "dir", "md", "mount"]
    drop = b.drop_cache(pool)
    assert drop["unmounted"] and drop["mounted"] and drop["verified"]
    # Read back something else: every difference is named.
    rec.responses["mdadm"] = "MD_LEVEL=raid6\nMD_DEVICES=4\n"
    problems = b.verify(pool)
    assert "md level is raid6, not raid5" in problems
    assert "the array has 4 devices, not 3" in problems
    # Destroy: unmount, stop the array (only if built on exactly our members), zero them.
    node = sys_block / "pbbkmd"
    (node / "md").mkdir(parents=True)
    (node / "slaves").mkdir()
    for i in range(3):
        (node / "slaves" / f"loop{i}").mkdir()
    rec.calls.clear()
    b.destroy(pool, journal)
    destroyed = [a for a in rec.argvs if a[0] in ("umount", "mdadm")]
    assert destroyed == [
        ("umount", str(mp)),
        ("mdadm", "--stop", "/dev/md/pbbkmd"),
        *[("mdadm", "--zero-superblock", d) for d in LOOPS],
    ]
    assert not mp.exists() and [e["kind"] for e in journal.entries] == ["path"]


def test_teardown_leaves_an_array_built_on_other_devices_alone(tmp_path: Path) -> None:
    node = tmp_path / "block" / "pbbkmd"
    (node / "md").mkdir(parents=True)
    (node / "slaves" / "sdz").mkdir(parents=True)
    rec = RecordingRunner()
    j = Journal(rec, sys_block=tmp_path / "block")
    j.array_created("/dev/md/pbbkmd", list(LOOPS))
    (note,) = j.teardown()
    assert "is built on sdz" in note and "left alone" in note
    assert rec.argvs == []


def test_ext3_is_offered_and_made_with_mkfs_ext3() -> None:
    b = MdBackend(RecordingRunner())
    MdBackend.validate_spec(spec("raid6", (*LOOPS, "/dev/loop3"), fs="ext3"))
    assert b.create_argvs(spec("raid5", fs="ext3"))[-1] == [
        "mkfs.ext3", "-q", "-F", "-L", "pbbkmd", "/dev/md/pbbkmd"
    ]  # fmt: skip
    assert b.mount_argv(spec(fs="ext3"))[:3] == ["mount", "-t", "ext3"]


def test_the_initial_resync_is_a_figure_of_its_own(tmp_path: Path) -> None:
    # /dev/md/pbbkmd does not exist here, so its sysfs node is /sys/block/pbbkmd/md.
    md = tmp_path / "pbbkmd" / "md"
    md.mkdir(parents=True)
    (md / "component_size").write_text("2096128\n")  # KiB per member, as the kernel writes it
    b = MdBackend(RecordingRunner(), sys_block=tmp_path)
    waited = b.resync_record(spec("raid6", (*LOOPS, "/dev/loop3")), 8.0)
    assert waited["seconds"] == 8.0 and waited["member_bytes"] == 2096128 * 1024
    assert waited["mib_per_s"] == round(2096128 / 1024 / 8.0, 1)
    assert waited["mode"].startswith("waited") and waited["measured_during_resync"] is False
    clean = b.resync_record(spec(pool={"assume_clean": "yes"}), None)
    assert clean["seconds"] is None and "--assume-clean" in clean["mode"]
    assert b.resync_record(spec("raid0"), None)["mode"].startswith("none")


def test_a_resync_running_at_verify_is_reported(tmp_path: Path) -> None:
    md = tmp_path / "pbbkmd" / "md"
    md.mkdir(parents=True)
    (md / "sync_action").write_text("resync\n")
    detail = "MD_LEVEL=raid5\nMD_DEVICES=3\n" + "".join(
        f"MD_DEVICE_loop{i}_DEV=/dev/loop{i}\n" for i in range(3)
    )
    b = MdBackend(RecordingRunner(responses={"mdadm": detail}), sys_block=tmp_path)
    pool = Pool(spec(), tmp_path / "mnt", [], {})
    assert "the array is busy with a resync" in " ".join(b.verify(pool))
    (md / "sync_action").write_text("idle\n")
    assert not [p for p in b.verify(pool) if "busy" in p]


def test_an_array_whose_node_never_appears_is_an_error_not_a_silent_skip(tmp_path: Path) -> None:
    # Without /dev/md/NAME, `mdadm --wait` would fail (ignored: it exits 1 when there is
    # nothing to wait for), the resync would go unmeasured and mkfs would fail obscurely.
    mdstat = tmp_path / "mdstat"
    mdstat.write_text("Personalities : [raid6] [raid5]\n")
    rec = RecordingRunner()
    b = MdBackend(rec, proc_mdstat=mdstat, node_exists=lambda _d: False)
    journal = Journal(rec, sys_block=tmp_path / "block", mountinfo=tmp_path / "mountinfo")
    with pytest.raises(PoolbenchError, match="/dev/md/pbbkmd did not appear"):
        b.create(spec(root=tmp_path / "pools"), journal)
    assert [a[:2] for a in rec.argvs if a[1] != "--version"] == [
        ("mdadm", "--create"),
        ("udevadm", "settle"),
    ]
    assert "md" in [e["kind"] for e in journal.entries]  # journaled: teardown stops it


def test_the_chunk_asked_for_is_read_back(tmp_path: Path) -> None:
    md = tmp_path / "pbbkmd" / "md"
    md.mkdir(parents=True)
    (md / "sync_action").write_text("idle\n")
    (md / "chunk_size").write_text("524288\n")  # what the kernel shows for --chunk=512K
    detail = "MD_LEVEL=raid5\nMD_DEVICES=3\n" + "".join(
        f"MD_DEVICE_loop{i}_DEV=/dev/loop{i}\n" for i in range(3)
    )
    b = MdBackend(RecordingRunner(responses={"mdadm": detail}), sys_block=tmp_path)
    asked = Pool(spec(pool={"chunk": "64K"}), tmp_path / "mnt", [], {})
    assert "the chunk is 524288 bytes, not 64K" in b.verify(asked)
    assert asked.described["chunk_bytes"] == 524288
    right = Pool(spec(pool={"chunk": "512K"}), tmp_path / "mnt", [], {})
    assert not [p for p in b.verify(right) if "the chunk is" in p]


def test_stripe_cache_is_shrunk_to_mds_minimum_and_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every value written is recorded: a file that logs its writes stands in for sysfs.
    size = tmp_path / "stripe_cache_size"
    size.write_text("256\n")
    writes: list[str] = []
    real_write = Path.write_text

    def logged(self: Path, text: str, *a: object, **k: object) -> int:
        writes.append(text.strip())
        return real_write(self, text)

    monkeypatch.setattr(Path, "write_text", logged)
    found = flush_stripe_cache(size)
    monkeypatch.undo()
    assert writes == ["17", "256"] and size.read_text() == "256\n"
    assert found["verified"] and found["size"] == 256 and found["kept_at_most"] == 17


def test_a_stripe_cache_that_cannot_be_written_is_not_verified(tmp_path: Path) -> None:
    found = flush_stripe_cache(tmp_path / "absent")
    assert not found["verified"] and "could not be emptied" in found["detail"]


def test_what_md_cannot_do_is_refused_by_name_not_by_class() -> None:
    """The trial loop asks for a capability (backends/base.py); md offers none of ZFS's."""
    from poolbench.backends.base import (
        SupportsAccounting,
        SupportsDiskReplace,
        SupportsVolumes,
        capability,
        require,
    )
    from poolbench.backends.zfs import ZfsBackend
    from poolbench.engine.pool_hooks import PoolHooks
    from poolbench.workloads.library import get

    md = MdBackend(RecordingRunner())
    assert capability(md, SupportsAccounting) is None
    with pytest.raises(UsageError, match="The md backend cannot make a zvol"):
        require(md, SupportsVolumes, "make a zvol", "")
    zfs = ZfsBackend(RecordingRunner())
    assert capability(zfs, SupportsDiskReplace) is zfs
    hooks = PoolHooks(RecordingRunner(), md, Pool(spec(), Path("/mnt/x"), []))
    assert hooks.after(get("seq-write")).to_json() == {}
    with pytest.raises(UsageError, match="The md backend cannot take a member offline"):
        hooks.before(get("degraded-read"))
