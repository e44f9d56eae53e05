"""The trial's pool operations around its workloads (engine.hooks.TrialHooks): one member
offline for `degraded-read`, the resilver after `zpool replace`, RAIDZ expansion, the usable
space for `capacity`, and the pool's own accounting (compressratio, per-vdev I/O, allocation
classes) read back after every measurement. Each asks its backend for the capability it
needs (backends/base.py), so a stack that lacks one is refused by name.
"""

from __future__ import annotations

import os
import re
import time

from poolbench.backends.base import (
    Backend,
    Pool,
    SupportsAccounting,
    SupportsCompressionReadBack,
    SupportsDiskReplace,
    SupportsExpansion,
    capability,
    require,
)
from poolbench.engine import l2arc_reads, resilver_load
from poolbench.engine.hooks import OpResult
from poolbench.engine.op_sections import (
    CapacityRecord,
    ExpandRecord,
    PoolSaid,
    PoolStateRecord,
    ResilverRecord,
    ScrubRecord,
)
from poolbench.errors import PoolbenchError, UsageError
from poolbench.factors import load as load_factor
from poolbench.factors import registry as factors
from poolbench.factors.base import AfterMeasurement, Levels
from poolbench.factors.fill import usable_bytes
from poolbench.system.runner import Runner
from poolbench.workloads.fiojob import JobParams
from poolbench.workloads.library import parse_load
from poolbench.workloads.workload import Workload
from poolbench.zfs.parse import TopVdev

GiB = 1 << 30
MiB = 1 << 20


# -- hooks ------------------------------------------------------------------------------------
def distributed_spare(top: TopVdev | None) -> str | None:
    """The first distributed spare of a dRAID top vdev as OpenZFS names it (draidP-T-S, T the
    top vdev's index, from its status name "draidP:Dd:Cc:Ss-T"), or None: not a dRAID, or
    one without spares."""
    m = re.fullmatch(r"draid(\d):\d+d:\d+c:(\d+)s-(\d+)", top.name) if top else None
    if m is None or int(m.group(2)) == 0:
        return None
    return f"draid{m.group(1)}-{m.group(3)}-0"


class PoolHooks:
    """engine.hooks.TrialHooks for one trial's pool."""

    def __init__(
        self, runner: Runner, backend: Backend, pool: Pool, levels: Levels | None = None
    ) -> None:
        self.runner = runner
        self.backend = backend
        self.pool = pool
        self.levels = levels or {}  # the configuration's: its factors read back after each
        self.load = load_factor.of(self.levels)  # the resilver's foreground workload, if any
        self.offline_leaf: str | None = None
        self.offline_top: TopVdev | None = None

    def before(self, w: Workload) -> PoolStateRecord:
        if w.pool_state != "degraded":
            return PoolStateRecord()
        if self.offline_leaf is None:
            replacing = self._replacing()
            self.offline_top, self.offline_leaf = self._member_to_offline(replacing)
            replacing.offline(self.pool, self.offline_leaf)
        return PoolStateRecord(state="degraded", offline=self.offline_leaf)

    def _member_to_offline(self, replacing: SupportsDiskReplace) -> tuple[TopVdev, str]:
        """The first redundant vdev and its last member, as `zpool status` names it now."""
        redundant = [t for t in replacing.data_vdevs(self.pool) if t.kind != "stripe" and t.leaves]
        if not redundant:
            raise UsageError(
                f"Layout {self.pool.spec.layout} has no redundancy: no member can go offline.",
                "Use a mirror or raidz layout for degraded-read and resilver.",
            )
        leaf = redundant[0].leaves[-1]
        # `zpool status` names a /dev node by its short name ("loop1"), which zfs-fuse's
        # offline and replace do not resolve before the pool was imported through its
        # links ("no such device in pool"); the full path works in both dialects.
        if not leaf.startswith("/") and os.path.exists(f"/dev/{leaf}"):
            leaf = f"/dev/{leaf}"
        return redundant[0], leaf

    def operate(self, w: Workload, params: JobParams) -> OpResult:
        if w.name == "capacity":
            usable = usable_bytes(self.pool)
            how = (
                "zfs get used,available (root dataset)"
                if self.pool.described.get("usable_bytes")
                else "statvfs of the mountpoint"
            )
            section = CapacityRecord(usable_bytes=usable, how=how)
            return OpResult(usable / GiB, 0, 0.0, sections={"capacity": section})
        if w.name == "resilver":
            return self._resilver(params)
        if w.name.startswith("l2arc-read-"):
            return l2arc_reads.measure(self.runner, w, params)
        if w.name == "expand":
            return self._expand()
        raise PoolbenchError(f"No pool operation named {w.name}.", "")

    def _expand(self) -> OpResult:
        """RAIDZ expansion: attach the unused disk to the first raidz vdev, timed until the
        reflow is done; the pool's allocated bytes (what the reflow moves) and its usable
        space before and after, as ZFS reports them."""
        expanding = require(self.backend, SupportsExpansion, "attach a disk to a raidz vdev",
                            "Run the expand workload on OpenZFS >= 2.3.")  # fmt: skip
        spare_list = list(self.pool.described.get("unused_devices") or [])
        raidz = [t for t in expanding.data_vdevs(self.pool) if t.kind.startswith("raidz")]
        if not spare_list or not raidz:
            raise UsageError(
                f"Expansion of {self.pool.spec.name}: it needs a raidz vdev and an unused disk.",
                "Give the study one more disk than a raidz layout uses (e.g. raidz1:3 on 4).",
            )
        before = expanding.usable_now(self.pool)
        alloc = expanding.allocated(self.pool) or 0
        seconds, after = expanding.expand(self.pool, raidz[0].name, spare_list[0])
        if after is not None:  # what a later capacity workload reports
            self.pool.described["usable_bytes"] = after
        section = ExpandRecord(
            vdev=raidz[0].name,
            width_before=raidz[0].width,
            disk=spare_list[0],
            allocated_bytes=alloc,
            usable_before=before,
            usable_after=after,
            seconds=round(seconds, 3),
            timing="`zpool attach -w` from its start until it returned (reflow done)",
        )
        warnings = [] if after is not None else ["the usable space after could not be read"]
        return OpResult(alloc / seconds / MiB, alloc, seconds,
                        sections={"expand": section}, warnings=warnings)  # fmt: skip

    def _resilver(self, params: JobParams) -> OpResult:
        """Replace the offline member and time the resilver: onto the top vdev's distributed
        spare when it is a dRAID with one (OpenZFS's sequential rebuild, then the scrub it
        starts to verify the copied blocks, timed apart), else onto the unused disk. With a
        `load`, its foreground runs from the replace until the resilver is finished, and
        then alone on the healthy pool (engine/resilver_load.py)."""
        assert self.offline_leaf is not None  # before() took it offline
        replacing = self._replacing()
        new = distributed_spare(self.offline_top)
        if new is None:
            spare_list = list(self.pool.described.get("unused_devices") or [])
            if not spare_list:
                raise UsageError(
                    f"Resilver of {self.pool.spec.name}: no spare disk to replace the offline one.",
                    "Give the study one more disk than the layout uses, or a dRAID layout with "
                    "a distributed spare (e.g. draid1:2d:1s).",
                )
            new = spare_list[0]
        fg = self._foreground(params)
        t0, start_ms = time.monotonic(), resilver_load.now_ms()
        try:
            replacing.replace(self.pool, self.offline_leaf, new)
            st = replacing.wait_resilver(self.pool)
        except BaseException:
            if fg is not None:
                fg.stop(quiet=True)  # the error in flight is the one to report
            raise
        end, end_ms = time.monotonic(), resilver_load.now_ms()
        seconds = max(end - t0, 1e-3)
        if fg is not None:
            fg.stop()  # before a verifying scrub starts
        nbytes = st.resilvered_bytes or 0
        warnings = []
        if st.resilvered_bytes is None:
            warnings.append("zpool status did not report the resilvered bytes")
        section: ResilverRecord = {
            "replaced": self.offline_leaf,
            "with": new,
            "kind": "sequential rebuild to a distributed spare" if st.rebuilt_vdev
            else "healing resilver",
            "resilvered_bytes": st.resilvered_bytes,
            "seconds": round(seconds, 3),
            "status_line": st.line,
            "timing": "from `zpool replace` until `zpool status` reports it finished "
            "(polled every 0.1 s)",
        }  # fmt: skip
        if st.rebuilt_vdev:
            section["rebuilt_vdev"] = st.rebuilt_vdev
            section["verify_scrub"] = self._verify_scrub(warnings)
        if fg is not None:  # alone once the pool is healthy (and scrubbed, after a rebuild)
            section[load_factor.KEY] = resilver_load.finish(
                fg, start_ms, end_ms, lambda: self.backend.drop_cache(self.pool)
            )
        return OpResult(nbytes / seconds / MiB, nbytes, seconds,
                        sections={"resilver": section}, warnings=warnings)  # fmt: skip

    def _foreground(self, params: JobParams) -> resilver_load.Foreground | None:
        """The load started on a cold cache, or None (an idle resilver)."""
        if self.load is None or self.load == "none":
            return None
        w, rate = parse_load(self.load)
        self.backend.drop_cache(self.pool)
        # the import names the members by their links now: the offline one too
        self.offline_top, self.offline_leaf = self._member_to_offline(self._replacing())
        fg = resilver_load.Foreground(self.runner, w, params, rate)
        fg.start()
        return fg

    def _verify_scrub(self, warnings: list[str]) -> ScrubRecord:
        """The scrub OpenZFS starts after a sequential rebuild: its time, apart from the
        rebuild's (redundancy is back when the rebuild ends; the checksums are checked when
        the scrub does)."""
        t0 = time.monotonic()
        sc = self._replacing().wait_scrub(self.pool)
        if not sc.seen:
            warnings.append(
                "no scrub followed the sequential rebuild (zfs_rebuild_scrub_enabled=0?)"
            )
            return ScrubRecord(seen=False)
        return ScrubRecord(seen=True, seconds=round(time.monotonic() - t0, 3), status_line=sc.line)

    def _replacing(self) -> SupportsDiskReplace:
        return require(self.backend, SupportsDiskReplace, "take a member offline",
                       "Run degraded-read and resilver on ZFS.")  # fmt: skip

    def after(self, w: Workload) -> PoolSaid:
        accounts = capability(self.backend, SupportsAccounting)
        if accounts is not None:
            # After the timed window: the workload's blocks in the pool's own accounting (in
            # the guest, 400 small files fsync'd were not yet in the special class's alloc)
            accounts.sync_txg(self.pool)
        # what the configuration's factors read back (the dedup table of a dedup=on pool)
        said = PoolSaid(
            factors.after_measurement(
                AfterMeasurement(self.runner, self.backend, self.pool, self.levels)
            )
        )
        if accounts is None:
            return said
        said.compressratio = accounts.compressratio(self.pool)
        said.zvol = accounts.volume_space(self.pool)  # a zvol target: what it is charged
        said.zpool_iostat = accounts.iostat_snapshot(self.pool)  # OpenZFS: per-vdev I/O
        if said.zpool_iostat:
            # what the data vdevs and a special vdev hold (the special study's fill figure),
            # and how full each class is (special's 75% threshold)
            said.class_alloc, said.class_free = accounts.class_alloc(self.pool, said.zpool_iostat)
        return said

    def compression(self) -> str | None:
        if self.pool.spec.backend == "directory":  # someone else's filesystem: not ours to say
            return "not read (a directory on a filesystem poolbench did not make)"
        reads = capability(self.backend, SupportsCompressionReadBack)
        if reads is not None:  # read back: OpenZFS's default is "on" (lz4)
            value = reads.compression_setting(self.pool)
        else:  # btrfs: the compress= mount option the configuration asked for (checked at build)
            value = self.pool.spec.fs_options.get("compression")
        return None if value in (None, "off", "no", "none") else f"compression={value}"
