"""One trial, in order, in one place (`run`): its disks, what the factors do before the
pool, the pool, the refusal if it is not what was asked, the workloads' options, the findings
every measurement carries, the measurement of this replicate, the teardown of the pool.

A dry run walks the same sequence, the same code: its runner prints each command that would
change something instead of running it, fio answers with nothing measured (workloads/fio.py
`planned`), and the pool, not built, answers the few read-backs the trial needs from a planned
description (backends/planned.py). It makes no figure and stores nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from poolbench.backends import planned
from poolbench.backends.base import Backend, Pool, PoolSpec, SupportsVolumes, require
from poolbench.backends.zvol import wanted as volume_wanted
from poolbench.engine import stalled
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.pool_hooks import PoolHooks
from poolbench.engine.records import TrialConfig
from poolbench.engine.session import Session
from poolbench.engine.subject import BlockDevice, Options, Subject
from poolbench.errors import PoolbenchError, UsageError
from poolbench.factors import registry as factors
from poolbench.factors.base import AfterPool
from poolbench.guards.devices import MountInfo, Target
from poolbench.records.findings import Findings
from poolbench.safety.claims import ClaimSet
from poolbench.safety.journal import Journal
from poolbench.store.db import Store
from poolbench.store.facts import MEMBER_DISKS
from poolbench.study import matrix
from poolbench.study.model import Study, Workloads
from poolbench.system import probes
from poolbench.system.runner import Runner
from poolbench.units import parse_size
from poolbench.workloads.workload import Workload


@dataclass(frozen=True)
class Bench:
    """What every trial of one study run shares."""

    runner: Runner
    store: Store
    run_id: int
    study: Study
    workloads: list[Workload]
    backends: Mapping[str, Backend]
    scratch: Path  # sparse files and mountpoints
    claims: ClaimSet | None  # real devices, claimed by the safety layer
    seed: int | None  # seeds fio's offsets too, so `run --seed N` replays them
    tarball: Path | None  # the plain tar `untar` extracts
    commands: CommandLog
    fio_version: str | None = None  # `fio --version` as the study's preflight read it


def run(bench: Bench, tc: TrialConfig, name: str, journal: Journal, have: set[str]) -> str:
    """One trial, in order (everything it creates is journaled first: the caller's teardown
    undoes it). `have`: the workloads the store already has for this replicate. Returns the
    trial's headline figures."""
    from poolbench.backends import sources

    runner = bench.runner
    base = bench.scratch / name
    backend = bench.backends[tc.backend]
    # 1. its disks and workloads as its factors set them (a source, a compressibility...),
    # and what factors do before the pool
    disks, shaped = factors.shape(bench.study.disks, bench.study.workloads, tc.levels)
    devices = sources.make_disks(runner, journal, disks, base, claims=bench.claims)
    made = factors.before_pool(journal, disks, devices, tc.levels)  # undone at teardown
    # 2. the pool
    pool = backend.create(spec_for(tc.config, devices, name, base), journal)
    if runner.dry_run:  # not built: what it would report, planned
        planned.describe(pool, bench.study.disks.size_bytes)
    try:  # 3. refused if not as asked, then measured
        refuse_if_not_as_asked(tc, backend.verify(pool))
        options = options_for(shaped, bench.workloads, bench.tarball, bench.seed)
        headline = _measure(bench, tc, backend, pool, journal, made, have, options)
    except PoolbenchError as exc:  # named with the pool when it stopped answering
        named = stalled.explain(runner, backend, pool, exc)
        if named is exc:
            raise
        raise named from exc
    # 4. its teardown
    backend.destroy(pool, journal)
    return headline


def _measure(
    bench: Bench, tc: TrialConfig, backend: Backend, pool: Pool, journal: Journal,
    made: Mapping[str, object], have: set[str], options: Options,
) -> str:  # fmt: skip
    """The findings every measurement carries, this replicate's measurements; returns their
    headline figures."""
    findings = findings_for(bench.runner, journal, backend, pool, tc, options)
    findings.other.update(made)
    subject = subject_for(bench.runner, backend, pool, tc.key, findings,
                          working_set=options.size, levels=tc.levels)  # fmt: skip
    session = Session(bench.runner, bench.store, bench.run_id, subject, options,
                      commands=bench.commands, fio_version=bench.fio_version)  # fmt: skip
    session.preflight()
    results = session.run_once(tc.replicate, skip=have)
    return ", ".join(
        f"{r.workload.name} {r.values[-1]:.1f} {r.workload.unit}"
        for r in results
        if r.values and r.workload.name not in have
    )


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


GENERIC_LAYOUTS: dict[str, dict[str, str]] = {
    "parity1": {"zfs": "raidz1", "btrfs": "raid5", "md": "raid5"},
    "parity2": {"zfs": "raidz2", "btrfs": "raid6", "md": "raid6"},
}


def backend_layout(backend: str, layout: str) -> str:
    """A generic layout (`parity1`) in `backend`'s terms; any other layout as it is."""
    generic = GENERIC_LAYOUTS.get(layout)
    if generic is None:
        return layout
    if backend not in generic:
        raise UsageError(
            f"Layout '{layout}' has no meaning for the {backend} backend.",
            f"Use it with {', '.join(generic)}.",
        )
    return generic[backend]


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
        layout=backend_layout(backend, levels["layout"]),
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
    wl: Workloads, workloads: list[Workload], tarball: Path | None, seed: int | None
) -> Options:
    """The session's options: the study's [workloads] as the trial's factors set them."""
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
        seed=seed,
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


def make_volume(backend: Backend, pool: Pool, working_set: int | None) -> BlockDevice | None:
    """The configuration's zvol, made in the pool (None: it measures the dataset)."""
    if not volume_wanted(pool.spec.volume):
        return None
    volumes = require(
        backend, SupportsVolumes, "make a zvol", "Measure a dataset (target = dataset)."
    )
    assert working_set is not None  # check_volume refused a zvol without one
    made = volumes.create_volume(pool, working_set)
    block = made.get("volblocksize") or 0
    return BlockDevice(Path(made["path"]), int(made["volsize"]), int(block))


# -- what the session measures --------------------------------------------------------------
def subject_for(
    runner: Runner,
    backend: Backend,
    pool: Pool,
    config: str,
    findings: Findings,
    working_set: int | None = None,
    levels: dict[str, str] | None = None,
) -> Subject:
    """The pool as one object for the measurement session: its mountpoint and members (and
    the zvol the configuration measures, made here), its backend's cache defeat, the
    trial's hooks and findings."""
    spec = pool.spec
    block = make_volume(backend, pool, working_set)
    devices = Target(
        str(pool.mountpoint),
        MountInfo(str(pool.mountpoint), spec.backend, spec.name, ""),
        # the pool's own list: an expansion adds its new member to every later window
        devices=pool.block_devices,
        how=f"members of {spec.backend} pool {spec.name}",
        unverified_reason="" if pool.block_devices else "the pool's members are plain files",
    )
    return Subject(
        pool.mountpoint,
        config,
        levels=dict(levels or {}),
        devices=devices,
        cache_defeat=lambda _files: backend.drop_cache(pool),
        hooks=PoolHooks(runner, backend, pool, levels),
        findings=findings,
        disposable=spec.backend != "directory",  # a directory outlives the trial
        write_model=backend.write_model(pool, block.block_size if block else None),
        block_device=block,
    )
