"""Windows long enough to mean something (DESIGN.md section 3 rule 7): the minimum window,
how a short write is repeated and a cold read is not, and the SNIA steady-state rule on
fio's one-second samples (stats/steady.py, engine/window.py, workloads/fiojob.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import needs_fio

from poolbench.engine import window
from poolbench.stats import steady
from poolbench.workloads import fiojob
from poolbench.workloads.fioparse import FioResult, parse
from poolbench.workloads.library import get

MiB = 1 << 20
DATA = Path(__file__).parent / "data"


def _result(seconds: float, samples: tuple[float, ...] = (), io: int = 64 * MiB) -> FioResult:
    return FioResult("write", io, io // MiB, seconds, io / seconds, 1.0, 0.0, 0.0, "fio-3.33", 1,
                     steady_bw=samples, steady_criterion="1.0%")  # fmt: skip


# -- the SNIA rule -------------------------------------------------------------------------------
def test_flat_rounds_are_steady_and_a_ramp_or_a_spike_is_not() -> None:
    flat = steady.judge([100.0, 104.0, 98.0, 101.0, 99.0])
    assert flat.steady is True and flat.range_share == pytest.approx(0.06 / 1.004, rel=1e-3)
    ramp = steady.judge([80.0, 85.0, 90.0, 95.0, 100.0])  # range 22% of 90, slope 22%
    assert ramp.steady is False and "slope" in ramp.why_not() and "range" in ramp.why_not()
    # Range within 20% but the fitted line rises 12% of the mean across the window.
    creep = steady.judge([94.0, 97.0, 100.0, 103.0, 106.0])
    assert creep.range_share is not None and creep.range_share < 0.20
    assert creep.slope_share == pytest.approx(0.12) and creep.steady is False
    assert creep.why_not().startswith("slope 12%")
    spike = steady.judge([100.0, 100.0, 140.0, 100.0, 100.0])  # no trend, 40% range
    assert spike.slope_share == pytest.approx(0.0) and spike.steady is False


def test_the_rule_judges_the_last_rounds_and_needs_three() -> None:
    warm_then_flat = [10.0, 50.0, 100.0, 101.0, 99.0, 100.0, 100.0, 101.0]
    got = steady.judge(warm_then_flat, window=5)
    assert got.rounds == 5 and got.steady is True
    assert steady.judge([100.0, 100.0]).steady is None  # two rounds show no trend
    assert steady.judge([0.0, 0.0, 0.0]).steady is None  # nothing moved: nothing to judge
    assert "SNIA" in got.rule and got.as_dict()["steady"] is True


# -- rounds that hold whole quanta (zfs-fuse admits a fast writer half its ARC at a time) ---------
Q = 50 * MiB  # zfs-fuse's quantum with a 100 MiB ARC


def test_a_stream_of_50_mib_quanta_with_jitter_is_steady_in_rounds_that_hold_ten() -> None:
    # 40 MiB/s admitted 50 MiB at a time: seconds of 50, 0 or 100 MiB by where the quanta fell
    # (5 quanta in 4 s, 50 in 40 s), each off by up to 2 MiB of jitter.
    quanta_s = [1, 1, 1, 0, 2] * 8  # 5 quanta every 5 s: 50 MiB/s
    jitter = [2.0, -1.0, 0.5, 0.0, -2.0, 1.0, -0.5, 1.5]
    ys = [n * Q + jitter[i % 8] * MiB * (n > 0) for i, n in enumerate(quanta_s)]
    second_by_second = steady.judge(ys)  # the old rule: it judges where the quanta fell
    assert second_by_second.round_s == 1 and second_by_second.steady is False
    got = steady.judge(ys, quantum_bytes=Q)
    # ceil(10 quanta x 50 MiB / the mean 50.05 MiB/s) = 10 s a round: 4 rounds of 40 s
    assert got.round_s == 10 and got.rounds == 4 and got.steady is True
    assert got.range_share is not None and got.range_share < steady.MAX_RANGE


def test_a_ramp_or_a_decay_in_quanta_is_not_steady() -> None:
    # Quanta a second rising across 40 s (a ramp), and the same reversed (a writer slowed
    # as a cache filled): in rounds of 10 s, the means are 0.6, 0.9, 1.1, 1.4 quanta a
    # second: range 80% of the mean 1.0; least-squares slope 1.3 / 5 = 0.26 a round, 78%
    # across the three steps of the window.
    per_round = [0.6, 0.9, 1.1, 1.4]
    ramp = [q * Q for q in per_round for _ in range(10)]
    up = steady.judge(ramp, quantum_bytes=Q)
    assert up.round_s == 10 and up.rounds == 4 and up.steady is False
    assert up.range_share == pytest.approx(0.8) and up.slope_share == pytest.approx(0.78)
    down = steady.judge(ramp[::-1], quantum_bytes=Q)
    assert down.steady is False and down.slope_share == pytest.approx(0.78)


def test_a_writes_closing_fsync_is_left_out_of_its_rounds_when_a_round_or_shorter() -> None:
    # 530 MiB moved at 100 MiB/s: the sixth second holds its last 30 MiB and the fsync.
    body = [100.0 * MiB] * 5 + [30.0 * MiB]
    got = steady.judge(body, moved_bytes=530 * MiB)
    assert got.closing_left_out == 1 and got.closing_kept == 0
    assert got.rounds == 5 and got.steady is True  # the 30 MiB second would break the range
    # 3 s of flush after that second, longer than a round of 1 s: a cache took the writes
    # faster than the disks made them; kept, and never steady.
    cached = steady.judge([*body, 0.0, 0.0, 0.0], moved_bytes=530 * MiB)
    assert cached.closing_kept == 4 and cached.steady is False
    assert "closing fsync" in cached.why_not()


def test_unknown_quanta_mean_not_judged_not_a_false_warning() -> None:
    from poolbench.engine import quanta

    unknown = quanta.of("zfs-fuse", Path("/nonexistent"))
    assert unknown.known is False and unknown.of("write", True) is None
    swinging = _result(10.0, tuple(float(n * Q) for n in [1, 1, 0, 2, 1, 0, 1, 2, 0, 1]))
    found, warnings = window.finding(get("seq-write"), swinging, 10.0, 0.0, quanta=unknown)
    assert found["steady_state"]["steady"] is None and found["steady_state"]["not_judged"]
    assert warnings == []
    # Nor with the minimum window on and met: the window is not short, its rounds unknown.
    found, warnings = window.finding(get("seq-write"), swinging, 10.0, 3.0, quanta=unknown)
    assert found["steady_state"]["steady"] is None and warnings == []
    # OpenZFS, btrfs, ext4: the writer is paced write by write, one-second rounds.
    for flavour in ("openzfs", None):
        assert quanta.of(flavour).of("write", True) is None
    assert steady.judge([float(Q)] * 5, quantum_bytes=None).round_s == 1


def test_zfs_fuse_quanta_are_half_its_arc_target(tmp_path: Path) -> None:
    from poolbench.engine import quanta

    (tmp_path / "c").write_text(f"{100 * MiB}\n")
    q = quanta.of("zfs-fuse", tmp_path)
    assert q.known and q.of("write", True) == 50 * MiB and q.of("read", True) == 50 * MiB
    assert q.of("read", False) is None  # a random read does not cross the layout in order


# -- what fio is asked ---------------------------------------------------------------------------
def _opts(job: str) -> dict[str, str]:
    return dict(ln.split("=", 1) for ln in job.splitlines() if "=" in ln)


def test_every_data_job_samples_steady_state_without_letting_fio_stop_it() -> None:
    p = fiojob.JobParams("/mnt/p/ws", 64 * MiB, runtime_s=1, min_window_s=3.0)
    for name in ("seq-write", "seq-read", "rand-read-4k", "rand-mix70-4k", "streams-write-2"):
        o = _opts(fiojob.render(get(name), p))
        # limit 0: fio stops only when its criterion falls strictly below it, i.e. never
        assert o["steadystate"] == "bw_slope:0%" and o["steadystate_duration"] == "600s", name
    assert "steadystate" not in _opts(fiojob.render(get("meta-create-seq"), p))


def test_time_based_jobs_last_the_minimum_window_and_size_bound_ones_do_not_change() -> None:
    p = fiojob.JobParams("/mnt/p/ws", 64 * MiB, runtime_s=1, min_window_s=2.5)
    assert _opts(fiojob.render(get("rand-read-4k"), p))["runtime"] == "3"
    assert _opts(fiojob.render(get("rand-read-4k"), p.__class__("/x", MiB, runtime_s=30)))[
        "runtime"] == "30"  # fmt: skip
    once = _opts(fiojob.render(get("seq-write"), p))
    assert "time_based" not in once and once["size"] == str(64 * MiB)
    again = _opts(fiojob.render(get("seq-write"), fiojob.JobParams("/x", 64 * MiB, loops=12)))
    assert again["loops"] == "12" and again["unlink_each_loop"] == "1"  # a fresh file each pass
    assert again["end_fsync"] == "1" and again["size"] == str(64 * MiB)  # durable each pass
    assert "time_based" not in again
    rewrite = _opts(fiojob.render(get("iozone-rewrite-128k"), fiojob.JobParams("/x", MiB, loops=3)))
    assert rewrite["loops"] == "3" and "unlink_each_loop" not in rewrite  # in place, as asked
    zvol = fiojob.JobParams("/x", 64 * MiB, loops=3, device="/dev/zvol/p/pbvol")
    assert "unlink_each_loop" not in _opts(fiojob.render(get("seq-write"), zvol))
    # A read is never repeated, whatever it is asked: the second pass would be cached.
    read = _opts(fiojob.render(get("seq-read"), fiojob.JobParams("/x", 64 * MiB, loops=3)))
    assert "loops" not in read and "time_based" not in read


# -- which windows are extended, and what is recorded ---------------------------------------------
def test_only_size_bound_writes_are_repeated() -> None:
    yes = ("seq-write", "streams-write-4", "iozone-write-128k", "iozone-rewrite-128k")
    no = ("seq-read", "rand-write-4k", "reread", "smallfile-write-16k", "meta-create-seq",
          "iozone-bread-128k", "untar")  # fmt: skip
    assert all(window.extendable(get(n)) for n in yes)
    assert not any(window.extendable(get(n)) for n in no)
    # 3 s × 1.5 headroom ÷ 0.24 s per pass: 19 passes; none when one pass lasts the minimum.
    assert window.loops_for(0.24, 3.0) == 19 and window.loops_for(2.5, 2.5) == 1
    assert window.loops_for(0.2, 0.0) == 1 and window.loops_for(2.9, 3.0) == 2
    assert window.loops_for(0.0, 3.0) == window.MAX_LOOPS == window.loops_for(1e-6, 3.0)


def test_a_repeated_write_records_its_first_pass_and_its_steady_state() -> None:
    res = parse((DATA / "fio-seq-write-loops22.json").read_text(), "write")
    found, warnings = window.finding(get("seq-write"), res, res.runtime_s, 3.0,
                                     first_pass_s=0.205, loops=22)  # fmt: skip
    assert found["reached"] is True and found["seconds"] == pytest.approx(4.715)
    assert found["repeated"] == {"first_pass_s": 0.205, "loops": 22}
    ss = found["steady_state"]
    # 546, 482, 481, 384 MiB/s (a shared machine): range 34% and slope 31% of the mean
    assert ss["rounds"] == 4 and ss["steady"] is False
    assert "fio_slope" not in ss  # fio computes its criterion only on a full ring
    assert len(warnings) == 1 and warnings[0].startswith("the window never reached steady")
    assert ss["why_not"] == "range 34% of the mean > 20% and slope 31% of the mean > 10%"


def test_a_short_cold_read_says_what_working_set_would_fill_the_window() -> None:
    found, warnings = window.finding(get("seq-read"), _result(0.5, io=128 * MiB), 0.5, 3.0)
    # 128 MiB in 0.5 s, for 3 s with 50% to spare: 1152 MiB, as a power of two
    assert found == {"seconds": 0.5, "min_s": 3.0, "reached": False,
                     "fill_working_set_mib": 2048}  # fmt: skip
    (w,) = warnings
    assert w.startswith("the timed window was shorter than the 3 s minimum: a cold read")
    assert "about 2048 MiB" in w
    # Another replicate a little faster or slower says the same words.
    assert window.finding(get("seq-read"), _result(0.55, io=128 * MiB), 0.55, 3.0)[1] == warnings
    steady_long = _result(6.0, (100.0, 101.0, 99.0, 100.0, 100.0))
    found, warnings = window.finding(get("rand-read-4k"), steady_long, 6.0, 3.0)
    assert warnings == [] and found["steady_state"]["steady"] is True
    assert "fio_slope" not in found["steady_state"]  # fio judges only a full ring (600 s)


# -- the setting: study file, study options, run/demo/bench -------------------------------------
STUDY = """
name = "w"
[disks]
count = 2
size = "64M"
[factors]
backend = ["zfs"]
layout = ["mirror"]
[workloads]
names = ["seq-write", "rand-read-4k"]
size = "8M"
runtime = 1
"""


def test_min_window_is_a_study_setting_with_a_cli_override() -> None:
    from poolbench.cli.common import override_min_window
    from poolbench.errors import UsageError
    from poolbench.study import estimate
    from poolbench.study.builtin import registry
    from poolbench.study.builtin.context import Context
    from poolbench.study.model import parse as parse_study

    study = parse_study(STUDY, "w")
    assert study.workloads.min_window == 3.0
    assert parse_study(STUDY + "min_window = 0.5\n", "w").workloads.min_window == 0.5
    for bad in ("-1", "nan", "inf", '"three"'):
        with pytest.raises(UsageError):
            parse_study(STUDY + f"min_window = {bad}\n", "w")
    assert override_min_window(study, 7.5).workloads.min_window == 7.5
    assert override_min_window(study, None) is study
    built = registry.build("parity", Context(4, "256M", options={"min_window": "6"}))
    assert built.workloads["min_window"] == 6.0
    assert "min_window" not in registry.build("parity", Context(4, "256M")).workloads
    # The estimate counts the window: a 1 s random read runs 3 s; a short write, twice.
    w = get("rand-read-4k")
    assert estimate.workload_seconds(w, 8 * MiB, 1, 100, 3.0) == estimate.workload_seconds(
        w, 8 * MiB, 3, 100)  # fmt: skip
    sw = get("seq-write")
    assert estimate.workload_seconds(sw, 8 * MiB, 1, 100, 3.0) > 3.0


# -- a real session on a plain directory: fio only, nothing that needs root -----------------------
@needs_fio
def test_a_session_repeats_a_short_write_and_stores_the_window(tmp_path: Path) -> None:
    import json

    from poolbench.engine.session import Session
    from poolbench.engine.subject import Options, Subject
    from poolbench.store.db import Store
    from poolbench.system.runner import LocalRunner
    from poolbench.workloads.library import parse_list

    target = tmp_path / "fs"
    target.mkdir()
    store = Store(tmp_path / "r.db")
    run_id = store.start_run("bench", "w", ["test"], {})
    options = Options(parse_list("seq-write"), size=16 * MiB, min_window_s=1.0, seed=1)
    session = Session(LocalRunner(), store, run_id, Subject.directory(target), options)
    session.preflight()
    (res,) = session.run_once(0)
    (row,) = store.measurements(run_id)
    win = json.loads(row["guards"])["window"]
    assert win["min_s"] == 1.0 and win["seconds"] == pytest.approx(row["seconds"], abs=1e-3)
    if "repeated" in win:  # one 16 MiB pass is well under a second on most disks
        loops = win["repeated"]["loops"]
        assert loops >= 2 and win["repeated"]["first_pass_s"] < 1.0
        assert row["app_bytes"] == loops * 16 * MiB
        job = _opts(row["job_file"])
        assert job["loops"] == str(loops) and job["unlink_each_loop"] == "1"
    else:
        assert row["app_bytes"] == 16 * MiB and row["seconds"] >= 1.0
    assert res.values == [row["value"]]
    assert list(target.iterdir()) == []  # the workspace is gone


def test_the_environment_sets_the_min_window_where_the_command_line_does_not() -> None:
    """POOLBENCH_MIN_WINDOW is --min-window's default (the suite runs with 0); the command
    line still wins, and without either a built-in study keeps the study's own 3 s."""
    from tests.conftest import poolbench

    def toml(*args: str, env: str | None) -> str:
        p = poolbench(
            "study",
            "parity",
            "--disks",
            "4x128M",
            *args,
            "--print-toml",
            env={"POOLBENCH_MIN_WINDOW": env} if env is not None else None,
        )
        assert p.returncode == 0, p.stderr
        return p.stdout

    assert "min_window = 5.0" in toml(env="5")
    assert "min_window = 2.0" in toml("--min-window", "2", env="5")
    import os

    saved = os.environ.pop("POOLBENCH_MIN_WINDOW", None)
    try:
        assert "min_window" not in toml(env=None)
    finally:
        if saved is not None:
            os.environ["POOLBENCH_MIN_WINDOW"] = saved
