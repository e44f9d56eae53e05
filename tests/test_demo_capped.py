"""`poolbench demo` as a new user runs it, on disks of a known speed: four loop devices capped
at 19 MiB/s each (blkio throttle), raidz1 vs raidz2 on the zfs-fuse daemon the demo starts
for itself (a 16 MiB ARC: 8 MiB write quanta). The answer is known from the caps before
anything runs: raidz1 of 4 streams writes through 3 data disks, raidz2 through 2 (the
planner: 55.3 and 36.8 MiB/s at ashift 12), and raidz2 reads all four (76 MiB/s), so the
verdict must rank raidz1 first for seq-write with a significant difference whose interval
holds the capped-disk truth, every figure must sit near the planner's, no member may be
called slow (the disks are equal), no window may be too short for its minimum or for the
steady-state rule to judge (the demo's own settings), and no cap, loop device, pool or
daemon may be left behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import needs_fio, poolbench, sh, stored_rows
from tests.plugins.zfs_fuse import OwnDaemon, _alive

from poolbench.cli.demo_cmd import CAP_MIB_S, DEMO_ARC_MIB, demo_text
from poolbench.planner.layout import parse_layout
from poolbench.planner.performance import DiskSpeed, predict_detailed
from poolbench.stats import steady
from poolbench.study.model import parse
from poolbench.system import throttle
from poolbench.units import parse_size

MiB = 1 << 20
CAP = CAP_MIB_S
STREAM_TOL = 0.15  # the planner's validated streaming tolerance (docs/planner.md)


def _predicted(layout: str, figure: str = "write_bps") -> float:
    disk = DiskSpeed(CAP * MiB, CAP * MiB, float("nan"), float("nan"), "cap", "transfer")
    found = predict_detailed(parse_layout(f"{layout}:4x512M"), disk, 128 << 10, 12)
    return float(getattr(found, figure).value)


def test_every_window_of_the_capped_demo_lasts_the_minimum() -> None:
    """No layout moves data faster than all its disks at their cap, so the working set at
    that rate is the shortest any window can be: 576 MiB / (4 × 19 MiB/s) = 7.6 s, above
    the 3 s minimum, for the cold reads too (never repeated to fill a window)."""
    study = parse(demo_text(zfs=True, capped=True), "demo")
    assert (study.disks.count, study.disks.cap) == (4, CAP)
    size = parse_size(study.workloads.size)
    fastest = study.disks.count * CAP * MiB
    assert size / fastest >= study.workloads.min_window == 3.0
    assert round(size / fastest, 2) == 7.58
    # the planner's figures: raidz2 reads all four disks (76 MiB/s), raidz1's writes are
    # the fastest write (3 data disks: 55.3 MiB/s)
    assert round(_predicted("raidz2", "read_bps") / MiB, 1) == 76.0
    assert round(_predicted("raidz1") / MiB, 1) == 55.3
    assert round(_predicted("raidz2") / MiB, 2) == 36.85


def test_the_demos_rounds_hold_12_quanta_at_the_caps_rates() -> None:
    """At the rates the caps allow, every window's rounds hold 12 of the demo daemon's 8 MiB
    quanta or more, so one quantum more or less in a round (a steady stream's own jitter) is
    at most 8% of it, where the range allows 20%: what the cap is chosen for
    (demo_cmd.CAP_MIB_S). A busy machine that slows a window lengthens nothing: its rounds
    then hold fewer, never under the rule's ten (asserted on the real run below)."""
    quantum = DEMO_ARC_MIB / 2 * MiB
    for layout in ("raidz1", "raidz2"):
        for figure in ("write_bps", "read_bps"):
            rate = _predicted(layout, figure)
            held = steady.round_seconds(quantum, rate) * rate / quantum
            assert held >= 12, (layout, figure, held)


@pytest.mark.parametrize(
    ("layout", "figure"),
    [("raidz1", "write_bps"), ("raidz2", "write_bps"), ("raidz1", "read_bps"),
     ("raidz2", "read_bps")],
)  # fmt: skip
def test_every_window_of_the_demo_holds_the_rounds_the_steady_state_rule_needs(
    layout: str, figure: str
) -> None:
    """The demo's own zfs-fuse daemon admits writes half its ARC at a time (8 MiB), and the
    rule judges rounds of ten such quanta, three at least, after the window's last second
    (a write's closing fsync, left out of the rounds). fio samples once a second, so a
    window of T seconds gives floor(T) samples (measured: 3.22 s gave 3, 7.24 s gave 7).
    Whatever the rate within the planner's tolerance of its prediction (and never above
    all four disks at their cap), the working set makes enough of them."""
    study = parse(demo_text(zfs=True, capped=True), "demo")
    size = parse_size(study.workloads.size)
    quantum = DEMO_ARC_MIB * MiB // 2
    predicted = _predicted(layout, figure)
    lo, hi = predicted * (1 - STREAM_TOL), min(predicted * (1 + STREAM_TOL), 4 * CAP * MiB)
    for step in range(101):
        rate = lo + (hi - lo) * step / 100
        samples = int(size / rate)
        round_s = steady.round_seconds(quantum, rate)
        rounds = (samples - 1) // round_s  # the last second left out
        assert rounds >= steady.MIN_ROUNDS, (layout, figure, rate / MiB, samples, round_s)


@needs_fio
@pytest.mark.skipif(bool(throttle.unavailable()), reason="needs the cgroup v1 blkio throttle")
def test_demo_answers_what_the_caps_predict(own_zfs_fuse: OwnDaemon, tmp_path: Path) -> None:
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    before = throttle.caps()
    with own_zfs_fuse.stopped():  # as on a machine where no zfs-fuse runs: the demo's own
        # the demo as a user runs it
        args = ("demo", "--db", str(db), "--scratch-dir", str(scratch))
        p = poolbench(*args, env={"POOLBENCH_MIN_WINDOW": "3"})
        found = sh("pgrep", "-x", "zfs-fuse", check=False).stdout.split()
        left = [pid for pid in found if _alive(int(pid))]  # not an exited one, unreaped
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert left == []  # the daemon the demo started was stopped again
    assert f"capped at {CAP} MiB/s each" in p.stdout
    assert "note:" not in p.stdout  # nor a daemon of someone else's, nor uncapped disks
    assert throttle.caps() == before  # every cap removed again
    assert not scratch.exists() or not any(scratch.iterdir())
    assert max(len(line) for line in p.stdout.splitlines()) <= 80  # a pipe: 80 columns
    doc = json.loads(poolbench("report", "latest", "--json", "--db", str(db)).stdout)
    (write,) = [r for r in doc["verdict"]["rankings"] if r["workload"] == "seq-write"]
    first, second = write["ranked"][0], write["ranked"][1]
    assert "raidz1" in first["config"] and "raidz2" in second["config"]
    vs = second["vs_best"]
    assert vs["significant"] and vs["ratio"] < 1
    truth = _predicted("raidz2") / _predicted("raidz1")  # 0.667: two data disks of three
    assert vs["ci_low"] * (1 - STREAM_TOL) <= truth <= vs["ci_high"] * (1 + STREAM_TOL), vs
    for row in write["ranked"]:
        layout = "raidz1" if "raidz1" in row["config"] else "raidz2"
        want = _predicted(layout) / MiB
        assert abs(row["figure"]["center"] / want - 1) < STREAM_TOL, (layout, row, want)
    # equal disks: nobody is called slow; the planner's table is shown beside the figures,
    # in the JSON too, each prediction the planner's for the capped disks
    assert "slower than its peers" not in p.stdout
    assert f"predicted vs measured (disk figures: the study's disk cap, {CAP} MiB/s" in p.stdout
    pred = {(r["short_label"], r["workload"]): r for r in doc["predicted"]["rows"]}
    for layout in ("raidz1", "raidz2"):
        assert pred[(layout, "seq-write")]["predicted"] == pytest.approx(_predicted(layout) / MiB)
    assert pred[("raidz2", "seq-read")]["predicted"] == pytest.approx(4 * CAP)
    # No warning about the demo's own settings: every window lasted the minimum (no
    # "shorter than the 3 s minimum") and was long enough for the steady-state rule to
    # judge (no "too short to judge"), in rounds of ten of the demo daemon's 8 MiB quanta.
    for t in doc["tables"]:
        for row in t["rows"]:
            said = [n for n in row["notes"] if "shorter than the" in n or "too short" in n]
            assert not said, (t["workload"], row)
    assert "too short" not in p.stdout and "shorter than the" not in p.stdout
    rows = stored_rows(db, "seq-write") + stored_rows(db, "seq-read")
    assert len(rows) >= 12  # 3 replicates at least of 2 layouts × 2 workloads
    for row in rows:
        judged = row["guards"]["window"]["steady_state"]
        assert judged["quanta"]["write_mib"] == DEMO_ARC_MIB / 2, judged
        assert judged["rounds"] >= steady.MIN_ROUNDS and judged["steady"] is not None, judged
        # ... and its rounds hold the rule's ten quanta or more at the rate measured (at the
        # caps' rates the demo's settings give 12 or more: test_the_demos_rounds_hold_...).
        quanta = judged["round_s"] * judged["mean"] / (judged["quanta"]["write_mib"] * MiB)
        assert quanta >= steady.QUANTA_PER_ROUND, (quanta, judged)
    (read,) = [r for r in doc["verdict"]["rankings"] if r["workload"] == "seq-read"]
    raidz2 = next(r for r in read["ranked"] if "raidz2" in r["config"])
    assert abs(raidz2["figure"]["center"] / (4 * CAP) - 1) < STREAM_TOL, raidz2
