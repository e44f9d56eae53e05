"""The slow-member guard's disk_wait rule (guards/member_latency.py) on `zpool iostat -Hvlp`
rows recorded in the OpenZFS 2.3 guest (tests/data/zpool-iostat-slow-disk.json: three runs
of the slow-disk study on three loop disks capped at 4 MiB/s, the first at 2 where
slow_member=50; 2 replicates of a streaming write and a cold streaming read on mirror:2,
raidz1:3 and draid1:2d:3c:0s), and the rule's edges on rows made from them."""

from __future__ import annotations

import copy
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from poolbench.engine import slow_members
from poolbench.engine.measure_checks import latency_findings
from poolbench.guards import member_latency as ml
from poolbench.records.findings import Findings
from poolbench.store.factrows import FactRow
from poolbench.store.facts import facts_from_records
from poolbench.study.builtin import registry, slow_guard
from poolbench.study.builtin import slow_disk as study
from poolbench.study.builtin.context import Context
from poolbench.workloads.library import streaming

REC = json.loads((Path(__file__).parent / "data" / "zpool-iostat-slow-disk.json").read_text())
RUNS: dict[str, dict[str, list[list[dict[str, Any]]]]] = REC["runs"]
FIRST, SECOND, THIRD = sorted(RUNS)
LAYOUTS = ("mirror:2", "raidz1:3", "draid1:2d:3c:0s")


def reps(
    layout: str, level: int, wl: str = "seq-write", run: str = FIRST
) -> list[list[dict[str, Any]]]:
    return RUNS[run][f"backend=zfs layout={layout} slow_member={level} {wl}"]


def leaf_waits(rows: list[dict[str, Any]]) -> list[float]:
    """The leaves' write disk_wait in ms, straight from the recorded rows (the last 2 or 3)."""
    return [r["disk_wait_write_ns"] / 1e6 for r in rows if not r["alloc"] and not r["free"]]


@pytest.mark.parametrize("run", [FIRST, SECOND, THIRD])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_healthy_vdev_names_no_one(layout: str, run: str) -> None:
    for rows in reps(layout, 100, run=run):
        ev = ml.evidence(rows)
        assert ev is not None and ev["slow"] == {}, rows
        waits = leaf_waits(rows)
        # every leaf was judged, and the largest gap to its peers' median stays under the rule
        assert len(ev["disk_wait_ms"]) == len(waits)
        worst = max(w / statistics.median(waits[:i] + waits[i + 1 :]) for i, w in enumerate(waits))
        assert worst < ml.WAIT_RATIO
    guards = [{"members_slow": {"latency": ml.evidence(r)}} for r in reps(layout, 100, run=run)]
    assert slow_members.named(guards) == []


def test_a_read_records_the_waits_and_judges_nothing() -> None:
    """The writes in a cold read's span are only the pool's own (the import's labels): in
    the second run a healthy mirror side's were 1.41x its peer's, which the rule would
    have flagged."""
    rows = reps("mirror:2", 100, "seq-read", SECOND)[0]
    w0, w1 = leaf_waits(rows)
    assert w0 / w1 > ml.WAIT_RATIO  # 12.04 against 8.53 ms
    ev = ml.evidence(rows, writes=False)
    assert ev is not None and "slow" not in ev and ev["not_judged"] == ml.NOT_JUDGED
    first = next(r["name"] for r in rows if not r["alloc"] and not r["free"])
    assert ev["disk_wait_ms"][first]["write"] == round(w0, 2)
    guards = [{"members_slow": {"latency": ml.evidence(r, writes=False)}}
              for r in reps("mirror:2", 100, "seq-read", SECOND)]  # fmt: skip
    assert slow_members.latency_parts(guards) == [] and slow_members.named(guards) == []


@pytest.mark.parametrize("run", [FIRST, SECOND, THIRD])
@pytest.mark.parametrize("layout", ["mirror:2", "raidz1:3"])
def test_the_throttled_member_of_a_mirror_and_a_raidz_is_named_with_its_figures(
    layout: str, run: str
) -> None:
    got = []
    for rows in reps(layout, 50, run=run):
        ev = ml.evidence(rows)
        assert ev is not None
        mine, *peers = leaf_waits(rows)  # the first member is the throttled one
        expect = statistics.median(peers)
        assert list(ev["slow"]) == ["loop0"]
        d = ev["slow"]["loop0"]
        assert d["position"] == 0
        assert d["write_ms"] == round(mine, 2) and d["peers_ms"] == round(expect, 2)
        assert d["ratio"] == round(mine / expect, 2) > ml.WAIT_RATIO
        got.append((mine, expect))
    # recorded: mirror 40.98 against 21.53 and 35.15 against 17.05 ms; raidz1:3 43.26
    # against 30.34 (1.43x) and 31.06 against 14.94 ms; the second run 1.88 and 1.87x,
    # 1.55 and 1.81x; the third 2.24 and 1.95x, 1.65 and 1.78x
    text = slow_members.named([{"members_slow": {"latency": ml.evidence(r)}}
                               for r in reps(layout, 50, run=run)])  # fmt: skip
    a = statistics.median(m for m, _ in got)
    b = statistics.median(p for _, p in got)
    assert text == [
        "member loop0 (disk 1 in the pool's order) waited longer per write than its peers in "
        f"2 of 2 replicates (write disk_wait, median {a:.0f} ms against {b:.0f} ms for its "
        "peers, `zpool iostat -l` since the pool's import): the pool waits for its slowest "
        "member"
    ]


def _with_wait(rows: list[dict[str, Any]], leaf: str, ratio: float) -> list[dict[str, Any]]:
    """The recorded rows with `leaf`'s write disk_wait set to `ratio` x its peers' median."""
    out = copy.deepcopy(rows)
    peers = [r["disk_wait_write_ns"] for r in out[2:] if r["name"] != leaf]
    for r in out:
        if r["name"] == leaf:
            r["disk_wait_write_ns"] = int(statistics.median(peers) * ratio)
    return out


def test_the_threshold_edge_and_a_leaf_with_too_few_writes() -> None:
    healthy = reps("raidz1:3", 100)[1]
    under = ml.evidence(_with_wait(healthy, "loop2", 1.32))
    assert under is not None and under["slow"] == {}
    over = ml.evidence(_with_wait(healthy, "loop2", 1.35))
    assert over is not None and list(over["slow"]) == ["loop2"]
    assert over["slow"]["loop2"]["position"] == 2
    # a leaf that served under a quarter of its busiest peer's writes is not judged, however
    # long they waited; with one peer left to compare, nothing is
    few = _with_wait(healthy, "loop2", 5.0)
    next(r for r in few if r["name"] == "loop2")["write_ops"] = 11  # busiest: 47 per second
    ev = ml.evidence(few)
    assert ev is not None and ev["slow"] == {}
    mirror = _with_wait(reps("mirror:2", 50)[0], "loop0", 3.0)
    next(r for r in mirror if r["name"] == "loop1")["write_ops"] = 0
    assert ml.evidence(mirror) is None


def test_a_draid_write_the_rule_missed_in_the_third_run() -> None:
    """dRAID is not held to it: in the third run one replicate's slow member waited 35.2 ms
    against peers at 30.6 and 22.5 (median 26.6: 1.32x, under the rule), the other 1.67x;
    so 1 of 2, not named. A peer that waits long too lifts the median."""
    first, second = reps("draid1:2d:3c:0s", 50, run=THIRD)
    one, two = ml.evidence(first), ml.evidence(second)
    assert one is not None and list(one["slow"]) == ["loop0"]
    assert two is not None and two["slow"] == {}
    mine, *peers = leaf_waits(second)
    assert mine / statistics.median(peers) < ml.WAIT_RATIO
    guards = [{"members_slow": {"latency": ev}} for ev in (one, two)]
    assert slow_members.named(guards) == []


def test_zfs_fuse_and_plain_disks_give_no_latency_part() -> None:
    rows = copy.deepcopy(reps("mirror:2", 50)[0])
    for r in rows:
        for col in [c for c in r if c.endswith("_ns")]:
            r[col] = None  # what a pool without latency columns parses to
    assert ml.evidence(rows) is None
    # two plain disks (a stripe): each its own top-level vdev, no peers
    stripe = [dict(rows[0], name="p"), dict(rows[2], name="loop0", alloc=5, free=9),
              dict(rows[3], name="loop1", alloc=5, free=9)]  # fmt: skip
    assert ml.leaves(stripe) == [] and ml.evidence(stripe) is None


def test_two_mirrors_are_judged_apart_and_positions_follow_the_pool() -> None:
    a = reps("mirror:2", 50)[0]  # loop0 slow against loop1
    b = copy.deepcopy(reps("mirror:2", 100)[0])  # two healthy sides
    rows = [a[0], a[1], a[2], a[3], dict(b[1], name="mirror-1"),
            dict(b[2], name="loop2"), dict(b[3], name="loop3")]  # fmt: skip
    got = ml.leaves(rows)
    assert [(x.name, x.position, x.top) for x in got] == [
        ("loop0", 0, "mirror-0"), ("loop1", 1, "mirror-0"),
        ("loop2", 2, "mirror-1"), ("loop3", 3, "mirror-1"),
    ]  # fmt: skip
    ev = ml.evidence(rows)
    assert ev is not None and list(ev["slow"]) == ["loop0"]  # not judged against mirror-1


def test_the_latency_part_joins_the_byte_counters_record() -> None:
    f = Findings()
    f.other["members_slow"] = {"slow": {}, "order": ["loop0", "loop1"]}
    f.merge_pool({"zpool_iostat": reps("mirror:2", 50)[0]})
    latency_findings(f, streaming("write"))
    rec = f.other["members_slow"]
    assert rec["slow"] == {} and rec["order"] == ["loop0", "loop1"]
    assert list(rec["latency"]["slow"]) == ["loop0"]
    # no byte evidence (fewer than two members compared): the record holds the latency alone,
    # and the byte rule does not count it as a judged replicate
    g = Findings()
    g.merge_pool({"zpool_iostat": reps("mirror:2", 50)[1]})
    latency_findings(g, streaming("write"))
    assert set(g.other["members_slow"]) == {"latency"}
    assert slow_members._by_bytes([{"members_slow": g.other["members_slow"]}]) == []
    h = Findings()
    h.merge_pool({"compressratio": "1.00"})  # zfs-fuse: no iostat at all
    latency_findings(h, streaming("write"))
    assert "members_slow" not in h.other
    # a streaming read: the waits recorded, nothing judged
    r = Findings()
    r.merge_pool({"zpool_iostat": reps("mirror:2", 50)[0]})
    latency_findings(r, streaming("read"))
    assert "slow" not in r.other["members_slow"]["latency"]


def test_the_study_restates_the_naming_majority() -> None:
    for judged in range(0, 9):
        assert slow_guard.needed(judged) == slow_members.needed(judged)


def _notes_line(slow_iostat: list[list[dict[str, Any]]]) -> tuple[Any, str]:
    """The seq-write notes line of a mirror:2 study whose slow configuration's replicates
    recorded `slow_iostat` (the healthy one: the recorded healthy rows)."""
    ctx = Context(3, "128M", dialect="openzfs", options={"layouts": "mirror:2"})
    meta = {"study_text": registry.study_text("slow-disk", ctx)}
    rows = []
    for level, recorded in ((100, reps("mirror:2", 100)), (50, slow_iostat)):
        key = f"backend=zfs layout=mirror:2 slow_member={level}"
        for rep, iostat in enumerate(recorded):
            g: dict[str, Any] = {"members_slow": {"slow": {}, "order": ["loop0", "loop1"],
                                                  "latency": ml.evidence(iostat)}}  # fmt: skip
            if level == 50:
                g["slow_member"] = {"device": "loop0", "position": 0, "percent": 50,
                                    "peer_mib_s": 4.0, "cap_mib_s": 2.0}  # fmt: skip
            rows.append(FactRow(config=key, workload="seq-write", replicate=rep,
                                value=3.0 if level == 100 else 1.6, guards=g))  # fmt: skip
    facts = facts_from_records(meta, rows)
    return facts, study.notes(ctx, facts)[1]


def test_notes_say_whether_either_rule_named_the_throttled_disk() -> None:
    facts, line = _notes_line(reps("mirror:2", 50))
    assert facts.configs[1].latency_flags["seq-write"] == ((0,), (0,))
    assert facts.configs[0].latency_flags["seq-write"] == ((), ())
    assert "the guard flagged disk 1 slow in 0 of 2 replicates (it cannot name it: OpenZFS " in line
    assert line.endswith("; its disk_wait rule flagged disk 1 slow in 2 of 2 replicates: the "
                         "guard names it by its disk_wait")  # fmt: skip
    # flagged in one replicate of two (the other a healthy window): a majority is two
    _facts, line = _notes_line([reps("mirror:2", 50)[0], reps("mirror:2", 100)[0]])
    assert line.endswith("; its disk_wait rule flagged disk 1 slow in 1 of 2 replicates: the "
                         "guard names it by neither rule")  # fmt: skip
