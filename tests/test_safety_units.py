"""The safety layer on a fake /sys, /dev and /proc, with a recording runner: no root needed."""

from __future__ import annotations

import json
import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from poolbench.errors import PoolbenchError, UsageError
from poolbench.safety import creating
from poolbench.safety.claims import (
    Claim,
    ClaimRefused,
    ClaimSet,
    DeviceChanged,
    claim_devices,
)
from poolbench.safety.guarded import GuardedRunner
from poolbench.safety.inventory import ASHIFT_ADVICE, Inventory, Paths, scan
from poolbench.safety.journal import Journal
from poolbench.store.db import Store
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.zfs import label as zfslabel

MiB = 1 << 20


# --- a ZFS label, XDR-encoded as OpenZFS writes it ------------------------------------------


def _xdr_str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">I", len(b)) + b + b"\0" * (-len(b) % 4)


def _pair(name: str, value: int | str) -> bytes:
    if isinstance(value, int):
        body = _xdr_str(name) + struct.pack(">iIQ", 8, 1, value)
    else:
        body = _xdr_str(name) + struct.pack(">iI", 9, 1) + _xdr_str(value)
    return struct.pack(">II", 8 + len(body), 0) + body


def nvlist(**pairs: int | str) -> bytes:
    body = b"".join(_pair(k, v) for k, v in pairs.items())
    return b"\x01\x01\x00\x00" + struct.pack(">II", 0, 1) + body + struct.pack(">II", 0, 0)


def write_zfs_label(image: Path, size: int, **pairs: int | str) -> None:
    with open(image, "r+b") as fh:
        for off in zfslabel.label_offsets(size):
            fh.seek(off + zfslabel.NVLIST_OFFSET)
            fh.write(nvlist(**pairs))


def test_nvlist_parser_reads_uint64_and_string_pairs_and_skips_the_rest() -> None:
    buf = nvlist(version=5000, name="tank", state=1, pool_guid=2**63 + 5)
    assert zfslabel.parse_nvlist(buf) == {
        "version": 5000, "name": "tank", "state": 1, "pool_guid": 2**63 + 5
    }  # fmt: skip
    with pytest.raises(ValueError):
        zfslabel.parse_nvlist(b"\0" * 64)


def test_labels_found_at_both_ends_and_absent_on_a_blank_image(tmp_path: Path) -> None:
    img = tmp_path / "d.img"
    img.write_bytes(b"")
    os.truncate(img, 4 * MiB)
    assert zfslabel.read_labels(img) is None
    write_zfs_label(img, 4 * MiB, name="tank", state=2, pool_guid=42, txg=7, hostname="h")
    label = zfslabel.read_labels(img)
    assert label is not None and label.labels_found == 4
    assert (label.pool_name, label.pool_guid, label.state) == ("tank", 42, "destroyed")


# --- a fake machine --------------------------------------------------------------------------


@dataclass
class FakeMachine:
    root: Path
    wipefs: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    pools: dict[str, int] | None = field(default_factory=dict)  # None: zpool list fails
    mountlines: list[str] = field(default_factory=list)
    swaps: list[str] = field(default_factory=list)
    majmin: dict[str, str] = field(default_factory=dict)  # /dev path -> major:minor
    installed: set[str] | None = None

    @property
    def paths(self) -> Paths:
        return Paths(self.root / "sys", self.root / "dev", self.root / "mountinfo",
                     self.root / "swaps")  # fmt: skip

    def disk(self, name: str, size: int = 64 * MiB, *, parent: str | None = None,
             serial: str | None = None, model: str | None = None, logical: int = 512,
             physical: int = 512, dev: str | None = None) -> Path:  # fmt: skip
        sysd = self.root / "sys" / "devices" / "virtual" / "block"
        node = sysd / parent / name if parent else sysd / name
        (node / "holders").mkdir(parents=True)
        (node / "slaves").mkdir()
        majmin = dev or f"8:{len(self.majmin)}"
        (node / "dev").write_text(majmin + "\n")
        (node / "size").write_text(f"{size // 512}\n")
        (node / "ro").write_text("0\n")
        if parent:
            (node / "partition").write_text("1\n")
        else:
            (node / "queue").mkdir()
            (node / "queue" / "logical_block_size").write_text(f"{logical}\n")
            (node / "queue" / "physical_block_size").write_text(f"{physical}\n")
            (node / "queue" / "rotational").write_text("1\n")
            (node / "device").mkdir()
            if serial:
                (node / "device" / "serial").write_text(serial + "\n")
            if model:
                (node / "device" / "model").write_text(model + "\n")
        cls = self.root / "sys" / "class" / "block"
        cls.mkdir(parents=True, exist_ok=True)
        (cls / name).symlink_to(node)
        devlink = self.root / "sys" / "dev" / "block"
        devlink.mkdir(parents=True, exist_ok=True)
        (devlink / majmin).symlink_to(node)
        img = self.root / "dev" / name
        img.parent.mkdir(exist_ok=True)
        img.write_bytes(b"")
        os.truncate(img, size)
        self.majmin[str(img)] = majmin
        return node

    def by_id(self, link: str, name: str) -> str:
        d = self.root / "dev" / "disk" / "by-id"
        d.mkdir(parents=True, exist_ok=True)
        (d / link).symlink_to(self.root / "dev" / name)
        self.majmin[str(d / link)] = self.majmin[str(self.root / "dev" / name)]
        return str(d / link)

    def mount(self, name: str, mountpoint: str, fstype: str = "ext4") -> None:
        majmin = self.majmin[str(self.root / "dev" / name)]
        n = len(self.mountlines) + 20
        self.mountlines.append(
            f"{n} 1 {majmin} / {mountpoint} rw - {fstype} {self.root / 'dev' / name} rw"
        )
        self.write()

    def write(self) -> None:
        (self.root / "mountinfo").write_text("\n".join(self.mountlines) + "\n")
        (self.root / "swaps").write_text(
            "Filename Type Size Used Priority\n" + "".join(f"{s} partition 1 0 -2\n"
                                                          for s in self.swaps)
        )  # fmt: skip

    def runner(self) -> RecordingRunner:
        def wipefs(argv: tuple[str, ...]) -> CommandResult:
            name = os.path.basename(argv[-1])
            sigs = self.wipefs.get(name, [])
            return CommandResult(argv, 0, json.dumps({"signatures": sigs}) if sigs else "", "", 0)

        pools: str | CommandResult = (
            "".join(f"{n}\t{g}\n" for n, g in self.pools.items())
            if self.pools is not None
            else CommandResult(("zpool",), 1, "", "cannot connect to daemon", 0)
        )
        return RecordingRunner(responses={"wipefs": wipefs, "zpool": pools},
                               installed=self.installed)  # fmt: skip

    def resolve(self, path: str) -> str:
        p = path if path in self.majmin else os.path.realpath(path)
        if p not in self.majmin:
            raise FileNotFoundError(path)
        return self.majmin[p]

    def scan(self, **kw: Any) -> Inventory:
        self.write()
        return scan(self.runner(), paths=self.paths, **kw)

    def claim(self, names: list[str], **kw: Any) -> ClaimSet:
        self.write()
        return claim_devices(self.runner(), names, paths=self.paths, resolve=self.resolve, **kw)


@pytest.fixture
def m(tmp_path: Path) -> FakeMachine:
    fm = FakeMachine(tmp_path)
    # sda: the system disk, 512e, root on sda1, sda2 spare.
    fm.disk("sda", 256 * MiB, serial="SYS123", model="Fast SSD", physical=4096)
    fm.disk("sda1", 128 * MiB, parent="sda")
    fm.disk("sda2", 128 * MiB, parent="sda")
    fm.wipefs["sda"] = [{"type": "gpt"}, {"type": "PMBR"}]
    fm.wipefs["sda1"] = [{"type": "ext4"}]
    fm.mount("sda1", "/")
    # sdb: an old ext4, not mounted, with a serial and a by-id link.
    fm.disk("sdb", serial="WD-OLD1", model="Red")
    fm.by_id("ata-Red_WD-OLD1", "sdb")
    fm.wipefs["sdb"] = [{"type": "ext4", "label": "photos"}]
    # sdc, sdd: free; sde: free, no serial.
    fm.disk("sdc", serial="S-C")
    fm.disk("sdd", serial="S-D")
    fm.disk("sde")
    fm.write()
    return fm


def _reasons(inv, name: str) -> list[tuple[str, str, bool]]:  # type: ignore[no-untyped-def]
    return [(r.kind, r.detail, r.overridable) for r in inv.devices[name].reasons]


def test_inventory_finds_free_devices_and_every_reason(m: FakeMachine) -> None:
    inv = m.scan()
    assert [d.name for d in inv.top()] == ["sda", "sdb", "sdc", "sdd", "sde"]
    assert inv.devices["sdc"].status == "free" and inv.devices["sde"].status == "free"
    sda = _reasons(inv, "sda")
    assert ("protected-disk", "holds partition sda1, which backs the root filesystem", False) in sda
    assert any(k == "partition-table" and "a gpt partition table: sda1 (" in d and not ov
               for k, d, ov in sda)  # fmt: skip
    assert ("protected", "backs the root filesystem: /", False) in _reasons(inv, "sda1")
    assert ("mounted", "mounted at / (ext4)", False) in _reasons(inv, "sda1")
    # A spare partition next to the root partition: no override, ever.
    (sib,) = inv.devices["sda2"].reasons
    assert sib.kind == "sibling" and not sib.overridable and "root filesystem" in sib.detail
    assert inv.devices["sda"].advice == [ASHIFT_ADVICE]
    assert _reasons(inv, "sdb") == [("filesystem", "holds an ext4 filesystem labelled 'photos'",
                                     True)]  # fmt: skip
    assert inv.devices["sdb"].override_id == "WD-OLD1"
    assert inv.devices["sde"].override_id == str(m.root / "dev" / "sde")
    d = inv.as_dict()["devices"][1]
    assert d["override"] == "--destroy-data-on WD-OLD1" and d["by_id"]


def test_inventory_holders_swap_loop_backing_and_signatures(m: FakeMachine) -> None:
    node = m.disk("md0", 128 * MiB)
    for member in ("sdc", "sdd"):
        (node / "slaves" / member).mkdir()
        (m.root / "sys" / "class" / "block" / member / "holders" / "md0").mkdir()
    m.swaps.append(str(m.root / "dev" / "sde"))
    loop = m.disk("loop0", 64 * MiB)
    (loop / "loop").mkdir()
    (loop / "loop" / "backing_file").write_text("/dev/sdb\n")
    m.wipefs["sde"] = [{"type": "swap"}]
    m.wipefs["sdb"] = [{"type": "LVM2_member"}, {"type": "linux_raid_member"}]
    inv = m.scan()
    assert ("holder", "member of running md RAID md0", False) in _reasons(inv, "sdc")
    assert ("swap", "is active swap", False) in _reasons(inv, "sde")
    assert ("signature", "holds a swap signature", True) in _reasons(inv, "sde")
    sdb = [d for _, d, _ in _reasons(inv, "sdb")]
    assert "holds an LVM physical volume (LVM2_member) signature" in sdb
    assert "holds an md RAID member signature" in sdb
    assert "backs loop device loop0" in sdb


def test_inventory_zfs_labels_imported_exported_destroyed(m: FakeMachine) -> None:
    size = 64 * MiB
    write_zfs_label(m.root / "dev" / "sdc", size, name="tank", state=0, pool_guid=11, txg=3)
    write_zfs_label(m.root / "dev" / "sdd", size, name="old", state=1, pool_guid=22, txg=3)
    write_zfs_label(m.root / "dev" / "sde", size, name="gone", state=2, pool_guid=33, txg=3)
    m.pools = {"tank": 11}
    m.wipefs["sdc"] = [{"type": "zfs_member", "label": "tank"}]
    inv = m.scan()
    assert _reasons(inv, "sdc") == [("zfs", "member of imported ZFS pool 'tank' guid 11", False)]
    ((kind, detail, ov),) = _reasons(inv, "sdd")
    assert "member of exported ZFS pool 'old' guid 22" in detail and ov
    assert "destroyed ZFS pool 'gone'" in _reasons(inv, "sde")[0][1]
    # A pool that is active but not imported here (another host, or the daemon is down).
    m.pools = {}
    assert _reasons(m.scan(), "sdc")[0][1:] == (
        "member of ZFS pool 'tank' guid 11, active but not imported here",
        True,
    )
    # ... and when the pools cannot be listed, it may be imported: no override then.
    m.pools = None
    inv = m.scan()
    assert not inv.devices["sdc"].overridable and "could not list" in inv.warnings[0]


def test_missing_wipefs_makes_every_device_in_use(m: FakeMachine) -> None:
    m.installed = {"zpool"}
    inv = m.scan()
    assert inv.devices["sdc"].status == "in use" and "wipefs" in inv.warnings[0]


def test_store_and_scratch_devices_are_protected(m: FakeMachine) -> None:
    data = m.root / "srv"
    data.mkdir()
    m.mount("sdc", str(data))
    db = data / "pb" / "results.db"  # not created yet: its nearest existing parent counts
    inv = m.scan(protect={"holds poolbench's result store": db})
    assert ("protected", f"holds poolbench's result store: {db}", False) in _reasons(inv, "sdc")


# --- claims ----------------------------------------------------------------------------------


def dev(m: FakeMachine, name: str) -> str:
    return str(m.root / "dev" / name)


def test_free_devices_are_claimed_in_order(m: FakeMachine) -> None:
    cs = m.claim([dev(m, "sdd"), dev(m, "sdc")])
    assert cs.device_paths == [dev(m, "sdd"), dev(m, "sdc")] and cs.overrides == ()
    assert cs.claims[0].serial == "S-D"


def test_claims_cannot_be_forged() -> None:
    with pytest.raises(TypeError, match="issued by"):
        Claim("/dev/sdz", "sdz", "8:0", "/dev/sdz", "x", None, (), None, 1, 512, 512, False, None)


def test_in_use_device_needs_stable_override_and_yes(m: FakeMachine) -> None:
    with pytest.raises(ClaimRefused) as exc:
        m.claim([dev(m, "sdb")])
    assert "--destroy-data-on WD-OLD1" in exc.value.problem
    assert "labelled 'photos'" in exc.value.problem
    with pytest.raises(UsageError, match="stable ID, '--destroy-data-on WD-OLD1'"):
        m.claim([dev(m, "sdb")], overrides=[dev(m, "sdb")], yes=True)
    with pytest.raises(UsageError, match="matches none of the devices"):
        m.claim([dev(m, "sdb")], overrides=["WD-OLD2"], yes=True)
    cs = m.claim([dev(m, "sdb")], overrides=["WD-OLD1"], yes=True)
    assert cs.overrides[0].ident == "WD-OLD1" and cs.overrides[0].confirmed_by == "--yes"
    by_id = str(m.root / "dev" / "disk" / "by-id" / "ata-Red_WD-OLD1")
    assert m.claim([by_id], overrides=[by_id], yes=True).claims[0].name == "sdb"


def test_root_and_its_neighbour_are_never_claimed(m: FakeMachine) -> None:
    for name, ident in (("sda", "SYS123"), ("sda2", dev(m, "sda2"))):
        with pytest.raises(ClaimRefused, match="never writes to the device of the root"):
            m.claim([dev(m, name)], overrides=[ident], yes=True)


def test_typo_is_refused_with_a_suggestion(m: FakeMachine) -> None:
    with pytest.raises(UsageError, match=r"No device .*/dev/sdx\. Did you mean .*/dev/sd"):
        m.claim([dev(m, "sdx")])


def test_md_array_and_its_member_are_one_device_twice(m: FakeMachine) -> None:
    node = m.disk("md0", 128 * MiB)
    (node / "slaves" / "sdc").mkdir()
    with pytest.raises(UsageError, match="the same disk twice"):
        m.claim([dev(m, "md0"), dev(m, "sdc")])


def test_recheck_catches_a_mount_and_a_swapped_disk(m: FakeMachine) -> None:
    cs = m.claim([dev(m, "sdc")])
    m.mount("sdc", "/mnt/surprise")
    rec = m.runner()
    with pytest.raises(DeviceChanged, match="now in use: mounted at /mnt/surprise"):
        GuardedRunner(rec, cs, resolve=m.resolve).run(["zpool", "create", "p", dev(m, "sdc")])
    assert all(c.argv[0] in ("wipefs", "zpool") and "create" not in c.argv for c in rec.calls)
    cs = m.claim([dev(m, "sdd")])
    (m.root / "sys" / "class" / "block" / "sdd" / "device" / "serial").write_text("OTHER\n")
    with pytest.raises(DeviceChanged, match="different disk"):
        cs.recheck(m.runner(), m.resolve)


def test_guarded_runner_only_lets_claimed_devices_through(m: FakeMachine) -> None:
    part = m.disk("sdc1", 32 * MiB, parent="sdc")
    del part
    cs = m.claim([dev(m, "sdd")])
    rec = m.runner()
    g = GuardedRunner(rec, cs, resolve=m.resolve)
    g.run(["mkfs.ext4", dev(m, "sdd")])
    g.run(["mdadm", "--create", "/dev/md9-not-there-yet", dev(m, "sdd")])
    g.run(["zpool", "list"], mutates=False)
    with pytest.raises(PoolbenchError, match="not a claimed device"):
        g.run(["dd", "if=/dev/zero", f"of={dev(m, 'sdc')}"])
    with pytest.raises(PoolbenchError, match="not a claimed device"):
        g.run(["wipefs", "-a", dev(m, "sdc1")])
    assert ("mkfs.ext4", dev(m, "sdd")) in rec.argvs
    assert not any(a[0] in ("dd",) or (a[0] == "wipefs" and "-a" in a) for a in rec.argvs)


# --- journal ---------------------------------------------------------------------------------


def test_journal_destroys_only_its_own_pool(tmp_path: Path) -> None:
    guid = {"v": 111}
    rec = RecordingRunner(responses={"zpool": lambda a: CommandResult(
        a, 0, f"pbx\t{guid['v']}\n" if a[1] == "list" else "", "", 0)})  # fmt: skip
    j = Journal(rec, tmp_path / "journal.jsonl")
    assert j.pool_created("pbx", [], clear_labels=False) == 111
    guid["v"] = 222  # same name, another pool
    (note,) = j.teardown()
    assert "GUID 222, not the GUID 111" in note and "never destroyed" in note
    assert ("zpool", "destroy", "pbx") not in rec.argvs
    j2 = Journal(rec)
    guid["v"] = 333
    j2.pool_created("pbx", [], clear_labels=False)
    assert j2.teardown() == [] and ("zpool", "destroy", "pbx") in rec.argvs


def test_journal_mounts_loops_and_persistence(tmp_path: Path) -> None:
    mi = tmp_path / "mountinfo"
    mi.write_text("30 1 7:3 / /mnt/a rw - ext4 /dev/loop3 rw\n")
    sysb = tmp_path / "block"
    (sysb / "loop3" / "loop").mkdir(parents=True)
    (sysb / "loop3" / "loop" / "backing_file").write_text("/var/tmp/other.img\n")
    rec = RecordingRunner()
    path = tmp_path / "j.jsonl"
    j = Journal(rec, path, sys_block=sysb, mountinfo=mi)
    j.loop_created("/dev/loop3", "/var/tmp/mine.img")
    j.mount_created("/mnt/a", "/dev/loop4")
    made = tmp_path / "made"
    made.mkdir()
    j.path_created(str(made))
    loaded = Journal.load(rec, path)
    loaded.sys_block, loaded.mountinfo = sysb, mi
    kept = loaded.teardown()
    assert any("/mnt/a is now a mount of /dev/loop3" in k for k in kept)
    assert any("/dev/loop3 now backs /var/tmp/other.img" in k for k in kept)
    assert rec.argvs == [] and not made.exists()


def test_journal_detach_that_races_the_kernels_rundown_is_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop device still held open is detached lazily; a second detach during its rundown
    answers ENXIO while sysfs still names the file (seen in CI after a SIGKILL mid-create).
    That is success once the device lets go of the file, and a real failure if it never does."""
    sysb = tmp_path / "block"
    backing = sysb / "loop0" / "loop" / "backing_file"
    backing.parent.mkdir(parents=True)
    img = str(tmp_path / "disk0.img")

    def enxio_then_gone(a: tuple[str, ...]) -> CommandResult:
        backing.unlink(missing_ok=True)  # the kernel finishes the rundown
        return CommandResult(a, 1, "", "losetup: /dev/loop0: detach failed: No such device", 0)

    backing.write_text(img + "\n")
    j = Journal(RecordingRunner(responses={"losetup": enxio_then_gone}), sys_block=sysb)
    j.loop_intent(img)
    assert j.teardown() == [] and j.entries == []

    monkeypatch.setattr("poolbench.safety.loopdetach.LOOP_RUNDOWN_SECONDS", 0.3)
    backing.write_text(img + "\n")
    stuck = RecordingRunner(responses={"losetup": lambda a: CommandResult(a, 1, "", "busy", 0)})
    j = Journal(stuck, sys_block=sysb)
    j.loop_intent(img)
    (note,) = j.teardown()
    assert "losetup --detach /dev/loop0" in note
    assert j.entries and j.entries[0]["kind"] == "loop_intent"  # kept for the next cleanup


def test_journal_dry_run_prints_and_touches_nothing(tmp_path: Path) -> None:
    rec = RecordingRunner(dry_run=True)
    j = Journal(rec)
    j.pool_created("pbx", ["/dev/loop9"])
    j.mount_created("/mnt/x", "/dev/loop9")
    j.loop_created("/dev/loop9", "/x.img")
    assert j.teardown() == []
    assert rec.argvs == [("losetup", "--detach", "/dev/loop9"), ("umount", "/mnt/x"),
                         ("zpool", "destroy", "pbx")]  # fmt: skip


# --- store -----------------------------------------------------------------------------------


def test_store_records_overrides_with_the_run(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.db")
    assert "0002_device_overrides" in s.migrations()
    run = s.start_run("study", "x", ["poolbench"], {})
    s.add_device_override(
        run,
        device="/dev/sdb",
        ident="WD-1",
        serial="WD-1",
        model="Red",
        size_bytes=10,
        reasons=["holds ext4"],
        confirmed_by="interactive",
    )
    (row,) = s.device_overrides(run)
    assert (row["ident"], json.loads(row["reasons"])) == ("WD-1", ["holds ext4"])
    s.close()
    assert "0002_device_overrides" in Store(tmp_path / "r.db").migrations()


def test_cleanup_sees_a_zpool_create_still_running(tmp_path: Path) -> None:
    """A killed poolbench leaves its `zpool create` running; cleanup must see it (from
    /proc/*/cmdline) and wait, or the pool appears after cleanup said all was undone."""
    import threading

    def proc(pid: int, *argv: str) -> Path:
        d = tmp_path / str(pid)
        d.mkdir()
        (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
        return d

    proc(10, "/usr/sbin/zpool", "create", "-o", "ashift=12", "pb1t0", "raidz1", "/dev/loop0")
    proc(11, "/bin/bash", "/tmp/x/bin/zpool", "create", "pb2t0", "/dev/loop1")
    proc(12, "zpool", "destroy", "pb3t0")
    proc(13, "vim", "notes about zpool create pb3t0")
    (tmp_path / "self").mkdir()
    assert creating.zpool_creating("pb1t0", tmp_path)
    assert creating.zpool_creating("pb2t0", tmp_path)  # a script named zpool running it
    assert not creating.zpool_creating("pb3t0", tmp_path)  # destroy; a mention in an editor
    assert not creating.zpool_creating("pb1t", tmp_path)  # the whole name, not a prefix
    # the wait ends when the command does
    threading.Timer(0.3, lambda: (tmp_path / "10" / "cmdline").write_bytes(b"")).start()
    t0 = time.monotonic()
    assert creating.await_create("pb1t0", tmp_path, timeout=10)
    assert 0.2 < time.monotonic() - t0 < 5
    assert not creating.await_create("pb9t0", tmp_path)
    # an orphaned destroy, waited for the same way (cleanup must not race it)
    assert creating.zpool_creating("pb3t0", tmp_path, verb="destroy")
    assert not creating.zpool_creating("pb1t0", tmp_path, verb="destroy")
    threading.Timer(0.3, lambda: (tmp_path / "12" / "cmdline").write_bytes(b"")).start()
    assert creating.await_create("pb3t0", tmp_path, timeout=10, verb="destroy")
    assert not creating.zpool_creating("pb3t0", tmp_path, verb="destroy")
