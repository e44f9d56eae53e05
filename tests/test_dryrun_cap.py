"""A dry run takes as long whatever max_replicates is (issue 39: at 1,000 it printed nothing
for 60 s and took 196 s, simulating the family rule's boundaries for every look)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.test_badinput import _dry_run_module

from poolbench.study import estimate
from poolbench.study.model import parse


def _bench() -> Any:
    return _dry_run_module()


def test_a_dry_run_at_a_cap_of_thousands_costs_what_one_at_3_does(tmp_path: Path) -> None:
    # CPU time of the whole command (a new interpreter each), as a ratio: the machine is
    # shared, and wall time follows its load. Before the fix the ratio was about 70.
    bench = _bench()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    small_wall, small_cpu, _ = bench.time_dry_run(bench.cap_study_text(3), tmp_path / "a")
    big_wall, big_cpu, _ = bench.time_dry_run(bench.cap_study_text(1000), tmp_path / "b")
    assert big_cpu < 1.5 * small_cpu + 0.5, (small_cpu, big_cpu)
    assert big_wall < 20, big_wall  # "well under a minute" even on a loaded machine


def test_the_detectable_line_says_when_it_stands_for_a_smaller_cap() -> None:
    text = bench_text(1000)
    cap = estimate.DRY_RUN_ROUNDS
    assert "max_replicates = 1000 is more rounds than a dry run computes" in text
    assert f"those of max_replicates = {cap}" in text
    assert f"up to {cap} rounds can detect" in text
    # at or below the dry run's rounds, the study's own cap, and no such sentence
    small = bench_text(cap)
    assert "more rounds than" not in small and f"up to {cap} rounds can detect" in small


def bench_text(cap: int) -> str:
    study = parse(_bench().cap_study_text(cap), "cap")
    return estimate.detectable_text(study, None)
