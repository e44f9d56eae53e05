"""The trial loop: for each trial, make disks → create → verify → measure → destroy, always
tearing down.

Everything a trial creates is journaled *before* it is created (sources and backends write
their intents to the journal), so teardown runs on success, on error, on Ctrl-C, and — after
a crash or kill -9 — on the next start (`poolbench cleanup`, also run automatically before a
study), and it never touches anything poolbench did not create.

Resuming (`--resume RUN`) replays the stored study text and seed, and measures exactly the
(configuration, replicate, workload) cells the store does not have yet.

A trial failure is a known error (a PoolbenchError: a failed command such as a typed zfs
error, after the retries pools.retry_busy already made) raised while the trial builds,
measures or destroys its pool. The trial is torn down, stored in `failed_trials` with its
reason, and the study goes on. Not trial failures, because every later trial would meet them
too or they mean poolbench itself is wrong: bad input (UsageError), a missing tool, a
safety refusal (a claimed device changed), a store that cannot be written, a teardown that
left something behind (a pool that stopped answering: the trial's failure is stored first,
so `--resume` measures it), Ctrl-C, and any other exception (a bug).
"""

from __future__ import annotations

import json
import logging
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.backends import registry
from poolbench.backends.base import Availability, Backend, unavailable
from poolbench.engine import lifecycle, pool_ops, replicates, trial
from poolbench.engine.lifecycle import CommandLog
from poolbench.engine.records import TrialConfig
from poolbench.errors import PoolbenchError, ToolMissingError, UsageError
from poolbench.factors import registry as factors
from poolbench.records.run_metadata import RunMetadataJson
from poolbench.safety.claims import ClaimRefused, ClaimSet, DeviceChanged
from poolbench.safety.journal import Journal
from poolbench.stats.policy import ReplicatePolicy
from poolbench.stats.rounds import rounds
from poolbench.store import queries
from poolbench.store.db import Store, db_option, resume_command
from poolbench.store.opening import StoreError, damaged
from poolbench.study import matrix, model
from poolbench.study.model import Study
from poolbench.system import probes, stopping, watchdog
from poolbench.system.runner import Runner
from poolbench.workloads import fio
from poolbench.workloads.library import parse_list

Progress = Callable[[str, int, int], None]
# After each trial: (trials done, total, the trial as "config (replicate r)", its headline
# figures or why it failed), for progress lines where no progress bar can be drawn.
TrialDone = Callable[[int, int, str, str], None]
# Known errors that stop the study rather than fail one trial (see the module docstring).
NOT_TRIAL_FAILURES = (UsageError, ToolMissingError, ClaimRefused, DeviceChanged, StoreError)
log = logging.getLogger(__name__)
# Three failures in a row are no longer one transient fault; going on would spend hours
# failing the rest of the study (each trial retries for POOLBENCH_BUSY_SECONDS).
MAX_FAILED_IN_A_ROW = 3


class TrialsKeepFailing(PoolbenchError):
    """The last MAX_FAILED_IN_A_ROW trials all failed: the study stops."""


@dataclass
class Paths:
    scratch: Path  # sparse files and mountpoints
    journals: Path  # one JSON-lines journal per trial


def default_paths(store: Store) -> Paths:
    base = store.path.parent
    return Paths(scratch=Path("/var/tmp/poolbench"), journals=base / "journals")


@dataclass
class StudyRun:
    runner: Runner
    store: Store
    study: Study
    study_text: str
    paths: Paths
    make_backend: Callable[[str, Runner], Backend] = field(default=registry.make)
    progress: Progress | None = None
    on_trial: TrialDone | None = None
    seed: int | None = None
    run_id: int = 0
    argv: Sequence[str] = ()
    claims: ClaimSet | None = None  # real devices, claimed by the safety layer
    not_screened: str | None = None  # what --no-screen left out (screen_check.before_study)
    # The command that finishes this run, as every message that stops the run prints it
    resume_command: Callable[[], str] | None = None

    def __post_init__(self) -> None:
        if self.seed is None:
            self.seed = self.study.seed if self.study.seed is not None else secrets.randbelow(2**31)
        self.workloads = parse_list(",".join(self.study.workloads.names))
        self.configs = matrix.configs(self.study)
        self.backends: dict[str, Backend] = {}
        self.untar_source: Path | None = None  # the plain tar `untar` extracts
        # `fio --version`, read once by the preflight (None: not read; "": a dry run on a
        # machine without fio): every trial's session takes it from here.
        self.fio_version: str | None = None
        # Pools are named pb<run><token>t<trial>: the random token keeps a stale pool of a
        # crashed run (or of another store's run with the same id) from blocking this one.
        self.pool_token = secrets.token_hex(2)
        self.headline = ""  # the last trial's figures, or why it failed (on_trial)
        # The run's one command log is made by run(), once the run has its id; a dry run's
        # trials (which store nothing) use this one.
        self.commands = CommandLog(self.runner, self.store, self.run_id)
        self.failed_in_a_row: list[str] = []  # reasons of the trials that failed since one passed

    # -- before anything is created ---------------------------------------------------------
    def preflight(self) -> dict[str, Availability]:
        """Refuse every problem we can see before creating anything."""
        n = self.study.disks.n
        if n == 0 and any(c.backend != "directory" for c in self.configs):
            raise UsageError(
                f"Study '{self.study.name}' has no disks.",
                "Set [disks] count and size (sparse files), or pass --disks 5x512M.",
            )
        self._check_fio()
        pool_ops.check_loop_scratch(self.study.disks, self.paths.scratch)
        from poolbench.backends import sources

        sources.check_emulation(self.study.disks, self.runner.dry_run)
        factors.check_study(self.study.disks, [dict(c.levels) for c in self.configs])
        found: dict[str, Availability] = {}
        dummy = [f"/dev/disk{i}" for i in range(n)]
        for cfg in self.configs:
            name = cfg.backend
            if name not in self.backends:
                backend = self.make_backend(name, self.runner)
                avail = backend.check()
                if not avail.ok:
                    raise unavailable(
                        name,
                        avail.reason,
                        "Remove it from the study's backend factor, or install what it needs.",
                    )
                self.backends[name] = backend
                found[name] = avail
            spec = trial.spec_for(cfg, dummy, "pbcheck", self.paths.scratch)
            self.backends[name].validate(spec)
            avail = found.get(name) or self.backends[name].check()
            factors.check(self.study.disks, dict(cfg.levels), name, avail.dialect)
            pool_ops.check_pool_workloads(name, spec.layout, n, self.workloads, avail.version)
            pool_ops.check_volume(spec, self.workloads, self.study.workloads.size)
        if not self.configs:
            raise UsageError(
                f"Study '{self.study.name}': its exclude list drops every configuration.",
                "Remove exclude entries or add factor levels.",
            )
        return found

    def _check_fio(self) -> None:
        """fio too old for the workloads is refused before any pool is built (a dry run
        without fio installed only shows the plan)."""
        if self.runner.dry_run and self.runner.which("fio") is None:
            self.fio_version = ""
            return
        self.fio_version = fio.fio_version(self.runner)

    # -- the run -----------------------------------------------------------------------------
    def metadata(self, availability: dict[str, Availability]) -> RunMetadataJson:
        meta: RunMetadataJson = {
            "machine": probes.machine(),
            "study": self.study.model_dump(),
            "study_text": self.study_text,
            "seed": self.seed,
            "pool_tokens": [self.pool_token],  # one per invocation (--resume adds one)
            "claims": self.claims.as_dict() if self.claims else None,
        }
        if self.not_screened:
            meta["screen"] = self.not_screened
        if (scales := watchdog.time_limit_scales()) is not None:  # when not 1
            meta["time_limit_scales"] = scales
        meta["backends"] = {k: vars(v) for k, v in availability.items()}
        meta["planned_trials"] = [
            {"index": t.index, "replicate": t.replicate, "config": t.config.key}
            for t in matrix.plan(self.study, self.seed or 0)
        ]
        return meta

    def missing(self, cfg: matrix.Config, replicate: int) -> set[str]:
        have = queries.measured_workloads(self.store, self.run_id, cfg.key, replicate)
        return {w.name for w in self.workloads} - have

    def run(self) -> None:
        assert self.seed is not None
        # One command log for the whole run (its id and store are known by now), flushed after
        # every trial, a failed one too: each command stored once, in order.
        self.commands = CommandLog(self.runner, self.store, self.run_id)
        planned = matrix.plan(self.study, self.seed)
        todo = [t for t in planned if self.missing(t.config, t.replicate)]
        if any(w.kind == "untar" for w in self.workloads) and todo and not self.runner.dry_run:
            # Unpacked once per run (untimed), removed at the end like everything else.
            source_journal = Journal(
                self.runner, self.paths.journals / f"run{self.run_id}-pid{os.getpid()}-src.jsonl"
            )
            self.paths.journals.mkdir(parents=True, exist_ok=True)
            try:
                self.untar_source = pool_ops.plain_tarball(
                    source_journal,
                    Path(self.study.workloads.tarball or "(none)"),
                    self.paths.scratch / f"pb{self.run_id}src",
                )
                self._run_trials(planned, todo)
            finally:
                source_journal.teardown()
            return
        self._run_trials(planned, todo)

    def _run_trials(self, planned: list[matrix.Trial], todo: list[matrix.Trial]) -> None:
        assert self.seed is not None
        total = len(planned)
        done = total - len(todo)
        for t in todo:
            self._progress(t, done, total)
            self.trial(t.config, t.replicate, t.index)
            done += 1
            self._trial_done(t, done, total)
        total, done = self._extra_rounds(total, done, planned[-1].config if planned else None)
        if self.progress:
            self.progress("done", done, total)

    def policy(self) -> ReplicatePolicy:
        return replicates.policy(
            self.study.replicates, self.study.max_replicates, self.study.ci_target / 100
        )

    def _extra_rounds(self, total: int, done: int, last: matrix.Config | None) -> tuple[int, int]:
        """The replicates added after stage one, in rounds: round r holds every configuration
        still owed one (`_owed`), in the seeded order of that round (stats/rounds.py, so a
        resume replays it), rotated so that the configuration that ended a round never starts
        the next one: extra replicates never run back to back. Each round is a block of the
        comparisons (stats.ReplicatePolicy.more_family), so what is owed is decided anew
        after every round."""
        assert self.seed is not None
        rule = self.policy()
        # The rounds of stage one's plan (matrix.plan), continued: round r is replicate r.
        first, end = self.study.replicates, self.study.max_replicates
        for replicate, order in rounds(lambda r: self._owed(rule, r), self.seed, first, end, last):
            for c in order:
                if self.missing(c, replicate):
                    total += 1
                    self._progress(matrix.Trial(total - 1, replicate, c), done, total)
                    self.trial(c, replicate, total - 1)
                    done += 1
        return total, done

    def _owed(self, rule: ReplicatePolicy, replicate: int) -> list[matrix.Config]:
        """The configurations a round `replicate` must hold: those whose own interval
        Stein's rule still owes a replicate (`_planned`), and, for every workload, those
        whose comparison with the workload's best configuration is still undecided by the
        group-sequential family rule (`more_family`; the best is the baseline, owed too)."""
        owed = {c.key for c in self.configs if self._planned(c, rule) > replicate}
        per = {c.key: queries.values_by_round(self.store, self.run_id, c.key)
               for c in self.configs}  # fmt: skip
        for w in self.workloads:
            owed |= family_owed({k: v.get(w.name, {}) for k, v in per.items()}, rule, w.unit)
        return [c for c in self.configs if c.key in owed]

    def _progress(self, t: matrix.Trial, done: int, total: int) -> None:
        if self.progress:
            self.progress(_describe(t), done, total)

    def _trial_done(self, t: matrix.Trial, done: int, total: int) -> None:
        if self.on_trial:
            self.on_trial(done, total, _describe(t), self.headline)

    def _planned(self, cfg: matrix.Config, rule: ReplicatePolicy) -> int:
        """The total Stein's rule fixed from stage one: the most any of the configuration's
        workloads needs (a trial measures them all)."""
        per = queries.values_by_workload(self.store, self.run_id, cfg.key)
        first = [v[: rule.min_runs] for v in per.values()]
        # len + more: a non-finite value stops the rule (more = 0) instead of raising.
        return max((len(v) + rule.more(v) for v in first), default=rule.min_runs)

    # -- one trial ---------------------------------------------------------------------------
    def pool_name(self, index: int) -> str:
        """Short (zfs-fuse and OpenZFS limits), unique per invocation: pb12a3f0t4."""
        return f"pb{self.run_id}{self.pool_token}t{index}"

    def trial(self, cfg: matrix.Config, replicate: int, index: int) -> None:
        """Build the configuration, check it is what was asked, measure it, tear it down
        (always: the journal undoes whatever was created, newest first). A trial failure
        (see the module docstring) is stored with its reason and the study goes on."""
        stopping.check()  # a stop signal held by the last trial's teardown: none more
        tc = TrialConfig(cfg, replicate, index)
        name = self.pool_name(index)
        self.headline = ""
        dry = self.runner.dry_run
        journal_path = self.paths.journals / f"run{self.run_id}-pid{os.getpid()}-trial{index}.jsonl"
        journal = Journal(self.runner, None if dry else journal_path)
        if not dry:
            self.paths.journals.mkdir(parents=True, exist_ok=True)
        failure: PoolbenchError | None = None
        have = self._measured(tc)  # resume: what the store already has of this replicate
        try:
            self._build_measure_destroy(tc, name, journal, have)
        except NOT_TRIAL_FAILURES:
            raise
        except PoolbenchError as exc:
            if self.runner.dry_run:
                raise  # a dry run stores nothing: its error is the answer
            failure = exc
        finally:
            left = journal.teardown()
            self.commands.flush()
            if left:
                if failure is not None:  # stored first: `--resume` measures it again
                    self._store_failure(tc, index, name, failure)
                raise self._teardown_failed(tc, index, failure, left)
        self._record(tc, index, name, failure)
        if failure is not None:
            self.headline = f"failed: {failure}"

    def _teardown_failed(self, tc: TrialConfig, index: int, failure: PoolbenchError | None,
                         left: list[str]) -> PoolbenchError:  # fmt: skip
        """The study stops: a trial whose pool or disks stayed would leave the next trials
        short of loop devices and names. Its own failure, usually the cause, comes first."""
        cause = f"Trial {index} ({tc.key}) failed: {failure} " if failure is not None else ""
        return PoolbenchError(
            f"{cause}Its teardown left these alone: " + "; ".join(left),
            "Fix the cause (is the storage service still running?), then run 'poolbench "
            f"cleanup{db_option(self.store.path)}', which retries what is poolbench's, and "
            f"continue with '{self.resume_line()}'. Every measurement finished so far is kept.",
        )

    def _record(self, tc: TrialConfig, index: int, name: str, failure: Exception | None) -> None:
        if self.runner.dry_run:
            return
        if failure is None:
            queries.resolve_failed_trials(self.store, self.run_id, tc.key, tc.replicate)
            self.failed_in_a_row.clear()
            return
        reason = self._store_failure(tc, index, name, failure)
        log.warning("trial %d (%s) failed and was torn down: %s", index, tc.key, reason)
        self.failed_in_a_row.append(f"{tc.key}: {reason}")
        if len(self.failed_in_a_row) >= MAX_FAILED_IN_A_ROW:
            raise TrialsKeepFailing(
                f"The last {len(self.failed_in_a_row)} trials all failed, so the study stops "
                "instead of failing the rest one by one (every result measured so far is "
                "kept). Their reasons: " + " | ".join(self.failed_in_a_row),
                f"Fix the cause, then continue with '{self.resume_line()}'.",
            )

    def _store_failure(self, tc: TrialConfig, index: int, name: str, failure: Exception) -> str:
        failed = queries.FailedTrial(tc.key, tc.replicate, index, name, str(failure))
        queries.add_failed_trial(self.store, self.run_id, failed)
        return failed.reason

    def resume_line(self) -> str:
        if self.resume_command is not None:
            return self.resume_command()
        return resume_command(self.store.path, self.run_id)

    def failed(self) -> list[queries.FailedTrial]:
        """The run's trials that failed and were not measured since."""
        return queries.failed_trials(self.store, self.run_id)

    def _build_measure_destroy(
        self, tc: TrialConfig, name: str, journal: Journal, have: set[str]
    ) -> None:
        """The trial itself, in order (engine/trial.py `run`); `have`: its workloads the store
        already has (resume), left out."""
        tarball = self.untar_source
        if tarball is None and self.runner.dry_run and self.study.workloads.tarball:
            tarball = Path(self.study.workloads.tarball)  # a dry run unpacks none: as given
        bench = trial.Bench(
            self.runner, self.store, self.run_id, self.study, self.workloads, self.backends,
            self.paths.scratch, self.claims, self.seed, tarball, self.commands, self.fio_version,
        )  # fmt: skip
        self.headline = trial.run(bench, tc, name, journal, have)

    def _measured(self, tc: TrialConfig) -> set[str]:
        """The trial's workloads the store already has for its replicate (resume)."""
        return {w.name for w in self.workloads} - self.missing(tc.config, tc.replicate)


def _describe(t: matrix.Trial) -> str:
    return f"{t.config.key} (replicate {t.replicate + 1})"


def family_owed(
    values: Mapping[str, Mapping[int, float]], rule: ReplicatePolicy, unit: str
) -> set[str]:
    """The configurations one workload's comparisons still need another block of. `values`
    holds each configuration's figures keyed by round (block); the rule pairs values by
    index, so every list is built from the rounds all configurations have, in round order:
    a failed trial's round is left out for all, and the later rounds stay paired with their
    own block (value i from the i-th common round). The best mean so far is the baseline.
    None for a figure read from the pool (GiB) or a single configuration."""
    if unit == "GiB" or len(values) < 2:
        return set()
    common = sorted(set.intersection(*(set(v) for v in values.values())))
    if len(common) < rule.min_runs:
        return set()  # stage one is still being measured (or a trial failed): not ours
    cut = {k: [v[r] for r in common] for k, v in values.items()}
    n = len(common)
    best = max(cut, key=lambda k: sum(cut[k]) / n)  # MiB/s, IOPS, ops/s: higher is better
    others = {k: v for k, v in cut.items() if k != best}
    more = rule.more_family(cut[best], others)
    return {best if k == "" else k for k, m in more.items() if m > 0}


def load_resume(store: Store, run_id: int) -> tuple[Study, str, int]:
    """The study, its text and seed, of a run to resume: the study as it was measured (a
    --min-window given when it started is in the stored study, not in its text)."""
    row = store.run(run_id)
    if row["kind"] != "study":
        raise UsageError(f"Run {run_id} is a {row['kind']} run, not a study.", "")
    owner = row["owner"]  # every store is migrated as it is opened: the column is there
    if row["status"] == "running" and lifecycle.owner_alive(owner):
        raise UsageError(
            f"Run {run_id} is still running (process {str(owner).split(':')[1]}).",
            "Stop it first (Ctrl-C or kill sends it down the way that tears everything down "
            "and keeps what it measured), then resume it.",
        )
    meta = json.loads(row["metadata"])  # valid JSON: Store.run checked it
    try:
        text, seed = str(meta["study_text"]), int(meta["seed"])
    except (KeyError, TypeError, ValueError):
        raise damaged(store.path, f"run {run_id} has no study text or seed to resume") from None
    study = model.parse(text, f"run {run_id}")
    window = _stored_min_window(meta)
    if window is not None and window != study.workloads.min_window:
        workloads = study.workloads.model_copy(update={"min_window": float(window)})
        study = study.model_copy(update={"workloads": workloads})
    return study, text, seed


def _stored_min_window(meta: object) -> float | None:
    """[workloads] min_window of the study as the run measured it (metadata `study`)."""
    stored = meta.get("study") if isinstance(meta, dict) else None
    workloads = stored.get("workloads") if isinstance(stored, dict) else None
    window = workloads.get("min_window") if isinstance(workloads, dict) else None
    if isinstance(window, int | float) and not isinstance(window, bool) and 0 <= window <= 3600:
        return float(window)
    return None
