"""Machine-readable output (issue 29): `compare --json`, replicates numbered from 1 in every
output, ISO 8601 times in every JSON document, and one CSV row per line. Pure: the planted
store of tests/report_store.py (run 3 is run 1 after a tuning), no pools."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from poolbench.cli.main import main
from report_store import RUN1_READ, RUN1_WRITE, STARTED, K, build


def poolbench(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (as main() runs it: its exit code, stdout and stderr), which
    is faster than a subprocess; tests/test_cli_contract.py runs it in real pipes."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as stop:
            main(list(args))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return subprocess.CompletedProcess(args, int(stop.value.code or 0), out.getvalue(),
                                       err.getvalue())  # fmt: skip


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("json") / "r.db"
    build(path).close()
    return path


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def test_compare_json_gives_each_pair_and_its_change(db: Path) -> None:
    p = poolbench("compare", "1", "3", "--json", "--db", str(db))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["format"] == "poolbench-compare" and doc["version"] == 1
    assert (doc["a"]["id"], doc["b"]["id"]) == (1, 3)
    assert doc["a"]["started_at"] == "2025-01-02T11:00:00+00:00"  # STARTED + 1 h, UTC
    assert doc["metrics"] == ["value"] and doc["forced_past"] == []
    assert {"what": "kernel", "a": "Linux 6.1.0-test", "b": "Linux 6.12.0-tuned"} in doc[
        "metadata_differences"
    ]
    # Four configurations × two workloads, each measured in both runs.
    assert len(doc["pairs"]) == 8 and doc["only_a"] == doc["only_b"] == []
    pair = next(
        x for x in doc["pairs"] if x["workload"] == "seq-write" and x["config_a"] == K("raidz1", 9)
    )
    a, b = _mean(RUN1_WRITE[K("raidz1", 9)]), _mean([330, 335, 325])  # run 3's planted values
    assert pair["figure_a"]["center"] == pytest.approx(a)
    assert pair["figure_b"]["center"] == pytest.approx(b)
    assert pair["change"]["ratio"] == pytest.approx(b / a)  # 330 / 300 = 1.1
    assert pair["change"]["ci_low"] < b / a < pair["change"]["ci_high"]
    assert pair["change"]["significant"] is True
    assert pair["change"]["text"].startswith("+10.0% [")
    # The terminal prints the same change to the digit.
    term = poolbench("compare", "1", "3", "--db", str(db), env={"COLUMNS": "200"})
    assert pair["change"]["text"] in term.stdout


def test_compare_json_with_two_metrics_refuses_before_printing(db: Path) -> None:
    """p99 was never recorded in the planted runs: the refusal leaves stdout empty (no
    half document of the `value` pairs)."""
    p = poolbench("compare", "1", "3", "--json", "--metric", "value,p99", "--db", str(db))
    assert p.returncode != 0 and p.stdout == "" and "p99" in p.stderr


def test_replicates_are_numbered_from_1_in_csv_and_json(db: Path) -> None:
    text = poolbench("export", "1", "--csv", "--db", str(db)).stdout
    rows = [r for r in csv.DictReader(io.StringIO(text)) if r["config"] == K("raidz2", 12)]
    writes = [r for r in rows if r["workload"] == "seq-write"]
    assert [r["replicate"] for r in writes] == ["1", "2", "3", "4"]  # 4 planted replicates
    assert [float(r["value"]) for r in writes] == RUN1_WRITE[K("raidz2", 12)]
    doc = json.loads(poolbench("export", "1", "--json", "--db", str(db)).stdout)
    assert doc["export_version"] == 2
    reads = [m for m in doc["measurements"] if m["workload"] == "seq-read"]
    assert sorted({m["replicate"] for m in reads}) == [1, 2, 3]
    assert len(reads) == sum(len(v) for v in RUN1_READ.values())


def test_csv_export_is_one_row_per_line(db: Path) -> None:
    text = poolbench("export", "1", "--csv", "--db", str(db)).stdout
    rows = list(csv.DictReader(io.StringIO(text)))
    n = sum(len(v) for v in RUN1_WRITE.values()) + sum(len(v) for v in RUN1_READ.values())
    assert len(rows) == n == 25
    assert len(text.splitlines()) == n + 1  # the header and one line per measurement
    wc = subprocess.run(["wc", "-l"], input=text, capture_output=True, text=True, check=True).stdout
    assert int(wc.split()[0]) == n + 1
    # The job file comes back exactly from its JSON text, and as a string in the JSON export.
    assert json.loads(rows[0]["job_file"]) == "[seq-write]\nrw=write\n"
    doc = json.loads(poolbench("export", "1", "--json", "--db", str(db)).stdout)
    assert doc["measurements"][0]["job_file"] == "[seq-write]\nrw=write\n"


def test_runs_json_gives_iso_times(db: Path) -> None:
    items = json.loads(poolbench("runs", "--json", "--db", str(db)).stdout)
    assert [i["id"] for i in items] == [1, 2, 3, 4]
    # Run N was planted to start at STARTED + N hours (2025-01-02 10:00 UTC + N h).
    assert STARTED == 1735812000.0
    assert [i["started_at"] for i in items] == [
        f"2025-01-02T{10 + n}:00:00+00:00" for n in (1, 2, 3, 4)
    ]
    export = json.loads(poolbench("export", "2", "--json", "--db", str(db)).stdout)
    assert export["run"]["started_at"] == items[1]["started_at"]


def test_the_html_page_numbers_replicates_as_the_export_does(db: Path, tmp_path: Path) -> None:
    """The page's table of every measurement and the CSV give each measurement the same
    replicate number (from 1)."""
    page = tmp_path / "r.html"
    assert poolbench("report", "1", "--html", str(page), "--db", str(db)).returncode == 0
    cells = re.findall(
        r"<tr><td>([^<]*)</td><td>([^<]*)</td><td class=num>(\d+)</td><td class=num>([^<]*)</td>",
        page.read_text(),
    )
    html_rows = sorted((c, w, int(r), float(v.replace(",", ""))) for c, w, r, v in cells)
    text = poolbench("export", "1", "--csv", "--db", str(db)).stdout
    csv_rows = sorted(
        (r["config"], r["workload"], int(r["replicate"]), float(r["value"]))
        for r in csv.DictReader(io.StringIO(text))
    )
    assert html_rows == csv_rows and len(csv_rows) == 25
    assert min(r[2] for r in csv_rows) == 1 and max(r[2] for r in csv_rows) == 4


def test_runs_json_keeps_a_damaged_time_as_text(tmp_path: Path) -> None:
    """One damaged start time (1e300 s: no calendar holds it) is given as stored, as text;
    the other runs still list with their ISO times."""
    store = build(tmp_path / "d.db")
    store.conn.execute("UPDATE runs SET started_at = 1e300 WHERE id = 2")
    store.conn.commit()
    store.close()
    p = poolbench("runs", "--json", "--db", str(tmp_path / "d.db"))
    assert p.returncode == 0, p.stderr
    items = json.loads(p.stdout, parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    assert [i["started_at"] for i in items] == [
        "2025-01-02T11:00:00+00:00", "1e+300", "2025-01-02T13:00:00+00:00",
        "2025-01-02T14:00:00+00:00",
    ]  # fmt: skip
