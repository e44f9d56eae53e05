"""The hostile matrix: real loop devices this test creates, each in use in one way.

Every case is refused with its own reason, and the device's content is unchanged (sha256 of
the whole device before and after). Claiming runs through a runner that fails on any mutating
command, so "refused" also means "nothing destructive was even attempted". Everything made
here — loop devices over sparse files under /var/tmp/pb-safety-*, mounts, zfs-fuse pools named
pbsafe* — is removed in a finally block; devices that existed before are never touched.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from tests.plugins.tiers import machine_fixture

from poolbench.errors import EXIT_INPUT, EXIT_REFUSED, PoolbenchError, UsageError
from poolbench.safety.claims import ClaimRefused, DeviceChanged, claim_devices
from poolbench.safety.guarded import GuardedRunner
from poolbench.safety.inventory import protected_paths, scan
from poolbench.safety.journal import Journal
from poolbench.store.db import Store
from poolbench.system.runner import CommandResult, LocalRunner
from poolbench.zfs.pools import pool_guid

pytestmark = pytest.mark.untimed


def sh(*argv: str, check: bool = True, input_text: str | None = None) -> str:
    res = subprocess.run(list(argv), capture_output=True, text=True, input=input_text)
    if check and res.returncode != 0:
        raise RuntimeError(f"{argv} failed ({res.returncode}): {res.stderr.strip()}")
    return res.stdout


def _destroy_while_busy(pool: str) -> None:
    """zfs-fuse answers 'pool is busy' for a moment after a pool was made or used: tried
    again each second for 30 s."""
    for _ in range(30):
        if subprocess.run(["zpool", "destroy", pool], capture_output=True).returncode == 0:
            return
        time.sleep(1)
    sh("zpool", "destroy", pool)


def mkfs_ext4(dev: str) -> None:
    """ext4 without lazy init: its background inode-table zeroing (ext4lazyinit) changes a
    mounted device's bytes minutes later, whatever poolbench does, and the tests compare
    checksums."""
    sh("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)


def sha(dev: str) -> str:
    h = hashlib.sha256()
    with open(dev, "rb") as fh:
        while chunk := fh.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


class ReadOnlyRunner(LocalRunner):
    """A LocalRunner that fails the test on any mutating command."""

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        if kw.get("mutates", True):
            raise AssertionError(f"a mutating command was run while claiming: {argv}")
        return super().run(argv, **kw)


class Lab:
    """Loop devices, mounts and pools made by this test, and nothing else."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.loops: list[str] = []
        self.mounts: list[Path] = []
        self.pools: list[str] = []
        self.exported: list[tuple[str, str]] = []  # (pool, device) to import for destroy
        self.store = base / "unrelated-store" / "results.db"  # the store is not on our loops
        self.protect: Mapping[str, Path] = protected_paths(self.store, base)

    def loop(self, size: str = "64M", partscan: bool = False) -> str:
        img = self.base / f"disk{len(self.loops)}.img"
        sh("truncate", "-s", size, str(img))
        args = ["losetup", "--find", "--show"] + (["--partscan"] if partscan else [])
        dev = sh(*args, str(img)).strip()
        assert dev.startswith("/dev/loop")
        self.loops.append(dev)
        return dev

    def mount(self, dev: str) -> Path:
        """Mounted, then frozen: the tests need the filesystem in use, never written, and a
        mounted ext4 writes its superblock and journal on its own schedule (CI saw a
        device's sha256 change with nothing but the kernel writing to it), which no
        read-only check may be blamed for. fsfreeze flushes it and holds every write."""
        mnt = self.base / f"mnt{len(self.mounts)}"
        mnt.mkdir()
        sh("mount", dev, str(mnt))
        self.mounts.append(mnt)
        sh("fsfreeze", "--freeze", str(mnt))
        return mnt

    def unmount(self, mnt: Path) -> None:
        sh("fsfreeze", "--unfreeze", str(mnt), check=False)
        sh("umount", str(mnt), check=False)
        self.mounts.remove(mnt)

    def pool(self, *devs: str) -> str:
        name = f"pbsafe{uuid.uuid4().hex[:8]}"
        sh("zpool", "create", name, *devs)
        self.pools.append(name)
        return name

    def export(self, name: str, dev: str) -> None:
        sh("zpool", "export", name)
        self.exported.append((name, dev))

    def cleanup(self) -> None:
        for mnt in reversed(list(self.mounts)):
            self.unmount(mnt)
        for name, dev in self.exported:
            # Import from a directory that holds only our device, then destroy by name.
            d = self.base / f"import-{name}"
            d.mkdir(exist_ok=True)
            link = d / os.path.basename(dev)
            if not link.exists():
                link.symlink_to(dev)
            sh("zpool", "import", "-d", str(d), name, check=False)
        for name in self.pools:
            # zfs-fuse is shared with other tests; a busy daemon gets a few more tries.
            for _ in range(20):
                gone = subprocess.run(["zpool", "list", name], capture_output=True, text=True)
                if gone.returncode != 0 and "no such pool" in gone.stderr:
                    break
                sh("zpool", "destroy", "-f", name, check=False)
                time.sleep(0.1)
        for dev in reversed(self.loops):
            sh("losetup", "--detach", dev, check=False)
        shutil.rmtree(self.base, ignore_errors=True)


@machine_fixture(slow=True)
def lab() -> Iterator[Lab]:
    base = Path(tempfile.mkdtemp(prefix="pb-safety-", dir="/var/tmp"))
    lab = Lab(base)
    try:
        yield lab
    finally:
        lab.cleanup()


@pytest.fixture
def zfs(zfs_fuse: None) -> None:
    """The zfs-fuse daemon, started (and stopped) by the session fixture in conftest."""


def refused(lab: Lab, names: Sequence[str], **kw: object) -> ClaimRefused:
    """Claim must be refused; returns the refusal."""
    with pytest.raises(ClaimRefused) as exc:
        claim_devices(ReadOnlyRunner(), names, protect=lab.protect, **kw)  # type: ignore[arg-type]
    return exc.value


def reasons_of(err: ClaimRefused, dev: str) -> list[tuple[str, str, bool]]:
    return [(r.kind, r.detail, r.overridable) for r in err.refusals[dev]]


# --- refused -------------------------------------------------------------------------------


def test_mounted_filesystem_is_refused_even_with_override(lab: Lab) -> None:
    dev = lab.loop()
    mkfs_ext4(dev)
    mnt = lab.mount(dev)
    before = sha(dev)
    err = refused(lab, [dev])
    assert ("mounted", f"mounted at {mnt} (ext4)", False) in reasons_of(err, dev)
    assert "Nothing overrides live use" in err.problem
    err = refused(lab, [dev], overrides=[dev], yes=True)
    assert "mounted at" in err.problem
    assert sha(dev) == before


@pytest.mark.parametrize("fs", ["ext4", "xfs", "btrfs"])
def test_unmounted_filesystem_signature_is_refused_with_the_override_shown(
    lab: Lab, fs: str
) -> None:
    if shutil.which(f"mkfs.{fs}") is None:
        pytest.skip(f"mkfs.{fs} not installed")
    dev = lab.loop("320M" if fs == "xfs" else "128M")
    sh(f"mkfs.{fs}", *(["-q"] if fs == "ext4" else ["-f", "-q"]), dev)
    before = sha(dev)
    err = refused(lab, [dev])
    kinds = reasons_of(err, dev)
    assert any(k == "filesystem" and f"{fs} filesystem" in d and ov for k, d, ov in kinds), kinds
    assert f"--destroy-data-on {dev}" in err.problem
    # The override alone is not enough: without a terminal and without --yes, no go.
    with pytest.raises(PoolbenchError, match="needs a confirmation"):
        claim_devices(ReadOnlyRunner(), [dev], overrides=[dev], protect=lab.protect)
    # The user says no at the prompt.
    with pytest.raises(PoolbenchError, match="Not confirmed"):
        claim_devices(
            ReadOnlyRunner(), [dev], overrides=[dev], protect=lab.protect, confirm=lambda t: False
        )
    assert sha(dev) == before


def test_swap_signature_is_refused(lab: Lab) -> None:
    dev = lab.loop()
    sh("mkswap", dev)
    before = sha(dev)
    err = refused(lab, [dev])
    assert any("swap signature" in d for _, d, _ in reasons_of(err, dev))
    assert sha(dev) == before


def test_lvm_physical_volume_is_refused(lab: Lab) -> None:
    if shutil.which("pvcreate") is None:
        pytest.skip("pvcreate not installed (Debian: lvm2)")
    dev = lab.loop()
    sh("pvcreate", "-q", "-y", dev)
    try:
        before = sha(dev)
        err = refused(lab, [dev])
        assert any("LVM physical volume" in d for _, d, _ in reasons_of(err, dev))
        assert sha(dev) == before
    finally:
        sh("pvremove", "-q", "-y", dev, check=False)  # forget it in LVM's cache too


def test_member_of_imported_zfs_pool_is_refused_without_override(lab: Lab, zfs: None) -> None:
    dev = lab.loop()
    name = lab.pool(dev)
    before = sha(dev)
    err = refused(lab, [dev], overrides=[dev], yes=True)
    assert any(k == "zfs" and f"imported ZFS pool '{name}'" in d and not ov
               for k, d, ov in reasons_of(err, dev))  # fmt: skip
    assert sha(dev) == before


def test_member_of_exported_zfs_pool_is_refused(lab: Lab, zfs: None) -> None:
    dev = lab.loop()
    name = lab.pool(dev)
    lab.export(name, dev)
    before = sha(dev)
    err = refused(lab, [dev])
    assert any(k == "zfs" and f"exported ZFS pool '{name}'" in d and ov
               for k, d, ov in reasons_of(err, dev))  # fmt: skip
    assert sha(dev) == before


def _partitioned(lab: Lab) -> tuple[str, str, str, Path]:
    dev = lab.loop("128M", partscan=True)
    sh("sfdisk", "-q", dev, input_text="label: gpt\n,48M\n,\n")
    sh("partx", "-u", dev, check=False)  # some kernels need the nudge to add partitions
    sh("partx", "-a", dev, check=False)
    p1, p2 = f"{dev}p1", f"{dev}p2"
    for _ in range(50):
        if os.path.exists(p1) and os.path.exists(p2):
            break
        time.sleep(0.1)
    mkfs_ext4(p1)
    return dev, p1, p2, lab.mount(p1)


def test_disk_whose_partition_is_mounted_is_refused(lab: Lab) -> None:
    dev, p1, _, mnt = _partitioned(lab)
    before = sha(dev)
    err = refused(lab, [dev], overrides=[dev], yes=True)
    (pt,) = [r for r in err.refusals[dev] if r.kind == "partition-table"]
    assert "gpt partition table" in pt.detail and f"mounted at {mnt}" in pt.detail
    assert not pt.overridable
    assert sha(dev) == before


def test_partition_of_an_in_use_disk_is_refused(lab: Lab) -> None:
    dev, p1, p2, _ = _partitioned(lab)
    before = sha(p2)
    err = refused(lab, [p2])
    (sib,) = [r for r in err.refusals[p2] if r.kind == "sibling"]
    assert f"with {os.path.basename(p1)}, which is in use (mounted at" in sib.detail
    assert sha(p2) == before


def test_same_device_twice_and_by_two_names_and_with_its_partition(lab: Lab) -> None:
    dev = lab.loop()
    link = lab.base / "alias"
    link.symlink_to(dev)
    with pytest.raises(UsageError, match="given twice"):
        claim_devices(ReadOnlyRunner(), [dev, dev], protect=lab.protect)
    with pytest.raises(UsageError, match="are the same device"):
        claim_devices(ReadOnlyRunner(), [dev, str(link)], protect=lab.protect)
    with pytest.raises(UsageError, match="are the same device"):
        claim_devices(ReadOnlyRunner(), [dev, os.path.basename(dev)], protect=lab.protect)
    disk, p1, p2, _ = _partitioned(lab)
    lab.unmount(lab.mounts[-1])
    with pytest.raises(UsageError, match="the same disk twice"):
        claim_devices(ReadOnlyRunner(), [p2, disk], protect=lab.protect)


def test_symlink_to_an_in_use_device_is_refused_under_its_real_name(lab: Lab) -> None:
    dev = lab.loop()
    mkfs_ext4(dev)
    lab.mount(dev)
    link = lab.base / "innocent-looking-name"
    link.symlink_to(dev)
    before = sha(dev)
    err = refused(lab, [str(link)])
    assert dev in err.refusals and f"named as {link}" in err.problem
    assert sha(dev) == before


@pytest.mark.parametrize("what", ["store", "scratch"])
def test_device_holding_the_store_or_scratch_dir_is_never_claimed(lab: Lab, what: str) -> None:
    dev = lab.loop()
    mkfs_ext4(dev)
    mnt = lab.mount(dev)
    protect = protected_paths(mnt / "pb" / "results.db", None) if what == "store" else (
        protected_paths(lab.store, mnt / "scratch"))  # fmt: skip
    before = sha(dev)
    with pytest.raises(ClaimRefused) as exc:
        claim_devices(ReadOnlyRunner(), [dev], overrides=[dev], yes=True, protect=protect)
    (r,) = [r for r in exc.value.refusals[dev] if r.kind == "protected"]
    assert f"poolbench's {'result store' if what == 'store' else 'scratch directory'}" in r.detail
    assert not r.overridable
    assert sha(dev) == before


def test_device_mounted_between_planning_and_first_write_is_caught(lab: Lab) -> None:
    dev = lab.loop()
    mkfs_ext4(dev)  # an old filesystem the user agreed to destroy
    claims = claim_devices(ReadOnlyRunner(), [dev], overrides=[dev], yes=True, protect=lab.protect)
    mnt = lab.mount(dev)  # ... and then someone mounts it
    before = sha(dev)
    guarded = GuardedRunner(LocalRunner(), claims)
    with pytest.raises(DeviceChanged, match=f"now in use: mounted at {mnt}"):
        guarded.run(["wipefs", "--all", dev])
    assert guarded.calls == [] or all(c.argv[0] != "wipefs" or "--no-act" in c.argv
                                      for c in guarded.calls)  # fmt: skip
    assert sha(dev) == before


def test_device_made_a_pool_member_between_planning_and_first_write(lab: Lab, zfs: None) -> None:
    dev = lab.loop()
    claims = claim_devices(ReadOnlyRunner(), [dev], protect=lab.protect)
    lab.pool(dev)
    before = sha(dev)
    with pytest.raises(DeviceChanged, match="imported ZFS pool"):
        GuardedRunner(LocalRunner(), claims).run(["zpool", "create", "pbsafe-never", dev])
    assert sha(dev) == before


# --- allowed -------------------------------------------------------------------------------


def test_free_device_is_claimed_and_only_it_may_be_written(lab: Lab) -> None:
    dev, other = lab.loop(), lab.loop()
    claims = claim_devices(ReadOnlyRunner(), [dev], protect=lab.protect)
    (c,) = claims.claims
    assert (c.path, c.overridden, claims.overrides) == (dev, (), ())
    assert c.size_bytes == 64 << 20 and c.loop_backing_file
    guarded = GuardedRunner(LocalRunner(), claims)
    other_before = sha(other)
    with pytest.raises(PoolbenchError, match="not a claimed device"):
        guarded.run(["mkfs.ext4", "-q", other])
    assert sha(other) == other_before
    guarded.run(["mkfs.ext4", "-q", dev])  # the claimed one: allowed, after the recheck
    assert claims.rechecked


def test_in_use_device_is_claimed_only_with_override_and_yes_and_logged(lab: Lab) -> None:
    dev = lab.loop()
    sh("mkfs.ext4", "-q", "-L", "olddata", dev)
    refused(lab, [dev], yes=True)  # --yes alone does nothing
    claims = claim_devices(ReadOnlyRunner(), [dev], overrides=[dev], yes=True, protect=lab.protect)
    assert claims.device_paths == [dev]
    store = Store(lab.base / "results.db")
    run_id = store.start_run("study", "safety", ["poolbench", "run"], {})
    claims.record_overrides(store, run_id)
    (row,) = store.device_overrides(run_id)
    assert (row["device"], row["ident"], row["confirmed_by"]) == (dev, dev, "--yes")
    assert "ext4 filesystem labelled 'olddata'" in row["reasons"]
    store.close()


def test_interactive_confirmation_shows_what_will_be_destroyed(lab: Lab) -> None:
    dev = lab.loop()
    sh("mkswap", "-L", "oldswap", dev)
    shown: list[str] = []

    def confirm(text: str) -> bool:
        shown.append(text)
        return True

    claims = claim_devices(
        ReadOnlyRunner(), [dev], overrides=[dev], protect=lab.protect, confirm=confirm
    )
    assert claims.overrides[0].confirmed_by == "interactive"
    assert dev in shown[0] and "swap signature labelled 'oldswap'" in shown[0]


def test_dry_run_on_free_devices_changes_nothing(lab: Lab, zfs: None) -> None:
    devs = [lab.loop(), lab.loop()]
    before = [sha(d) for d in devs]
    echoed: list[str] = []
    claims = claim_devices(ReadOnlyRunner(), devs, protect=lab.protect)
    runner = GuardedRunner(LocalRunner(dry_run=True, echo=echoed.append), claims)
    journal = Journal(runner)
    # What a backend does for one trial, and its teardown.
    runner.run(["zpool", "create", "-o", "ashift=12", "pbsafe-dry", "mirror", *devs])
    journal.pool_created("pbsafe-dry", devs)
    runner.run(["zfs", "set", "recordsize=1M", "pbsafe-dry"])
    runner.run(["mkfs.ext4", "-q", "-F", devs[0]])
    assert journal.teardown() == []
    assert [d for d in devs] and [sha(d) for d in devs] == before
    assert echoed[0].startswith("zpool create -o ashift=12 pbsafe-dry mirror")
    assert "zpool destroy pbsafe-dry" in echoed
    assert "pbsafe-dry" not in sh("zpool", "list", "-H", "-o", "name")


# --- teardown ------------------------------------------------------------------------------


def test_teardown_destroys_its_pool_and_leaves_the_device_free(lab: Lab, zfs: None) -> None:
    dev = lab.loop()
    claims = claim_devices(ReadOnlyRunner(), [dev], protect=lab.protect)
    runner = GuardedRunner(LocalRunner(), claims)
    name = f"pbsafe{uuid.uuid4().hex[:8]}"
    lab.pools.append(name)  # so the fixture cleans up if the test fails midway
    runner.run(["zpool", "create", name, dev])
    journal = Journal(runner)
    guid = journal.pool_created(name, [dev])
    assert guid == pool_guid(LocalRunner(), name)
    assert journal.teardown() == []
    assert pool_guid(LocalRunner(), name) is None
    inv = scan(ReadOnlyRunner(), protect=lab.protect)
    d = inv.get(os.path.basename(dev))
    assert d is not None
    assert d.status == "free", d.reasons


def test_teardown_never_destroys_a_pool_of_the_same_name_it_did_not_create(
    lab: Lab, zfs: None
) -> None:
    a, b = lab.loop(), lab.loop()
    name = lab.pool(a)
    journal = Journal(LocalRunner())
    journal.pool_created(name, [a])
    # Our pool goes away; someone else creates one with the same name on another device.
    _destroy_while_busy(name)
    sh("zpool", "create", name, b)
    kept = journal.teardown()
    assert len(kept) == 1 and "never destroyed" in kept[0], kept
    assert name in sh("zpool", "list", "-H", "-o", "name").split()


def test_disks_command_lists_our_loop_devices(lab: Lab) -> None:
    import json
    import sys

    free, used = lab.loop(), lab.loop()
    mkfs_ext4(used)
    out = subprocess.run(
        [sys.executable, "-m", "poolbench", "disks", "--json", "--db", str(lab.store)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    devices = {d["path"]: d for d in json.loads(out)["devices"]}
    assert devices[free]["status"] == "free" and devices[free]["override"] is None
    assert devices[used]["status"] == "in use"
    assert devices[used]["override"] == f"--destroy-data-on {used}"
    assert devices[free]["loop_backing_file"].startswith(str(lab.base))


def test_disks_check_mode_refuses_and_accepts_like_a_destructive_command(lab: Lab) -> None:
    import sys

    dev = lab.loop()
    mkfs_ext4(dev)
    before = sha(dev)
    cmd = [sys.executable, "-m", "poolbench", "disks", "--db", str(lab.store), dev]
    no = subprocess.run(cmd, capture_output=True, text=True)
    assert no.returncode == EXIT_REFUSED and f"--destroy-data-on {dev}" in no.stderr
    yes = subprocess.run([*cmd, "--destroy-data-on", dev], capture_output=True, text=True)
    assert yes.returncode == 0 and "would be claimed" in yes.stdout, yes.stderr
    mistyped = dev.replace("/loop", "/lopo")  # one slip of the fingers
    typo = subprocess.run([*cmd[:-1], mistyped], capture_output=True, text=True)
    assert typo.returncode == EXIT_INPUT and f"No device {mistyped}. Did you mean" in typo.stderr
    assert sha(dev) == before
