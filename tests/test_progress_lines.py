"""Progress off a terminal (cli/common.py PlainProgress): rich draws its bar only on a TTY,
so a study under nohup or into a log printed nothing for hours. One plain line per finished
trial instead, with its figures, the time so far and the time left at the mean pace."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from poolbench.cli.common import PlainProgress, clock_text, progress_bar


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_line_per_finished_trial_with_the_eta_from_the_mean_trial_time() -> None:
    clock, lines = Clock(), []
    p = PlainProgress(lines.append, clock)
    clock.now += 90.0  # the first trial took 1:30
    p.trial_done(1, 4, "layout=raidz1 (replicate 1)", "seq-write 101.5 MiB/s")
    clock.now += 150.0  # the second 2:30: mean 2:00, two trials left
    p.trial_done(2, 4, "layout=raidz2 (replicate 1)", "seq-write 88.0 MiB/s")
    clock.now += 60.0
    p.trial_done(4, 4, "layout=raidz2 (replicate 2)", "failed: zpool create said busy")
    assert lines == [
        "trial 1 of 4: layout=raidz1 (replicate 1): seq-write 101.5 MiB/s; elapsed 1:30, "
        "about 4:30 left",
        "trial 2 of 4: layout=raidz2 (replicate 1): seq-write 88.0 MiB/s; elapsed 4:00, "
        "about 4:00 left",
        "trial 4 of 4: layout=raidz2 (replicate 2): failed: zpool create said busy; elapsed 5:00",
    ]


def test_a_resumed_run_counts_only_the_trials_timed_here() -> None:
    """Resumed at trial 7 of 10: 6 were measured before and took no time in this process."""
    clock, lines = Clock(), []
    p = PlainProgress(lines.append, clock)
    clock.now += 3600.0 + 120.0
    p.trial_done(7, 10, "c (replicate 3)", "")
    assert lines == ["trial 7 of 10: c (replicate 3); elapsed 1:02:00, about 3:06:00 left"]
    assert clock_text(59.6) == "1:00" and clock_text(-1) == "0:00"


def test_off_a_terminal_the_progress_callback_prints_plain_lines() -> None:
    """bench's callback is called before each measurement: the previous one has finished
    when the count moves on; a study prints its own per-trial lines instead."""
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    with progress_bar(console) as update:
        update("seq-write run 1", 0, 2)
        update("seq-read run 1", 1, 2)
        update("done", 2, 2)
    got = out.getvalue().splitlines()
    assert [g.split(";")[0] for g in got] == [
        "measurement 1 of 2: seq-write run 1",
        "measurement 2 of 2: seq-read run 1",
    ]
    out2 = io.StringIO()
    with progress_bar(Console(file=out2, force_terminal=False), plain_lines=False) as update:
        update("x", 0, 1)
        update("done", 1, 1)
    assert out2.getvalue() == ""


def test_the_trial_loop_reports_each_finished_trial_with_its_figures(tmp_path: Path) -> None:
    """The engine's side: after each trial, (done, total, the trial, its figures or why it
    failed); a stand-in trial, so nothing is built."""
    from poolbench.engine.trial_loop import Paths, StudyRun
    from poolbench.store.db import Store
    from poolbench.study import matrix
    from poolbench.study.model import parse
    from poolbench.system.runner import LocalRunner

    text = """
name = "t"
replicates = 2
max_replicates = 2
[disks]
count = 2
size = "64M"
[factors]
backend = ["zfs"]
layout = ["mirror"]
[workloads]
names = ["seq-write"]
size = "8M"
"""
    study = parse(text, "t")
    sr = StudyRun(LocalRunner(dry_run=True), Store(tmp_path / "r.db"), study, text,
                  Paths(tmp_path / "s", tmp_path / "j"), seed=3)  # fmt: skip
    sr.run_id = sr.store.start_run("study", "t", [], {})
    got: list[tuple[int, int, str, str]] = []
    sr.on_trial = lambda *a: got.append(a)

    def fake_trial(cfg: matrix.Config, replicate: int, index: int) -> None:
        sr.headline = f"seq-write {100.0 + replicate:.1f} MiB/s"

    sr.trial = fake_trial  # type: ignore[method-assign]
    planned = matrix.plan(study, 3)
    sr._run_trials(planned, planned)
    assert got == [
        (1, 2, "backend=zfs layout=mirror (replicate 1)", "seq-write 100.0 MiB/s"),
        (2, 2, "backend=zfs layout=mirror (replicate 2)", "seq-write 101.0 MiB/s"),
    ]
