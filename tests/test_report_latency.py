"""Latency in the reports (issue 16 items 7 and 11): percentiles across replicates with
their log-scale interval in tables, `--metric`, compare and export, and tables that read at
80 columns with one column per varying factor. Pure: a store filled through Store."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from rich.console import Console

from poolbench.cli.main import cli, main
from poolbench.errors import UsageError
from poolbench.records.findings import Findings
from poolbench.records.latency import Latency
from poolbench.records.measurement import Measurement
from poolbench.report import export, html, terminal
from poolbench.report.data import load_run
from poolbench.report.metrics import LATENCY, parse_metrics
from poolbench.report.tables import Footnotes, choose_baseline, tables
from poolbench.store.db import Store
from report_store import SEQ_WRITE, _machine, _study

RAND = {
    "name": "rand-read-4k",
    "family": "random",
    "direction": "read",
    "unit": "IOPS",
    "fio": {"rw": "randread", "bs": "4096", "ioengine": "psync", "randrepeat": "0"},
}
SEQ = SEQ_WRITE  # the streaming workload report_store's runs use
LAYOUTS = ["raidz1", "mirror:2+mirror:2"]
COMPRESSION = ["off", "lz4"]
COMPRESSIBILITY = ["0", "50"]
# Per replicate p99 in µs for (layout, compression, compressibility): known on purpose.
P99 = [180.0, 200.0, 240.0]


def _key(layout: str, comp: str, pct: str) -> str:
    return f"backend=zfs layout={layout} compression={comp} compressibility={pct}"


def _clat(p99_us: float, samples: int = 30_000) -> dict[str, Any]:
    """A run whose histogram agrees with its p99 and p99.9: 98.5% of its completions at
    50 µs, 1% at its p99, 0.5% at 3× that (its p99.9)."""
    pct = {"50": p99_us * 250, "90": p99_us * 600, "99": p99_us * 1000, "99.9": p99_us * 3000}
    p99_ns = round(p99_us * 1000)
    bins = {
        "50000": samples * 985 // 1000,
        str(p99_ns): samples // 100,
        str(3 * p99_ns): samples - samples * 985 // 1000 - samples // 100,
    }
    return {"direction": "read", "samples": samples, "mean_ns": p99_us * 300,
            "min_ns": 1000.0, "max_ns": p99_us * 5000, "stddev_ns": 1.0,
            "percentiles": pct, "bins": bins}  # fmt: skip


def _run(store: Store, slower: float = 1.0, samples: int = 30_000) -> int:
    factors = {"layout": LAYOUTS, "compression": COMPRESSION, "compressibility": [0, 50]}
    study = _study("latency", factors, ["rand-read-4k", "seq-write"])
    run = store.start_run("study", "latency", ["poolbench", "run", "x.toml"],
                          {"machine": _machine(), "study": study})  # fmt: skip
    for i, (lay, comp, pct) in enumerate(
        (a, b, c) for a in LAYOUTS for b in COMPRESSION for c in COMPRESSIBILITY
    ):
        factor = (1 + i / 10) * slower
        for rep, p99 in enumerate(P99):
            for wdef, value in ((RAND, 5000.0 / factor + rep), (SEQ, 300.0 + rep)):
                rand = wdef is RAND
                store.add_measurement(run, Measurement(
                    _key(lay, comp, pct), str(wdef["name"]), rep, value, str(wdef["unit"]),
                    4096, 1000, 10.0, 4096, 1.0, [], Findings(), wdef, "[job]\n",
                    latency=Latency.from_json(_clat(p99 * factor, samples)) if rand else None,
                ))  # fmt: skip
    store.finish_run(run, "finished")
    return run


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "lat.db")
    _run(s)
    _run(s, slower=2.0)
    return s


def _render(store: Store, width: int, metric: str | None = None, ref: str = "1") -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False)
    run = load_run(store, ref)
    terminal.render_run(console, run, choose_baseline(run), None, parse_metrics(metric))
    return buf.getvalue()


def _assert_reads_at(out: str, width: int) -> None:
    """No line wider than the terminal; each configuration's levels, unbroken, in one line
    in factor order (one column per factor); never the old key string."""
    assert max(len(ln) for ln in out.splitlines()) <= width
    # The tables; the answer after them names configurations by their levels in sentences.
    out = out.split("\nThe answer")[0]
    lines = out.splitlines()
    assert "compression=lz4" not in out and "compressibility=50" not in out
    for lay in LAYOUTS:
        for comp in COMPRESSION:
            for pct in COMPRESSIBILITY:
                assert any(ln.split()[:3] == [lay, comp, pct] for ln in lines if ln.strip()), (
                    lay, comp, pct,
                )  # fmt: skip


def test_tables_read_at_80_columns_with_p99_for_random_io(store: Store) -> None:
    out = _render(store, 80)
    _assert_reads_at(out, 80)
    out = out.split("\nThe answer")[0]  # the tables (the answer ranks them after)
    titles = [ln for ln in out.splitlines() if ln.startswith(("rand-read-4k", "seq-write"))]
    assert len(titles) == 2
    # p99 beside the random workload's figure, not beside the streaming one's.
    rand_block, seq_block = out.split("seq-write (MiB/s)")
    assert "p99 µs" in rand_block and "p99 µs" not in seq_block
    assert _p99_header(store) == "p99 µs\nall I/Os"  # which p99 it is (wrapped at 80)
    # The first configuration's p99 of all I/Os: its 3 runs of 30,000 completions hold
    # 88,650 at 50 µs, then 300 each at 180, 200 and 240 µs (each run's p99), then 150 each
    # at 3× that; the 89,100th (99%) is at 200 µs. Its interval: Woodruff's lower end falls
    # in the 50 µs bin (the runs' fractions at or below 200 µs, 29,850, 29,850 and 29,550 of
    # 30,000, leave q − t·se below 98.5%), and its upper end past 100%: the slowest
    # completion seen, 720 µs, printed as a lower bound.
    lines = rand_block.splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.split()[:3] == ["raidz1", "off", "0"])
    assert lines[i].split()[-1] == "200"
    assert lines[i + 1].split()[-1] == "(50.0–≥" and lines[i + 2].split()[-1] == "720)"


def _p99_header(store: Store) -> str:
    run = load_run(store, "1")
    baseline = choose_baseline(run)
    wt = next(t for t in tables(run, baseline, Footnotes()) if t.workload == "rand-read-4k")
    return next(c.header for c in terminal.workload_columns(run, wt, baseline) if c.key == "p99")


def test_wide_terminal_keeps_every_column_on_one_line(store: Store) -> None:
    out = _render(store, 200)
    lines = out.splitlines()
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("─"))
    header = " ".join(lines[rule - 2 : rule])  # the two header lines of the first table
    for name in ("layout", "compression", "compressibility", "runs", "p99 µs", "notes"):
        assert name in header
    assert "not shown at" not in out


def test_narrow_terminal_drops_optional_columns_and_says_so(store: Store) -> None:
    out = _render(store, 60)
    assert max(len(ln) for ln in out.splitlines()) <= 60
    assert "not shown at 60 columns: runs" in out
    assert "compress-" in out  # the long factor name set on two lines, hyphenated


def test_metric_p99_table_figures_and_comparison(store: Store) -> None:
    run = load_run(store, "1")
    (t,) = tables(run, choose_baseline(run), Footnotes(), LATENCY["p99"])
    assert t.workload == "rand-read-4k" and t.unit == "µs"  # seq-write has no latency
    rows = {r.cell.config: r for r in t.rows}
    base = rows[_key("raidz1", "off", "0")]
    other = rows[_key("mirror:2+mirror:2", "off", "0")]  # factor 1.4 slower
    assert base.figure is not None and other.figure is not None
    # The p99 of all I/Os (see the 80-column test): 200 µs, 1.4× that on the other.
    assert base.figure.pooled and base.figure.center == 200.0
    assert (base.figure.low, base.figure.high) == (50.0, 720.0) and base.figure.open_high
    assert other.figure.center == pytest.approx(280.0)
    assert base.figure.as_dict()["statistic"] == "of all I/Os"
    # The change compares the runs' own p99s on the log scale: 1.4× in every run.
    assert other.change is not None and other.change.ratio == pytest.approx(1.4)
    out = _render(store, 80, "p99")
    _assert_reads_at(out, 80)
    assert "rand-read-4k: p99 completion latency (µs)" in out
    assert "of all I/Os (95% CI)" in out
    flat = " ".join(out.split())
    assert "change: ratio of the geometric means of the runs' own p99s" in flat


def test_runs_without_histograms_keep_the_geometric_mean_and_say_so(tmp_path: Path) -> None:
    """An older store (per-run percentiles, no histograms): the p99 is the geometric mean of
    the runs' p99s, labelled so in the header and in a footnote on every such row."""
    s = Store(tmp_path / "old.db")
    real = _clat

    def no_bins(p99_us: float, samples: int = 30_000) -> dict[str, Any]:
        c = real(p99_us, samples)
        del c["bins"]
        return c

    globals()["_clat"] = no_bins
    try:
        _run(s)
    finally:
        globals()["_clat"] = real
    run = load_run(s, "1")
    (t,) = tables(run, choose_baseline(run), Footnotes(), LATENCY["p99"])
    base = next(r for r in t.rows if r.cell.config == _key("raidz1", "off", "0"))
    assert base.figure is not None and not base.figure.pooled
    gm = math.exp(sum(math.log(v) for v in P99) / 3)
    assert base.figure.center == pytest.approx(gm)
    assert t.statistic == "geometric mean (95% CI)"
    assert _p99_header(s) == "p99 µs\ngeo. mean"
    out = " ".join(_render(s, 80).split())
    assert "p99 here is the geometric mean of the runs' own p99s, not the p99 of all I/Os" in out
    out = " ".join(_render(s, 80, "p99").split())
    assert "geometric" in out and "p99 of all I/Os" not in out.replace("not the p99 of all", "")


def test_compare_p99_between_runs(store: Store) -> None:
    r = CliRunner().invoke(
        cli, ["compare", "1", "2", "--metric", "p99", "--db", str(store.path)],
        env={"COLUMNS": "80"},
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    assert max(len(ln) for ln in r.output.splitlines()) <= 80
    flat = " ".join(r.output.split())
    assert "ratio of geometric means with its 95% t-interval on the log scale" in flat
    assert r.output.count("+100.0%") == 8  # run 2 is twice as slow in every configuration
    assert "only in" not in r.output  # seq-write has no latency: not "only in A"


def test_bad_metric_is_one_clear_paragraph(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(UsageError, match="p99.9"):
        parse_metrics("p98")
    for argv in (
        ["report", "1", "--metric", "p98"],
        ["compare", "1", "2", "--metric", "p99,nope"],
        ["bench", "/nonexistent", "--metric", "value", "--dry-run"],
    ):
        with pytest.raises(SystemExit) as exc:
            main([*argv, "--db", str(store.path)])
        out = capsys.readouterr()
        text = out.out + out.err
        assert exc.value.code != 0 and "Traceback" not in text, text
        assert "--metric" in text and "p99" in text, text


def test_too_few_completions_for_p999_are_flagged(tmp_path: Path) -> None:
    s = Store(tmp_path / "few.db")
    _run(s, samples=3000)  # 3 completions beyond the p99.9 of each run
    out = _render(s, 100, "p99.9")
    assert "timed too few I/Os" in out and "3,000 I/Os" in out
    assert "timed too few" not in _render(s, 100, "p99")  # 30 beyond p99: enough


def test_export_carries_latency_columns(store: Store) -> None:
    run = load_run(store, "1")
    rows = list(csv.DictReader(io.StringIO(export.to_csv(run))))
    rand = [r for r in rows if r["workload"] == "rand-read-4k"]
    seq = [r for r in rows if r["workload"] == "seq-write"]
    assert float(rand[0]["clat_p99_ns"]) == pytest.approx(P99[0] * 1000)
    assert json.loads(rand[0]["clat"])["bins"] == {"50000": 29550, "180000": 300, "540000": 150}
    assert seq[0]["clat_p99_ns"] == "" and json.loads(seq[0]["clat"]) is None


def test_html_has_a_latency_chart_per_latency_workload(store: Store) -> None:
    run = load_run(store, "1")
    page = html.render(run, choose_baseline(run))
    assert 'id="chart-latency-rand-read-4k"' in page
    assert "chart-latency-seq-write" not in page
    chart = re.search(r'<svg id="chart-latency-rand-read-4k".*?</svg>', page, re.S)
    assert chart is not None
    assert chart.group(0).count('class="lat"') == 8 * 4  # 8 configurations × 4 percentiles
    # Which percentiles they are, and the first configuration's p99 of all I/Os in its cell
    # (200 µs, 50.0 to at least the slowest completion, 720 µs: the 80-column test).
    assert "completion latency per configuration (percentiles of all I/Os of the runs" in page
    assert "200 (50.0–≥ 720)" in page


def test_latency_decides_for_random_and_synchronous_io() -> None:
    from poolbench.report.metrics import latency_matters
    from poolbench.workloads import library

    assert latency_matters("fio", library.get("rand-write-4k").fio)
    assert latency_matters("fio", {"rw": "write", "bs": "4096", "fsync": "1"})
    assert latency_matters("fio", {"rw": "write", "bs": "8192", "sync": "1"})
    assert latency_matters("pgbench", {})
    for name in ("seq-write", "seq-read", "iozone-read-128k", "meta-create-seq"):
        assert not latency_matters("fio", library.get(name).fio), name
