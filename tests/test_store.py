import sqlite3
from pathlib import Path

import pytest

from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.store.db import Store
from poolbench.store.opening import StoreError
from poolbench.system.runner import CallRecord


def _m(rep: int) -> Measurement:
    return Measurement(
        "cfg",
        "seq-write",
        rep,
        100.0 + rep,
        "MiB/s",
        1,
        1,
        1.0,
        1,
        100.0,
        [],
        Findings(),
        {"name": "seq-write"},
        "[job]\n",
    )


def test_migrations_recorded_and_reopen_is_idempotent(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.db")
    assert s.migrations()[0] == "0001_initial"
    s.close()
    s2 = Store(tmp_path / "r.db")
    assert s2.migrations()[0] == "0001_initial"


def test_newer_store_is_refused(tmp_path: Path) -> None:
    Store(tmp_path / "r.db").close()
    c = sqlite3.connect(tmp_path / "r.db")
    c.execute("INSERT INTO schema_migrations VALUES ('9999_future', 0)")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="newer poolbench"):
        Store(tmp_path / "r.db")


def test_each_measurement_is_committed_at_once(tmp_path: Path) -> None:
    s = Store(tmp_path / "r.db")
    run = s.start_run("bench", "/x", ["poolbench", "bench"], {"a": 1})
    s.add_measurement(run, _m(0))
    # Another connection (as after a crash) sees it without any further commit.
    other = sqlite3.connect(tmp_path / "r.db")
    assert other.execute("SELECT count(*) FROM measurements").fetchone()[0] == 1
    s.add_commands(run, [CallRecord(("fio", "x"), 1.0, 0.5, 0)])
    assert other.execute("SELECT argv FROM commands").fetchone()[0] == '["fio", "x"]'
    with pytest.raises(sqlite3.IntegrityError):
        s.add_measurement(run, _m(0))  # a replicate is never silently overwritten
    s.finish_run(run, "finished")
    assert s.run(run)["status"] == "finished"


def test_unwritable_store_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("")
    with pytest.raises(StoreError, match="--db"):
        Store(tmp_path / "f" / "sub" / "r.db")


def test_failed_trials_are_kept_until_their_cell_is_measured(tmp_path: Path) -> None:
    from poolbench.store import queries

    s = Store(tmp_path / "r.db")
    assert "0004_failed_trials" in s.migrations()
    run = s.start_run("study", "x", ["poolbench"], {})
    other = s.start_run("study", "y", ["poolbench"], {})
    a = queries.FailedTrial("layout=raidz1", 0, 0, "pb1abcdt0", "cannot export: pool is busy")
    b = queries.FailedTrial("layout=mirror", 1, 3, "pb1abcdt3", "zpool create failed")
    queries.add_failed_trial(s, run, a)
    queries.add_failed_trial(s, run, b)
    assert queries.failed_trials(s, run) == [a, b]
    assert queries.failed_trials(s, other) == []
    # Measuring a different replicate of the same configuration resolves nothing.
    queries.resolve_failed_trials(s, run, "layout=raidz1", 1)
    assert queries.failed_trials(s, run) == [a, b]
    queries.resolve_failed_trials(s, run, "layout=raidz1", 0)
    assert queries.failed_trials(s, run) == [b]
    s.close()
    assert queries.failed_trials(Store(tmp_path / "r.db", "read"), run) == [b]


def test_resume_hint_names_the_store_unless_it_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poolbench.store.db import db_option, resume_command

    monkeypatch.delenv("POOLBENCH_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    mine = tmp_path / "my results.db"
    # A store given with --db: the hint must carry it, quoted for the shell.
    assert resume_command(mine, 7) == f"poolbench run --resume 7 --db '{mine}'"
    # The default store: the command opens it anyway.
    default = tmp_path / "home" / ".local" / "share" / "poolbench" / "results.db"
    assert resume_command(default, 7) == "poolbench run --resume 7"
    # POOLBENCH_DB is the default while it is set; the same file through a link is the same.
    monkeypatch.setenv("POOLBENCH_DB", str(mine))
    link = tmp_path / "link.db"
    mine.touch()
    link.symlink_to(mine)
    assert db_option(mine) == db_option(link) == ""
    assert db_option(default) == f" --db {default}"
    monkeypatch.setenv("POOLBENCH_DB", "")  # refused as a default: the hint needs --db
    assert db_option(mine) == f" --db '{mine}'"
