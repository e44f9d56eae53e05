"""Teardown safety: undo only what poolbench itself created, and only if it is still that.

Every pool, mount, loop device and file poolbench creates is recorded here at once, with what
identifies it: a pool by name *and* the GUID read back right after `zpool create`, a mount by
mountpoint and source device, a loop device by its backing file. `teardown()` undoes the
entries newest first and, before each step, checks that the thing is still the one recorded;
a pool of the same name that poolbench did not create is never destroyed, a loop device that
was re-used for another file is never detached. Optionally the journal is also written to a
JSON-lines file, so a crashed run can be cleaned up later.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Required, TypedDict, cast

from poolbench.emulate import process as emulated
from poolbench.errors import PoolbenchError
from poolbench.guards.devices import mounts
from poolbench.safety.creating import await_create
from poolbench.safety.journal_words import describe
from poolbench.safety.loopdetach import detach as _detach
from poolbench.safety.loopdetach import loops_backing as _loops_backing
from poolbench.system import modparams, pgserver, stopping, throttle
from poolbench.system.runner import Runner
from poolbench.system.umount import umount
from poolbench.system.watchdog import narrated
from poolbench.zfs import ops, pools, suspended
from poolbench.zfs.dialect import ZFS_FUSE
from poolbench.zfs.labelclear import clear_member, partitions_of, wipe_partition_table


class Entry(TypedDict, total=False):
    """One journal line: `kind` says what was made, the other keys identify it (which keys
    each kind has is set by its recording method below)."""

    kind: Required[str]  # pool_intent pool mount loop loop_intent throttle emulated_disk md ..
    name: str  # a pool's name
    guid: int  # the pool's GUID read back after `zpool create`
    members: list[str]  # a pool's or an md array's member devices
    spares: list[str]
    dialect: str  # how teardown clears a pool's labels
    clear_labels: bool
    import_dir: str
    mountpoint: str
    source: str
    device: str
    backing_file: str
    majmin: str
    bytes_per_s: int
    root: str
    partition: str
    path: str
    datadir: str  # a PostgreSQL cluster's data directory, its socket directory, its programs
    keep_datadir: bool  # the data directory goes with its pool: not removed file by file
    sockdir: str
    bindir: str
    original: int  # a module parameter's value before poolbench set it
    value: int  # the value poolbench set
    effective: int  # what the parameter's setting was in effect (ARC: c_max, c_min) before
    before: str  # a kernel setting's value before poolbench set it (kind "setting")
    after: str  # and the value poolbench set, as the kernel reads it back


Filter = Callable[[Entry], bool]


@dataclass
class Journal:
    runner: Runner
    path: Path | None = None  # JSON lines, appended as things are created
    entries: list[Entry] = field(default_factory=list)
    sys_block: Path = Path("/sys/class/block")
    mountinfo: Path = Path("/proc/self/mountinfo")
    stuck: list[tuple[str, str]] = field(default_factory=list)  # pools not undone: dialect, why

    @classmethod
    def load(cls, runner: Runner, path: Path) -> Journal:
        # The file is poolbench's own (written by _add): each line one Entry.
        lines = path.read_text().splitlines()
        entries = [cast(Entry, json.loads(line)) for line in lines if line.strip()]
        return cls(runner, path, entries)

    def _add(self, entry: Entry) -> None:
        self.entries.append(entry)
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    # recording --------------------------------------------------------------------------------
    def pool_intent(self, name: str, members: list[str], dialect: str = ZFS_FUSE) -> None:
        """Record, *before* `zpool create`, a pool about to be made from `members`.

        If poolbench dies before `pool_created`, teardown destroys a pool of this name only if
        its leaf devices are exactly these members (nobody else's pool is built on them)."""
        self._add({"kind": "pool_intent", "name": name, "members": members, "dialect": dialect})

    def pool_created(
        self,
        name: str,
        members: list[str],
        clear_labels: bool = True,
        import_dir: str | None = None,
        dialect: str = ZFS_FUSE,
        spares: list[str] | None = None,
    ) -> int:
        """Record a pool just created; returns the GUID it was recorded with.

        `import_dir`: a directory holding only links to the pool's own members; teardown of a
        pool found exported (a crash during an export/import cache drop) imports it from
        there, by GUID, to destroy it. `dialect` says how teardown clears the members'
        labels (`zpool labelclear` on OpenZFS, zeroing the label areas on zfs-fuse);
        `spares` are devices claimed with the pool that may join it later (`zpool replace`):
        teardown clears this pool's labels from them too."""
        if self.runner.dry_run:
            guid = 0  # nothing was created; teardown of a dry run only prints
        else:
            found = pools.pool_guid(self.runner, name)
            if found is None:
                raise PoolbenchError(f"Pool {name} was created but is not listed.", "")
            guid = found
        entry: Entry = {"kind": "pool", "name": name, "guid": guid, "members": members,
                 "clear_labels": clear_labels, "dialect": dialect}  # fmt: skip
        if import_dir is not None:
            entry["import_dir"] = import_dir
        if spares:
            entry["spares"] = spares
        self._add(entry)
        return guid

    def mount_created(self, mountpoint: str, source: str) -> None:
        self._add({"kind": "mount", "mountpoint": mountpoint, "source": source})

    def loop_created(self, device: str, backing_file: str) -> None:
        self._add({"kind": "loop", "device": device, "backing_file": backing_file})

    def loop_intent(self, backing_file: str) -> None:
        """Record, *before* `losetup`, a loop device about to be made over `backing_file`;
        teardown detaches whichever loop devices then back that file."""
        self._add({"kind": "loop_intent", "backing_file": backing_file})

    def throttle_set(self, device: str, majmin: str, bytes_per_s: int, root: str) -> None:
        """Record, *before* it is set, a blkio cap on `device` (system/throttle.py); teardown
        removes it while the rule is still the one set, before the device is detached (a
        loop device's number, and a rule on it, outlive the detach)."""
        self._add({"kind": "throttle", "device": device, "majmin": majmin,
                   "bytes_per_s": int(bytes_per_s), "root": root})  # fmt: skip

    def emulated_disk_intent(self, mountpoint: str) -> None:
        """Record, *before* it starts, a disk emulator to serve at `mountpoint`
        (emulate/process.py); teardown unmounts it and sees its process gone."""
        self._add({"kind": "emulated_disk", "mountpoint": mountpoint})

    def param_set(self, name: str, original: int, value: int, effective: int, root: str) -> None:
        """Record, *before* it is written, a module parameter (system/modparams.py) about to
        go from `original` to `value`; teardown puts it back while the parameter still holds
        `value` (someone who changed it since keeps theirs): first `effective`, the setting
        that was in effect, then `original` (OpenZFS ignores a 0, "the default", written to
        zfs_arc_max, so writing 0 alone would leave the lowered ceiling in place)."""
        self._add({"kind": "param", "name": name, "original": int(original),
                   "value": int(value), "effective": int(effective), "root": root})  # fmt: skip

    def array_created(self, device: str, members: list[str]) -> None:
        """Record, *before* `mdadm --create`, an md array about to be made from `members`;
        teardown stops it only if its member devices are exactly these."""
        self._add({"kind": "md", "device": device, "members": members})

    def partition_table_intent(self, device: str, partition: str) -> None:
        """Record, *before* sfdisk, the partition table about to be written on `device` for
        a partition/slice vdev source; teardown wipes it again, so a disk goes back blank."""
        self._add({"kind": "partition_table", "device": device, "partition": partition})

    def path_created(self, path: str) -> None:
        """A file or a directory tree poolbench made (removed with everything in it)."""
        self._add({"kind": "path", "path": path})

    def postgres_intent(self, datadir: str, sockdir: str, bindir: str,
                        keep_datadir: bool = False) -> None:  # fmt: skip
        """Record, *before* `initdb`, a PostgreSQL cluster (system/pgserver.py); teardown
        stops a server still running on `datadir` and removes both directories, or only the
        socket directory with `keep_datadir` (a data directory in a pool about to be
        destroyed goes with it: removed file by file it would hang in a pool that stopped
        answering)."""
        entry: Entry = {"kind": "postgres", "datadir": datadir, "sockdir": sockdir,
                        "bindir": bindir}  # fmt: skip
        if keep_datadir:
            entry["keep_datadir"] = True
        self._add(entry)

    def setting_changed(self, path: str, before: str, after: str) -> None:
        """Record, *before* it is written, a kernel setting (a sysfs or tracefs file, e.g. the
        blk tracer `record` enables); teardown writes `before` back while it still reads
        `after`."""
        self._add({"kind": "setting", "path": path, "before": before, "after": after})

    def dir_created(self, path: str) -> None:
        """A directory (a mountpoint) poolbench made: removed only if it is empty."""
        self._add({"kind": "dir", "path": path})

    # undoing ----------------------------------------------------------------------------------
    def teardown(self, only: Filter | None = None) -> list[str]:
        """Undo every entry (or those `only` selects), newest first; returns what was left
        alone and why. Undone entries leave the journal (and its file)."""
        kept: list[str] = []
        chosen = [e for e in self.entries if only is None or only(e)]
        undone: list[Entry] = []
        what = f"tearing down {describe(chosen)}"
        if chosen and stopping.stopping():  # heard at once, whatever the teardown takes
            stopping.say(f"stopping: {what}; a second signal is ignored until this is done")
        with stopping.deferred(what):  # a stop signal never leaves it half done
            for entry in reversed(chosen):
                step = entry.get("name") or entry.get("mountpoint") or entry.get("device") or ""
                try:  # a step quiet for more than 2 s says what it waits for
                    with narrated(f"teardown: undoing {entry['kind']} {step or entry}"):
                        note = getattr(self, f"_undo_{entry['kind']}")(entry)
                except (PoolbenchError, OSError) as exc:
                    # A failed undo stays in the journal for `poolbench cleanup` to retry, and
                    # so does everything older: what was made before it (loop devices, their
                    # files) is what it stands on, and must not be pulled from under it.
                    kept.append(f"{entry}: {exc}")
                    if entry["kind"] in ("pool", "pool_intent"):
                        self.stuck.append((str(entry.get("dialect") or ZFS_FUSE), str(exc)))
                    break
                undone.append(entry)
                if note:
                    kept.append(note)  # deliberately left alone (not ours any more): forget it
        self.entries = [e for e in self.entries if not any(e is u for u in undone)]
        if self.path is not None:
            if not self.entries:
                self.path.unlink(missing_ok=True)
            else:
                self._rewrite()
        return kept

    def teardown_or_raise(self, left_alone: str, fix: str, only: Filter | None = None) -> None:
        """`teardown`, and a PoolbenchError (`left_alone` + what was left, and `fix`) if
        anything was left: the one ending of every scope that undoes what it made."""
        left = self.teardown(only)
        if left:
            raise PoolbenchError(left_alone + "; ".join(left), fix)

    def _rewrite(self) -> None:
        assert self.path is not None
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as fh:
            for e in self.entries:
                fh.write(json.dumps(e) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def _undo_pool(self, e: Entry) -> str:
        name, guid = str(e["name"]), int(e["guid"])
        if self.runner.dry_run:
            pools.destroy(self.runner, name)
            return ""
        members, dialect = [str(m) for m in e["members"]], str(e.get("dialect") or ZFS_FUSE)
        destroyed = await_create(name, verb="destroy")  # a killed run's: let it end, not race it
        current = suspended.guid(self.runner, name, members, dialect)  # PoolStuck: no answer
        if current is None and destroyed:  # our own destroy did it; its labels are left
            return self._clear_labels(e, guid)
        import_dir = e.get("import_dir")
        if current is None and import_dir and Path(import_dir).is_dir():
            # Exported by a cache drop that never got to import it again: bring back exactly
            # the pool with our GUID, from our own member links, under its own name.
            ops.try_import(self.runner, str(import_dir), str(guid))
            current = pools.pool_guid(self.runner, name)
        if current is None:
            return f"pool {name} (GUID {guid}) is not imported; left alone"
        if current != guid:
            return (f"pool {name} has GUID {current}, not the GUID {guid} poolbench created: "
                    "someone else's pool, never destroyed")  # fmt: skip
        self._destroy(name, members, dialect)
        return self._clear_labels(e, guid)

    def _clear_labels(self, e: Entry, guid: int) -> str:
        members, dialect = [str(m) for m in e["members"]], str(e.get("dialect") or ZFS_FUSE)
        if e.get("clear_labels"):
            self._clear_members([*members, *e.get("spares", [])], guid, dialect)
        return ""

    def _destroy(self, name: str, members: list[str], dialect: str) -> None:
        """`zpool destroy`, or the path that can finish on a pool that stopped answering."""
        table = [suspended.Mount(m.mountpoint, m.source) for m in mounts(self.mountinfo)]
        suspended.destroy(self.runner, name, members, dialect, table)

    def _clear_members(self, members: list[str], guid: int, dialect: str) -> None:
        """Return each member as found: no label of this pool (GUID-checked) and no partition
        table that `zpool create` wrote on it (zfs/labelclear.py)."""
        for dev in members:
            clear_member(self.runner, str(dev), guid, dialect, self.sys_block)

    def _undo_mount(self, e: Entry) -> str:
        mp, source = str(e["mountpoint"]), str(e["source"])
        if self.runner.dry_run:
            self.runner.run(["umount", mp])
            return ""
        here = [m for m in mounts(self.mountinfo) if m.mountpoint == mp]
        if not here:
            return ""
        if os.path.realpath(here[-1].source) != os.path.realpath(source):
            return f"{mp} is now a mount of {here[-1].source}, not of {source}; left alone"
        umount(self.runner, mp, pools.busy_seconds())
        return ""

    def _undo_loop(self, e: Entry) -> str:
        dev, backing = str(e["device"]), str(e["backing_file"])
        if self.runner.dry_run:
            self.runner.run(["losetup", "--detach", dev])
            return ""
        try:
            now = (self.sys_block / os.path.basename(dev) / "loop" / "backing_file").read_text()
        except OSError:
            return ""  # already detached
        if os.path.realpath(now.strip()) != os.path.realpath(backing):
            return f"{dev} now backs {now.strip()}, not {backing}; left alone"
        _detach(self.runner, self.sys_block, os.path.basename(dev), backing)
        return ""

    def _undo_throttle(self, e: Entry) -> str:
        majmin, root, rate = str(e["majmin"]), Path(str(e["root"])), int(e["bytes_per_s"])
        if self.runner.dry_run:
            return ""
        now = throttle.caps(root).get(majmin)
        if now is None:
            return ""  # never set (interrupted before it was), or already removed
        if now != (rate, rate):
            return f"the cap on {e['device']} ({majmin}) is now {now}, not ours; left alone"
        throttle.set_cap(majmin, 0, root)
        return ""

    def _undo_emulated_disk(self, e: Entry) -> str:
        if self.runner.dry_run:
            self.runner.run(["umount", str(e["mountpoint"])])
            return ""
        return emulated.stop(self.runner, Path(str(e["mountpoint"])), self.mountinfo)

    def _undo_param(self, e: Entry) -> str:
        name, root = str(e["name"]), Path(str(e["root"]))
        if self.runner.dry_run:
            return ""
        now = modparams.read(name, root)
        if now is None or now == e["original"]:
            return ""  # never written (interrupted before), or already put back
        if now != e["value"]:
            return f"{name} is now {now}, not the {e['value']} poolbench set; left alone"
        effective = int(e.get("effective") or 0)
        if effective and effective != e["original"]:
            modparams.write(name, effective, root)
        modparams.write(name, int(e["original"]), root)
        return ""

    def _undo_pool_intent(self, e: Entry) -> str:
        name = str(e["name"])
        if self.runner.dry_run:
            return ""  # the dry run's `zpool destroy` is printed by the "pool" entry
        leaves = pools.members(self.runner, name)
        if leaves is None and await_create(name):
            # A poolbench killed mid-`zpool create` leaves that command running: the pool
            # appears after the kill, so wait for the command before deciding.
            leaves = pools.members(self.runner, name)
        if leaves is None:
            return ""  # never created (or already destroyed)
        want = sorted(os.path.realpath(str(m)) for m in e["members"])
        if sorted(leaves) != want and not _partitions_of(want, leaves, self.sys_block):
            return (
                f"pool {name} is built on {', '.join(leaves)}, not on the members poolbench "
                "was about to use: someone else's pool, never destroyed"
            )
        # The pool on exactly our members is the one our `zpool create` made: its GUID, read
        # now, is what its labels carry.
        guid = pools.pool_guid(self.runner, name)
        self._destroy(name, [str(m) for m in e["members"]], str(e.get("dialect") or ZFS_FUSE))
        if guid is not None:
            self._clear_members(e["members"], guid, str(e.get("dialect") or ZFS_FUSE))
        return ""

    def _undo_loop_intent(self, e: Entry) -> str:
        backing = str(e["backing_file"])
        if self.runner.dry_run:
            return ""
        for name in _loops_backing(self.sys_block, backing):
            _detach(self.runner, self.sys_block, name, backing)
        return ""

    def _undo_md(self, e: Entry) -> str:
        dev, members = str(e["device"]), [str(m) for m in e["members"]]
        if self.runner.dry_run:
            self.runner.run(["mdadm", "--stop", dev])
            return ""
        real = os.path.realpath(dev)
        node = self.sys_block / os.path.basename(real)
        if not real.startswith("/dev/") or not (node / "md").is_dir():
            return ""  # never assembled, or already stopped
        want = {os.path.basename(os.path.realpath(m)) for m in members}
        holders = node / "slaves"
        slaves = {p.name for p in holders.iterdir()} if holders.is_dir() else set()
        if slaves != want:
            return f"{dev} is built on {', '.join(sorted(slaves))}, not on {members}; left alone"
        self.runner.run(["mdadm", "--stop", real])
        for m in members:
            self.runner.run(["mdadm", "--zero-superblock", m], check=False)
        return ""

    def _undo_partition_table(self, e: Entry) -> str:
        """Wipe the table poolbench wrote, only if its one partition is still the only one
        and nothing mounts it (the pool on it, newer in the journal, is gone by now)."""
        dev, part = str(e["device"]), str(e["partition"])
        if self.runner.dry_run:
            self.runner.run(["wipefs", "--all", "--quiet", dev])
            return ""
        parts = partitions_of(dev, self.sys_block)
        if not parts:
            return ""  # never written (sfdisk did not run), or the device is gone
        if [os.path.realpath(p) for p in parts] != [os.path.realpath(part)]:
            return f"{dev} now has partitions {', '.join(parts)}, not only {part}; left alone"
        if any(
            os.path.realpath(m.source) == os.path.realpath(part) for m in mounts(self.mountinfo)
        ):
            return f"{part} is mounted; its partition table was left alone"
        wipe_partition_table(self.runner, dev, parts)
        return ""

    def _undo_path(self, e: Entry) -> str:
        p = Path(str(e["path"]))
        if self.runner.dry_run:
            return ""
        if p.is_dir() and not p.is_symlink():
            inside = self._mounts_under(p)
            if inside:
                return f"{p} holds the mount {inside[0]}; left alone"
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        return ""

    def _undo_postgres(self, e: Entry) -> str:
        dirs = (Path(str(e["datadir"])), Path(str(e["sockdir"])))
        pgserver.stop(self.runner, Path(str(e["bindir"])), *dirs,
                      remove_datadir=not e.get("keep_datadir"))  # fmt: skip
        return ""

    def _undo_setting(self, e: Entry) -> str:
        p, before, after = Path(str(e["path"])), str(e["before"]), str(e["after"])
        if self.runner.dry_run or not p.exists():
            return ""  # the device or the tracefs mount is gone, and the setting with it
        now = p.read_text().strip()
        if now == before:
            return ""  # never set (interrupted before the write), or already restored
        if now != after:
            return f"{p} now reads {now!r}, not the {after!r} poolbench set; left alone"
        p.write_text(before + "\n")
        return ""

    def _undo_dir(self, e: Entry) -> str:
        p = Path(str(e["path"]))
        if self.runner.dry_run or not p.is_dir() or p.is_symlink():
            return ""
        if self._mounts_under(p):
            return f"{p} is still a mountpoint; left alone"
        try:
            p.rmdir()
        except OSError:
            return f"{p} is not empty; left alone"
        return ""

    def _mounts_under(self, p: Path) -> list[str]:
        root = os.path.realpath(p)
        return [
            m.mountpoint
            for m in mounts(self.mountinfo)
            if m.mountpoint == root or m.mountpoint.startswith(root.rstrip("/") + "/")
        ]


def _partitions_of(members: list[str], leaves: list[str], sys_block: Path) -> bool:
    """Whether `leaves` are exactly the first partitions OpenZFS made on the whole disks
    `members` (one leaf per member, each a partition of it)."""
    if len(members) != len(leaves):
        return False
    parts = {m: {os.path.realpath(p) for p in partitions_of(m, sys_block)} for m in members}
    return sorted(leaves) == sorted(
        next((lf for lf in leaves if lf in parts[m]), m) for m in members
    )
