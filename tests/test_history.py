"""`poolbench history` on stores with planted series (store/history.py, report/history.py,
report/history_html.py, cli/history_cmd.py): series chosen by target and workload (or study
and configuration) per host, a row per run with what changed since the previous one, a step
reported as a ratio with its interval and the fingerprint fields that changed there, a flat
series without one, a drift along the fill level told apart, `--json` and the HTML page
saying the same, the issue's false-alarm and detection targets through the history path
(the calibration's simulator, tests/changepoint_sim.py). A real series on capped loop devices
is tests/test_history_real.py."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from tests.conftest import poolbench

from changepoint_sim import LEVEL, points, step_levels, step_position
from poolbench.cli.main import cli
from poolbench.errors import EXIT_REGRESSION, UsageError
from poolbench.records.fingerprint import Disk, Fingerprint, Pool
from poolbench.records.fingerprint_changes import changes
from poolbench.report import history as hist
from poolbench.stats.changepoint import Point
from poolbench.store import fingerprints, merge
from poolbench.store.db import Store
from poolbench.store.history import RunPoint, SeriesKey, load, set_series
from test_stats_changepoint_calibration import _at_least, _at_most

DAY = 86400.0
T0 = 1_780_000_000.0
TARGET = "/tank/bench"


def _fp(zfs: str = "zfs-2.2.6-1", used: int = 100, host: str = "nas") -> Fingerprint:
    pool = Pool("zfs", "tank", "tank/bench", "raidz1:3", {"ashift": "12"},
                {"recordsize": "131072"}, 1000, used)  # fmt: skip
    return Fingerprint(TARGET, "0.5.0", "Linux 6.1.0", host, pool,
                       (Disk("sda", "X", "S1", "FW1"),), zfs, "fio-3.33")  # fmt: skip


def _bench_run(store: Store, t: float, values: dict[str, list[float]], fp: Fingerprint) -> int:
    rid = store.start_run("bench", TARGET, ["poolbench", "bench", TARGET], {})
    with store.transaction() as c:
        c.execute("UPDATE runs SET started_at = ?, status = 'finished' WHERE id = ?",
                  (t, rid))  # fmt: skip
        for workload, vals in values.items():
            for rep, v in enumerate(vals):
                c.execute(
                    "INSERT INTO measurements (run_id, config, workload, replicate, value, unit,"
                    " app_bytes, ops, seconds, warnings, guards, workload_def, job_file,"
                    " created_at) VALUES (?, ?, ?, ?, ?, 'MiB/s', 1, 1, 1, '[]', '{}', '{}',"
                    " '', 0)", (rid, TARGET, workload, rep, v),
                )  # fmt: skip
    fingerprints.add(store, rid, fp)
    return rid


def _planted(db: Path, host: str = "nas", start: float = T0) -> Store:
    """12 daily runs: seq-write steps −20% at run 7, the day ZFS went 2.2.6 → 2.3.3;
    seq-read stays flat throughout; 3 replicates a run, CV 2%, seeded."""
    rng = np.random.default_rng(42)
    store = Store(db)
    for day in range(12):
        after = day >= 6
        write = 500 * (0.8 if after else 1.0) * math.exp(rng.normal(0, 0.01))
        read = 800 * math.exp(rng.normal(0, 0.01))
        vals = {"seq-write": list(write * (1 + 0.02 * rng.standard_normal(3))),
                "seq-read": list(read * (1 + 0.02 * rng.standard_normal(3)))}  # fmt: skip
        _bench_run(store, start + day * DAY, vals, _fp("zfs-2.3.3-1" if after else "zfs-2.2.6-1",
                                         100 + day, host))  # fmt: skip
    return store


def test_a_step_is_named_with_its_interval_and_what_changed_there(tmp_path: Path) -> None:
    store = _planted(tmp_path / "r.db")
    series = load(store)
    assert sorted((k.name, k.workload, k.host) for k in series) == [
        (TARGET, "seq-read", "nas"), (TARGET, "seq-write", "nas")]  # fmt: skip
    ((key, pts),) = hist.select(series, TARGET, workload="seq-write")
    v = hist.view(key, pts)
    assert [r.n for r in v.rows] == [3] * 12
    assert v.rows[6].changed == ("ZFS zfs-2.2.6-1 → zfs-2.3.3-1",)
    assert all(r.changed == () for i, r in enumerate(v.rows) if i != 6)
    (step,) = v.steps
    assert step.index == 6 and step.low < 0.8 < step.high and step.high < 0.9
    assert step.changed == ("ZFS zfs-2.2.6-1 → zfs-2.3.3-1",)
    assert v.covariate == "run order"  # fill moved 1.1 points: not a covariate
    text = "\n".join(v.lines())
    assert f"step: {step.text('seq-write')}" in text
    assert "seq-write -20" in step.text("seq-write") or "seq-write -1" in step.text("seq-write")
    assert "after ZFS zfs-2.2.6-1 → zfs-2.3.3-1" in text
    # The flat workload of the same runs: the same upgrade, no step.
    ((rkey, rpts),) = hist.select(series, TARGET, workload="seq-read")
    flat = hist.view(rkey, rpts)
    assert flat.steps == () and flat.history is not None and flat.history.reason
    assert "no step:" in "\n".join(flat.lines())


def test_cli_table_json_and_html_say_the_same(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _planted(db).close()
    run = CliRunner()
    listed = run.invoke(cli, ["history", "--db", str(db)])
    assert listed.exit_code == 0 and listed.output.count("12 runs") == 2, listed.output
    page = tmp_path / "h.html"
    out = run.invoke(cli, ["history", TARGET, "--workload", "seq-write", "--json", "--html",
                           str(page), "--db", str(db)])  # fmt: skip
    assert out.exit_code == 0, out.output
    (doc,) = json.loads(out.output)["series"]
    assert len(doc["points"]) == 12 and doc["points"][6]["changed"] == [
        "ZFS zfs-2.2.6-1 → zfs-2.3.3-1"]  # fmt: skip
    (step,) = doc["steps"]
    assert step["date"] == doc["points"][6]["date"] and step["low"] < 0.8 < step["high"]
    assert doc["analysis"]["steps"][0]["ratio"] == pytest.approx(step["ratio"])
    html = page.read_text()
    assert html.count("<svg") == 1 and html.count('class="err"') >= 12  # an interval per run
    assert "ZFS zfs-2.2.6-1 → zfs-2.3.3-1" in html and f"{(step['ratio'] - 1) * 100:+.1f}%" in html
    text = run.invoke(cli, ["history", TARGET, "--db", str(db)]).output
    assert text.count("step: seq-write") == 1 and "no step:" in text


def test_an_unknown_series_is_a_usage_error_naming_what_the_store_holds(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _planted(db).close()
    out = poolbench("history", "/nope", "--db", str(db))
    assert out.returncode == UsageError.exit_code and "Traceback" not in out.stderr
    said = " ".join(out.stderr.split())
    assert "No series in the store matches name='/nope'" in said and TARGET in said


def test_imported_stores_give_one_series_per_host(tmp_path: Path) -> None:
    local = _planted(tmp_path / "a.db", host="nas")
    _planted(tmp_path / "b.db", host="backup", start=T0 + 3600).close()
    merge.import_store(local, tmp_path / "b.db")
    series = load(local)
    assert sorted({k.host for k in series}) == ["backup", "nas"]
    assert all(len(p) == 12 for p in series.values())
    assert len(hist.select(series, TARGET, workload="seq-write", host="backup")) == 1


def test_a_fill_drift_is_told_apart_from_a_step() -> None:
    """Each run 2% slower as the pool fills from 10% to 65% (12 runs): a drift along the fill
    level, not a staircase of steps. (Seeded; beside a drift like this the method reports a
    step too in a few percent of series, §8's calibration: 1 of 40 seeds of this one.)"""
    rng = np.random.default_rng(0)
    key = SeriesKey(TARGET, "seq-write", "", "nas")
    pts = []
    for day in range(12):
        level = 500 * 0.98**day * math.exp(rng.normal(0, 0.005))
        vals = tuple(level * (1 + 0.01 * rng.standard_normal(4)))
        pts.append(RunPoint(day, T0 + day * DAY, "finished", "MiB/s", vals,
                            _fp(used=100 + 50 * day)))  # fmt: skip
    v = hist.view(key, pts)
    assert v.covariate == "fill" and v.steps == ()
    assert v.history is not None and v.history.drift is not None
    assert (
        v.history.drift.span_low < 0.98**11 * 1.05 and v.history.drift.span_high > 0.98**11 * 0.95
    )
    assert any("told apart from a step" in line for line in v.verdict())


def test_disk_replacement_and_firmware_are_named() -> None:
    a = _fp()
    b = replace(a, disks=(Disk("sdb", "X", "S9", "FW1"),))
    c = replace(a, disks=(Disk("sda", "X", "S1", "FW2"),))
    assert [x.text() for x in changes(a, b)] == ["disk serial S1 → serial S9"]
    assert [x.text() for x in changes(a, c)] == ["disk serial S1 firmware FW1 → FW2"]
    d = replace(a, pool=replace(a.pool, properties={"ashift": "12", "autotrim": "on"}))
    assert [x.text() for x in changes(a, d)] == ["pool property autotrim on added"]
    assert (
        changes(None, a) == () and changes(a, replace(a, pool=replace(a.pool, used_bytes=7))) == ()
    )


def _view_of(pts: list[Point]) -> hist.SeriesView:
    key = SeriesKey(TARGET, "seq-write", "", "nas")
    return hist.view(key, [RunPoint(i, T0 + i * DAY, "finished", "MiB/s", p.values, None)
                           for i, p in enumerate(pts)])  # fmt: skip


def test_planted_series_meet_the_issues_targets_through_history() -> None:
    """The issue's targets on series of 20 runs at CV 5% (2% between runs), through the
    history's own path: a flat series reports a step in ≤ 5%, a 15% step is found (within one
    run of the truth) in ≥ 80%, each bound within its binomial tolerance."""
    rng = np.random.default_rng(4242)
    runs, n = 60, 20
    flat = sum(bool(_view_of(points(rng, np.full(n, LEVEL), 0.05, 0.02)).steps)
               for _ in range(runs))  # fmt: skip
    assert _at_most(flat, runs, 0.05), flat
    found = 0
    for _ in range(runs):
        at = step_position(rng, n)
        v = _view_of(points(rng, step_levels(n, at, 0.85), 0.05, 0.02))
        found += any(abs(s.index - at) <= 1 for s in v.steps)
    assert _at_least(found, runs, 0.80), found


def test_fail_on_regression_exits_8_naming_the_step_and_0_below_its_size(tmp_path: Path) -> None:
    """The planted seq-write fell 20% at the ZFS upgrade: a 10% threshold fails with the
    documented code (the history printed first), a 30% one passes, and --json lists it."""
    db = tmp_path / "r.db"
    _planted(db).close()
    out = poolbench("history", TARGET, "--workload", "seq-write", "--fail-on-regression",
                    "10%", "--db", str(db))  # fmt: skip
    assert out.returncode == EXIT_REGRESSION == 8, out.stderr
    said = " ".join(out.stderr.split())
    assert "1 series fell by 10% or more" in said and "after ZFS zfs-2.2.6-1 → zfs-2.3.3-1" in said
    assert "step: seq-write" in out.stdout and "Traceback" not in out.stderr
    ok = poolbench("history", TARGET, "--fail-on-regression", "30", "--db", str(db))
    assert ok.returncode == 0, ok.stderr
    js = poolbench("history", TARGET, "--json", "--fail-on-regression", "10%", "--db", str(db))
    assert js.returncode == 8
    (fell,) = json.loads(js.stdout)["regressions"]
    assert fell["workload"] == "seq-write" and fell["high"] < 0.9


def test_a_recorded_name_is_the_series_whatever_the_path(tmp_path: Path) -> None:
    store = _planted(tmp_path / "r.db")
    rid = _bench_run(store, T0 + 20 * DAY, {"seq-write": [400.0, 401.0, 399.0]}, _fp())
    set_series(store, rid, "tank-nightly")
    series = load(store)
    ((key, pts),) = hist.select(series, "tank-nightly")
    assert key.name == "tank-nightly" and [p.run_id for p in pts] == [rid]
    assert all(len(p) == 12 for k, p in series.items() if k.name == TARGET)
