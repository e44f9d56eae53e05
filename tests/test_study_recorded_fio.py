"""A whole study through study_lifecycle and StudyRun, in process, with fio answered from its
recorded JSON (tests/recorded_fio.py): three configurations × three replicates × three workloads on
the directory backend, each trial's two sparse disks made and removed through its journal.
The stored figures are computed here from the recordings themselves; the trials run in the
seeded interleaved rounds; every trial's journal is torn down, a failed one's too; a trial
whose fio fails is stored with fio's reason while the study goes on; Ctrl-C mid-trial tears
the trial down, keeps what was measured, and a resume measures exactly the rest. No root, no
fio, no disk of the machine's: milliseconds, any user (the page-cache drop of the cold read
is the one call to the machine, and it is replaced by a spy that records what it was asked).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from tests.recorded_fio import RecordedFio, Recording

from poolbench.engine import study_lifecycle
from poolbench.guards import cache
from poolbench.safety.claims import ClaimSet
from poolbench.safety.journal import Journal
from poolbench.store import fingerprints
from poolbench.store.db import Store
from poolbench.study import matrix
from poolbench.study.model import parse
from poolbench.system.runner import Runner

ANSWERS = {  # each workload's recorded fio run
    "seq-write": "fio-seq-write.json",
    "rand-read-4k": "fio-rand-read-4k.jsonplus.json",
    "sync-write-4k": "fio-sync-write-4k.json",
}
WORKLOADS = list(ANSWERS)  # the order a trial measures them in
CONFIGS, REPLICATES, SEED = 3, 3, 7
TRIALS = CONFIGS * REPLICATES


class Hooks:
    """What study_lifecycle tells its caller, kept."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        self.done: list[tuple[int, int, str, str]] = []
        self.interrupts: list[tuple[int, int, str]] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def command(self, argv: str) -> None:
        raise AssertionError("not a dry run")

    def claim(self, runner: Runner, devices: Sequence[str], store: Path, scratch: Path) -> ClaimSet:
        raise AssertionError("a study on sparse files claims no device")

    @contextmanager
    def progress(self) -> Iterator[Callable[[str, int, int], None]]:
        yield lambda what, done, total: None

    def trial_done(self) -> Callable[[int, int, str, str], None]:
        return lambda done, total, what, headline: self.done.append((done, total, what, headline))

    def interrupted(self, run_id: int, kept: int, resume: str) -> None:
        self.interrupts.append((run_id, kept, resume))


@dataclass
class Teardowns:
    """Each trial journal's teardown: what its entries had made (kind, name) and what it left."""

    seen: list[tuple[str, list[tuple[str, str]], list[str]]] = field(default_factory=list)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = Journal.teardown

        def spy(journal: Journal, only: Callable[..., bool] | None = None) -> list[str]:
            kinds = [(str(e["kind"]), Path(str(e.get("path"))).name) for e in journal.entries]
            left = real(journal, only)
            if journal.path is not None and "-trial" in journal.path.name:
                self.seen.append((journal.path.name, kinds, left))
            return left

        monkeypatch.setattr(Journal, "teardown", spy)


@dataclass
class Lab:
    tmp: Path
    text: str
    fio: RecordedFio
    teardowns: Teardowns
    drops: list[list[str]]  # the files each cold read's cache drop was asked for
    hooks: Hooks = field(default_factory=Hooks)  # the last run's

    @property
    def db(self) -> Path:
        return self.tmp / "r.db"

    def run(self, resume: int | None = None) -> tuple[study_lifecycle.StudyOutcome, Hooks]:
        hooks = self.hooks = Hooks()
        request = study_lifecycle.StudyRequest(
            parse(self.text), self.text, self.db, resume=resume, seed=SEED,
            scratch_dir=self.tmp / "scratch", argv=["poolbench", "run"],
        )  # fmt: skip
        return study_lifecycle.run_study(request, hooks), hooks


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    layouts = [tmp_path / f"fs{i}" for i in range(CONFIGS)]
    for d in layouts:
        d.mkdir()
    text = (
        f'name = "recorded"\nreplicates = {REPLICATES}\nmax_replicates = {REPLICATES}\n'
        'ci_target = 50\n[disks]\nsource = "files"\ncount = 2\nsize = "64M"\n'
        f'[factors]\nbackend = ["directory"]\nlayout = {json.dumps([str(d) for d in layouts])}\n'
        f'[workloads]\nnames = {json.dumps(WORKLOADS)}\nsize = "1M"\nmin_window = 0\n'
    )
    fio = RecordedFio(ANSWERS)
    # Every command of the study goes through this runner (study_lifecycle makes its own).
    monkeypatch.setattr(
        study_lifecycle, "LocalRunner", lambda dry_run=False, echo=None: fio.runner()
    )
    drops: list[list[str]] = []

    def drop(runner: Runner, files: Sequence[Path]) -> cache.CacheDrop:
        drops.append([f.name for f in files])
        return cache.CacheDrop("spy", 0, 0, 1 << 20, True, "")

    monkeypatch.setattr(cache, "drop", drop)
    teardowns = Teardowns()
    teardowns.install(monkeypatch)
    return Lab(tmp_path, text, fio, teardowns, drops)


def _rows(store: Store, run_id: int) -> list[dict[str, object]]:
    return [dict(r) for r in store.measurements(run_id)]


def _trials(rows: list[dict[str, object]]) -> list[tuple[str, int]]:
    """(configuration, replicate) of each trial, in the order the trials ran."""
    seen: list[tuple[str, int]] = []
    for r in rows:
        t = (str(r["config"]), int(r["replicate"]))  # type: ignore[call-overload]
        if t not in seen:
            seen.append(t)
    return seen


def _expected(workload: str) -> tuple[float, int, float]:
    """(figure, bytes, seconds) of a workload's recording, computed here from its JSON."""
    rec = Recording.load(ANSWERS[workload])
    unit_of = {"seq-write": "MiB/s", "rand-read-4k": "IOPS", "sync-write-4k": "IOPS"}
    if unit_of[workload] == "MiB/s":
        return rec.io_bytes / rec.seconds / 2**20, rec.io_bytes, rec.seconds
    return rec.total_ios / rec.seconds, rec.io_bytes, rec.seconds


def test_the_study_stores_each_recorded_figure_in_seeded_interleaved_rounds(lab: Lab) -> None:
    out, hooks = lab.run()
    rows = _rows(out.store, out.run_id)
    assert out.failed == [] and len(rows) == TRIALS * len(WORKLOADS)
    for r in rows:
        value, io_bytes, seconds = _expected(str(r["workload"]))
        assert r["value"] == pytest.approx(value, rel=1e-9), r["workload"]
        assert (r["app_bytes"], r["seconds"]) == (io_bytes, pytest.approx(seconds))
    assert _expected("seq-write")[0] == pytest.approx(1066.67, abs=0.01)  # 16 MiB in 15 ms
    # Trials in rounds: every configuration once per replicate, round after round, never
    # one configuration twice in a row; each trial measures its workloads in the study's order.
    trials = _trials(rows)
    keys = sorted(c.key for c in matrix.configs(parse(lab.text)))
    for rep in range(REPLICATES):
        in_round = trials[rep * CONFIGS : (rep + 1) * CONFIGS]
        assert sorted(c for c, _ in in_round) == keys and {r for _, r in in_round} == {rep}
    assert all(a[0] != b[0] for a, b in zip(trials, trials[1:], strict=False))
    assert [r["workload"] for r in rows] == WORKLOADS * TRIALS
    # Each trial's fingerprint, taken on its configuration's directory before it measured.
    fps = fingerprints.of_run(out.store, out.run_id)
    assert [(f.config, f.replicate) for f in fps] == trials
    paths = {c: {f.fingerprint.path for f in fps if f.config == c} for c, _ in trials}
    assert sorted(len(p) for p in paths.values()) == [1] * CONFIGS
    assert {p for ps in paths.values() for p in ps} == {str(lab.tmp / f"fs{i}")
                                                        for i in range(CONFIGS)}  # fmt: skip
    # Seeded: the plan of this seed is the order that ran, and another seed orders otherwise.
    plan = matrix.plan(parse(lab.text), SEED)
    assert trials == [(t.config.key, t.replicate) for t in plan]
    assert any(
        [t.config.key for t in matrix.plan(parse(lab.text), s)] != [c for c, _ in trials]
        for s in (1, 2, 3)
    )
    # fio ran each timed job once, in that order; each cold read's cache was dropped first.
    assert [j.split(".")[0] for j in lab.fio.timed] == WORKLOADS * TRIALS
    assert len(lab.drops) == TRIALS  # rand-read-4k is the one cold read
    # Each trial's journal made its disks' directory and two sparse files; its teardown
    # removed them all, one journal per trial, named for it.
    for (name, made, left), t in zip(lab.teardowns.seen, plan, strict=True):
        pool = f"pb{out.run_id}"
        assert name.endswith(f"-trial{t.index}.jsonl") and left == []
        assert [k for k, _ in made] == ["path"] * 3 and made[0][1].startswith(pool), made
        assert [n for _, n in made[1:]] == ["disk0.img", "disk1.img"]
    assert not any((lab.tmp / "scratch").glob("**/*")) and not any((lab.tmp / "journals").iterdir())
    assert out.store.run(out.run_id)["status"] == "finished"
    assert [d[:2] for d in hooks.done] == [(n, TRIALS) for n in range(1, TRIALS + 1)]


def test_a_trial_whose_fio_fails_is_kept_with_its_reason_and_resumed(lab: Lab) -> None:
    """The fifth timed job (the second trial's rand-read-4k) answers fio's recorded ENOSPC,
    exit 1: that trial fails and is torn down, its seq-write stays stored, the other trials
    are measured; the resume measures exactly the failed trial's two missing workloads."""
    lab.fio.fail = {5: "fio-enospc.json"}
    out, hooks = lab.run()
    (failed,) = out.failed
    assert "No space left on device" in failed.reason
    rows = _rows(out.store, out.run_id)
    trials = _trials(rows)
    broken = trials[1]
    assert (failed.config, failed.replicate) == broken
    mine = [r["workload"] for r in rows if (r["config"], r["replicate"]) == broken]
    assert mine == ["seq-write"] and len(rows) == TRIALS * len(WORKLOADS) - 2
    assert hooks.done[1][3].startswith("failed:") and "No space left" in hooks.done[1][3]
    assert len(lab.teardowns.seen) == TRIALS  # the failed trial's journal was torn down too
    assert all(left == [] for _, _, left in lab.teardowns.seen)
    assert out.store.run(out.run_id)["status"] == "finished"  # every other trial measured
    lab.fio.fail = {}
    lab.fio.timed.clear()
    again, _ = lab.run(resume=out.run_id)
    assert lab.fio.timed == [f"{w}.{broken[1]}.fio" for w in ("rand-read-4k", "sync-write-4k")]
    assert again.failed == []
    assert len(_rows(again.store, out.run_id)) == TRIALS * len(WORKLOADS)


def test_ctrl_c_mid_trial_tears_it_down_keeps_what_was_measured_and_resume_finishes(
    lab: Lab,
) -> None:
    lab.fio.interrupt_at = 8  # the third trial's rand-read-4k: its seq-write is stored
    with pytest.raises(KeyboardInterrupt):
        lab.run()
    store = Store(lab.db)
    (run_id,) = [r["id"] for r in store.runs()]
    rows = _rows(store, run_id)
    assert len(rows) == 7 and store.run(run_id)["status"] == "interrupted"
    resume = f"poolbench run --resume {run_id} --db {lab.db} --scratch-dir {lab.tmp / 'scratch'}"
    assert lab.hooks.interrupts == [(run_id, 7, resume)]  # where the study was started
    assert len(lab.teardowns.seen) == 3 and all(left == [] for *_, left in lab.teardowns.seen)
    assert not any((lab.tmp / "scratch").glob("**/*"))  # the third trial's disks are gone
    first = _trials(rows)
    lab.fio.interrupt_at = None
    lab.fio.timed.clear()
    out, hooks = lab.run(resume=run_id)
    rows = _rows(out.store, run_id)
    assert len(rows) == TRIALS * len(WORKLOADS) and out.failed == []
    plan = matrix.plan(parse(lab.text), SEED)
    assert _trials(rows) == [(t.config.key, t.replicate) for t in plan]
    assert _trials(rows)[:3] == first
    # the resume ran the interrupted trial's two missing workloads, then the six trials left
    assert len(lab.fio.timed) == 2 + 6 * len(WORKLOADS)
    assert out.store.run(run_id)["status"] == "finished" and len(hooks.done) == 7
