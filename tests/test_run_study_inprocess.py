"""engine.study_lifecycle driven in-process with hooks that record what the engine tells its caller:
the lifecycle the CLI used to own (checks, store opened for writing only after the preflight,
run row, measuring loop, scratch left empty), on the directory backend with real fio."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from poolbench.engine import study_lifecycle
from poolbench.errors import PoolbenchError
from poolbench.safety.claims import ClaimSet
from poolbench.store.db import Store
from poolbench.study.model import parse
from poolbench.system.runner import Runner

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")


class Recorder:
    def __init__(self) -> None:
        self.notes: list[str] = []
        self.commands: list[str] = []
        self.ticks: list[tuple[str, int, int]] = []
        self.done: list[tuple[int, int]] = []

    def note(self, message: str) -> None:
        self.notes.append(message)

    def command(self, argv: str) -> None:
        self.commands.append(argv)

    def claim(self, runner: Runner, devices: Sequence[str], store: Path, scratch: Path) -> ClaimSet:
        raise AssertionError("a study on directories claims no device")

    @contextmanager
    def progress(self) -> Iterator[Callable[[str, int, int], None]]:
        yield lambda what, done, total: self.ticks.append((what, done, total))

    def trial_done(self) -> Callable[[int, int, str, str], None]:
        return lambda done, total, what, headline: self.done.append((done, total))

    def interrupted(self, run_id: int, kept: int, resume: str) -> None:
        raise AssertionError("not interrupted")


def _text(a: Path, b: Path, backend: bool = True) -> str:
    factors = 'backend = ["directory"]\n' if backend else ""
    return (
        'name = "inproc"\nreplicates = 2\nmax_replicates = 2\nci_target = 50\n'
        f'[disks]\ncount = 0\n[factors]\n{factors}layout = ["{a}", "{b}"]\n'
        '[workloads]\nnames = ["seq-write"]\nsize = "1M"\nmin_window = 0\n'
    )


def test_run_study_measures_stores_and_reports_through_its_hooks(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    text = _text(a, b)
    hooks = Recorder()
    scratch = tmp_path / "scratch"
    req = study_lifecycle.StudyRequest(parse(text), text, tmp_path / "r.db", seed=3,
                                 scratch_dir=scratch, argv=["test"])  # fmt: skip
    out = study_lifecycle.run_study(req, hooks)
    assert out.failed == []
    rows = out.store.measurements(out.run_id)
    assert len(rows) == 2 * 2  # two configurations × two replicates, one workload
    assert all(r["app_bytes"] == 1 << 20 for r in rows)
    run = out.store.run(out.run_id)
    assert run["status"] == "finished" and run["kind"] == "study"
    # one line per trial, counting to the total; the progress display saw every trial
    assert hooks.done == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert hooks.ticks and hooks.ticks[-1][2] == 4
    assert hooks.notes == [] and not scratch.exists()  # the backend was named; nothing left


def test_a_refused_study_leaves_no_store_behind(tmp_path: Path) -> None:
    text = _text(tmp_path / "missing-a", tmp_path / "missing-b")
    db = tmp_path / "sub" / "r.db"
    req = study_lifecycle.StudyRequest(parse(text), text, db, argv=["test"])
    with pytest.raises(PoolbenchError):
        study_lifecycle.run_study(req, Recorder())
    assert not db.exists() and not db.parent.exists()


def test_resuming_a_complete_run_measures_nothing_again(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    text = _text(a, b)
    db = tmp_path / "r.db"
    first = study_lifecycle.run_study(
        study_lifecycle.StudyRequest(parse(text), text, db, seed=3, argv=["t"]), Recorder()
    )
    hooks = Recorder()
    again = study_lifecycle.run_study(
        study_lifecycle.StudyRequest(
            parse(text), text, db, resume=first.run_id, seed=3, argv=["t"]
        ),
        hooks,
    )
    assert again.run_id == first.run_id and hooks.done == []
    assert len(Store(db).measurements(first.run_id)) == 4
    assert Store(db).run(first.run_id)["status"] == "finished"
