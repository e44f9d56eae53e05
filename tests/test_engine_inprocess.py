"""The trial loop driven in-process, for the fast tier: a study on the directory backend
(two plain directories as its two "layouts", nothing built or destroyed) measured by StudyRun
itself, no CLI subprocess, with fio answered from its recorded JSON (tests/recorded_fio.py:
the engine's branches are the subject here; test_run_study_inprocess.py runs real fio through
the same path). It covers the engine's own branches that the real-pool tests reach only
through `poolbench run` as root: stage one in interleaved rounds, the replicate rule's extra
rounds, the stored levels, resume of exactly the missing cells, a trial failure kept with its
reason while the study goes on, and the report read back from the store."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from tests.recorded_fio import RecordedFio, Recording

from poolbench.engine import lifecycle, trial_loop
from poolbench.errors import PoolbenchError
from poolbench.guards import cache
from poolbench.report.data import load_run
from poolbench.store import queries
from poolbench.store.db import Store
from poolbench.study import matrix
from poolbench.study.model import parse
from poolbench.system.runner import Runner

ANSWERS = {"seq-write": "fio-seq-write.json", "seq-read": "fio-libaio-qd16-j2-buffered.json"}


@pytest.fixture(autouse=True)
def _no_machine_cache_drop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cold read's cache drop (as root: the whole machine's page cache, after a sync of
    every filesystem) is not this module's subject: it answers as a verified drop."""

    def drop(runner: Runner, files: Sequence[Path]) -> cache.CacheDrop:
        return cache.CacheDrop("spy", 0, 0, 1 << 20, True, "")

    monkeypatch.setattr(cache, "drop", drop)


def _study(a: Path, b: Path, replicates: int = 3, max_replicates: int = 3) -> tuple[str, object]:
    text = (
        f'name = "inproc"\nreplicates = {replicates}\nmax_replicates = {max_replicates}\n'
        'ci_target = 50\n[disks]\ncount = 0\n[factors]\nbackend = ["directory"]\n'
        f'layout = ["{a}", "{b}"]\n'
        '[workloads]\nnames = ["seq-write", "seq-read"]\nsize = "1M"\nmin_window = 0\n'
    )
    return text, parse(text)


def _run(tmp: Path, text: str, resume: int | None = None) -> trial_loop.StudyRun:
    study = parse(text)
    store = Store(tmp / "r.db")
    sr = trial_loop.StudyRun(
        RecordedFio(ANSWERS).runner(), store, study, text,
        trial_loop.Paths(scratch=tmp / "scratch", journals=tmp / "journals"), seed=7,
    )  # fmt: skip
    avail = sr.preflight()
    if resume is None:
        sr.run_id = lifecycle.start(store, "study", study.name, sr.metadata(avail), ["test"])
    else:
        sr.run_id = resume
    sr.run()
    return sr


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return a, b


def test_stage_one_interleaves_and_stores_every_cell_with_its_levels(
    tmp_path: Path, dirs: tuple[Path, Path]
) -> None:
    text, _ = _study(*dirs)
    sr = _run(tmp_path, text)
    rows = sr.store.measurements(sr.run_id)
    assert len(rows) == 2 * 3 * 2  # configurations × replicates × workloads
    keys = [c.key for c in matrix.configs(sr.study)]
    # rounds: every configuration once per replicate, never the same one twice in a row
    order = [r["config"] for r in rows if r["workload"] == "seq-write"]
    assert sorted(order[:2]) == sorted(keys) and sorted(order[2:4]) == sorted(keys)
    assert all(x != y for x, y in zip(order, order[1:], strict=False))
    for r in rows:  # the figure is fio's bytes over its time, and the levels are data
        assert r["value"] == pytest.approx(r["app_bytes"] / r["seconds"] / 2**20, rel=1e-6)
        assert r["app_bytes"] == Recording.load(ANSWERS[r["workload"]]).io_bytes
    run = load_run(sr.store, str(sr.run_id))
    assert {c: run.levels(c)["layout"] for c in run.configs} == {
        k: k.split("layout=")[1] for k in keys
    }
    assert run.factors() == {"layout": [str(d) for d in dirs]}


def test_resume_measures_exactly_the_missing_cells(tmp_path: Path, dirs: tuple[Path, Path]) -> None:
    text, _ = _study(*dirs)
    sr = _run(tmp_path, text)
    victim = sr.store.measurements(sr.run_id)[5]
    sr.store.conn.execute("DELETE FROM measurements WHERE id = ?", (victim["id"],))
    kept = {r["id"] for r in sr.store.measurements(sr.run_id)}
    again = _run(tmp_path, text, resume=sr.run_id)
    rows = again.store.measurements(sr.run_id)
    new = [r for r in rows if r["id"] not in kept]
    assert [(r["config"], r["workload"], r["replicate"]) for r in new] == [
        (victim["config"], victim["workload"], victim["replicate"])
    ]


def test_the_replicate_rule_adds_rounds_up_to_the_maximum(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration whose stage one is noisy is owed more replicates; they run in extra
    rounds after stage one, never back to back, up to max_replicates."""
    text, _ = _study(*dirs, replicates=3, max_replicates=5)
    planned_for: dict[str, int] = {}

    def planned(self: trial_loop.StudyRun, cfg: matrix.Config, rule: object) -> int:
        planned_for[cfg.key] = 5 if cfg.key.endswith(str(dirs[0])) else 3
        return planned_for[cfg.key]

    monkeypatch.setattr(trial_loop.StudyRun, "_planned", planned)
    monkeypatch.setattr(trial_loop, "family_owed", lambda *_a: set())  # Stein's rule alone
    sr = _run(tmp_path, text)
    per = queries.values_by_workload(sr.store, sr.run_id, next(iter(planned_for)))
    counts = {
        k: len(queries.values_by_workload(sr.store, sr.run_id, k)["seq-write"]) for k in planned_for
    }
    assert counts == planned_for and per
    reps = [r["replicate"] for r in sr.store.measurements(sr.run_id) if r["workload"] == "seq-read"]
    assert reps[-2:] == [3, 4]  # the extra replicates come last, in their own rounds


def test_a_failing_trial_is_kept_with_its_reason_and_the_study_goes_on(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    text, _ = _study(*dirs)
    real = trial_loop.StudyRun._build_measure_destroy
    calls = {"n": 0}

    def flaky(
        self: trial_loop.StudyRun, tc: object, name: str, journal: object, have: set[str]
    ) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise PoolbenchError("the pool went away", "try again")
        real(self, tc, name, journal, have)  # type: ignore[arg-type]

    monkeypatch.setattr(trial_loop.StudyRun, "_build_measure_destroy", flaky)
    sr = _run(tmp_path, text)
    failed = sr.failed()
    assert len(failed) == 1 and "the pool went away" in failed[0].reason
    assert len(sr.store.measurements(sr.run_id)) == (2 * 3 - 1) * 2
    # resume measures the failed trial and marks it resolved
    monkeypatch.setattr(trial_loop.StudyRun, "_build_measure_destroy", real)
    again = _run(tmp_path, text, resume=sr.run_id)
    assert again.failed() == [] and len(again.store.measurements(sr.run_id)) == 2 * 3 * 2


def test_undecided_comparisons_get_more_blocks_up_to_the_maximum(
    tmp_path: Path, dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration the family rule still owes a block gets one per round, up to
    max_replicates, whatever Stein's rule says; one it does not owe gets none. The rule
    sees each workload's values of every configuration (stage one measured)."""
    text, _ = _study(*dirs, replicates=3, max_replicates=5)
    keys = [c.key for c in matrix.configs(parse(text))]
    seen: list[tuple[str, int]] = []

    def owed(values: dict[str, list[float]], rule: object, unit: str) -> set[str]:
        assert set(values) == set(keys) and unit == "MiB/s"
        seen.append((unit, min(len(v) for v in values.values())))
        return {keys[0]}  # the first configuration's comparison stays undecided

    monkeypatch.setattr(trial_loop.StudyRun, "_planned", lambda self, cfg, rule: 3)
    monkeypatch.setattr(trial_loop, "family_owed", owed)
    sr = _run(tmp_path, text)
    counts = {k: len(queries.values_by_workload(sr.store, sr.run_id, k)["seq-write"])
              for k in keys}  # fmt: skip
    assert counts == {keys[0]: 5, keys[1]: 3}
    assert min(n for _u, n in seen) == 3  # asked after stage one, never before


def _rounds(*values: float) -> dict[int, float]:
    return dict(enumerate(values))


def test_family_owed_asks_for_the_undecided_and_cuts_to_common_blocks() -> None:
    from poolbench.engine.replicates import policy

    rule = policy(3, 6, 0.05)
    clear = {"a": _rounds(100.0, 101.0, 99.0), "b": _rounds(50.0, 50.5, 49.5)}  # decided
    assert trial_loop.family_owed(clear, rule, "MiB/s") == set()
    close = {"a": _rounds(100.0, 103.0, 97.0), "b": _rounds(99.0, 104.0, 98.0)}
    assert trial_loop.family_owed(close, rule, "MiB/s") == {"a", "b"}
    assert trial_loop.family_owed(close, rule, "GiB") == set()  # read from the pool
    short = {"a": _rounds(1.0, 2.0), "b": _rounds(1.0)}
    assert trial_loop.family_owed(short, rule, "MiB/s") == set()


def test_family_owed_pairs_values_by_their_round_after_a_failed_trial(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Round 1 of "b" failed. Each round moves both configurations together (a machine
    slowing down), so within a round "b" is exactly 10% slower than "a". Paired by round
    the rule sees a constant ratio of 0.9; paired by position (b's round 2 beside a's
    round 1, and so on) it would see ratios scattered by the drift."""
    from poolbench.engine.replicates import policy

    rule = policy(3, 10, 0.05)
    level = {0: 100.0, 1: 80.0, 2: 120.0, 3: 70.0, 4: 110.0}
    a = dict(level)
    b = {r: 0.9 * v for r, v in level.items() if r != 1}  # round 1's trial failed
    seen: list[tuple[list[float], dict[str, list[float]]]] = []
    real = rule.more_family

    def spy(base: list[float], others: dict[str, list[float]]) -> dict[str, int]:
        seen.append((list(base), {k: list(v) for k, v in others.items()}))
        return real(base, others)

    monkeypatch.setattr(type(rule), "more_family", lambda self, base, others: spy(base, others))
    assert trial_loop.family_owed({"a": a, "b": b}, rule, "MiB/s") == set()  # decided: 0.9
    base, others = seen[0]
    assert base == [100.0, 120.0, 70.0, 110.0]  # rounds 0, 2, 3, 4: round 1 left out
    assert others["b"] == pytest.approx([90.0, 108.0, 63.0, 99.0])
    assert [y / x for x, y in zip(base, others["b"], strict=True)] == pytest.approx([0.9] * 4)
    # The same values paired by position (the old cut) are not a constant ratio:
    # b's four values beside a's first four rounds.
    by_position = [y / x for x, y in zip(list(a.values())[:4], b.values(), strict=True)]
    assert max(by_position) / min(by_position) > 1.5
