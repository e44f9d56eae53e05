"""A study's dry run walks the trial's real path (engine/trial.py `run` into the session's
`run_once`, the factors' `after_pool`, the pool hooks), its runner printing each command
that would change something: what it prints is what a real trial runs, in the real order,
with the job files the real Workspace names. In-process, no pool, no root."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.recorded_fio import RecordedFio
from tests.test_l2arc import zfs_answers

from poolbench.backends import planned
from poolbench.backends.base import Pool, PoolSpec
from poolbench.engine import lifecycle, trial_loop
from poolbench.factors import fill
from poolbench.guards import cache
from poolbench.store.db import Store
from poolbench.study.model import parse
from poolbench.system.runner import CallRecord, CommandResult, RecordingRunner, Runner
from poolbench.workloads import fio

GiB = 1 << 30

STUDY = """name = "drytrial"
seed = 1
replicates = 2
[disks]
count = 3
size = "512M"
[factors]
backend = ["zfs"]
layout = ["mirror:2"]
fill = [FILL]
AGING
load = ["seq-read@20M"]
[workloads]
names = ["seq-write", "seq-read", "degraded-read", "resilver", "pgbench-tpcb-c4"]
size = "64M"
"""


def _dry_run(tmp: Path, capsys: pytest.CaptureFixture[str], text: str) -> list[list[str]]:
    """`poolbench run STUDY --dry-run`, in-process: each printed command, split."""
    from poolbench.cli.main import main

    study = tmp / "s.toml"
    study.write_text(text)
    db = tmp / "store" / "r.db"
    # PostgreSQL's user must be able to reach the scratch directory: not under pytest's 0700
    where = Path(tempfile.mkdtemp(prefix="pbtest-drytrial-", dir="/var/tmp"))
    where.chmod(0o755)
    try:
        with pytest.raises(SystemExit) as done:
            main(["run", str(study), "--dry-run", "--db", str(db), "--scratch-dir",
                  str(where / "scratch")])  # fmt: skip
        assert done.value.code == 0
        assert not (where / "scratch").exists()  # nothing made
    finally:
        where.rmdir()
    err = capsys.readouterr().err
    assert "dry run: nothing was changed." in err
    assert not db.exists()  # nothing stored
    return [line.removeprefix("would run: ").split(" ") for line in err.splitlines()
            if line.startswith("would run: ")]  # fmt: skip


def _names(lines: list[list[str]]) -> tuple[str, Path, Path]:
    """The pool's name, its mountpoint and the session's job directory, from its create."""
    create = next(a for a in lines if a[:2] == ["zpool", "create"])
    name, mountpoint = create[create.index("-m") + 2], Path(create[create.index("-m") + 1])
    return name, mountpoint, mountpoint / ".poolbench-dry-run" / "jobs"


def _drop(name: str, mountpoint: Path) -> list[list[str]]:
    """The cold read's cache drop: export, then import through the member links."""
    cachefile, links = f"{mountpoint}.cache", f"{mountpoint}.members"
    return [["zpool", "export", name],
            ["zpool", "import", "-o", f"cachefile={cachefile}", "-d", links, name]]  # fmt: skip


def _pool_part(lines: list[list[str]]) -> list[list[str]]:
    """The commands between the pool's create and its destroy, PostgreSQL's by program."""
    start = next(i for i, a in enumerate(lines) if a[:2] == ["zpool", "create"])
    end = next(i for i, a in enumerate(lines) if a[:2] == ["zpool", "destroy"])
    return [[Path(a[4]).name] if a[:3] == ["runuser", "-u", "postgres"] else a
            for a in lines[start + 1 : end]]  # fmt: skip


def _workloads(name: str, mp: Path, jobs: Path, disks: list[str]) -> list[list[str]]:
    """What the study's workloads run on OpenZFS, in order, each followed by the txg sync
    that writes its blocks into the pool's accounting (pool_hooks `after`)."""
    sync = ["zpool", "sync", name]
    drop = _drop(name, mp)

    def run(job: str, *extra: str) -> list[str]:
        return fio.command(jobs / job, extra)

    return [
        run("seq-write.0.fio"), sync,  # a fresh file: nothing laid out first
        *drop, run("seq-read.0.fio"), sync,  # reads what seq-write left, cold
        # the same files, as seq-write left them: nothing laid out again from here on
        ["zpool", "offline", name, disks[1]], *drop, run("degraded-read.0.fio"), sync,
        *drop,  # the load during the resilver, then alone
        run("load-during.fio", f"--trigger-file={jobs / 'load-during.stop'}",
            f"--aux-path={jobs}"),
        ["zpool", "replace", "-f", name, disks[1], disks[2]], *drop, run("load-alone.fio"), sync,
        ["initdb"], ["pg_ctl"], ["pgbench"], ["psql"], ["pgbench"], ["psql"], ["pg_ctl"], sync,
    ]  # fmt: skip


def test_the_dry_run_prints_the_trials_real_commands_in_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    zfs_answers(monkeypatch, "openzfs")
    lines = _dry_run(tmp_path, capsys, STUDY.replace("FILL", "50").replace("AGING", ""))
    name, mp, jobs = _names(lines)
    disks = [f"/dev/loop-for-disk{i}.img" for i in range(3)]
    # the fill: fio jobs of at most a GiB each over half the planned usable space of a
    # 2-way mirror (and a spare) on 512M disks, in the job files prefill writes
    spec = PoolSpec("zfs", "mirror:2", tuple(disks), name, mp.parent)
    pool = Pool(spec, mp, [], {})
    planned.describe(pool, 512 << 20)
    usable = pool.described["usable_bytes"]
    assert isinstance(usable, int) and 300 << 20 < usable < 512 << 20
    filled = [fio.command(p) for p, _job in fill.jobs(mp / ".poolbench-fill", usable // 2)]
    assert [Path(a[-1]).name for a in filled] == ["fill0.fio"]
    assert _pool_part(lines) == filled + _workloads(name, mp, jobs, disks)
    # the disks before, their teardown after (the spare too, newest first)
    assert lines[:3] == [["losetup", "--find", "--show", "--direct-io=on", "--partscan",
                          str(mp.parent / f"disk{i}.img")] for i in range(3)]  # fmt: skip
    assert lines[-3:] == [["losetup", "--detach", d] for d in reversed(disks)]


def test_aging_replaces_the_fill_and_reads_its_fragmentation_after_a_txg_sync(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    zfs_answers(monkeypatch, "openzfs")
    text = STUDY.replace("FILL", "50").replace("AGING", "aging = [1]")
    lines = _dry_run(tmp_path, capsys, text)
    name, mp, jobs = _names(lines)
    disks = [f"/dev/loop-for-disk{i}.img" for i in range(3)]
    # aged by this process's own file I/O (nothing to print), then `zpool sync` before the
    # fragmentation property is read; no fill job: aging fills to the fill level itself
    assert _pool_part(lines) == [["zpool", "sync", name], *_workloads(name, mp, jobs, disks)]


def _writing_fio(recorded: RecordedFio) -> RecordingRunner:
    """fio answered from its recordings, whose write jobs leave their files as a real fio
    does (each `filename` in its `directory`, `size` bytes): what a later job finds there."""

    def answer(argv: Sequence[str]) -> CommandResult | str:
        got = recorded.answer(argv)
        job = Path(argv[-1])
        text = job.read_text() if job.is_file() else ""  # (a dry run writes no job file)
        opts = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        if "write" in opts.get("rw", ""):
            for name in re.findall(r"^filename=(.+)$", text, re.M):
                with open(Path(opts["directory"]) / name, "ab") as f:
                    f.truncate(max(f.tell(), int(opts["size"])))
        return got

    return RecordingRunner({"fio": answer})


def _mutating(calls: Sequence[CallRecord]) -> list[tuple[str, ...]]:
    """The calls that change something, their session directory named alike."""
    return [tuple(re.sub(r"\.poolbench-(run\d+-\d+|dry-run)", "<ws>", a) for a in c.argv)
            for c in calls if c.mutates]  # fmt: skip


def test_a_real_trial_and_its_dry_run_run_the_same_commands_in_the_same_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One trial on the directory backend (nothing built), measured with fio answered from
    its recordings, and the same trial under a dry runner: the same commands that change
    something, in the same order, and the dry one measured nothing and wrote nothing."""

    def drop(runner: Runner, files: Sequence[Path]) -> cache.CacheDrop:  # not this test's
        return cache.CacheDrop("spy", 0, 0, 1 << 20, True, "")

    monkeypatch.setattr(cache, "drop", drop)
    target = tmp_path / "target"
    target.mkdir()
    text = (
        'name = "agree"\nreplicates = 2\n[disks]\ncount = 0\n[factors]\n'
        f'backend = ["directory"]\nlayout = ["{target}"]\n[workloads]\n'
        'names = ["seq-write", "seq-read", "rand-write-4k", "rand-read-4k"]\nsize = "1M"\n'
        "min_window = 0\n"
    )
    runs = {}
    for dry in (False, True):
        answers = {"seq-write": "fio-seq-write.json", "rand-write-4k": "fio-seq-write.json",
                   "seq-read": "fio-libaio-qd16-j2-buffered.json",
                   "rand-read-4k": "fio-rand-read-4k.jsonplus.json"}  # fmt: skip
        runner = _writing_fio(RecordedFio(answers))
        runner.dry_run = dry
        store = Store(tmp_path / f"r{dry}.db")
        sr = trial_loop.StudyRun(runner, store, parse(text), text, trial_loop.Paths(
            scratch=tmp_path / "scratch", journals=tmp_path / "journals"), seed=7)  # fmt: skip
        sr.run_id = lifecycle.start(store, "study", "agree", sr.metadata(sr.preflight()), ["t"])
        sr.commands = lifecycle.CommandLog(runner, store, sr.run_id)  # as run() makes it
        runner.calls.clear()
        sr.trial(sr.configs[0], 0, 0)
        runs[dry] = (_mutating(runner.calls), store.measurements(sr.run_id))
    (real, measured), (dry_calls, none) = runs[False], runs[True]
    assert len(measured) == 4 and none == []  # the dry run stored no measurement
    assert dry_calls == real
    jobs = [Path(a[-1]).name for a in real if a[0] == "fio"]
    # seq-read reads what seq-write left, the random write writes into it in place, and the
    # random read after it lays its data out afresh
    assert jobs == ["seq-write.0.fio", "seq-read.0.fio", "rand-write-4k.0.fio",
                    "prepare-rand-read-4k.fio", "rand-read-4k.0.fio"]  # fmt: skip
    assert not any(p.name == ".poolbench-dry-run" for p in target.iterdir())
