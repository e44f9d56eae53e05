"""How long a study will take, before it runs (pure; shown by `--dry-run`).

A rough model, stated with its assumptions so nobody mistakes it for a promise: each trial
costs a fixed setup (make disks, create, read back, verify, destroy) plus, per workload, the
time to move its bytes at an assumed streaming rate, a cache drop before each cold read, and
the run time of time-based workloads. The range runs from the planned replicates to
`max_replicates` (more rounds while a confidence interval is wider than the target). With two
or more configurations the family rule (stats.ReplicatePolicy.more_family) measures every
comparison it has not decided up to `max_replicates` rounds, so the maximum is what to plan
for when configurations are close, and is printed as the rule's maximum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from poolbench.factors import registry as factor_registry
from poolbench.factors import specs as factor_specs
from poolbench.stats.policy import ReplicatePolicy
from poolbench.stats.power import BLIND
from poolbench.study import matrix
from poolbench.study.model import Study
from poolbench.units import parse_size
from poolbench.workloads import pgbench
from poolbench.workloads.library import L2ARC_INTERVALS, l2arc_interval_s, parse_list
from poolbench.workloads.workload import Workload

MiB = 1 << 20
ASSUMED_MIB_S = 150.0  # streaming rate of the pool (a few spinning disks, or files)
SETUP_S = 8.0  # make disks, create, read back and verify, destroy
PER_DISK_S = 0.3  # a loop device, a partition table
CACHE_DROP_S = 1.5  # export + import (ZFS) or remount
META_OPS_S = 2000.0  # metadata operations per second
UNTAR_S = 60.0  # a kernel source tree (≈1.4 GB in 80k files) with its syncfs
PG_CLUSTER_S = 5.0  # initdb, start, checkpoints, stop (PostgreSQL 15 on loop devices)
PG_LOAD_S_PER_SCALE = 1.0  # pgbench -i, one scale unit (16 MB) with its vacuum and keys
RESILVER_FACTOR = 1.0  # resilver ≈ rewriting the working set once
ASSUMED_CV = 0.05  # run-to-run CV assumed when the store has no earlier run on this machine


@dataclass(frozen=True)
class Estimate:
    trials: int  # stage one: `replicates` per configuration
    trials_max: int  # max_replicates per configuration
    seconds: float  # at the planned replicates
    seconds_max: float  # at max_replicates for every configuration
    # Configurations are compared (stats.ReplicatePolicy.more_family): the rule measures
    # every comparison it has not decided up to max_replicates rounds, so the maximum is
    # the figure to plan for, not stage one.
    family_rule: bool = False

    @property
    def planned_trials(self) -> int:
        """The trials to plan for: the family rule's maximum when it applies, else Stein's."""
        return self.trials_max if self.family_rule else self.trials

    @property
    def planned_seconds(self) -> float:
        return self.seconds_max if self.family_rule else self.seconds

    def text(self) -> str:
        assumes = (
            f" (assumes ~{ASSUMED_MIB_S:.0f} MiB/s streaming and ~{SETUP_S:.0f} s to build "
            "and tear down each pool; real disks differ)"
        )
        if self.family_rule and self.trials_max > self.trials:
            return (
                f"estimated duration: about {fmt_duration(self.seconds)} for {self.trials} "
                "trials at stage one; the comparisons' family rule adds a round while any "
                f"comparison is undecided, up to {fmt_duration(self.seconds_max)} "
                f"({self.trials_max} trials, its maximum: what configurations that differ by "
                "less than the detectable change take)" + assumes
            )
        return (
            f"estimated duration: about {fmt_duration(self.seconds)} for {self.trials} trials"
            + (
                f", up to {fmt_duration(self.seconds_max)} ({self.trials_max} trials) if every "
                "configuration needs max_replicates"
                if self.trials_max > self.trials
                else ""
            )
            + assumes
        )


def fmt_duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 90:
        return f"{s} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    return f"{s / 3600:.1f} h"


def workload_seconds(
    w: Workload, ws_bytes: int, runtime: int, meta_files: int, min_window: float = 0.0
) -> float:
    mib = ws_bytes / MiB
    if w.name.startswith("l2arc-read-"):  # its intervals, after the data is laid out
        return L2ARC_INTERVALS * l2arc_interval_s(runtime) + mib / ASSUMED_MIB_S + 0.5
    if w.kind == "pool":
        return 0.5 if w.name == "capacity" else mib * RESILVER_FACTOR / ASSUMED_MIB_S + 2
    if w.kind == "untar":
        return UNTAR_S
    if w.kind == "pgbench":  # a fresh cluster, its load, the window and a checkpoint
        return PG_CLUSTER_S + ws_bytes / pgbench.BYTES_PER_SCALE * PG_LOAD_S_PER_SCALE + runtime
    if w.is_metadata:
        return meta_files / META_OPS_S + (CACHE_DROP_S if w.cold else 0.5)
    t = max(runtime, min_window) if w.time_based else mib * w.io_fraction / ASSUMED_MIB_S
    if not w.time_based and w.direction == "write" and not w.cached_by_design and t < min_window:
        t += min_window  # a short write's first pass sizes a repeat that fills the window
    if w.needs_data and w.direction in ("write", "mixed"):
        t += mib / ASSUMED_MIB_S  # the data to rewrite in place is written first
    if w.cold:
        t += CACHE_DROP_S
    if w.cached_by_design:
        t *= 2  # the warming read
    return t + 0.5


def estimate(study: Study) -> Estimate:
    wl = study.workloads
    ws = parse_size(wl.size)
    workloads = parse_list(",".join(wl.names))
    per_trial = SETUP_S + PER_DISK_S * study.disks.n
    per_trial += sum(workload_seconds(w, ws, wl.runtime, wl.metadata_files, wl.min_window)
                     for w in workloads)  # fmt: skip
    configs = matrix.configs(study)
    basis = factor_specs.Basis(
        raw_mib=study.disks.size_bytes * study.disks.n / MiB,
        resilver_run_mib=ws / MiB * RESILVER_FACTOR + 2 * CACHE_DROP_S * ASSUMED_MIB_S,
    )
    # what each configuration's factors do untimed before (or around) the measurements
    fill_extra = sum(factor_registry.untimed_mib(dict(c.levels), basis) for c in configs)
    fill_s = fill_extra / ASSUMED_MIB_S
    n, n_max = len(configs) * study.replicates, len(configs) * study.max_replicates
    # The engine compares a workload's configurations by the family rule unless its figure
    # is read from the pool (GiB): engine/trial_loop.family_owed.
    compared = len(configs) > 1 and any(w.unit != "GiB" for w in workloads)
    return Estimate(
        n,
        n_max,
        n * per_trial + fill_s * study.replicates,
        n_max * per_trial + fill_s * study.max_replicates,
        family_rule=compared,
    )


COLD_FACTOR = 2  # a bench's default working set: ≥ 2× RAM (DESIGN.md section 3 rule 1)


def working_set_text(study: Study, ram: int) -> str:
    """The working set and the workloads, and what keeps the reads cold at that size: a
    study's pool is far smaller than 2× RAM, so the cache drop before each cold read
    (export/import or remount, then verified) does, not the size."""
    wl = study.workloads
    ws = parse_size(wl.size)
    ratio = ws / ram
    why = (
        f"at least {COLD_FACTOR}× RAM, so no cache can hold it"
        if ratio >= COLD_FACTOR
        else f"below the {COLD_FACTOR}× RAM a bench uses by default (a study's pool is "
        "smaller), so reads are kept cold by dropping the caches before each cold read "
        "(export/import or remount), each drop verified"
    )
    workloads = parse_list(",".join(wl.names))
    timed = [w.name for w in workloads if w.time_based]
    runtime = (
        f"; time-based ({', '.join(timed)}) run {max(wl.runtime, wl.min_window):g} s each"
        if timed
        else ""
    )
    return (
        f"working set: {wl.size} = {ws:,} bytes per configuration ([workloads] size), "
        f"{f'{ratio:.2f}×' if ratio >= 0.1 else f'{ratio:.2%} of'} this machine's "
        f"{ram / 2**30:.1f} GiB RAM: {why}.\n"
        f"workloads ({len(wl.names)}, each trial): {', '.join(wl.names)}"
        f"{runtime}" + _pgbench_text(workloads, ws, ram)
    )


def _pgbench_text(workloads: list[Workload], ws: int, ram: int) -> str:
    """pgbench's database is not cooled by a cache drop (its server is running): its size
    against RAM decides whether its figure is cold or labelled warm."""
    if not any(w.kind == "pgbench" for w in workloads):
        return ""
    scale = pgbench.scale_for(ws)
    data = scale * pgbench.BYTES_PER_SCALE
    warm = data < COLD_FACTOR * ram
    return (
        f"\npgbench: scale {scale} (about {data / 2**20:,.0f} MiB of data, from the working "
        "set), a fresh PostgreSQL cluster per measurement; "
        + (f"below {COLD_FACTOR}× RAM, so RAM caches the database and its figures are "
           "labelled warm" if warm else f"at least {COLD_FACTOR}× RAM: cold")
    )  # fmt: skip


# The dry run computes the family rule's boundaries for at most this many rounds. Their cost
# grows with the square of the cap (a seeded simulation of every look, stats/sequential.py):
# about 0.5 s of CPU for every figure of the detectable line at 20 or 30 rounds, 5 s at 100,
# and 160 s at 1,000, where a dry run used to print nothing for minutes (docs/dryrun-scale.md).
DRY_RUN_ROUNDS = 30


def detectable_text(study: Study, cv: float | None, pilot_run: int | None = None) -> str:
    """The smallest change between two configurations the family rule finds (80% power, 95%
    confidence, Holm over the comparisons of one workload, up to max_replicates blocks:
    ReplicatePolicy.detectable), at the
    run-to-run CV of a pilot run on this machine, else at ASSUMED_CV, saying which. A cap
    above DRY_RUN_ROUNDS is said as such and the figures are those of a cap of
    DRY_RUN_ROUNDS, so a dry run takes as long whatever the cap."""
    cap = study.max_replicates
    rounds = min(cap, max(DRY_RUN_ROUNDS, study.replicates))
    p = ReplicatePolicy(study.ci_target / 100, study.replicates, rounds)
    used = ASSUMED_CV if cv is None else cv
    family = max(1, len(matrix.configs(study)) - 1)
    d = p.detectable(used, family=family)
    source = (
        f"the run-to-run CV {used:.1%} measured by run {pilot_run} on this machine"
        if cv is not None
        else f"an assumed run-to-run CV of {used:.0%} (no earlier run on this machine in "
        "the store; a first run of this study gives the real figure)"
    )
    if not math.isfinite(d):
        found = "no change"
    elif d > BLIND:  # "≥ 2495%" is true and useless: as the reports say it
        found = "no change smaller than 2× (too few rounds at this noise)"
    else:
        found = f"a change of ≥ {d:.1%}"
    need = replicates_for(p, used, TARGET_CHANGE, family)
    need_text = (
        f"{need} replicates per configuration would detect {TARGET_CHANGE:.0%}"
        if need is not None
        else f"no count up to {MAX_SEARCHED:,} replicates detects {TARGET_CHANGE:.0%}"
    )
    capped = (
        f"max_replicates = {cap} is more rounds than a dry run computes the family rule's "
        f"boundaries for ({DRY_RUN_ROUNDS}: their cost grows with the square of the rounds, "
        "minutes at a thousand, which the run itself spends after stage one); the "
        f"figures here are those of max_replicates = {rounds}; "
        if rounds < cap
        else ""
    )
    return (
        f"detectable difference: {capped}with {source}, up to {rounds} rounds can detect "
        f"{found} "
        f"between two configurations (80% power, 95% confidence, {family} comparison(s) per "
        f"workload, Holm-adjusted); {need_text} (replicates = N in the study file, "
        "--replicates N for a built-in study)"
    )


TARGET_CHANGE = 0.10  # the difference the power line sizes replicates for
# The planning rule models the blocked sequential test, whose cost grows with the count
# (about 3 s at 96): past 100 replicates the answer is "more than a study should run", and
# a dry run with a noisy pilot (CV 50%) must not search for minutes to say so.
MAX_SEARCHED = 100


def replicates_for(policy: ReplicatePolicy, cv: float, change: float, family: int) -> int | None:
    """The fewest replicates per configuration whose detectable change (the policy's own
    planning rule) is at most `change`; None past MAX_SEARCHED. The rule's detectable
    change falls as n grows, so doubling then halving the bracket finds it."""

    def ok(n: int) -> bool:
        return policy.detectable(cv, n=n, family=family) <= change

    low = max(2, policy.min_runs)
    if ok(low):
        return low
    high = low
    while not ok(high):
        if high >= MAX_SEARCHED:
            return None
        low, high = high, min(MAX_SEARCHED, high * 2)
    while high - low > 1:  # invariant: not ok(low), ok(high)
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid, high)
    return high
