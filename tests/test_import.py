"""`poolbench import OTHER.db`: runs from another store come in once, remapped, complete."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from poolbench.cli.import_cmd import import_
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.store.db import Store
from poolbench.store.merge import import_store
from poolbench.store.migrations import MIGRATIONS
from poolbench.store.opening import StoreError
from poolbench.system.runner import CallRecord


def _m(config: str, rep: int, value: float, host: str | None = None) -> Measurement:
    return Measurement(
        config, "seq-write", rep, value, "MiB/s", 1 << 20, 1, 1.0, None, None,
        ["w"], Findings.from_json({"g": 1}), {"name": "seq-write"}, "[job]\n", host,
    )  # fmt: skip


def _store(path: Path, machine: str, values: list[float], fleet: bool = False) -> Store:
    s = Store(path)
    run = s.start_run(
        "bench", f"/mnt/{machine}", ["poolbench", "bench"], {"machine": {"hostname": machine}}
    )
    for i, v in enumerate(values):
        s.add_measurement(run, _m(f"{machine}:/mnt", i, v, host=machine if fleet else None))
    s.add_commands(run, [CallRecord(("fio", "--version"), 1.0, 0.1, 0)])
    if fleet:
        with s.transaction() as c:
            c.execute(
                "INSERT INTO run_hosts (run_id, label, address, port, path, status, not_applied)"
                " VALUES (?, ?, ?, 8765, '/mnt', 'ok', '[]')",
                (run, machine, machine),
            )
    s.finish_run(run, "finished")
    return s


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_import_remaps_ids_carries_rows_and_refuses_a_second_time(tmp_path: Path) -> None:
    local = _store(tmp_path / "local.db", "alpha", [100.0, 101.0])
    other = _store(tmp_path / "other.db", "beta", [200.0, 202.0, 204.0], fleet=True)
    _store_run2 = other.start_run("bench", "/mnt/beta2", ["poolbench"], {})
    other.add_measurement(_store_run2, _m("beta:/x", 0, 5.0))
    other.finish_run(_store_run2, "finished")
    other.close()
    before_local = [dict(r) for r in local.runs()]
    src_hash = _digest(tmp_path / "other.db")

    rep = import_store(local, tmp_path / "other.db")
    assert rep.imported == [(1, 2), (2, 3)] and rep.skipped == []
    assert rep.rows == {"commands": 1, "measurements": 4, "run_hosts": 1}
    assert _digest(tmp_path / "other.db") == src_hash  # the other store is only read
    # Nothing local changed; the imported runs have their own ids, rows and origin.
    assert [dict(r) for r in local.runs()][:1] == before_local
    r2 = local.run(2)
    assert r2["name"] == "/mnt/beta" and r2["status"] == "finished"
    origin = json.loads(r2["origin"])
    assert origin["run_id"] == 1 and origin["hostname"] == "beta"
    assert origin["store"] == str((tmp_path / "other.db").resolve())
    assert [m["value"] for m in local.measurements(2)] == [200.0, 202.0, 204.0]
    assert {m["host"] for m in local.measurements(2)} == {"beta"}
    assert [json.loads(c["argv"]) for c in local.commands(2)] == [["fio", "--version"]]
    hosts = list(local.conn.execute("SELECT label FROM run_hosts WHERE run_id = 2"))
    assert [h[0] for h in hosts] == ["beta"]
    assert [m["value"] for m in local.measurements(1)] == [100.0, 101.0]

    again = import_store(local, tmp_path / "other.db")
    assert again.imported == []
    assert again.skipped == [
        (1, "already in the local store as run 2"),
        (2, "already in the local store as run 3"),
    ]
    assert len(local.runs()) == 3


def test_cli_import_messages_and_refusal(tmp_path: Path) -> None:
    _store(tmp_path / "local.db", "alpha", [1.0, 2.0]).close()
    _store(tmp_path / "other.db", "beta", [3.0, 4.0]).close()
    cli = CliRunner()
    args = [str(tmp_path / "other.db"), "--db", str(tmp_path / "local.db")]
    r = cli.invoke(import_, args)
    assert r.exit_code == 0, r.output
    assert f"imported run 1 of {tmp_path / 'other.db'} as run 2" in r.output
    r = cli.invoke(import_, args)
    assert r.exit_code != 0
    assert "skipped run 1" in r.output and "already in the local store as run 2" in r.output
    assert "Nothing imported" in str(r.exception)
    r = cli.invoke(import_, [str(tmp_path / "local.db"), "--db", str(tmp_path / "local.db")])
    assert "is the local store itself" in str(r.exception)


def test_old_store_without_uids_is_read_without_change_and_deduplicated(tmp_path: Path) -> None:
    old = tmp_path / "old.db"
    c = sqlite3.connect(old)
    c.execute("CREATE TABLE schema_migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    for name, sql in MIGRATIONS[:2]:
        c.executescript(sql)
        c.execute("INSERT INTO schema_migrations VALUES (?, 0)", (name,))
    c.execute(
        "INSERT INTO runs (kind, name, status, started_at, argv, metadata) "
        "VALUES ('bench', '/old', 'finished', 1700000000.123456, '[]', '{}')"
    )
    c.commit()
    c.close()
    local = Store(tmp_path / "local.db")
    assert import_store(local, old).imported == [(1, 1)]
    assert local.run(1)["uid"] == "legacy:1700000000123456:bench:/old"
    # The same store, now migrated by a newer poolbench, is still recognised.
    Store(old).close()
    assert [r for r, _ in import_store(local, old).skipped] == [1]


def test_refusals(tmp_path: Path) -> None:
    local = Store(tmp_path / "local.db")
    with pytest.raises(StoreError, match="does not exist"):
        import_store(local, tmp_path / "missing.db")
    (tmp_path / "junk.db").write_text("not sqlite")
    with pytest.raises(StoreError, match="Cannot read|not a poolbench"):
        import_store(local, tmp_path / "junk.db")
    newer = Store(tmp_path / "newer.db")
    newer.conn.execute("INSERT INTO schema_migrations VALUES ('9999_future', 0)")
    newer.close()
    with pytest.raises(StoreError, match="newer poolbench"):
        import_store(local, tmp_path / "newer.db")
    _store(tmp_path / "two.db", "x", [1.0]).close()
    with pytest.raises(StoreError, match="No run 7"):
        import_store(local, tmp_path / "two.db", runs=[7])
    assert import_store(local, tmp_path / "two.db", runs=[1]).imported == [(1, 1)]
