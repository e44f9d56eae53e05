"""Every store command against every kind of bad store file (issue 13).

For each pair: a non-zero exit with one `error:` paragraph, no traceback, the bad file's bytes
exactly as before (sha256), and nothing else created or changed in the test's directory (no
store, no parent directory, no journal directory, no -journal/-wal file). No root, no pools:
every command fails at the store, before anything else would happen.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from poolbench.cli.main import main
from poolbench.errors import EXIT_INPUT
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.store import opening
from poolbench.store.db import Store
from poolbench.store.migrations import MIGRATIONS


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The real CLI in this process; returns (exit code, stdout + stderr)."""
    code = 0
    try:
        main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out + out.err


def snapshot(root: Path) -> dict[str, str]:
    """Every path under root with the sha256 of its bytes ('dir' for directories)."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def good_store(path: Path, runs: int = 1) -> Path:
    s = Store(path)
    s.conn.execute("PRAGMA synchronous = OFF")  # test data: no fsync per measurement
    for r in range(runs):
        rid = s.start_run("bench", f"run{r}", ["poolbench", "bench"], {"machine": {}})
        for i in range(60):  # several pages, so truncation and corruption hit real data
            s.add_measurement(
                rid,
                Measurement(
                    "cfg", "seq-read", i, 100.0 + i, "MiB/s", 1, 1, 1.0, None, None,
                    ["w" * 40], Findings(), {}, "job" * 60,
                ),
            )  # fmt: skip
        s.finish_run(rid, "finished")
    s.close()
    return path


# -- the kinds of bad store file ---------------------------------------------------------------
def _text(p: Path) -> None:
    p.write_text("name,value\nnot,a database\n")


def _empty(p: Path) -> None:
    p.write_bytes(b"")


def _other_sqlite(p: Path) -> None:
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
    c.execute("INSERT INTO contacts VALUES ('a', '1')")
    c.commit()
    c.close()


def _other_app_id(p: Path) -> None:
    # Even a schema_migrations table does not make it ours when another application id is set.
    c = sqlite3.connect(p)
    c.execute("PRAGMA application_id = 1234")
    c.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL)")
    c.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY)")
    c.commit()
    c.close()


def _truncated(p: Path) -> None:
    good_store(p)
    data = p.read_bytes()
    p.write_bytes(data[: len(data) // 2])


def _corrupted(p: Path) -> None:
    good_store(p)
    data = bytearray(p.read_bytes())
    page = 4096 if len(data) > 4096 * 4 else 1024
    data[page * 3 : page * 3 + 600] = bytes((i * 37 + 11) % 256 for i in range(600))
    p.write_bytes(bytes(data))


def _newer(p: Path) -> None:
    good_store(p)
    c = sqlite3.connect(p)
    c.execute("INSERT INTO schema_migrations VALUES ('9999_from_the_future', 0)")
    c.commit()
    c.close()


def _directory(p: Path) -> None:
    p.mkdir()
    (p / "inside.txt").write_text("x")


KINDS: dict[str, Callable[[Path], None]] = {
    "text": _text,
    "empty": _empty,
    "other-sqlite": _other_sqlite,
    "other-application-id": _other_app_id,
    "truncated": _truncated,
    "corrupted": _corrupted,
    "newer-schema": _newer,
    "directory": _directory,
    "locked": lambda p: None if good_store(p) else None,  # bad by a lock held (held_lock)
}


@contextlib.contextmanager
def held_lock(path: Path) -> Iterator[None]:
    """Another process's exclusive lock, held past the (shortened) busy timeout."""
    c = sqlite3.connect(path, isolation_level=None)
    c.execute("BEGIN EXCLUSIVE")
    try:
        yield
    finally:
        c.execute("ROLLBACK")
        c.close()


def commands(bad: Path, tmp: Path) -> dict[str, list[str]]:
    study = tmp / "study.toml"
    source = tmp / "source.db"
    db = ["--db", str(bad)]
    return {
        "runs": ["runs", *db],
        "runs --json": ["runs", "--json", *db],
        "report": ["report", "latest", *db],
        "export": ["export", "1", "--csv", *db],
        "compare": ["compare", "1", "2", *db],
        "import into it": ["import", str(source), *db],
        "import from it": ["import", str(bad), "--db", str(tmp / "new" / "results.db")],
        "plan --disk-speed-from": [
            "plan",
            "--layout",
            "raidz1:3x1T",
            "--disk-speed-from",
            "1",
            *db,
        ],
        "run --dry-run": ["run", str(study), "--dry-run", *db],
        "run --resume": ["run", str(study), "--resume", "1", *db],
        "bench": ["bench", str(tmp / "target"), *db],
        "cleanup --dry-run": ["cleanup", "--dry-run", *db],
    }


COMMANDS = list(commands(Path("x"), Path("t")))


def _setup(tmp: Path) -> None:
    (tmp / "target").mkdir()
    (tmp / "study.toml").write_text(
        'name = "s"\n[disks]\ncount = 3\nsize = "1G"\n[factors]\nbackend = ["zfs"]\n'
        'layout = ["raidz1"]\n[workloads]\nsize = "64M"\n'
    )
    good_store(tmp / "source.db")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bad_store_is_refused_and_left_unchanged(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    kind: str,
    command: str,
) -> None:
    monkeypatch.setattr(opening, "BUSY_TIMEOUT_MS", 200)
    monkeypatch.delenv("POOLBENCH_DB", raising=False)
    _setup(tmp_path)
    bad = tmp_path / "bad" / "results.db"
    bad.parent.mkdir()
    KINDS[kind](bad)
    before = snapshot(tmp_path)
    lock = held_lock(bad) if kind == "locked" else contextlib.nullcontext()
    with lock:
        code, out = run_cli(commands(bad, tmp_path)[command], capsys)
    assert code != 0, out
    assert "Traceback" not in out and "internal error" not in out, out
    assert "error" in out.lower(), out  # poolbench's paragraph, or click's for a directory
    assert snapshot(tmp_path) == before  # the bad file's bytes, and nothing created


def test_the_messages_name_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(opening, "BUSY_TIMEOUT_MS", 200)
    expected = {
        "text": "not an SQLite database",
        "empty": "empty file poolbench did not create",
        "other-sqlite": "another application's SQLite database",
        "other-application-id": "belongs to another application (application id 1234)",
        "truncated": "This store is damaged",
        "corrupted": "This store is damaged",
        "newer-schema": "written by a newer poolbench",
        "directory": "it is a directory",
        "locked": "is locked by another process",
    }
    for kind, words in expected.items():
        bad = tmp_path / kind / "results.db"
        bad.parent.mkdir()
        KINDS[kind](bad)
        lock = held_lock(bad) if kind == "locked" else contextlib.nullcontext()
        monkeypatch.setenv("POOLBENCH_DB", str(bad))  # --db would let click refuse a directory
        with lock:
            code, out = run_cli(["runs"], capsys)
        assert code == EXIT_INPUT and words in out, (kind, out)


# -- a read-only store: readable by read-only commands, refused by writing ones ----------------
@pytest.fixture
def immutable_store(tmp_path: Path) -> Iterator[Path]:
    """A store nobody may write, root included (chattr +i: root ignores mode bits)."""
    path = good_store(tmp_path / "ro.db", runs=2)
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        os.chmod(path, 0o444)
        if os.access(path, os.W_OK):
            pytest.skip("cannot make a file read-only here (root without chattr)")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def test_read_only_store(
    tmp_path: Path, immutable_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _setup(tmp_path)
    before = snapshot(tmp_path)
    cmds = commands(immutable_store, tmp_path)
    for name in ("runs", "report", "export", "compare", "plan --disk-speed-from"):
        code, out = run_cli(cmds[name], capsys)
        assert code == 0 and "Traceback" not in out, (name, out)
    for name in ("import into it", "bench"):
        code, out = run_cli(cmds[name], capsys)
        assert code == EXIT_INPUT and "read-only" in out, (name, out)
    assert snapshot(tmp_path) == before


# -- read-only commands never create a store or its directory --------------------------------
@pytest.mark.parametrize("command", ["runs", "report", "export", "compare", "import from it",
                                     "plan --disk-speed-from", "run --dry-run"])  # fmt: skip
def test_read_only_commands_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    _setup(tmp_path)
    missing = tmp_path / "no" / "such" / "results.db"
    before = snapshot(tmp_path)
    code, out = run_cli(commands(missing, tmp_path)[command], capsys)
    assert "Traceback" not in out, out
    if command != "run --dry-run":  # a dry run needs no store (it may fail on zfs here)
        assert code == EXIT_INPUT and "no result store" in out.lower(), out
    assert snapshot(tmp_path) == before


def test_failed_import_leaves_no_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = good_store(tmp_path / "source.db")
    dest = tmp_path / "dest" / "results.db"
    code, out = run_cli(["import", str(source), "--run", "99", "--db", str(dest)], capsys)
    assert code == EXIT_INPUT and "No run 99" in out, out
    assert not dest.parent.exists()  # neither the store nor the directory made for it


def test_bench_on_a_missing_path_stores_no_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "results.db"
    code, out = run_cli(["bench", str(tmp_path / "nope"), "--db", str(db)], capsys)
    assert code == EXIT_INPUT and "not a directory" in out, out
    assert not db.exists()


def test_empty_poolbench_db_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOLBENCH_DB", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    code, out = run_cli(["runs"], capsys)
    assert code == EXIT_INPUT and "POOLBENCH_DB is set but empty" in out, out
    assert list(tmp_path.iterdir()) == []


def test_an_older_store_is_read_without_being_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A store as poolbench made it before migration 0003 (and before application ids).
    path = tmp_path / "old.db"
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, sql in MIGRATIONS[:2]:
        c.executescript(sql)
        c.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    c.execute(
        "INSERT INTO runs (kind, name, status, started_at, argv, metadata) "
        "VALUES ('bench', 'run0', 'finished', 1.5, '[]', '{}')"
    )
    c.commit()
    c.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    code, out = run_cli(["runs", "--json", "--db", str(path)], capsys)
    assert code == 0, out
    assert [r["name"] for r in json.loads(out)] == ["run0"]
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


# -- rows poolbench cannot have written ---------------------------------------------------------
JUNK = {
    "value 'abc'": ("UPDATE measurements SET value = 'abc' WHERE id = 3", ["report", "1"]),
    "started_at 'yesterday'": ("UPDATE runs SET started_at = 'yesterday'", ["runs"]),
    "broken metadata": ("UPDATE runs SET metadata = '{broken'", ["export", "1", "--json"]),
    "value inf": ("UPDATE measurements SET value = 9e999 WHERE id = 2", ["export", "1", "--csv"]),
    # No clock reaches these: datetime refuses them with OverflowError / ValueError (issue 29).
    "started_at 1e300 report": ("UPDATE runs SET started_at = 1e300", ["report", "1"]),
    "started_at 1e300 export": ("UPDATE runs SET started_at = 1e300", ["export", "1", "--json"]),
    "started_at -1e20 export csv": ("UPDATE runs SET started_at = -1e20", ["export", "1", "--csv"]),
}


@pytest.mark.parametrize("case", sorted(JUNK))
def test_junk_rows_are_reported_as_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    path = good_store(tmp_path / "r.db")
    sql, argv = JUNK[case]
    c = sqlite3.connect(path)
    c.execute(sql)
    c.commit()
    c.close()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    code, out = run_cli([*argv, "--db", str(path)], capsys)
    assert code == EXIT_INPUT and "This store is damaged" in out and "Traceback" not in out, out
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


def test_resume_with_broken_metadata_is_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.db"
    s = Store(path)
    rid = s.start_run("study", "s", ["poolbench"], {"study_text": "x", "seed": 1})
    s.close()
    c = sqlite3.connect(path)
    c.execute("UPDATE runs SET metadata = 'not json' WHERE id = ?", (rid,))
    c.commit()
    c.close()
    code, out = run_cli(["run", "x.toml", "--resume", str(rid), "--db", str(path)], capsys)
    assert code == EXIT_INPUT and "This store is damaged" in out, out


def test_resume_without_study_text_is_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.db"
    s = Store(path)
    rid = s.start_run("study", "s", ["poolbench"], {"seed": "x"})
    s.close()
    code, out = run_cli(["run", "x.toml", "--resume", str(rid), "--db", str(path)], capsys)
    assert code == EXIT_INPUT and "has no study text or seed to resume" in out, out
