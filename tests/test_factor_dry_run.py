"""A trial's factors under a dry run, in-process, no pools: the factors' `after_pool` (the
trial's stage, as engine/trial.py calls it) is the one code for both, and under a dry runner
it must run the same commands that change something, in order, as under a real one, make
nothing and return no section (nothing was done). One case per drift the narrative copy it
replaces once had: the fill's job files, aging's commands, and a fill that aging replaces."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench.backends import planned
from poolbench.backends.base import Pool, PoolSpec
from poolbench.backends.zfs.backend import ZfsBackend
from poolbench.factors import aging, fill
from poolbench.factors import registry as factors
from poolbench.factors.base import AfterPool
from poolbench.safety.journal import Journal
from poolbench.system.runner import RecordingRunner
from poolbench.workloads import fio

MiB = 1 << 20
GiB = 1 << 30
DATA = Path(__file__).parent / "data"


def _runner(dry_run: bool) -> RecordingRunner:
    """An OpenZFS host whose fio answers as a recorded sequential write did and whose pool
    reports 3 % free-space fragmentation."""
    return RecordingRunner(
        responses={
            ("zpool", "version"): "zfs-2.2.3-1\nzfs-kmod-2.2.3-1\n",
            ("zpool", "list", "-H"): "",
            ("zpool", "get", "-Hp", "-o", "value", "fragmentation", "pbdry"): "3\n",
            "fio": (DATA / "fio-seq-write.json").read_text(),
        },
        dry_run=dry_run,
    )


def _backend(dry_run: bool) -> ZfsBackend:
    backend = ZfsBackend(_runner(dry_run))
    backend.check()  # the dialect probe, before the calls compared
    assert isinstance(backend.runner, RecordingRunner)
    backend.runner.calls.clear()
    return backend


def _after_pool(pool: Pool, levels: dict[str, str], dry_run: bool) -> list[tuple[str, ...]]:
    """The commands the trial's factor stage runs on `pool`, as engine/trial.py calls it (a
    dry run's: nothing done, so no section)."""
    backend = _backend(dry_run)
    runner = backend.runner
    assert isinstance(runner, RecordingRunner)
    made = factors.after_pool(AfterPool(runner, Journal(runner, None), backend, pool, levels,
                                        1 * MiB, 1, 42))  # fmt: skip
    assert (made == {}) == dry_run, made
    return runner.argvs


def _real(pool: Pool, levels: dict[str, str]) -> list[tuple[str, ...]]:
    return _after_pool(pool, levels, dry_run=False)


def _dry(pool: Pool, levels: dict[str, str]) -> list[tuple[str, ...]]:
    return _after_pool(pool, levels, dry_run=True)


def _pool(mountpoint: Path, usable: int | None) -> Pool:
    spec = PoolSpec("zfs", "raidz1", (), "pbdry", mountpoint)
    return Pool(spec, mountpoint, [], {} if usable is None else {"usable_bytes": usable})


def test_the_fill_dry_run_prints_the_fio_runs_and_job_files_prefill_runs(tmp_path: Path) -> None:
    pool = _pool(tmp_path, 5 * GiB // 2)
    levels = {"fill": "60"}
    real = _real(pool, levels)
    # 60 % of 2.5 GiB is 1.5 GiB: two job files, one per GiB, fio's JSON+ on each
    where = tmp_path / ".poolbench-fill"
    assert real == [tuple(fio.command(where / f"fill{i}.fio")) for i in (0, 1)]
    assert (where / "fill1.fio").read_text() == fill.jobs(where, 3 * GiB // 2)[1][1]
    (where / "fill0.fio").unlink()
    (where / "fill1.fio").unlink()
    where.rmdir()
    assert _dry(pool, levels) == real
    assert not where.exists()  # the dry run wrote no job file
    # A dry run's pool, not built, has its planned usable space (raidz1 of 3 x 1 GiB: the
    # planner's figure), so as many fill jobs as the pool built would take: two, here.
    unbuilt = _pool(tmp_path / "unbuilt", None)
    unbuilt.spec = PoolSpec("zfs", "raidz1", ("/dev/a", "/dev/b", "/dev/c"), "pbdry",
                            tmp_path / "unbuilt")  # fmt: skip
    planned.describe(unbuilt, GiB)
    usable = unbuilt.described["usable_bytes"]
    assert isinstance(usable, int) and GiB < usable * 60 // 100 <= 2 * GiB
    assert [a[-1] for a in _dry(unbuilt, levels)] == [
        str(tmp_path / "unbuilt" / ".poolbench-fill" / f"fill{i}.fio") for i in (0, 1)
    ]
    assert not (tmp_path / "unbuilt").exists()


def test_the_aging_dry_run_prints_what_aging_runs_and_no_fill(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # statfs of tmp would be the host's free space: the room for files is stated instead
    # (24 MiB at 20 %: room for the working set on top, check_room's rule; few bytes written)
    monkeypatch.setattr(aging, "available", lambda _mnt: 24 * MiB)
    pool = _pool(tmp_path, 5 * GiB // 2)
    levels = {"aging": "1", "fill": "20"}  # with a fill level: aged to it, not filled
    real = _real(pool, levels)
    assert (tmp_path / aging.DIRECTORY).is_dir()  # the real path aged the pool: files written
    assert not (tmp_path / ".poolbench-fill").exists()
    # OpenZFS: the txg written, then the pool's fragmentation read, once after the rounds
    assert real == [("zpool", "sync", "pbdry"),
                    ("zpool", "get", "-Hp", "-o", "value", "fragmentation", "pbdry")]  # fmt: skip
    assert factors.acting(levels) == [aging.FACTOR]
    files = sorted(p for p in (tmp_path / aging.DIRECTORY).rglob("*"))
    assert _dry(pool, levels) == real  # no fio line of the fill it replaces
    assert sorted(p for p in (tmp_path / aging.DIRECTORY).rglob("*")) == files  # none new
    # aging's commands do not depend on its fill level (the default when it has none)
    assert _dry(pool, {"aging": "3"}) == real
