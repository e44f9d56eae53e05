"""Predicted beside measured on disks of known speed (root, zfs-fuse, fio; run under the lock).

Three loop devices capped at CAP MiB/s through the root blkio cgroup (bench/validate_speed.py's
environment): one carries ext4 and is measured by `poolbench bench` (the single-disk
figures), two carry a ZFS stripe that a study measures with `--disk-speed-from`. The model's
stripe figure is the sum of its members' (docs/planner.md), so the report must show
2 × the bench's figure, that must sit near 2 × CAP, and the study's measurement must sit
within the validated tolerance (±15 % streaming) of it — in the terminal and in the HTML
report as headless Chromium renders it.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest
from tests.conftest import needs_fio, poolbench, sh
from tests.plugins.tiers import machine_fixture

pytestmark = needs_fio

MiB = 1 << 20
CAP = 20  # MiB/s per disk, read and write
STREAM_TOL = 0.15  # the model's validated streaming tolerance (issue 14, docs/planner.md)


@machine_fixture(slow=True, scope="module")
def vs() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "bench" / "validate_speed.py"
    spec = importlib.util.spec_from_file_location("validate_speed", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["validate_speed"] = mod
    spec.loader.exec_module(mod)
    if not mod.BLKIO.joinpath("blkio.throttle.read_bps_device").exists():
        pytest.skip("no cgroup v1 blkio controller at /sys/fs/cgroup/blkio")
    return mod


def _bench_one_disk(dev: str, mnt: Path, db: Path) -> dict[str, float]:
    """`poolbench bench` of one capped disk (ext4): its mean seq-write / seq-read MiB/s."""
    mnt.mkdir()
    sh("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", dev)
    sh("mount", dev, str(mnt))
    try:
        p = poolbench("bench", str(mnt), "--size", "64M", "--workloads", "seq-write,seq-read",
                      "--min-runs", "2", "--max-runs", "2", "--json", "--db", str(db))  # fmt: skip
    finally:
        sh("umount", str(mnt), check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return {r["workload"]: float(r["mean"]) for r in json.loads(p.stdout)["results"]}


def _study_means(db: Path) -> dict[str, float]:
    doc = json.loads(poolbench("export", "latest", "--json", "--db", str(db)).stdout)
    out: dict[str, list[float]] = {}
    for m in doc["measurements"]:
        out.setdefault(m["workload"], []).append(float(m["value"]))
    return {w: sum(v) / len(v) for w, v in out.items()}


def test_study_on_capped_disks_shows_predicted_beside_measured(
    vs: ModuleType, tmp_path: Path
) -> None:
    from tests.test_report_html import CHROMIUM, _open

    db = tmp_path / "r.db"
    with vs.capped_env(3, db) as env:
        vs.throttle(env, CAP * MiB, 0)
        disk = _bench_one_disk(env.loops[2], env.work / "mnt", db)
        for w in ("seq-write", "seq-read"):  # the single disk measures its cap
            assert CAP * 0.9 <= disk[w] <= CAP * 1.1, (w, disk)
        study = tmp_path / "stripe.toml"
        args = vs.parse_args(["--size", "96M", "--runtime", "5"])
        study.write_text(vs.study_text("stripe:2", "stripe:2", "stream", args))
        p = poolbench("run", str(study), "--disks", ",".join(env.loops[:2]),
                      "--disk-speed-from", "latest", "--db", str(db),
                      env={"COLUMNS": "250"})  # fmt: skip
        assert p.returncode == 0, p.stderr[-3000:]
    measured = _study_means(db)
    page = tmp_path / "r.html"
    rep = poolbench("report", "latest", "--disk-speed-from", "1", "--html", str(page),
                    "--db", str(db), env={"COLUMNS": "250"})  # fmt: skip
    assert rep.returncode == 0, rep.stderr
    dom = _open(page, tmp_path)[0] if CHROMIUM else page.read_text()
    for w in ("seq-write", "seq-read"):
        predicted = 2 * disk[w]  # a stripe of two: the sum of its members
        assert abs(predicted - 2 * CAP) <= 0.1 * 2 * CAP
        ratio = measured[w] / predicted
        assert abs(ratio - 1) <= STREAM_TOL, (w, measured[w], predicted)
        print(
            f"{w}: disk {disk[w]:.1f}, predicted {predicted:.1f}, measured {measured[w]:.1f} MiB/s"
        )
        for out in (p.stdout, rep.stdout):
            row = [ln for ln in out.splitlines() if f" {w} " in ln and "validated" in ln]
            assert len(row) == 1, out[-3000:]
            assert f" {predicted:.1f} " in row[0] and f" {ratio:.2f} " in row[0], row[0]
        assert f'<td class="num ratio">{ratio:.2f}</td>' in dom
    assert 'id="predicted-table"' in dom and "bench run 1 (seq-read, seq-write" in dom
