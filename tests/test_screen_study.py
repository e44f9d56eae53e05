"""A screen of a study's disks, used by the study (issue 32, item 1): the warning before a
study on unequal disks (matched by serial, recent), and the screen's figures as the disk
speeds of the report's predicted-vs-measured table. On a fake machine and a hand-built store.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import poolbench
from tests.test_report_predicted import _add
from tests.test_safety_units import FakeMachine

from poolbench.engine.screen.check import study_notes
from poolbench.engine.screen.jobs import FIO_START_S
from poolbench.engine.screen.records import DiskScreen, Figure
from poolbench.report.data import load_run
from poolbench.report.predicted import predicted_rows
from poolbench.report.screened_disk import screened_disk
from poolbench.store.db import Store
from poolbench.store.screens import add_screen

MiB = 1024 * 1024


def _screened(name: str, serial: str, seq: float, iops: float = 200.0) -> DiskScreen:
    d = DiskScreen(f"/dev/{name}", name, serial, "M", 64 * MiB, 512, 512, True, "none", None)
    for test, unit, v in (("seq-read", "MiB/s", seq), ("seq-write", "MiB/s", seq),
                          ("rand-read-4k-qd1", "IOPS", iops)):  # fmt: skip
        d.figures[test] = Figure(test, unit, (v * 0.99, v, v * 1.01), "how")
    return d


def _machine(tmp_path: Path) -> FakeMachine:
    m = FakeMachine(tmp_path / "machine")
    for name, serial in (("sdc", "S-C"), ("sdd", "S-D"), ("sde", "S-E"), ("sdf", None)):
        m.disk(name, serial=serial)
    return m


def test_a_study_on_unequal_disks_is_warned_by_their_screen(tmp_path: Path) -> None:
    m = _machine(tmp_path)
    store = Store(tmp_path / "r.db")
    # Screened under other names (disks move): matched by serial, named by today's path.
    screens = [_screened("sdx", "S-C", 100), _screened("sdy", "S-D", 100),
               _screened("sdz", "S-E", 50)]  # fmt: skip
    add_screen(store, [s.to_json() for s in screens], False, {})
    claims = m.claim(["sdc", "sdd", "sde"])
    notes = study_notes(store, claims)
    slow = [n for n in notes if n.startswith("warning:")]
    assert len(slow) == 2  # seq-read and seq-write; its 4K figures are its peers'
    sde = str(m.root / "dev" / "sde")
    assert all(f"{sde} (serial S-E) is slow" in n for n in slow)
    # A disk with no screen: named, with the command; one without a serial (a loop device)
    # can never be matched, and is not nagged about.
    store.conn.execute("DELETE FROM disk_screens WHERE serial = 'S-E'")
    (note,) = study_notes(store, m.claim(["sdc", "sde"]))
    assert note.startswith("note: no screen within 30 days of") and note.count("/sde") == 2
    assert "poolbench disks --screen" in note
    assert study_notes(store, m.claim(["sdc", "sdf"])) == []


def test_equal_screened_disks_give_no_warning(tmp_path: Path) -> None:
    m = _machine(tmp_path)
    store = Store(tmp_path / "r.db")
    add_screen(store, [_screened("a", "S-C", 100).to_json(),
                       _screened("b", "S-D", 96).to_json()], False, {})  # fmt: skip
    assert study_notes(store, m.claim(["sdc", "sdd"])) == []


def _study(store: Store, serials: list[str]) -> int:
    claims = [{"path": f"/dev/{s}", "serial": s} for s in serials]
    meta = {"study": {"name": "s", "disks": {"devices": ["/dev/a", "/dev/b"]}},
            "claims": {"claims": claims}}  # fmt: skip
    run = store.start_run("study", "s", ["poolbench", "run"], meta)
    for layout, read in (("mirror:2", 190.0), ("stripe:2", 200.0)):
        _add(store, run, f"layout={layout}", "seq-read", [read, read])
    store.finish_run(run, "finished")
    return run


def test_the_report_takes_the_screen_as_its_disk_speeds(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    store = Store(db)
    add_screen(store, [_screened("a", "S-A", 100).to_json(),
                       _screened("b", "S-B", 80).to_json()], True, {})  # fmt: skip
    run = load_run(store, str(_study(store, ["S-A", "S-B"])))
    disk = screened_disk(store, run)
    assert disk is not None and "disk screen of 2 of the study's 2 disks" in disk.source
    assert disk.read_bps == 90 * MiB and disk.read_iops == 200.0  # medians of the means
    assert disk.medium == "media"  # rotational disks
    rows = {r.config: r for r in predicted_rows(run, disk)}
    # A 2-way mirror of 90 MiB/s disks reads from both sides (docs/planner.md): 180.
    assert rows["layout=mirror:2"].predicted == 180.0
    p = poolbench("report", str(run.id), "--db", str(db), env={"COLUMNS": "200"})
    assert p.returncode == 0, p.stderr
    assert "measured ÷ predicted" in p.stdout and "disk screen of 2" in p.stdout
    assert "--disk-speed-from BENCH_RUN" not in p.stdout  # no "no disk figures" hint


def test_no_screen_of_these_serials_leaves_the_report_as_it_was(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    add_screen(store, [_screened("a", "OTHER", 100).to_json()], True, {})
    run = load_run(store, str(_study(store, ["S-A", "S-B"])))
    assert screened_disk(store, run) is None


def test_a_real_run_screens_its_unscreened_disks_first_and_reuses_a_recent_screen(
    tmp_path: Path,
) -> None:
    from tests.test_screen import fake_fio

    from poolbench.engine.screen.check import screen_unscreened
    from poolbench.system.runner import RecordingRunner

    m = _machine(tmp_path)
    for name in ("sdc", "sdd", "sde"):
        (m.root / "sys" / "class" / "block" / name / "stat").write_text("0 " * 11 + "\n")
    store = Store(tmp_path / "r.db")
    old = _screened("old", "S-C", 100, iops=100 * 256)  # as fake fio gives 100 MiB/s in 4K
    add_screen(store, [old.to_json()], False, {})  # recent: reused
    dev = {n: str(m.root / "dev" / n) for n in ("sdc", "sdd", "sde")}
    runner = RecordingRunner({"fio": fake_fio({dev["sdd"]: 100, dev["sde"]: 50})})
    said: list[str] = []
    claims = m.claim(["sdc", "sdd", "sde"])
    assert screen_unscreened(runner, store, claims, said.append, m.root / "sys") == 2
    # Both at once, 2 tests x 2 runs x 10 s, and the alone check's 2 x 10 s: 60 s and 6 fio
    # starts.
    assert said[0].startswith(
        f"screening {dev['sdd']}, {dev['sde']} first (read-only, about "
        f"{60 + 6 * FIO_START_S:.0f} s, all at once"
    )
    # Read-only (fio's --readonly), and only the two unscreened disks: 2 tests x 2 runs on
    # both at once, and seq-read on one alone after each round.
    assert len(runner.argvs) == 6 and all("--readonly" in a for a in runner.argvs)
    assert not any(f"--filename={dev['sdc']}" in a for a in runner.argvs)
    notes = study_notes(store, claims)  # now from the stored screens: sde is the slow one
    assert notes and all(f"{dev['sde']} (serial S-E) is slow on" in n for n in notes)
    # A second run finds every disk screened: nothing runs.
    assert screen_unscreened(runner, store, claims, said.append, m.root / "sys") == 0
    assert len(runner.argvs) == 6


def _unscreened_machine(tmp_path: Path) -> tuple[FakeMachine, Store, dict[str, str]]:
    """sdc screened recently, sdd and sde never: what a real run would screen first."""
    m = _machine(tmp_path)
    for name in ("sdc", "sdd", "sde"):
        (m.root / "sys" / "class" / "block" / name / "stat").write_text("0 " * 11 + "\n")
    store = Store(tmp_path / "r.db")
    add_screen(store, [_screened("old", "S-C", 100, iops=100 * 256).to_json()], False, {})
    return m, store, {n: str(m.root / "dev" / n) for n in ("sdc", "sdd", "sde")}


def test_no_screen_skips_the_screen_and_says_a_slow_disk_was_not_looked_for(
    tmp_path: Path,
) -> None:
    from tests.test_screen import fake_fio

    from poolbench.engine.screen.check import before_study
    from poolbench.system.runner import RecordingRunner

    m, store, dev = _unscreened_machine(tmp_path)
    claims = m.claim(["sdc", "sdd", "sde"])
    runner = RecordingRunner({"fio": fake_fio({dev["sdd"]: 100, dev["sde"]: 50})})
    said: list[str] = []
    kept = before_study(runner, store, claims, said.append, False, m.root / "sys")
    assert runner.argvs == [] and said == []  # no fio, not a word of screening
    # what the run keeps: the two unscreened disks (sdc's recent screen was no skip)
    assert kept is not None and kept.startswith(f"{dev['sdd']}, {dev['sde']} not screened")
    assert "a slow disk among them was not looked for" in kept and dev["sdc"] + "," not in kept
    (warn,) = study_notes(store, claims, screening=False)
    assert warn == f"warning: {kept}"  # said as stored, never "the real run screens them"
    assert "disks --screen" in warn and store.conn.execute(
        "SELECT count(*) FROM disk_screens").fetchone()[0] == 1  # fmt: skip
    # without --no-screen the screen still runs (2 tests x 2 runs at once, 2 alone) and
    # nothing is left out
    assert before_study(runner, store, claims, said.append, True, m.root / "sys") is None
    assert len(runner.argvs) == 6 and said[0].startswith(f"screening {dev['sdd']}, {dev['sde']}")
    assert before_study(runner, store, claims, said.append, False, m.root / "sys") is None


def test_no_screen_is_stored_with_the_run_and_shown_in_its_report(tmp_path: Path) -> None:
    from poolbench.engine import trial_loop
    from poolbench.report import header
    from poolbench.study.model import parse
    from poolbench.system.runner import RecordingRunner

    store = Store(tmp_path / "r.db")
    text = ('name = "s"\n[disks]\ncount = 0\n[factors]\nbackend = ["directory"]\n'
            f'layout = ["{tmp_path}"]\n[workloads]\nnames = ["seq-write"]\n')  # fmt: skip
    paths = trial_loop.Paths(tmp_path / "scratch", tmp_path / "journals")
    sr = trial_loop.StudyRun(RecordingRunner(), store, parse(text), text, paths, seed=1)
    assert "screen" not in sr.metadata({})
    sr.not_screened = "/dev/sdd not screened (--no-screen, ...)"
    meta = sr.metadata({})
    assert meta["screen"] == sr.not_screened
    run = store.start_run("study", "s", ["poolbench", "study"], meta)
    store.finish_run(run, "finished")
    got = dict(header.lines(load_run(store, str(run)), None))
    assert got["disk screen"] == f"warning: {sr.not_screened}"
    from poolbench.report import report_json

    doc = report_json.report(load_run(store, str(run)), None)
    assert doc["run"]["not_screened"] == sr.not_screened  # type: ignore[index]
    assert "disk screen" not in dict(header.lines(load_run(store, str(_study(store, []))), None))


def test_the_no_screen_flag_reaches_the_study_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from poolbench.cli import study_exec
    from poolbench.cli.main import cli

    got: list[bool] = []

    def run_study(request: study_exec.study_lifecycle.StudyRequest, hooks: object) -> None:
        got.append(request.screen)
        raise SystemExit(0)  # the request is all this test needs

    monkeypatch.setattr(study_exec.study_lifecycle, "run_study", run_study)
    (tmp_path / "s.toml").write_text(
        'name = "s"\n[disks]\ncount = 0\n[factors]\nbackend = ["directory"]\n'
        f'layout = ["{tmp_path}"]\n[workloads]\nnames = ["seq-write"]\n'
    )
    db = ["--db", str(tmp_path / "r.db")]
    for args in (["study", "parity", "--disks", "3x64M"], ["run", str(tmp_path / "s.toml")]):
        for flag in (["--no-screen"], []):
            r = CliRunner().invoke(cli, [*args, *flag, *db])
            assert r.exit_code == 0, r.output
    assert got == [False, True, False, True]
