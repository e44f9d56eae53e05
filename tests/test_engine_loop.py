"""engine/loop.py, the measuring loop bench, studies and the fleet share, driven with a
measure function that records fixed figures: rounds until the stop rule is satisfied, each
figure kept and stored at once with the commands run for it, uncounted figures stored but
left out of the summary, and the summary's own warnings at the end."""

from __future__ import annotations

import shutil
from dataclasses import asdict
from pathlib import Path

import pytest

from poolbench import __version__
from poolbench.engine import replicates
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.loop import MeasureLoop, keep, summarise
from poolbench.engine.session import Session
from poolbench.engine.subject import Options, Subject, WorkloadResult
from poolbench.guards.devices import mount_of
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.stats import outliers
from poolbench.store import fingerprints
from poolbench.store.db import Store
from poolbench.system import probes
from poolbench.system.runner import LocalRunner, RecordingRunner
from poolbench.workloads.library import parse_list


def _m(res: WorkloadResult, rep: int, value: float, warnings: list[str]) -> Measurement:
    w = res.workload
    return Measurement("cfg", w.name, rep, value, w.unit, 1 << 20, 256, 1.0, None, None,
                       warnings, Findings(), asdict(w), "")  # fmt: skip


def test_rounds_keep_and_store_every_figure_until_the_rule_is_met(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("bench", "x", ["poolbench"], {})
    runner = RecordingRunner()
    loop = MeasureLoop(store, run_id, CommandLog(runner, store, run_id), seed=11)
    rule = replicates.policy(3, 3, 0.5)
    results = [WorkloadResult(w, policy=rule) for w in parse_list("seq-write,seq-read")]
    figures = {"seq-write": [10.0, 12.0, 11.0], "seq-read": [20.0, 20.0, 20.0]}

    def measure(res: WorkloadResult, rep: int) -> None:
        runner.run(["fio", f"{res.workload.name}.{rep}.fio"], timeout=60)
        loop.record(res, _m(res, rep, figures[res.workload.name][rep], ["same note"]))

    ticks: list[tuple[str, int, int]] = []
    done = loop.rounds(results, rule, measure, lambda r, rep: f"{r.workload.name} {rep}",
                       lambda what, n, total: ticks.append((what, n, total)))  # fmt: skip
    assert done == 6 and [t[1] for t in ticks] == list(range(6))
    assert len(loop.round_orders) == 3
    assert all(sorted(o) == ["seq-read", "seq-write"] for o in loop.round_orders)
    # Never the same workload twice in a row across a round boundary.
    flat = [n for o in loop.round_orders for n in o]
    assert all(a != b for a, b in zip(flat, flat[1:], strict=False))
    by_name = {r.workload.name: r for r in results}
    assert by_name["seq-write"].values == [10.0, 12.0, 11.0]
    assert by_name["seq-write"].warnings == ["same note"]  # each distinct warning once
    # Stored at once, in the order measured, each with the command run for it.
    rows = store.measurements(run_id)
    assert [(r["workload"], r["replicate"]) for r in rows] == [
        (n, flat[: i + 1].count(n) - 1) for i, n in enumerate(flat)
    ]
    assert len(store.commands(run_id)) == 6
    # An uncounted figure (a fleet's partial aggregate) is stored and its warning shown,
    # but it is not a replicate of the summary.
    extra = _m(by_name["seq-read"], 3, 99.0, ["partial: 1 of 2 hosts reported"])
    loop.record(by_name["seq-read"], extra, counted=False)
    assert by_name["seq-read"].values == [20.0] * 3
    assert "partial: 1 of 2 hosts reported" in by_name["seq-read"].warnings
    assert len(store.measurements(run_id)) == 7


def test_summarise_adds_the_intervals_warning_and_the_outliers() -> None:
    (w,) = parse_list("seq-write")
    res = WorkloadResult(w, policy=replicates.policy(3, 10, 0.05))
    for rep, v in enumerate([100.0, 101.0, 99.0, 100.0, 100.0, 250.0]):
        keep(res, _m(res, rep, v, []))
    summarise(res)
    summary = res.summary
    assert summary.outliers == (5,)  # the sixth replicate, 250 among ~100s
    assert res.warnings == [summary.warning(), outliers.note("6")]


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_benchs_session_runs_on_the_loop(tmp_path: Path) -> None:
    """`bench`'s session measures through the same loop, with real fio on a directory."""
    target = tmp_path / "fs"
    target.mkdir()
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("bench", "b", ["test"], {})
    rule = replicates.policy(2, 2, 0.5)
    options = Options(parse_list("seq-write,seq-read"), size=1 << 20, min_window_s=0,
                      stop=rule, seed=3)  # fmt: skip
    session = Session(LocalRunner(), store, run_id, Subject.directory(target), options)
    session.preflight()
    results = {r.workload.name: r for r in session.run()}
    assert session.round_orders is session.loop.round_orders and len(session.round_orders) == 2
    rows = store.measurements(run_id)
    ran = [w for o in session.round_orders for w in o]
    assert [r["workload"] for r in rows] == ran  # stored at once, in the order measured
    for name, res in results.items():
        mine = [r["value"] for r in rows if r["workload"] == name]
        assert res.values == mine and len(mine) == 2
        said = rule.summarize(mine).warning()  # the interval's own warning, if it has one
        assert not said or said in res.warnings
    assert list(target.iterdir()) == []  # the workspace is gone
    # What it ran on, in its own table: one fingerprint for the run, of the filesystem that
    # holds the target, taken before the first measurement.
    (fp,) = fingerprints.of_run(store, run_id)
    mount = mount_of(target)
    assert (fp.config, fp.replicate) == (None, None) and fp.created_at <= rows[0]["created_at"]
    got = fp.fingerprint
    assert (got.path, got.pool.stack, got.pool.name) == (str(target), mount.fstype, mount.source)
    assert got.fio == session.fio_version and got.poolbench == __version__
    assert got.ram_bytes == probes.ram_bytes() and got.pool.size_bytes
