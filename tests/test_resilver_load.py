"""Resilver under load without a pool: the load's grammar, the foreground's slices (a
recorded fio answer), which slices count as "during", their pooled p99, and the notes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from poolbench.engine import resilver_load as rl
from poolbench.errors import UsageError
from poolbench.store.facts import ConfigFacts, Resilver, StudyFacts
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.resilver_load import load_notes
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.workloads.fiojob import JobParams

FIO = (Path(__file__).parent / "data" / "fio-rand-read-4k.jsonplus.json").read_text()
MiB = 1 << 20


def test_a_load_is_a_fio_workload_that_can_run_in_slices_at_a_stated_rate() -> None:
    w, rate = rl.parse_load("seq-read")
    assert w.name == "seq-read" and w.time_based and rate is None
    w, rate = rl.parse_load("rand-write-4k@2M")
    assert w.direction == "write" and rate == 2 * MiB
    for bad in ("seq-write", "meta-create-seq", "capacity"):
        with pytest.raises(UsageError, match="cannot run in slices"):
            rl.parse_load(bad)


def test_the_resilver_study_gains_an_idle_and_a_loaded_configuration() -> None:
    ctx = Context(3, "1G", options={"layouts": "mirror:2", "load": "seq-read@20M"})
    data = registry.build("resilver", ctx)
    assert data["factors"]["load"] == ["none", "seq-read@20M"]
    assert data["factors"]["primarycache"] == ["metadata"]
    assert any("primarycache=metadata" in line for line in ctx.said)
    with pytest.raises(UsageError, match="cannot run in slices"):
        registry.build("resilver", Context(3, "1G", options={"load": "seq-write"}))


def _slice(start: float, end: float, mib: float, bins: dict[int, int]) -> rl.Slice:
    return rl.Slice(start, end, int(mib * MiB), int(mib * 256), end - start, bins)


def test_only_slices_that_ended_within_the_resilver_count_and_their_p99_is_pooled() -> None:
    s = [_slice(0, 1, 10, {1_000_000: 98, 9_000_000: 2}), _slice(1, 2, 20, {2_000_000: 100}),
         _slice(2, 3, 30, {50_000_000: 100})]  # fmt: skip
    during = rl.within(s, end=2.4)
    assert during == s[:2]  # the third ran 0.6 s of its 1 s after the resilver's end
    assert rl.within(s, end=2.5) == s  # half of it before: it counts
    # 200 completions: the 198th (99%) lies in the 2 ms bin (98 at 1 ms, then 100 at 2 ms)
    assert rl.p99_ms(during) == 2.0
    got = rl.figures(during, "MiB/s")
    assert got["value"] == 15.0 and got["slices"] == 2 and got["p99_ms"] == 2.0
    assert rl.figures(during, "IOPS")["value"] == 15 * 256
    assert rl.figures([], "MiB/s")["value"] is None and rl.p99_ms([]) is None


def _runner(fail: bool = False) -> RecordingRunner:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        time.sleep(0.01)
        return CommandResult(argv, 1 if fail else 0, "" if fail else FIO, "boom", 0.01)

    return RecordingRunner({"fio": answer})


def test_the_foreground_runs_slices_until_stopped_then_alone(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    w, rate = rl.parse_load("rand-read-4k@4M")
    params = JobParams(directory=str(tmp_path), size_bytes=64 * MiB, runtime_s=30, randseed=7)
    fg = rl.Foreground(_runner(), w, params, rate)
    fg.start()
    time.sleep(0.1)
    end = time.monotonic()
    time.sleep(0.05)  # slices of 10 ms (fio's runtime 1.001 s as recorded: see below)
    section = rl.finish(fg, fg.stop(), end, lambda: None)
    during, alone = section["during"], section["alone"]
    assert isinstance(during, dict) and isinstance(alone, dict)
    assert during["slices"] >= 1 and alone["slices"] == during["slices"]
    # the recorded fio run: 25,122 reads in 1.001 s per slice, whatever the slice count
    assert alone["value"] == pytest.approx(25122 / 1.001, rel=1e-3)
    # the recorded runtime (1 s) dwarfs the 50 ms they ran past the end: all count
    assert section["rate"] == "4 MiB/s (fio rate)" and "left_out" not in section
    job = (tmp_path / "jobs" / "load-during.0.fio").read_text()
    assert "rate=4194304" in job and "runtime=1" in job and "randseed=7" in job
    assert (tmp_path / "jobs" / "load-alone.0.fio").exists()


def test_a_foreground_that_fails_says_so_when_stopped(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    w, _ = rl.parse_load("seq-read")
    fg = rl.Foreground(_runner(fail=True), w, JobParams(str(tmp_path), 8 * MiB), None)
    fg.start()
    time.sleep(0.05)
    assert fg.stop(quiet=True) == []  # the caller's own error goes first
    with pytest.raises(Exception, match="fio"):
        fg.stop()


def _loaded(load: str, seconds: list[float], rate: list[float], during: list[float],
            alone: list[float]) -> ConfigFacts:  # fmt: skip
    sections = tuple(
        {"load": {"workload": "seq-read", "rate": "flat out",
                  "during": {"value": d, "unit": "MiB/s", "p99_ms": 8.0},
                  "alone": {"value": a, "unit": "MiB/s", "p99_ms": 2.0}}}
        for d, a in zip(during, alone, strict=True)
    ) if load != "none" else ()  # fmt: skip
    return ConfigFacts(
        key=f"layout=mirror:2 load={load}", levels={"layout": "mirror:2", "load": load},
        figures={"resilver": tuple(rate)},
        resilvers=tuple(Resilver(i, 32 * MiB, s) for i, s in enumerate(seconds)),
        sections={"resilver": sections},
    )  # fmt: skip


def test_the_notes_say_what_the_load_costs_the_resilver_and_the_resilver_the_load() -> None:
    idle = _loaded("none", [2.0, 2.2, 1.8], [16.0, 14.5, 17.8], [], [])
    loaded = _loaded("seq-read", [4.0, 4.4, 3.6], [8.0, 7.3, 8.9], [6.0, 7.0, 5.0],
                     [18.0, 19.0, 17.0])  # fmt: skip
    text = "\n".join(load_notes(StudyFacts("resilver", "loop", 3, 128 * MiB, (idle, loaded))))
    assert "mirror:2, under seq-read:" in text
    assert "resilver: 2.00 s idle vs 4.00 s under load (+100% time)" in text
    assert "2.00× slower" in text  # the resilver's rate under load against idle
    assert "6.0 MiB/s during the resilver vs 18.0 alone: 3.00× slower" in text
    assert "the resilver costs the workload 67% of its figure" in text
    assert "p99 8.00 ms during vs 2.00 ms alone" in text
    assert load_notes(StudyFacts("resilver", "loop", 3, 128 * MiB, (idle,))) == []


def test_the_dry_run_plans_an_idle_and_a_loaded_resilver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner
    from tests.test_l2arc import zfs_answers

    from poolbench.cli.main import cli

    zfs_answers(monkeypatch, "zfs-fuse")
    r = CliRunner().invoke(cli, [
        "study", "resilver", "--disks", "3x256M", "--layouts", "mirror:2", "--load",
        "seq-read@20M", "--dry-run", "--db", str(tmp_path / "r.db"), "--scratch-dir",
        str(tmp_path / "scratch"), "--seed", "1",
    ])  # fmt: skip
    out = " ".join(r.output.split())
    assert r.exit_code == 0, r.output
    assert "6 trials, 2 configurations × 3 replicates" in out
    assert "load=none" in out and "load=seq-read@20M" in out
    assert "primarycache=metadata" in out
    # the loaded configuration's trial runs the load's slices; the idle one does not
    assert out.count("load-during.N.fio") == 1 and out.count("load-alone.N.fio") == 1
    assert not (tmp_path / "scratch").exists()
