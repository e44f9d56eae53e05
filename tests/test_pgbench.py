"""The pgbench workload family, fast: its names, the parsers on pgbench's recorded output
(PostgreSQL 15.18, tests/data/pgbench/), the scale and the device-bytes floor, the refusals.

The recorded runs: `tpcb-c2-T1` is `pgbench -b tpcb-like -c 2 -j 2 -T 1 -l` (two threads, so
two log files); `select-c1-t200` is `pgbench -b select-only -c 1 -t 200 -l`. The expected
figures below were read off the logs with sort and awk (nearest-rank percentiles).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.errors import EXIT_UNSUPPORTED, Unsupported, UsageError
from poolbench.stats import pooled
from poolbench.study.model import parse
from poolbench.system import pgserver
from poolbench.workloads import pgbench
from poolbench.workloads.library import get, parse_list

DATA = Path(__file__).resolve().parent / "data" / "pgbench"


def _log(name: str) -> pgbench.TxLog:
    return pgbench.parse_logs(sorted(DATA.glob(f"{name}.log.*")))


def test_summary_of_a_timed_run() -> None:
    s = pgbench.parse_summary((DATA / "tpcb-c2-T1.stdout").read_text())
    assert s == pgbench.Summary(1021, 0, 1025.010868, 1.951)


def test_summary_of_a_counted_run() -> None:
    s = pgbench.parse_summary((DATA / "select-c1-t200.stdout").read_text())
    assert (s.transactions, s.tps) == (200, 12164.710176)  # "processed: 200/200"


def test_summary_without_its_closing_lines_is_refused() -> None:
    with pytest.raises(ValueError, match="no transaction count"):
        pgbench.parse_summary("pgbench (15.18)\nconnection to server failed\n")


def test_two_thread_logs_read_together() -> None:
    log = _log("tpcb-c2-T1")
    assert len(log.latencies_us) == 1021  # as many as pgbench counted
    lat = log.latency()
    assert lat is not None and lat.samples == 1021
    assert lat.min_ns == 513_000 and lat.max_ns == 20_593_000
    assert lat.mean_ns == pytest.approx(1_942_520, rel=1e-5)  # awk: 1942.52 µs
    assert dict(lat.percentiles) == {"50": 1_145_000, "95": 5_556_000, "99": 8_800_000}
    assert sum(lat.bins.values()) == 1021


def test_select_log_percentiles() -> None:
    lat = _log("select-c1-t200").latency()
    assert lat is not None
    # sorted: the 100th, 190th and 198th of 200 latencies (nearest rank)
    assert dict(lat.percentiles) == {"50": 73_000, "95": 99_000, "99": 260_000}


def test_histogram_pools_to_the_exact_p99_within_a_bin() -> None:
    """The bins (64 per power of two, fio's layout) merge into the p99 of all transactions;
    a bin is at most 1/64 wide, so the pooled figure is the exact one within 1.6%."""
    lat = _log("tpcb-c2-T1").latency()
    assert lat is not None
    got = pooled.pooled_percentile([lat.bins, lat.bins], 99.0).value
    assert got == pytest.approx(8_800_000, rel=1 / 64)


def test_failed_and_skipped_transactions_are_counted_apart() -> None:
    lines = [
        "0 1 1500 0 1795554373 450643",
        "0 2 failed 0 1795554373 451579 0 3",
        "1 1 skipped 0 1795554374 1 25",
        "1 2 900 0 1795554374 2",
    ]
    log = pgbench.parse_log_lines(lines)
    assert (log.latencies_us, log.failed, log.skipped) == ((1500, 900), 1, 1)
    assert log.first_epoch_s == pytest.approx(1795554373.450643)
    assert log.last_epoch_s == pytest.approx(1795554374.000002)


@pytest.mark.parametrize("line", ["hello world", "0 1 abc 0 1795554373 1", "0 1 5 0 x 1"])
def test_a_line_that_is_not_a_log_line_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match="line 1"):
        pgbench.parse_log_lines([line])


def test_an_empty_log_has_no_latency() -> None:
    assert pgbench.parse_log_lines([]).latency() is None


# -- names ------------------------------------------------------------------------------------
def test_names() -> None:
    w = get("pgbench-tpcb")
    assert (w.kind, w.unit, w.family, w.jobs, w.direction) == (
        "pgbench", "TPS", "database", 0, "mixed",
    )  # fmt: skip
    assert get("pgbench-select-c8").jobs == 8 and get("pgbench-select").direction == "read"
    assert pgbench.mode_of(get("pgbench-select-c8")) == "select"


def test_a_script_names_its_file(tmp_path: Path) -> None:
    script = tmp_path / "bench.sql"
    script.write_text("SELECT 1;\n")
    w = get(f"pgbench-script:{script}")
    assert pgbench.mode_of(w) == "script" and pgbench.script_of(w) == script


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("pgbench-tpc", "pgbench-{tpcb|select}"),
        ("pgbench-tpcb-c0", "client count"),
        ("pgbench-tpcb-c300", "client count"),
        ("pgbench-script:/nonexistent/x.sql", "not a readable file"),
        ("pgbench-script:", "not a readable file"),
    ],
)
def test_bad_names_are_refused_with_the_forms(name: str, says: str) -> None:
    with pytest.raises(UsageError, match=r"\S") as e:
        get(name)
    assert says in str(e.value)


def test_a_study_file_refuses_a_missing_script_with_its_line() -> None:
    text = (
        'name = "db"\n[factors]\nlayout = ["mirror:2"]\n[workloads]\n'
        'names = ["pgbench-script:/nonexistent.sql"]\n'
    )
    with pytest.raises(UsageError, match="not a readable file"):
        parse(text, "db.toml")


def test_unknown_workload_error_lists_pgbench() -> None:
    with pytest.raises(UsageError, match=r"pgbench-\{tpcb\|select\}"):
        parse_list("tpcb")


# -- sizes ------------------------------------------------------------------------------------
def test_scale_follows_the_working_set() -> None:
    assert pgbench.scale_for(16 << 20) == 1  # 16.8 MB: one 16 MB scale unit
    assert pgbench.scale_for(256 << 20) == 16  # 268 MB / 16 MB = 16.8
    assert pgbench.scale_for(0) == 1
    assert pgbench.scale_for(10**18) == pgbench.MAX_SCALE


def test_bytes_floor() -> None:
    # One client: each commit is its own fsync, at least one 4 KiB block, plus one
    # 128K record of data for 1000 transactions (131 bytes each).
    assert pgbench.bytes_floor(128 << 10, 1000, 1) == 4096 + 131.072
    # An 8K page is the least a checkpoint writes, whatever the smaller recordsize.
    assert pgbench.bytes_floor(4096, 1000, 1) == 4096 + 8.192
    # Several clients share fsyncs (group commit): the WAL record alone per transaction.
    assert pgbench.bytes_floor(8192, 1000, 4) == 200 + 8.192


# -- this machine ------------------------------------------------------------------------------
def test_no_postgresql_is_unsupported(tmp_path: Path) -> None:
    with pytest.raises(Unsupported) as e:
        pgserver.bindir(tmp_path / "nothing")
    assert e.value.exit_code == EXIT_UNSUPPORTED
    assert "apt-get install --no-remove postgresql postgresql-contrib" in str(e.value)


def test_newest_postgresql_is_chosen(tmp_path: Path) -> None:
    for v in ("9", "15", "13"):
        d = tmp_path / v / "bin"
        d.mkdir(parents=True)
        (d / "initdb").touch()
        (d / "pgbench").touch()
    assert pgserver.bindir(tmp_path) == tmp_path / "15" / "bin"


def test_a_postgresql_without_pgbench_is_unsupported(tmp_path: Path) -> None:
    (tmp_path / "15" / "bin").mkdir(parents=True)
    (tmp_path / "15" / "bin" / "initdb").touch()
    with pytest.raises(Unsupported, match="has no pgbench"):
        pgserver.bindir(tmp_path)


@pytest.mark.root  # the refusal is root's
def test_a_directory_the_server_user_cannot_reach_is_refused(tmp_path: Path) -> None:
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    (tmp_path / "a").chmod(0o700)
    with pytest.raises(UsageError, match="does not let others enter") as e:
        pgserver.check_reachable(inner)
    assert "mode 700" in str(e.value) and str(tmp_path / "a") in str(e.value)


# -- bench --dry-run ---------------------------------------------------------------------------
def test_bench_dry_run_prints_the_postgresql_commands(tmp_path: Path) -> None:
    target = Path(tempfile.mkdtemp(prefix="pbtest-pgdry-", dir="/var/tmp"))
    try:
        target.chmod(0o755)
        p = poolbench("bench", str(target), "--dry-run", "--size", "48M", "--runtime", "7",
                      "--workloads", "pgbench-tpcb-c2", "--db", str(tmp_path / "r.db"))  # fmt: skip
        assert p.returncode == 0, p.stderr
        runs = [" ".join(x.split()) for x in p.stderr.split("would run: ")[1:]]
        tools = [next(w for w in r.split() if w.startswith("/")).rsplit("/", 1)[1] for r in runs]
        assert tools == ["initdb", "pg_ctl", "pgbench", "psql", "pgbench", "psql", "pg_ctl"]
        assert " -i -q -s 3 " in runs[2]  # 48 MiB = 50.3 MB: three 16 MB scale units
        assert " -b tpcb-like -c 2 " in runs[4] and " -T 7 -l " in runs[4]
        assert list(target.iterdir()) == []  # nothing was made
    finally:
        shutil.rmtree(target, ignore_errors=True)


@pytest.mark.root  # the refusal is root's
def test_bench_refuses_a_target_the_server_user_cannot_reach(tmp_path: Path) -> None:
    p = poolbench("bench", str(tmp_path), "--dry-run", "--size", "16M",
                  "--workloads", "pgbench-select", "--db", str(tmp_path / "r.db"))  # fmt: skip
    assert p.returncode == 5 and "Traceback" not in p.stderr
    assert "cannot reach" in p.stderr and "does not let others enter" in p.stderr
