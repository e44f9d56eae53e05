"""The dry run's duration estimate counts the rounds the family rule takes (study/estimate.py):
with several configurations the rule measures every comparison it has not decided up to
max_replicates rounds, so the estimate gives that maximum, labelled as the rule's."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from poolbench.stats import ReplicatePolicy
from poolbench.study import matrix
from poolbench.study.estimate import estimate
from poolbench.study.model import parse

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stats_sim import draws, run_family  # noqa: E402


def _study(layouts: str, names: str = '"seq-write"') -> str:
    return (
        'name = "t"\nreplicates = 3\nmax_replicates = 6\nci_target = 5\n'
        '[disks]\ncount = 4\nsize = "256M"\n[factors]\nbackend = ["zfs"]\n'
        f'layout = [{layouts}]\n[workloads]\nnames = [{names}]\nsize = "64M"\n'
    )


def test_compared_configurations_are_planned_at_the_rules_maximum() -> None:
    study = parse(_study('"raidz1", "raidz2", "mirror:2+mirror:2"'), "t")
    e = estimate(study)
    configs = len(matrix.configs(study))
    assert configs == 3 and e.family_rule
    assert (e.trials, e.trials_max) == (3 * 3, 3 * 6)
    assert e.planned_trials == 18 and e.planned_seconds == e.seconds_max
    # Per trial the same cost at either count: the maximum is twice stage one here.
    assert e.seconds_max / e.seconds == 2.0
    text = e.text()
    assert text.startswith("estimated duration: about ") and "for 9 trials at stage one" in text
    assert "family rule adds a round while any comparison is undecided, up to " in text
    assert "(18 trials, its maximum: what configurations that differ by less" in text
    # What the maximum models: configurations that do not differ are measured to the end.
    rule = ReplicatePolicy(0.05, 3, 6)
    rng = np.random.default_rng(5)
    counts = []
    for fam in draws(rng, "lognormal", 0.05, (200, configs, 6)).tolist():
        base, others = run_family(rule, fam)
        counts.append(len(base) + sum(len(v) for v in others.values()))
    assert np.mean(counts) > 0.95 * e.trials_max  # false positives stop ~5% early at most
    assert max(counts) == e.trials_max


def test_a_single_configuration_keeps_steins_totals() -> None:
    e = estimate(parse(_study('"raidz1"'), "t"))
    assert not e.family_rule and e.planned_trials == e.trials == 3 and e.trials_max == 6
    text = e.text()
    assert text.startswith("estimated duration: about ") and "if every configuration" in text
