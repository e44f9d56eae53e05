"""Order and seeds on real pools (issue 12): a zfs-fuse study's stored trial order shows its
extra replicates interleaved; a `bench --seed` run's fio offsets replay."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

from tests.conftest import poolbench

from poolbench.stats import ReplicatePolicy
from poolbench.stats.rounds import round_order
from poolbench.study import matrix
from poolbench.study.model import parse

SEED = 5
# A ci_target of 0.1% cannot be met with 2 replicates: Stein plans the cap (4) for both
# configurations, so rounds 3 and 4 are extra replicates.
STUDY = f"""
name = "order"
seed = {SEED}
replicates = 2
max_replicates = 4
ci_target = 0.1

[disks]
count = 3
size = "256M"
source = "loop"

[factors]
backend = ["zfs"]
layout = ["raidz1", "mirror:2"]
ashift = [12]

[workloads]
names = ["seq-write"]
size = "16M"
"""


def test_study_extra_replicates_run_interleaved(zfs_fuse: None, tmp_path: Path) -> None:
    study = tmp_path / "order.toml"
    study.write_text(STUDY)
    db = tmp_path / "r.db"
    r = poolbench("run", str(study), "--db", str(db), "--scratch-dir", str(tmp_path / "s"))
    assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    rows = con.execute(
        "SELECT config, replicate, value, created_at FROM measurements ORDER BY id"
    ).fetchall()
    keys = [c.key for c in matrix.configs(parse(STUDY, "order"))]
    order = [row[0] for row in rows]
    assert [row[3] for row in rows] == sorted(row[3] for row in rows)  # stored as measured
    rule = ReplicatePolicy(0.001, 2, 4)
    for k in keys:
        # Never fewer than Stein's total. Two replicates that took the same milliseconds (a
        # 16M write on zfs-fuse takes about 0.11 s) have no spread, so Stein plans none
        # for them; the comparison with the other configuration may still add one.
        first = [row[2] for row in rows if row[0] == k][:2]
        assert order.count(k) >= rule.planned(first), (k, first, order)
    assert max(order.count(k) for k in keys) == 4  # extras happened, up to the cap
    # Never the same configuration twice in a row, stage one and extra rounds alike.
    assert all(a != b for a, b in zip(order, order[1:], strict=False)), order
    # Each extra round is the seeded shuffle of the configurations it owes a replicate,
    # rotated after the previous round's last.
    last = order[3]
    for rep in (2, 3):
        got = [row[0] for row in rows if row[1] == rep]
        owed = [k for k in keys if order.count(k) > rep]
        assert got == round_order(owed, SEED, rep, last)
        last = got[-1]


def _offsets(job: str, where: Path, tag: str) -> list[int]:
    """Run a stored job again with fio's write_iolog: the offsets it writes, in order."""
    log = where / f"{tag}.iolog"
    text = re.sub(r"(?m)^directory=.*$", f"directory={where}", job)
    text = text.replace("[global]\n", f"[global]\nwrite_iolog={log}\nnumber_ios=300\n", 1)
    path = where / f"{tag}.fio"
    path.write_text(text)
    subprocess.run(["fio", "--output-format=json", str(path)], check=True, capture_output=True)
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()  # iolog v3: "<ms> <file> write <offset> <length>"
        if len(parts) >= 4 and parts[-3] == "write":
            out.append(int(parts[-2]))
    return out[:300]  # the job is time based: compare the first 300 offsets


def test_bench_seed_replays_fio_offsets(make_loop_fs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    fs = make_loop_fs("256M").mountpoint
    db = tmp_path / "r.db"
    for seed in ("7", "7", "8"):
        r = poolbench(
            "bench", str(fs), "--workloads", "rand-write-4k", "--size", "16M", "--runtime", "1",
            "--min-runs", "2", "--max-runs", "2", "--seed", seed, "--json", "--db", str(db),
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
    con = sqlite3.connect(db)
    jobs: dict[int, str] = {}
    for run_id, guards, job in con.execute(
        "SELECT run_id, guards, job_file FROM measurements WHERE replicate = 0 ORDER BY run_id"
    ):
        jobs[run_id] = job
        assert f"randseed={json.loads(guards)['fio_randseed']}\n" in job  # recorded, used
    a, b, c = (jobs[k] for k in sorted(jobs))
    work = fs / "replay"
    work.mkdir()
    off_a, off_b, off_c = (_offsets(j, work, t) for j, t in ((a, "a"), (b, "b"), (c, "c")))
    assert len(off_a) == len(off_b) == 300
    assert off_a == off_b  # the same seed: the same offsets
    assert off_a != off_c  # another seed: others
    assert len(set(off_a)) > 100  # random, not sequential by accident
