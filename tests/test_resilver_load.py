"""Resilver under load without a pool: the load's grammar, the foreground's one fio run read
back over the resilver's window (a recorded fio histogram log), its p99, and the notes."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from poolbench.engine import resilver_load as rl
from poolbench.errors import UsageError
from poolbench.records.sections import Resilver
from poolbench.store.facts import ConfigFacts, StudyFacts
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.study.builtin.resilver_load import load_notes
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.workloads import fioparse, histlog
from poolbench.workloads.fiojob import JobParams
from poolbench.workloads.library import parse_load

FIO = (Path(__file__).parent / "data" / "fio-rand-read-4k.jsonplus.json").read_text()
MiB = 1 << 20


def test_a_load_is_a_timed_fio_workload_at_a_stated_rate_or_flat_out() -> None:
    w, rate = parse_load("seq-read")
    assert w.name == "seq-read" and w.time_based and rate is None
    w, rate = parse_load("rand-write-4k@2M")
    assert w.direction == "write" and rate == 2 * MiB
    for bad in ("seq-write", "meta-create-seq", "capacity"):
        with pytest.raises(UsageError, match="cannot run for as long as the pool resilvers"):
            parse_load(bad)


def test_the_resilver_study_gains_an_idle_and_a_loaded_configuration() -> None:
    ctx = Context(3, "1G", options={"layouts": "mirror:2", "load": "seq-read@20M"})
    data = registry.build("resilver", ctx)
    assert data.factors["load"] == ["none", "seq-read@20M"]
    assert data.factors["primarycache"] == ["metadata"]
    assert any("primarycache=metadata" in line for line in ctx.said)
    with pytest.raises(UsageError, match="cannot run for as long as the pool resilvers"):
        registry.build("resilver", Context(3, "1G", options={"load": "seq-write"}))


DATA = Path(__file__).parent / "data" / "resilver-load"
HIST = (DATA / "load-during_clat_hist.1.log").read_text()
WINDOW = json.loads((DATA / "window.json").read_text())


def test_the_histogram_log_buckets_are_fios_json_bins() -> None:
    """The recorded run's log, every row merged, against its own json+ bins: the same
    latencies (fio's plat_idx_to_val), and no more completions than fio counted (the last,
    partial interval is not logged)."""
    rows = histlog.parse(HIST)
    assert [r.ddir for r in rows] == [0] * 7 and {r.bs for r in rows} == {4096}
    assert all(len(r.counts) == histlog.PLAT_NR for r in rows)
    whole = histlog.window(rows, "read", 0, 2**62)
    fio_bins = fioparse.parse((DATA / "load-during.jsonplus.json").read_text(), "read")
    assert fio_bins.latency is not None
    assert set(whole.bins) <= set(fio_bins.latency.bins)
    assert all(v <= fio_bins.latency.bins[k] for k, v in whole.bins.items())
    assert histlog.bin_value_ns(127) == 127 and histlog.bin_value_ns(128) == 129
    assert histlog.bin_value_ns(192) == 258  # base 256, buckets of 4 ns: the first's mean


def test_the_foreground_figure_is_the_rate_over_the_windows_own_intervals() -> None:
    rows = histlog.parse(HIST)
    a, b = WINDOW["start_ms"], WINDOW["end_ms"]
    # Rows every 250 ms from a + 322 to a + 1822: six spans wholly within the 2 s window
    # (the first row's start is unknown, the one ending at a + 2072 ran past it).
    inside = [r for r in rows if a <= r.t_ms <= b]
    assert len(inside) == 7
    win = histlog.window(rows, "read", a, b)
    assert win.intervals == 6 and win.seconds == 1.5
    assert win.ios == sum(sum(r.counts) for r in inside[1:])
    got = rl.window_figures(win, "IOPS")
    # fio's rate=8 MiB/s of 4 KiB reads: 2,048 a second
    assert got["value"] == pytest.approx(2048, rel=0.01)
    assert got["window_s"] == 2.0 and got["intervals"] == 6 and "why" not in got
    assert got["p99_ms"] == pytest.approx(win.p99_ms())
    assert rl.window_figures(win, "MiB/s")["value"] == pytest.approx(8.0, rel=0.01)


def test_a_window_across_log_rows_counts_their_part_inside_it() -> None:
    rows = histlog.parse(HIST)
    a = WINDOW["start_ms"]
    # rows at +322, +572, ... +1822: (322,572] is 172/250 inside [a+400, a+1500], three are
    # wholly inside, (1322,1572] 178/250: 1.1 s covered, at the run's 2,048 reads a second
    win = histlog.window(rows, "read", a + 400, a + 1500)
    assert win.intervals == 5 and win.seconds == 1.1
    counts = [sum(r.counts) for r in rows]
    assert win.ios == pytest.approx(
        counts[1] * 172 / 250 + sum(counts[2:5]) + counts[5] * 178 / 250
    )
    assert rl.window_figures(win, "IOPS")["value"] == pytest.approx(2048, rel=0.02)


def test_a_window_too_short_for_the_log_says_so_rather_than_no_figure() -> None:
    rows = histlog.parse(HIST)
    a = WINDOW["start_ms"]
    # rows at +322, +572, +822, +1072: 0.578 s of the 0.9 s window covered, under 4 x 250 ms
    win = histlog.window(rows, "read", a, a + 900)
    got = rl.window_figures(win, "IOPS")
    assert win.intervals == 3 and got["value"] is None and got["p99_ms"] is None
    assert got["why"] == (
        "too short to measure: fio's log covered 0.58 s of the resilver's 0.90 s window "
        "(3 of its 250 ms intervals; fio's first I/O 0.072 s into it), less than 4 intervals"
    )
    # here fio's job was forked when the window began, its first row 322 ms into it: one
    # 250 ms interval after its first I/O, 72 ms in (opening its file)
    assert got["fio_late_s"] == 0.072
    # a window over before fio's first I/O: nothing in it, and fio's late start is named
    late = rl.window_figures(histlog.window(rows, "read", a - 5000, a - 4000), "IOPS")
    assert late["intervals"] == 0 and late["value"] is None and late["seconds"] == 0
    assert late["fio_late_s"] == pytest.approx(5.322 - 0.25)
    assert "fio's first I/O 5.072 s into it" in str(late["why"])


def test_a_stall_is_one_long_row_and_counts_for_its_whole_span() -> None:
    def row(t: int, n: int, slow: bool = False) -> histlog.Row:
        counts = [0] * histlog.PLAT_NR
        counts[histlog.PLAT_NR - 1 if slow else 100] = n
        return histlog.Row(t, 0, 1 << 20, tuple(counts))

    rows = [row(0, 5), row(250, 5), row(2250, 1, slow=True), row(2500, 5), row(2750, 5),
            row(3000, 5)]  # fmt: skip
    win = histlog.window(rows, "read", 100, 2600)
    # (0,250] 0.6 inside: 3 reads; the stall (250,2250]: 1; (2250,2500]: 5; (2500,2750] 0.4
    # inside: 2. 11 MiB of 1 MiB reads over the 2.5 s window.
    assert win.intervals == 4 and win.seconds == 2.5
    assert win.io_bytes == pytest.approx(11 << 20)
    assert rl.window_figures(win, "MiB/s")["value"] == 4.4
    # 11 completions, 1 slow: the 99th percentile is the slow one's bucket
    assert win.p99_ms() == pytest.approx(histlog.bin_value_ns(histlog.PLAT_NR - 1) / 1e6)
    assert histlog.window(rows, "write", 100, 2600).intervals == 0
    # two logs of one run (numjobs=2): their I/O adds up over the same seconds
    both = histlog.merged([win, win])
    assert both.io_bytes == pytest.approx(22 << 20) and both.seconds == 2.5
    # a coarse log (log_hist_coarseness=2): a bucket is valued at its highest fine one
    coarse = histlog.window([row(0, 1), row(250, 4)], "read", 0, 250, coarseness=2)
    assert set(coarse.bins) == {histlog.bin_value_ns(100 * 4 + 3)}
    assert histlog.parse("1,0,4096,1,2\nbroken\n3,0\n") == [histlog.Row(1, 0, 4096, (1, 2))]


def _runner(fail: bool = False) -> RecordingRunner:
    def answer(argv: tuple[str, ...]) -> CommandResult:
        time.sleep(0.01)
        return CommandResult(argv, 1 if fail else 0, "" if fail else FIO, "boom", 0.01)

    return RecordingRunner({"fio": answer})


def test_the_foreground_is_one_fio_run_stopped_by_its_trigger_then_alone(
    tmp_path: Path,
) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    w, rate = parse_load("rand-read-4k@4M")
    params = JobParams(directory=str(tmp_path), size_bytes=64 * MiB, runtime_s=30, randseed=7)
    runner = _runner()
    fg = rl.Foreground(runner, w, params, rate)
    fg.start()
    fg.stop()
    (jobs / "load-during_clat_hist.1.log").write_text(HIST)  # what the real fio leaves
    section = rl.finish(fg, WINDOW["start_ms"], WINDOW["end_ms"], lambda: None)
    during, alone = section["during"], section["alone"]
    assert isinstance(during, dict) and isinstance(alone, dict)
    assert during["intervals"] == 6 and during["value"] == pytest.approx(2048, rel=0.01)
    assert isinstance(during["fio_start_s"], float)
    # alone: the recorded fio answer, 25,122 reads in 1.001 s
    assert alone["value"] == pytest.approx(25122 / 1.001, rel=1e-3)
    assert section["rate"] == "4 MiB/s (fio rate)" and "histogram log" in str(section["how"])
    first, second = runner.argvs
    assert f"--trigger-file={jobs / 'load-during.stop'}" in first
    assert f"--aux-path={jobs}" in first and first[-1] == str(jobs / "load-during.fio")
    assert not any(a.startswith("--trigger") for a in second)
    job = (jobs / "load-during.fio").read_text()
    assert "rate=4194304" in job and f"runtime={rl.RUNTIME_S * 1000}ms" in job
    assert "randseed=7" in job and job.count("runtime=") == 1
    assert f"write_hist_log={jobs / 'load-during'}" in job and "log_unix_epoch=1" in job
    assert "log_hist_msec=250" in job
    # alone runs as long as the resilver's 2 s window, with no log
    alone_job = (jobs / "load-alone.fio").read_text()
    assert "runtime=2000ms\n" in alone_job and "write_hist_log" not in alone_job
    assert not (jobs / "load-during.stop").exists()


def test_a_foreground_that_fails_says_so_when_stopped(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    w, _ = parse_load("seq-read")
    fg = rl.Foreground(_runner(fail=True), w, JobParams(str(tmp_path), 8 * MiB), None)
    fg.start()
    fg.stop(quiet=True)  # the caller's own error goes first
    with pytest.raises(Exception, match="fio"):
        fg.stop()


def _loaded(load: str, seconds: list[float], rate: list[float], during: list[float],
            alone: list[float]) -> ConfigFacts:  # fmt: skip
    loads = [
        {"workload": "seq-read", "rate": "flat out",
         "during": {"value": d, "unit": "MiB/s", "p99_ms": 8.0},
         "alone": {"value": a, "unit": "MiB/s", "p99_ms": 2.0}}
        for d, a in zip(during, alone, strict=True)
    ] if load != "none" else [None] * len(seconds)  # fmt: skip
    return ConfigFacts(
        key=f"layout=mirror:2 load={load}", levels={"layout": "mirror:2", "load": load},
        figures={"resilver": tuple(rate)},
        resilvers=tuple(_resilver(i, s, ld)
                        for i, (s, ld) in enumerate(zip(seconds, loads, strict=True))),
    )  # fmt: skip


def _resilver(replicate: int, seconds: float, load: dict[str, object] | None) -> Resilver:
    """One replicate's resilver section as the store decodes it (its load, if any)."""
    section: dict[str, object] = {"resilvered_bytes": 32 * MiB, "seconds": seconds}
    if load is not None:
        section["load"] = load
    got = Resilver.decode({"resilver": section}, replicate)
    assert got is not None
    return got


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
    # the loaded configuration's trial runs the load during the resilver, then alone
    during = re.findall(r"--trigger-file=(\S+) --aux-path=(\S+) (\S+)", out)
    assert [(Path(t).name, Path(j).name) for t, _a, j in during] == [
        ("load-during.stop", "load-during.fio")
    ]
    assert out.count("load-alone.fio") == 1
    loaded = out[out.index("load=seq-read@20M", out.index("commands of one trial")) :]
    assert (
        loaded.index("load-during.fio") < loaded.index("zpool replace") < loaded.index("load-alone")
    )
    assert not (tmp_path / "scratch").exists()


def test_the_notes_name_a_window_too_short_and_count_only_replicates_with_both() -> None:
    idle = _loaded("none", [2.0, 2.0], [16.0, 16.0], [], [])
    loaded = _loaded("seq-read", [4.0, 1.0], [8.0, 30.0], [6.0, 7.0], [18.0, 18.0])
    why = "too short to measure: the resilver's 0.90 s window held 2 of fio's 250 ms log"
    during = [{"value": 6.0, "unit": "MiB/s", "p99_ms": 8.0, "window_s": 4.0,
               "intervals": 15, "interval_ms": 250},
              {"value": None, "unit": "MiB/s", "p99_ms": None, "window_s": 0.9,
               "intervals": 2, "interval_ms": 250, "why": why}]  # fmt: skip
    alone = {"value": 18.0, "unit": "MiB/s", "p99_ms": 2.0}
    loads = [{"workload": "seq-read", "rate": "flat out", "during": d, "alone": alone}
             for d in during]  # fmt: skip
    resilvers = tuple(_resilver(r.replicate, r.seconds or 0.0, ld)
                      for r, ld in zip(loaded.resilvers, loads, strict=True))  # fmt: skip
    loaded = replace(loaded, resilvers=resilvers)
    text = "\n".join(load_notes(StudyFacts("resilver", "loop", 3, 128 * MiB, (idle, loaded))))
    assert f"no figure during the resilver in replicate(s) of it: {why}" in text
    assert "6.0 MiB/s during the resilver vs 18.0 alone" in text  # the first replicate only
    assert "costs the workload 67% of its figure (1 of 2 replicates)" in text
    assert "250 ms intervals: 4.0 s (15 intervals), 0.9 s (2 intervals)" in text


def test_the_foreground_runs_until_its_trigger_also_when_the_resilver_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fio (a fake here) runs until the trigger file appears, as the real one does; stop()
    makes it, on success and on an error in flight (Ctrl-C, a failed replace) alike."""
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    seen: list[float] = []

    def fio_until_triggered(argv: tuple[str, ...]) -> CommandResult:
        trigger = Path(next(a for a in argv if a.startswith("--trigger-file="))[15:])
        t0 = time.monotonic()
        while not trigger.exists() and time.monotonic() - t0 < 5:
            time.sleep(0.01)
        seen.append(time.monotonic() - t0)
        trigger.unlink()  # as fio does once it has seen it
        return CommandResult(argv, 0, FIO, "", 0.0)

    # start() waits for fio's job processes (none here): the fake counts as started at once
    monkeypatch.setattr(rl.fio, "jobs_started", lambda job: True)
    w, _ = parse_load("rand-read-4k")
    for quiet in (False, True):
        fg = rl.Foreground(RecordingRunner({"fio": fio_until_triggered}), w,
                           JobParams(str(tmp_path), 8 * MiB), None)  # fmt: skip
        fg.start()
        time.sleep(0.05)
        t0 = time.monotonic()
        fg.stop(quiet=quiet)
        stopped = time.monotonic() - t0
        assert fg.result is not None and fg.result.total_ios == 25122
        # on success fio runs one more log interval so its log covers the window's end; on an
        # error in flight it is stopped at once
        assert (stopped >= rl.TAIL_S) if not quiet else (stopped < rl.TAIL_S)
    assert len(seen) == 2 and all(s < 5 for s in seen)
