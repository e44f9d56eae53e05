"""What one trial builds: the pool spec from a configuration's levels, the measurement
options, and the findings every measurement of the trial carries."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from poolbench.backends.base import Backend, Pool, PoolSpec
from poolbench.engine import pool_ops
from poolbench.engine.records import TrialConfig
from poolbench.engine.subject import Options
from poolbench.errors import PoolbenchError, UsageError
from poolbench.factors import registry as factors
from poolbench.factors.base import AfterPool
from poolbench.records.findings import Findings
from poolbench.safety.journal import Journal
from poolbench.store.facts import MEMBER_DISKS
from poolbench.study import matrix
from poolbench.study.model import Study
from poolbench.system import probes
from poolbench.system.runner import Runner
from poolbench.workloads.workload import Workload

ZFS_POOL_OPTIONS = ("ashift",)
ZFS_FS_OPTIONS = (
    "recordsize", "compression", "atime", "sync", "primarycache", "special_small_blocks",
    "logbias",
)  # fmt: skip
MD_POOL_OPTIONS = ("chunk", "assume_clean")  # backends/md.py POOL_OPTIONS
ZFS_VOLUME_OPTIONS = ("target", "volblocksize")  # backends/zvol.py: what the workloads run on


class TrialRefused(PoolbenchError):
    """The pool that was built is not the one asked for: nothing was measured on it."""


def _options_by_backend(backend: str, levels: dict[str, str]) -> tuple[dict[str, str], ...]:
    """(pool options, filesystem options, volume options) the backend takes from the levels."""
    pool_opts: dict[str, str] = {}
    fs_opts: dict[str, str] = {}
    volume: dict[str, str] = {}
    if backend == "zfs":
        pool_opts = {k: levels[k] for k in ZFS_POOL_OPTIONS if k in levels}
        fs_opts = {k: levels[k] for k in ZFS_FS_OPTIONS if k in levels}
        volume = {k: levels[k] for k in ZFS_VOLUME_OPTIONS if k in levels}
    elif backend == "btrfs":
        if "compression" in levels:
            fs_opts["compression"] = levels["compression"]
        if "metadata_profile" in levels:
            pool_opts["metadata_profile"] = levels["metadata_profile"]
    elif backend == "md":
        pool_opts = {k: levels[k] for k in MD_POOL_OPTIONS if k in levels}
        fs_opts["fs"] = levels.get("fs", "ext4")
    return pool_opts, fs_opts, volume


def spec_for(cfg: matrix.Config, devices: Sequence[str], name: str, mount_root: Path) -> PoolSpec:
    backend = cfg.backend
    levels = dict(cfg.levels)
    pool_opts, fs_opts, volume = _options_by_backend(backend, levels)
    # Applied by the trial loop itself; and `fs = <backend>` names a stack's own filesystem
    # (fs-compare's matrix: fs=zfs, fs=btrfs beside md's fs=ext3/ext4/xfs).
    consumed = set(factors.KEYS) | ({"fs"} if levels.get("fs") == backend else set())
    unused = (
        set(levels) - {"backend", "layout"} - set(pool_opts) - set(fs_opts) - set(volume)
        - consumed
    )  # fmt: skip
    if unused:
        raise UsageError(
            f"Configuration '{cfg.key}': the {backend} backend has no use for "
            f"{', '.join(sorted(unused))}.",
            "Remove that factor, or split the study by backend.",
        )
    return PoolSpec(
        backend=backend,
        layout=pool_ops.backend_layout(backend, levels["layout"]),
        devices=tuple(devices),
        name=name,
        mount_root=mount_root,
        pool_options=pool_opts,
        fs_options=fs_opts,
        volume=volume,
    )


def refuse_if_not_as_asked(tc: TrialConfig, problems: Sequence[str]) -> None:
    if problems:
        raise TrialRefused(
            f"The pool built for '{tc.key}' is not what was asked: "
            + "; ".join(problems)
            + ". Nothing was measured on it.",
            "Check that this ZFS/btrfs version supports the option as given.",
        )


def options_for(
    study: Study, workloads: list[Workload], tc: TrialConfig, tarball: Path | None
) -> Options:
    """The session's options: the study's [workloads], as the trial's factors set them."""
    from poolbench.units import parse_size

    wl = factors.workloads_for(study.workloads, tc.levels)
    return Options(
        workloads=workloads,
        size=parse_size(wl.size),
        compressibility=wl.compressibility,
        runtime_s=wl.runtime,
        min_window_s=wl.min_window,
        iodepth=wl.iodepth,
        numjobs=wl.jobs,
        metadata_files=wl.metadata_files,
        tarball=tarball,
    )


def findings_for(
    runner: Runner, journal: Journal, backend: Backend, pool: Pool, tc: TrialConfig,
    options: Options,
) -> Findings:  # fmt: skip
    """What every measurement of the trial records: the pool, the replicate, and what the
    pool's factors did (done here, before any workload: the ARC's ceiling, the fill or age)."""
    other: dict[str, object] = {"replicate": tc.replicate}
    # The disks the pool really sits on (sector sizes for the ashift study's 512e note).
    other[MEMBER_DISKS] = [probes.device_info(Path(d).name) for d in pool.block_devices]
    # The pool's factors, in order (journaled: the trial's teardown undoes what they set)
    streams = max((w.streams for w in options.workloads), default=1)
    at = AfterPool(runner, journal, backend, pool, tc.levels, options.size, streams,
                   options.seed or 0)  # fmt: skip
    other.update(factors.after_pool(at))
    return Findings(pool=pool.described, other=other)
