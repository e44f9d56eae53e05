"""Predicted beside measured in a study's report, on a hand-built store (pure: no pools).

The disk is a bench run in the same store; each expected figure is the model's rule worked
by hand (docs/planner.md): a 2-way mirror streams reads from both sides and writes every
block to both; a stripe of 2 adds both disks for everything.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.store.db import Store

MiB = 1024 * 1024


def _add(store: Store, run: int, config: str, workload: str, values: list[float]) -> None:
    unit = "IOPS" if workload.startswith("rand") else "MiB/s"
    for i, v in enumerate(values):
        m = Measurement(config, workload, i, v, unit, 1, 1, 1.0, None, None, [], Findings(), {}, "")
        store.add_measurement(run, m)


def _store(db: Path, model: str = "CAPPED25") -> tuple[int, int]:
    store = Store(db)
    meta = {"devices": [{"model": model, "size_bytes": 1 << 30}]}
    bench = store.start_run("bench", "/mnt/d0", ["poolbench", "bench"], meta)
    _add(store, bench, "/mnt/d0", "seq-read", [24.0, 26.0])  # mean 25 MiB/s
    _add(store, bench, "/mnt/d0", "seq-write", [25.0, 25.0])
    _add(store, bench, "/mnt/d0", "rand-read-4k", [100.0, 100.0])
    store.finish_run(bench, "finished")
    study_meta = {"study": {"name": "s", "disks": {"count": 4, "size": "512M"}}}
    study = store.start_run("study", "s", ["poolbench", "run"], study_meta)
    for layout, read, write in (("mirror:2", 49.0, 24.0), ("stripe:2", 50.0, 40.0)):
        cfg = f"layout={layout} ashift=12"
        _add(store, study, cfg, "seq-read", [read, read])
        _add(store, study, cfg, "seq-write", [write, write])
        _add(store, study, cfg, "rand-write-4k", [300.0, 310.0])
        _add(store, study, cfg, "rand-read-4k", [150.0, 150.0])
    store.finish_run(study, "finished")
    return bench, study


def test_rows_give_model_figure_and_ratio(tmp_path: Path) -> None:
    from poolbench.report.data import load_run
    from poolbench.report.predicted import predicted_rows, report_disk

    db = tmp_path / "r.db"
    bench, study = _store(db)
    store = Store(db)
    disk = report_disk(store, str(bench))
    rows = {(r.config, r.workload): r for r in predicted_rows(load_run(store, str(study)), disk)}
    # mirror:2 of 25 MiB/s disks: reads 2 × 25, writes 25; stripe of 2: 50 and 50.
    assert rows[("layout=mirror:2", "seq-read")].predicted == 50.0
    assert rows[("layout=mirror:2", "seq-write")].predicted == 25.0
    assert rows[("layout=stripe:2", "seq-write")].predicted == 50.0
    assert rows[("layout=mirror:2", "seq-read")].ratio == 49.0 / 50.0
    assert rows[("layout=stripe:2", "seq-write")].ratio_text() == f"{40 / 50:.2f}"
    # random reads: every member's 100 IOPS when many requests are in flight
    assert rows[("layout=mirror:2", "rand-read-4k")].predicted == 200.0
    # random writes: copy-on-write, not predicted, whatever the disk
    rw = rows[("layout=mirror:2", "rand-write-4k")]
    assert rw.predicted is None and rw.ratio is None and rw.tag == "not predicted"


def test_an_unmeasured_disk_figure_is_not_predicted(tmp_path: Path) -> None:
    from poolbench.report.data import load_run
    from poolbench.report.predicted import predicted_rows, report_disk

    db = tmp_path / "r.db"
    store = Store(db)
    bench = store.start_run("bench", "/mnt/d0", ["poolbench", "bench"], {})
    _add(store, bench, "/mnt/d0", "seq-write", [30.0])
    store.finish_run(bench, "finished")
    _, study = _store(db)
    rows = predicted_rows(load_run(store, str(study)), report_disk(store, str(bench)))
    reads = [r for r in rows if r.workload == "seq-read"]
    assert reads and all(r.predicted is None for r in reads)
    assert "did not measure the disk's seq-read" in reads[0].basis
    writes = [r for r in rows if r.workload == "seq-write" and r.config == "layout=mirror:2"]
    assert writes[0].predicted == 30.0  # a no-default: only what the bench measured


def test_report_terminal_and_html_by_model(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    bench, study = _store(db)
    out = tmp_path / "r.html"
    p = poolbench("report", str(study), "--disk-speed-from", "model:capped25",
                  "--db", str(db), "--html", str(out), env={"COLUMNS": "200"})  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert f"bench run {bench}" in p.stdout and "measured ÷ predicted" in p.stdout
    assert "0.98" in p.stdout and "not predicted" in p.stdout
    page = out.read_text()
    assert 'id="predicted-table"' in page and '<td class="num ratio">0.98</td>' in page


def test_without_disk_figures_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _, study = _store(db)
    p = poolbench("report", str(study), "--db", str(db))
    assert p.returncode == 0, p.stderr
    # No table and no line of its own: one next step at the end, what would give figures.
    tail = p.stdout.split("\nNext:\n")[1]
    assert "--disk-speed-from BENCH_RUN|model:NAME" in tail and "disk_baseline = true" in tail
    assert "measured ÷ predicted" not in p.stdout


def test_unknown_model_is_refused_clearly(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _, study = _store(db)
    p = poolbench("report", str(study), "--disk-speed-from", "model:WD40", "--db", str(db))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "model 'WD40'" in p.stderr and "CAPPED25" in p.stderr


def test_plan_takes_disk_by_model(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _store(db)
    p = poolbench("plan", "--layout", "mirror:2x4T", "--disk-speed-from", "model:CAPPED25",
                  "--db", str(db), "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    speed = json.loads(p.stdout)["predicted_speed"]
    assert speed["stream_read_bytes_per_s"] == round(2 * 25 * MiB)


def test_run_refuses_a_bad_disk_before_building(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    _store(db)
    before = Store(db).runs()
    p = poolbench("run", "examples/parity.toml", "--disks", "3x512M", "--dry-run",
                  "--disk-speed-from", "model:NOPE", "--db", str(db))  # fmt: skip
    assert p.returncode != 0 and "Traceback" not in p.stderr and "model 'NOPE'" in p.stderr
    assert len(Store(db).runs()) == len(before)


STUDY = """name = "b"
[factors]
layout = ["mirror:2"]
[workloads]
names = ["seq-read"]
"""


def test_disk_baseline_adds_a_single_disk_layout() -> None:
    from poolbench.study.matrix import configs
    from poolbench.study.model import parse

    plain = parse(STUDY)
    with_base = parse(STUDY + "[planner]\ndisk_baseline = true\n")
    assert plain.factors["layout"] == ["mirror:2"]
    assert with_base.factors["layout"] == ["mirror:2", "stripe:1"]
    assert [c.get("layout") for c in configs(with_base)] == ["mirror:2", "stripe:1"]


def test_the_study_baseline_feeds_the_prediction(tmp_path: Path) -> None:
    from poolbench.report.data import load_run
    from poolbench.report.predicted import predicted_rows

    store = Store(tmp_path / "r.db")
    meta = {"study": {"name": "b", "disks": {"count": 2, "size": "512M"}}}
    run = store.start_run("study", "b", ["poolbench", "run"], meta)
    for cfg, read in (("layout=mirror:2 ashift=12", 38.0), ("layout=stripe:1 ashift=12", 20.0)):
        _add(store, run, cfg, "seq-read", [read, read])
        _add(store, run, cfg, "seq-write", [18.0, 22.0])
    store.finish_run(run, "finished")
    rows = {(r.config, r.workload): r for r in predicted_rows(load_run(store, str(run)), None)}
    # The mirror's two sides each read at the single-disk pool's 20 MiB/s: 40 predicted.
    assert rows[("layout=mirror:2", "seq-read")].predicted == 40.0
    assert rows[("layout=mirror:2", "seq-read")].ratio_text() == "0.95"
    assert rows[("layout=mirror:2", "seq-write")].predicted == 20.0  # mean of 18 and 22
    base = rows[("layout=stripe:1", "seq-read")]
    assert base.predicted is None and base.tag == "disk baseline"
    p = poolbench("report", str(run), "--db", str(tmp_path / "r.db"), env={"COLUMNS": "200"})
    assert p.returncode == 0 and "single-disk baseline" not in p.stdout.split("predicted vs")[0]
    assert "stripe:1 baseline" in p.stdout and "0.95" in p.stdout


@pytest.mark.slow  # a browser
def test_predicted_table_in_chromium(tmp_path: Path) -> None:
    from tests.test_report_html import CHROMIUM, _open, _selfcheck

    if CHROMIUM is None:
        import pytest

        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    db = tmp_path / "r.db"
    bench, study = _store(db)
    page = tmp_path / "p.html"
    p = poolbench("report", str(study), "--disk-speed-from", str(bench), "--db", str(db),
                  "--html", str(page))  # fmt: skip
    assert p.returncode == 0, p.stderr
    dom, console = _open(page, tmp_path)
    assert console == "" and _selfcheck(dom)["errors"] == "0"
    table = dom.split('id="predicted-table"')[1].split("</table>")[0]
    # mirror:2 seq-read 49 of 50, stripe:2 seq-write 40 of 50; random writes not predicted
    assert '<td class="num ratio">0.98</td>' in table and '<td class="num ratio">0.80</td>' in table
    assert table.count("not predicted") == 4  # 2 configurations × (cell + basis tag)


def test_disk_baseline_refused_for_other_backends(tmp_path: Path) -> None:
    study = tmp_path / "s.toml"
    study.write_text(STUDY.replace("[factors]", '[factors]\nbackend = ["zfs", "btrfs"]')
                     + "[planner]\ndisk_baseline = true\n")  # fmt: skip
    p = poolbench("run", str(study), "--dry-run", "--disks", "2x512M", "--db", str(tmp_path / "r"))
    assert p.returncode != 0 and "Traceback" not in p.stderr
    assert "disk_baseline needs backend zfs only" in p.stderr


def _seeking_study(db: Path) -> int:
    """The geometry bench's shape (bench/seekdisk_geometry.toml): four hdd-7200 disks, 16K
    records, the stripe:1 baseline, 4K random reads by one reader and by 16."""
    store = Store(db)
    study = {"name": "geometry-seek", "disks": {"count": 4, "model": {"name": "hdd-7200"}},
             "workloads": {"iodepth": 1, "jobs": 1}}  # fmt: skip
    run = store.start_run("study", "geometry-seek", ["poolbench", "run"], {"study": study})
    figures = {  # layout: (QD 1, 16 jobs, 4K writes)
        "stripe:1": (140.0, 155.0, 80.0),
        "mirror:2+mirror:2": (135.0, 530.0, 86.0),
        "raidz1:4": (107.0, 210.0, 62.0),
        "raidz2:4": (110.0, 273.0, 64.0),
    }
    for layout, (qd1, j16, write) in figures.items():
        cfg = f"layout={layout} ashift=12 recordsize=16K primarycache=metadata"
        _add(store, run, cfg, "rand-read-4k", [qd1, qd1])
        _add(store, run, cfg, "rand-read-4k-qd1-j16", [j16, j16])
        _add(store, run, cfg, "rand-write-4k", [write, write])
        _add(store, run, cfg, "rand-write-4k-qd1-j16", [write, write])
        _add(store, run, cfg, "rand-read-64k", [100.0, 100.0])
    store.finish_run(run, "finished")
    return run


def test_disks_that_seek_take_the_queue_depth_rule(tmp_path: Path) -> None:
    """On seeking disks the table is the planner's queue-depth rule (docs/planner.md,
    "Random reads on disks that seek"), fed by the one-disk pool under the same load:
    K members' IOPS × Q/(Q + K − 1), and a read needing d members at once × 1/(1 + a(d −
    1)/(d + 1)/Q) with a = 2/3. Not 4 × one disk at QD 1, which the transfer-bound rule
    gave (455 against 135 measured on the geometry bench)."""
    from poolbench.report.data import load_run
    from poolbench.report.predicted import predicted_table

    db = tmp_path / "g.db"
    run = load_run(Store(db), str(_seeking_study(db)))
    table = predicted_table(run, None)
    assert table is not None and "disks that seek" in table.heading
    rows = {(r.config.split()[0], r.workload): r for r in table.rows}
    mirrors, qd1, j16 = "layout=mirror:2+mirror:2", "rand-read-4k", "rand-read-4k-qd1-j16"
    # Two mirrors of two: 4 members, each read needs one. One reader keeps one busy:
    # 4 × 140 × 1/(1 + 3) = 140; sixteen keep 16/19 of them: 4 × 155 × 16/19.
    assert rows[(mirrors, qd1)].predicted == pytest.approx(140.0)
    assert rows[(mirrors, qd1)].ratio == pytest.approx(135.0 / 140.0)
    assert rows[(mirrors, j16)].predicted == pytest.approx(4 * 155 * 16 / 19)
    # raidz2 of 4, 16K records: 4 data sectors on 2 data columns, 2 disks' IOPS, K = 2, and
    # every read waits for the slower of 2: × 1/(1 + (2/3)(1/3)/Q) = 9/11 at Q = 1.
    assert rows[("layout=raidz2:4", qd1)].predicted == pytest.approx(2 * 140 * 1 / 2 * 9 / 11)
    assert rows[("layout=raidz2:4", j16)].predicted == pytest.approx(
        2 * 155 * 16 / 17 / (1 + 2 / 9 / 16)
    )
    # raidz1 of 4: 3 data columns (2 + 1 + 1 sectors), 4/3 disks' IOPS (the raidz map's
    # average over the first columns a pool's runs start on moves it 0.2 %), K = 4/3, and
    # the slowest of 3: at Q = 1 × 3/4 × 1/(1 + (2/3)(2/4)) = 3/4 × 3/4.
    assert rows[("layout=raidz1:4", qd1)].predicted == pytest.approx(
        4 / 3 * 140 * 3 / 4 * 3 / 4, rel=0.005
    )
    # Writes: copy-on-write, not predicted; but a 4K write into a 16K record not cached
    # reads the record first: at most the reads under the same load (140 at QD 1, below
    # the in-place rule's 2 mirrors × 80). A read larger than the record: no rule.
    write = rows[(mirrors, "rand-write-4k")]
    assert write.predicted is None
    assert (
        "reads the record first" in write.basis
        and "(140 IOPS; the in-place rule gives 160)" in write.basis
    )
    assert rows[(mirrors, "rand-read-64k")].predicted is None
    # 16 writers: the reads under the same load bound them (4 × 155 × 16/19 = 522)
    assert (
        "(522 IOPS; the in-place rule gives 160)" in rows[(mirrors, "rand-write-4k-qd1-j16")].basis
    )
    assert rows[("layout=stripe:1", qd1)].tag == "disk baseline"


def test_a_member_holding_less_of_the_data_seeks_less(tmp_path: Path) -> None:
    """With the disks' size and the working set known, the one-disk baseline held all 96 MiB
    and a side of two mirrors holds 48: the disk model's random 16K read time over 96 MiB ÷
    over 48 MiB scales the baseline's IOPS (1.19 for hdd-7200 on 256 MiB disks)."""
    from poolbench.emulate.model import PRESETS, Geometry
    from poolbench.report.data import load_run
    from poolbench.report.predicted import predicted_rows

    db = tmp_path / "g.db"
    run = load_run(Store(db), str(_seeking_study(db)))
    disks, workloads = run.study.disks, run.study.workloads
    assert disks is not None
    study = replace(run.study, disks=replace(disks, size="256M"))
    run.metadata = replace(
        run.metadata, study=replace(study, workloads=replace(workloads, size="96M"))
    )
    g = Geometry(PRESETS["hdd-7200"], 256 * MiB)
    share = g.expected_random_s(16384, 0, 96 * MiB) / g.expected_random_s(16384, 0, 48 * MiB)
    assert 1.15 < share < 1.25
    rows = {(r.config.split()[0], r.workload): r for r in predicted_rows(run, None)}
    assert rows[("layout=mirror:2+mirror:2", "rand-read-4k")].predicted == pytest.approx(
        140.0 * share
    )
