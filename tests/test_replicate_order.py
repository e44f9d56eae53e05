"""The order replicates run in (stats/rounds.py) and the dry-run's detectable change."""

from __future__ import annotations

import math
from pathlib import Path

from poolbench.engine import replicates
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.stats import ReplicatePolicy
from poolbench.stats.rounds import round_order
from poolbench.store.db import Store
from poolbench.study import estimate, pilot
from poolbench.study.model import parse


def test_round_order_is_a_seeded_permutation_rotated_after_the_last() -> None:
    items = ["a", "b", "c", "d"]
    once = round_order(items, 11, 3)
    assert sorted(once) == items and once == round_order(items, 11, 3)
    assert any(round_order(items, 11, r) != once for r in range(4))  # new per round
    rotated = round_order(items, 11, 3, last=once[0])
    assert rotated == once[1:] + once[:1]  # the previous round's last item does not start it
    assert round_order(["a"], 11, 3, last="a") == ["a"]  # alone: nothing to swap


def _run(values: dict[str, list[float]], rule: ReplicatePolicy, seed: int) -> list[list[str]]:
    measured = {k: [] for k in values}  # type: dict[str, list[float]]
    rounds: list[list[str]] = []
    order: list[str] = []

    def measure(name: str, rep: int) -> None:
        order.append(name)
        measured[name].append(values[name][rep])

    done = replicates.interleave(
        list(values), rule, measured.__getitem__, measure, lambda n, r: f"{n} {r}",
        seed=seed, record=lambda _r, names: rounds.append(names),
    )  # fmt: skip
    assert done == len(order) == sum(len(v) for v in measured.values())
    assert [n for r in rounds for n in r] == order  # what is recorded is what ran
    return rounds


def test_extra_replicates_run_in_rounds_interleaved_never_back_to_back() -> None:
    rule = ReplicatePolicy(ci_target=0.05, min_runs=3, max_runs=8)
    # Stage-one CVs of about 1%, 5% and 20%: Stein plans different totals (computed below).
    values = {
        "quiet": [100, 101, 99, 100, 100, 100, 100, 100],
        "mid": [100, 105, 95, 100, 100, 100, 100, 100],
        "loud": [100, 120, 80, 100, 100, 100, 100, 100],
    }
    want = {k: rule.planned([float(x) for x in v[:3]]) for k, v in values.items()}
    assert want["quiet"] < want["mid"] <= want["loud"] == 8
    for seed in range(20):
        rounds = _run({k: [float(x) for x in v] for k, v in values.items()}, rule, seed)
        # Stein fixes each total after stage one: exactly that many, one per round.
        for k, total in want.items():
            assert sum(r.count(k) for r in rounds) == total
            assert all(r.count(k) <= 1 for r in rounds)
        flat = [n for r in rounds for n in r]
        for i in range(1, len(flat)):
            if flat[i] == flat[i - 1]:
                # Only when a single item is still owed replicates is back to back unavoidable.
                assert len(rounds[_round_of(rounds, i)]) == 1, (seed, rounds)
        # The round order is the seeded shuffle of each round (replayable).
        assert rounds[0] == round_order(list(values), seed, 0)


def _round_of(rounds: list[list[str]], i: int) -> int:
    for r, names in enumerate(rounds):
        if i < len(names):
            return r
        i -= len(names)
    raise IndexError(i)


def test_dry_run_detectable_change_names_its_cv(tmp_path: Path) -> None:
    study = parse(
        'name = "t"\nreplicates = 3\nmax_replicates = 6\nci_target = 5\n'
        '[disks]\ncount = 4\nsize = "256M"\n[factors]\nbackend = ["zfs"]\n'
        'layout = ["raidz1", "raidz2"]\n[workloads]\nnames = ["seq-write"]\nsize = "64M"\n',
        "t",
    )
    p = ReplicatePolicy(0.05, 3, 6)
    assumed = estimate.detectable_text(study, None)
    assert "assumed run-to-run CV of 5%" in assumed
    assert f"≥ {p.detectable(0.05, family=1):.1%}" in assumed
    measured = estimate.detectable_text(study, 0.02, 7)
    assert "CV 2.0% measured by run 7" in measured
    assert f"≥ {p.detectable(0.02, family=1):.1%}" in measured
    assert p.detectable(0.02, family=1) < p.detectable(0.05, family=1)


def test_a_stage_too_small_to_detect_a_doubling_says_so_not_a_huge_percentage() -> None:
    """Two rounds at the assumed 5% CV with two comparisons detect only a change of ~411%:
    true and useless, so the line says what the reports say past a 2× change."""
    text = 'name = "t"\nreplicates = 2\nmax_replicates = 2\n[disks]\ncount = 4\nsize = "256M"\n'
    layouts = '[factors]\nbackend = ["zfs"]\nlayout = ["raidz1", "raidz2", "mirror"]\n'
    study = parse(text + layouts + '[workloads]\nnames = ["seq-write"]\nsize = "64M"\n', "t")
    d = ReplicatePolicy(study.ci_target / 100, 2, 2).detectable(0.05, family=2)
    assert d > 1.0  # more than a doubling: the case this is about
    line = estimate.detectable_text(study, None)
    assert "up to 2 rounds can detect no change smaller than 2× (too few rounds" in line
    assert f"{d:.1%}" not in line and "≥" not in line.split("can detect")[1].split(";")[0]
    # the same two rounds on a quieter machine (CV 1%) detect less than a doubling: a figure
    quiet = estimate.detectable_text(study, 0.01, 3)
    assert "can detect a change of ≥ " in quiet


def _m(config: str, value: float, rep: int) -> Measurement:
    return Measurement(
        config, "seq-write", rep, value, "MiB/s", 1 << 20, 16, 0.5, None, None, [],
        Findings(), {"name": "seq-write"}, "[job]\n",
    )  # fmt: skip


def test_pilot_is_the_newest_finished_run_on_this_machine(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    here = {"machine": {"hostname": "here"}}
    old = store.start_run("study", "a", [], here)
    for i, v in enumerate([100.0, 110.0, 90.0]):
        store.add_measurement(old, _m("x", v, i))
    store.finish_run(old, "finished")
    other = store.start_run("study", "b", [], {"machine": {"hostname": "elsewhere"}})
    for i, v in enumerate([100.0, 200.0]):
        store.add_measurement(other, _m("x", v, i))
    store.finish_run(other, "finished")
    found = pilot.find(store, {"seq-write"}, "here")
    assert found is not None and found.run_id == old and found.cells == 1
    assert math.isclose(found.cv, 10 / 100)  # sd of 100, 110, 90 is 10
    assert pilot.find(store, {"rand-read"}, "here") is None
    assert pilot.find(store, {"seq-write"}, "nowhere") is None


def test_planned_stage_one_never_runs_a_configuration_twice_in_a_row() -> None:
    from poolbench.study import matrix

    study = parse(
        'name = "t"\nreplicates = 3\n[disks]\ncount = 4\nsize = "256M"\n[factors]\n'
        'backend = ["zfs"]\nlayout = ["raidz1", "raidz2"]\n[workloads]\nnames = ["seq-write"]\n'
        'size = "64M"\n',
        "t",
    )
    for seed in range(30):
        keys = [t.config.key for t in matrix.plan(study, seed)]
        assert len(keys) == 6 and all(a != b for a, b in zip(keys, keys[1:], strict=False))


def test_a_studys_stage_one_is_rounds_of_the_one_scheduler() -> None:
    """matrix.plan's rounds: each the seeded order of every configuration, rotated after the
    configuration that ended the round before (the study's extra rounds continue from it)."""
    from poolbench.study import matrix

    study = parse(
        'name = "t"\nreplicates = 4\n[disks]\ncount = 4\nsize = "256M"\n[factors]\n'
        'backend = ["zfs"]\nlayout = ["stripe", "mirror", "raidz1"]\n[workloads]\n'
        'names = ["seq-write"]\nsize = "64M"\n',
        "t",
    )
    cfgs = matrix.configs(study)
    for seed in range(30):
        trials = matrix.plan(study, seed)
        assert [t.index for t in trials] == list(range(12))
        last = None
        for r in range(4):
            got = [t.config for t in trials if t.replicate == r]
            assert got == round_order(cfgs, seed, r, last)
            last = got[-1]
        assert all(a.config != b.config for a, b in zip(trials, trials[1:], strict=False))
