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
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poolbench.errors import PoolbenchError
from poolbench.guards.devices import mounts
from poolbench.safety.zfslabel import LABEL_SIZE, label_offsets, read_labels
from poolbench.system.runner import Runner


def pool_guid(runner: Runner, name: str) -> int | None:
    """GUID of the imported pool `name`, or None. Works with OpenZFS and zfs-fuse."""
    for attempt in range(3):  # the daemon may be busy or restarting: try again
        res = runner.run(["zpool", "list", "-H", "-o", "name,guid"], check=False, mutates=False)
        if res.returncode == 0:
            break
        time.sleep(0.2 * (attempt + 1))
    else:
        raise PoolbenchError(
            f"Cannot list ZFS pools: {res.stderr.strip() or res.returncode}.",
            "Is the ZFS service (zfs-fuse daemon or the zfs module) running?",
        )
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2 and parts[0] == name and parts[1].strip().isdigit():
            return int(parts[1])
    return None


@dataclass
class Journal:
    runner: Runner
    path: Path | None = None  # JSON lines, appended as things are created
    entries: list[dict[str, Any]] = field(default_factory=list)
    sys_block: Path = Path("/sys/class/block")
    mountinfo: Path = Path("/proc/self/mountinfo")

    @classmethod
    def load(cls, runner: Runner, path: Path) -> Journal:
        entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return cls(runner, path, entries)

    def _add(self, entry: dict[str, Any]) -> None:
        self.entries.append(entry)
        if self.path is not None:
            with open(self.path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")
                fh.flush()
                os.fsync(fh.fileno())

    # recording --------------------------------------------------------------------------------
    def pool_created(self, name: str, members: list[str], clear_labels: bool = True) -> int:
        """Record a pool just created; returns the GUID it was recorded with."""
        if self.runner.dry_run:
            guid = 0  # nothing was created; teardown of a dry run only prints
        else:
            found = pool_guid(self.runner, name)
            if found is None:
                raise PoolbenchError(f"Pool {name} was created but is not listed.", "")
            guid = found
        self._add(
            {"kind": "pool", "name": name, "guid": guid, "members": members,
             "clear_labels": clear_labels}
        )  # fmt: skip
        return guid

    def mount_created(self, mountpoint: str, source: str) -> None:
        self._add({"kind": "mount", "mountpoint": mountpoint, "source": source})

    def loop_created(self, device: str, backing_file: str) -> None:
        self._add({"kind": "loop", "device": device, "backing_file": backing_file})

    def path_created(self, path: str) -> None:
        self._add({"kind": "path", "path": path})

    # undoing ----------------------------------------------------------------------------------
    def teardown(self) -> list[str]:
        """Undo every entry, newest first; returns what was left alone and why."""
        kept: list[str] = []
        for entry in reversed(self.entries):
            try:
                note = getattr(self, f"_undo_{entry['kind']}")(entry)
            except (PoolbenchError, OSError) as exc:
                note = f"{entry}: {exc}"
            if note:
                kept.append(note)
        self.entries.clear()
        if self.path is not None and not kept:
            self.path.unlink(missing_ok=True)
        return kept

    def _undo_pool(self, e: dict[str, Any]) -> str:
        name, guid = str(e["name"]), int(e["guid"])
        if self.runner.dry_run:
            self.runner.run(["zpool", "destroy", name])
            return ""
        current = pool_guid(self.runner, name)
        if current is None:
            return f"pool {name} (GUID {guid}) is not imported; left alone"
        if current != guid:
            return (
                f"pool {name} has GUID {current}, not the GUID {guid} poolbench created: "
                "someone else's pool, never destroyed"
            )
        self.runner.run(["zpool", "destroy", name])
        if e.get("clear_labels"):
            for dev in e["members"]:
                self._clear_labels(str(dev), guid)
        return ""

    def _clear_labels(self, dev: str, guid: int) -> None:
        """Zero the four ZFS labels of a member, only if they are still this pool's labels."""
        label = read_labels(Path(dev))
        if label is None or label.pool_guid != guid:
            return
        size = os.stat(dev).st_size or _device_size(dev)
        for offset in label_offsets(size):
            self.runner.run(
                ["dd", "if=/dev/zero", f"of={dev}", f"bs={LABEL_SIZE}", "count=1",
                 f"seek={offset // LABEL_SIZE}", "conv=notrunc,fsync", "status=none"]
            )  # fmt: skip

    def _undo_mount(self, e: dict[str, Any]) -> str:
        mp, source = str(e["mountpoint"]), str(e["source"])
        if self.runner.dry_run:
            self.runner.run(["umount", mp])
            return ""
        here = [m for m in mounts(self.mountinfo) if m.mountpoint == mp]
        if not here:
            return ""
        if os.path.realpath(here[-1].source) != os.path.realpath(source):
            return f"{mp} is now a mount of {here[-1].source}, not of {source}; left alone"
        self.runner.run(["umount", mp])
        return ""

    def _undo_loop(self, e: dict[str, Any]) -> str:
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
        self.runner.run(["losetup", "--detach", dev])
        return ""

    def _undo_path(self, e: dict[str, Any]) -> str:
        p = Path(str(e["path"]))
        if self.runner.dry_run:
            return ""
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        return ""


def _device_size(dev: str) -> int:
    fd = os.open(dev, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)
