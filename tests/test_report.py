"""Reports on a fixed store: terminal snapshots, compare (and its refusal), export, escaping.

Snapshots live in tests/data/*.txt; after an intended change of the output, regenerate them
with `POOLBENCH_UPDATE_SNAPSHOTS=1 pytest tests/test_report.py` and read the diff.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from poolbench.cli import report_cmd
from poolbench.errors import UsageError
from poolbench.report import compare_runs, export, html, terminal
from poolbench.report.data import load_run
from poolbench.report.tables import Footnotes, choose_baseline, tables
from poolbench.store.db import Store
from report_store import HOSTILE, HOSTILE_LEVEL, build

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return build(tmp_path / "results.db")


def _console() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(
        file=buf,
        width=130,
        color_system=None,
        force_terminal=False,
        legacy_windows=False,
        emoji=False,
        highlight=False,
    ), buf


def _snapshot(name: str, text: str) -> None:
    path = DATA / name
    if os.environ.get("POOLBENCH_UPDATE_SNAPSHOTS"):
        path.write_text(text)
    assert text == path.read_text(), f"output differs from {path}"


def test_report_table_snapshot(store: Store) -> None:
    run = load_run(store, "1")
    console, buf = _console()
    terminal.render_run(console, run, choose_baseline(run))
    _snapshot("report_parity.txt", buf.getvalue())


def test_report_table_figures(store: Store) -> None:
    run = load_run(store, "1")
    base = choose_baseline(run)
    assert base is not None and base.label == "layout=raidz1"
    write, read = tables(run, base, Footnotes())
    by = {r.cell.config: r for r in write.rows}
    # raidz2 is compared with raidz1 at the same ashift, never across ashifts.
    r9 = by["backend=zfs layout=raidz2 ashift=9"].change
    assert r9 is not None and r9.mean_a == 300 and r9.mean_b == 210 and r9.significant
    r12 = by["backend=zfs layout=raidz2 ashift=12"].change
    assert r12 is not None and r12.mean_a == 310 and (r12.n_a, r12.n_b) == (3, 4)
    # Two comparisons per table: Holm tests the smaller p-value at 0.025.
    assert sorted([r9.confidence, r12.confidence]) == pytest.approx([0.95, 0.975])
    assert all(r.change is None or not r.change.significant for r in read.rows)
    assert "no significant difference" in {
        r.change.text() for r in read.rows if r.change is not None
    }


def test_baseline_option(store: Store) -> None:
    run = load_run(store, "1")
    b = choose_baseline(run, "ashift=12")
    assert (
        b is not None
        and b.partner("backend=zfs layout=raidz2 ashift=9", run, run.configs)
        == "backend=zfs layout=raidz2 ashift=12"
    )
    with pytest.raises(UsageError, match="layout=raidz1, layout=raidz2, ashift=9, ashift=12"):
        choose_baseline(run, "layout=raidz9")


def test_rich_markup_in_the_store_prints_as_text(store: Store) -> None:
    run = load_run(store, "2")
    console, buf = _console()
    terminal.render_run(console, run, choose_baseline(run))
    out = buf.getvalue()
    assert HOSTILE in out and HOSTILE_LEVEL in out
    run1 = load_run(store, "1")
    console, buf = _console()
    terminal.render_run(console, run1, None)
    assert "([red]not markup[/red])" in buf.getvalue()


def test_compare_snapshot(store: Store) -> None:
    cmp = compare_runs.compare(load_run(store, "1"), load_run(store, "3"))
    assert not cmp.problems
    assert ("kernel", "Linux 6.1.0-test", "Linux 6.12.0-tuned") in cmp.metadata_differences
    texts = {(p.workload, p.cell_a.config): p.change.text() for p in cmp.pairs}
    assert texts[("seq-write", "backend=zfs layout=raidz2 ashift=9")] == (
        "no significant difference"
    )
    assert texts[("seq-read", "backend=zfs layout=raidz1 ashift=12")].startswith("-26.8% [")
    console, buf = _console()
    terminal.render_comparison(console, cmp)
    _snapshot("compare_runs.txt", buf.getvalue())


def test_compare_refuses_incomparable_runs_and_says_what_differs(store: Store) -> None:
    a, b = load_run(store, "1"), load_run(store, "4")
    with pytest.raises(UsageError) as exc:
        compare_runs.compare(a, b)
    msg = str(exc.value)
    assert "data compressibility differs: 0% in run 1, 50% in run 4" in msg
    assert "workload seq-write: definition differs: fio.bs '1048576' vs '131072'" in msg
    assert "--force" in msg
    forced = compare_runs.compare(a, b, force=True)
    assert len(forced.problems) == 2 and len(forced.pairs) == 8
    console, buf = _console()
    terminal.render_comparison(console, forced)
    assert "forced past: data compressibility differs" in buf.getvalue()


def test_compare_refuses_different_working_sets(store: Store) -> None:
    a, b = load_run(store, "1"), load_run(store, "3")
    study = replace(b.study, workloads=replace(b.study.workloads, size="1G"))
    b.metadata = replace(b.metadata, study=study)
    with pytest.raises(UsageError, match="working set differs: 256M in run 1, 1G in run 3"):
        compare_runs.compare(a, b)


def test_export_csv_columns_and_rows(store: Store) -> None:
    text = export.to_csv(load_run(store, "1"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == [c for c, _ in export.COLUMNS]
    assert len(rows) == 25  # 4 + 4 + 4 + 4... : 13 seq-write + 12 seq-read replicates
    first = rows[0]
    assert first["run_id"] == "1" and first["run_kind"] == "study"
    assert first["config"] == "backend=zfs layout=raidz1 ashift=9"
    assert json.loads(first["config_levels"]) == {
        "backend": "zfs",
        "layout": "raidz1",
        "ashift": "9",
    }
    assert first["value"] == "300.0" and first["unit"] == "MiB/s"
    assert first["run_started_at"] == "2025-01-02T11:00:00+00:00"
    assert first["fio_version"] == "fio-3.33" and first["ram_bytes"] == str(8 * 1024**3)
    assert first["compressibility_percent"] == "0"
    assert json.loads(first["pool"]) == {"usable_bytes": 3 * 480 * 1024**2}
    reads = [r for r in rows if r["workload"] == "seq-read"]
    assert {r["cache_verified"] for r in reads} == {"true"}
    assert any(r["device_mib_s"] == "" for r in reads)  # unverified cells stay empty


def test_export_json_matches_csv_columns(store: Store) -> None:
    doc = json.loads(export.to_json(load_run(store, "2")))
    assert doc["export_version"] == 2
    assert doc["columns"] == [c for c, _ in export.COLUMNS]
    assert doc["run"]["name"] == HOSTILE
    assert doc["commands"][0]["argv"] == ["zpool", "create", HOSTILE]
    m = doc["measurements"][0]
    assert list(m) == doc["columns"]
    assert isinstance(m["warnings"], list) and isinstance(m["guards"], dict)


def test_export_columns_are_documented() -> None:
    doc = (ROOT / "docs" / "export.md").read_text()
    documented = re.findall(r"^\| `([a-z0-9_]+)` \|", doc, re.M)
    assert documented == [c for c, _ in export.COLUMNS]


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [k for k, _ in attrs]

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_html_escapes_everything_from_the_store(store: Store) -> None:
    run = load_run(store, "2")
    page = html.render(run, choose_baseline(run))
    p = _Collect()
    p.feed(page)
    assert "img" not in p.tags and not any(a.startswith("on") for a in p.attrs)
    assert p.tags.count("svg") == len(re.findall(r'<svg id="chart-', page))
    text = "".join(p.text)
    assert HOSTILE in text and HOSTILE_LEVEL in text
    assert page.count("<script>") == 1  # only our own self-check


def test_cli_report_compare_export(store: Store, tmp_path: Path) -> None:
    db = ["--db", str(store.path)]
    runner = CliRunner()
    r = runner.invoke(report_cmd.report, ["1", *db, "--html", str(tmp_path / "r.html")])
    assert r.exit_code == 0, r.output
    assert "seq-write (MiB/s)" in r.output and (tmp_path / "r.html").exists()
    r = runner.invoke(report_cmd.compare, ["1", "4", *db])
    assert r.exit_code != 0 and isinstance(r.exception, UsageError)
    r = runner.invoke(report_cmd.compare, ["1", "4", "--force", *db])
    assert r.exit_code == 0, r.output
    r = runner.invoke(report_cmd.export, ["latest", "--json", *db])
    assert r.exit_code == 0 and json.loads(r.output)["run"]["id"] == 4
    r = runner.invoke(report_cmd.export, ["2", "--csv", "-o", str(tmp_path / "x.csv"), *db])
    assert r.exit_code == 0 and (tmp_path / "x.csv").read_text().startswith("run_id,")
    r = runner.invoke(report_cmd.export, ["2", *db])
    assert isinstance(r.exception, UsageError)


def test_hosts_of_a_fleet_run_are_kept_apart(store: Store) -> None:
    cols = {r[1] for r in store.conn.execute("PRAGMA table_info(measurements)")}
    if "host" not in cols:
        pytest.skip("this store has no per-host measurements")
    store.conn.execute(
        "UPDATE measurements SET host = CASE WHEN replicate % 2 = 0 THEN 'alpha' ELSE 'beta' "
        "END WHERE run_id = 1"
    )
    run = load_run(store, "1")
    assert run.configs[:2] == [
        "backend=zfs layout=raidz1 ashift=9 host=alpha",
        "backend=zfs layout=raidz1 ashift=9 host=beta",
    ]
    rows = list(csv.DictReader(io.StringIO(export.to_csv(run))))
    assert rows[0]["config"] == "backend=zfs layout=raidz1 ashift=9" and rows[0]["host"] == "alpha"


def test_an_exact_figure_prints_as_the_table_does_in_tables_and_answers() -> None:
    """A capacity read from the pool is the same on every build: three decimals, no ±,
    in the table row and in the HTML report's one-sentence answer alike."""
    from poolbench.report.data import Cell
    from poolbench.report.tables import value_text

    exact = Cell("layout=raidz1", "capacity", "GiB", values=[0.318359375] * 2,
                 workload_def={"exact": True})  # fmt: skip
    assert value_text(exact) == "0.318"
    measured = Cell("layout=raidz1", "seq-write", "MiB/s", values=[100.0, 110.0, 105.0])
    assert "±" in value_text(measured)
    # Replicates of an exact figure that disagree are statistics again, and say so.
    split = Cell("layout=raidz1", "capacity", "GiB", values=[0.3, 0.4],
                 workload_def={"exact": True})  # fmt: skip
    assert value_text(split) != "0.300"
