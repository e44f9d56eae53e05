"""`poolbench plan --disk-speed-from RUN`: one disk's measured figures drive the prediction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.errors import EXIT_INPUT
from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.store.db import Store

MiB = 1024 * 1024


def _bench_run(db: Path, figures: dict[str, list[float]]) -> int:
    store = Store(db)
    run = store.start_run("bench", "/dev/sdz", ["poolbench", "bench"], {})
    for workload, values in figures.items():
        unit = "IOPS" if workload.startswith("rand") else "MiB/s"
        for i, v in enumerate(values):
            store.add_measurement(
                run,
                Measurement(
                    "/mnt/x", workload, i, v, unit, 1, 1, 1.0, None, None, [], Findings(), {}, ""
                ),  # fmt: skip
            )
    store.finish_run(run, "finished")
    return run


def test_mirror_prediction_uses_the_measured_disk(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    run = _bench_run(db, {"seq-read": [200, 220], "seq-write": [100, 100],
                          "rand-read-4k": [300, 300]})  # fmt: skip
    p = poolbench("plan", "--layout", "mirror:2x4T", "--disk-speed-from", str(run),
                  "--db", str(db), "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    speed = json.loads(p.stdout)["predicted_speed"]
    assert f"bench run {run}" in speed["disk"] and "rand-write" not in speed["disk"]
    # A 2-way mirror reads from both sides and writes every block to both (docs/planner.md).
    assert speed["stream_read_bytes_per_s"] == round(2 * 210 * MiB)
    assert speed["stream_write_bytes_per_s"] == round(100 * MiB)
    # A 128K record from a disk of 300 4K IOPS (hdd: it seeks) reading 210 MiB/s: 1/300 s
    # plus 124K of transfer a side.
    seek = (1 / 300) / (1 / 300 + (128 - 4) * 1024 / (210 * MiB))
    assert speed["random_read_iops"] == pytest.approx(600 * seek, abs=0.1)
    assert speed["random_write_iops"] == 150  # not measured: the hdd default, and it says so


def test_a_study_run_is_not_a_disk(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    store = Store(db)
    store.start_run("study", "parity", ["poolbench", "run"], {})
    p = poolbench("plan", "--layout", "mirror:2x4T", "--disk-speed-from", "1", "--db", str(db))
    assert p.returncode == EXIT_INPUT and "No bench run '1'" in p.stderr
