"""Completion latency end to end with real fio (issue 16 item 7): `bench --json` on a
private tmpfs reports p50/p90/p99/p99.9 of all I/Os with their intervals (and each
replicate's), and the store keeps fio's histogram, from which the stored percentiles are
recomputed here."""

from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

from tests.conftest import needs_fio, poolbench

from poolbench.workloads.fioparse import percentile_from_bins

pytestmark = needs_fio


def test_bench_json_has_latency_percentiles_with_intervals(tmpfs: Path, tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = poolbench(
        "bench", str(tmpfs), "--size", "16M", "--workloads", "rand-read-4k", "--runtime", "1",
        "--min-runs", "3", "--max-runs", "3", "--json", "--db", str(db),
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["results"]
    lat = r["latency"]
    assert lat["unit"] == "µs" and r["replicates"] == 3
    con = sqlite3.connect(db)
    stored = [json.loads(c) for (c,) in con.execute(
        "SELECT clat FROM measurements ORDER BY replicate").fetchall()]  # fmt: skip
    merged: dict[int, int] = {}
    for clat in stored:
        for k, v in clat["bins"].items():
            merged[int(k)] = merged.get(int(k), 0) + int(v)
    for key in ("p50", "p90", "p99", "p99.9"):
        f = lat[key]
        # The percentile of all I/Os of the 3 runs: fio's rule on their added histograms.
        assert f["statistic"] == "of all I/Os" and len(f["values"]) == 3
        q = float(key[1:])
        assert math.isclose(f["center"], (percentile_from_bins(merged, q) or 0) / 1000)
        if f["reason"] is None:
            assert f["ci_low"] <= f["center"] <= f["ci_high"]
    # Per replicate and for the summaries: p50 ≤ p99 ≤ p99.9.
    for a, b, c in zip(lat["p50"]["values"], lat["p99"]["values"], lat["p99.9"]["values"],
                       strict=True):  # fmt: skip
        assert 0 < a <= b <= c
    assert lat["p50"]["center"] <= lat["p99"]["center"] <= lat["p99.9"]["center"]
    # The store keeps every run's histogram; the stored percentiles are fio's, i.e. the
    # histogram's (recomputed here from the bins), and the columns match the JSON.
    rows = con.execute(
        "SELECT clat, clat_p50_ns, clat_p99_ns, clat_p999_ns FROM measurements ORDER BY replicate"
    ).fetchall()
    assert len(rows) == 3
    for (clat_text, p50, p99, p999), v99 in zip(rows, lat["p99"]["values"], strict=True):
        clat = json.loads(clat_text)
        bins = {int(k): int(v) for k, v in clat["bins"].items()}
        assert sum(bins.values()) == clat["samples"] > 100
        assert p50 == percentile_from_bins(bins, 50) and p99 == percentile_from_bins(bins, 99)
        assert p999 == percentile_from_bins(bins, 99.9)
        assert math.isclose(p99 / 1000, v99)
