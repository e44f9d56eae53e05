"""A block device as the measured target (a zvol on OpenZFS): what a configuration may ask
for, the fio jobs on the device, and a real session on a loop device this test makes, whose
bytes the device window must count exactly (one copy: a plain block device).

zfs-fuse has no zvols, so zvol studies run in the guest tier (tests/guest/test_openzfs_zvol.py);
here the same session code runs for real on a raw loop device, and every zvol request on
zfs-fuse is refused before anything exists."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from tests.conftest import poolbench

from poolbench.backends import zvol
from poolbench.engine.measure_checks import block_device_refusal
from poolbench.engine.session import Session
from poolbench.engine.subject import BlockDevice, Options, Subject
from poolbench.engine.trial import spec_for
from poolbench.errors import EXIT_UNSUPPORTED, Unsupported, UsageError
from poolbench.guards import amplification
from poolbench.guards.devices import MountInfo, Target
from poolbench.store.db import Store
from poolbench.study import matrix
from poolbench.system.runner import LocalRunner
from poolbench.workloads import fiojob
from poolbench.workloads.library import get, parse_list

pytestmark = pytest.mark.untimed

MiB = 1 << 20


def test_fio_jobs_on_a_block_device_name_it_and_use_o_direct() -> None:
    params = fiojob.JobParams("/mnt/pool/ws", 64 * MiB, device="/dev/zvol/p/pbvol")
    job = fiojob.render(get("rand-write-4k"), params)
    lines = job.splitlines()
    assert "filename=/dev/zvol/p/pbvol" in lines and "direct=1" in lines
    assert not any(ln.startswith("directory=") for ln in lines)
    assert f"size={64 * MiB}" in lines
    prep = fiojob.render_prepare(get("rand-read-4k"), params)
    assert prep is not None and "filename=/dev/zvol/p/pbvol" in prep and "direct=1" in prep
    # files as before
    files = fiojob.render(get("rand-write-4k"), fiojob.JobParams("/mnt/pool/ws", 64 * MiB))
    assert "directory=/mnt/pool/ws" in files and "direct=1" not in files.splitlines()


def test_workloads_that_need_files_are_refused_on_a_block_device() -> None:
    ok = parse_list("seq-read,seq-write,rand-read-4k,rand-write-16k,rand-mix70-16k,sync-write-4k")
    assert block_device_refusal(ok) is None
    for name in ("meta-create-seq", "smallfile-write-8k", "streams-read-4", "untar",
                 "capacity", "iozone-reread-128k"):  # fmt: skip
        refused = block_device_refusal([*ok, get(name)])
        assert refused is not None and refused[0].startswith(f"{name} cannot run"), name


def test_what_a_zvol_configuration_may_ask() -> None:
    zvol.validate({"target": "zvol", "volblocksize": "8K"}, {}, fuse=False, version="zfs-2.3.2")
    zvol.validate({"target": "dataset"}, {"recordsize": "1M"}, fuse=False, version="2.3")
    cases = [
        ({"target": "lun"}, {}, False, "not a target"),
        ({"volblocksize": "8K"}, {}, False, "volblocksize is a zvol's block size"),
        ({"target": "dataset", "volblocksize": "8K"}, {}, False, "add target = zvol"),
        ({"target": "zvol", "volblocksize": "3K"}, {}, False, "power of two"),
        ({"target": "zvol", "volblocksize": "256K"}, {}, False, "from 512 to 128K"),
        # without a volblocksize the zvol takes the recordsize level, checked the same way
        ({"target": "zvol"}, {"recordsize": "256K"}, False, "recordsize (the zvol's block)"),
    ]
    for volume, fs, fuse, said in cases:
        with pytest.raises(UsageError) as exc:
            zvol.validate(volume, fs, fuse, "zfs-2.1.5")
        assert said.lower() in exc.value.paragraph().lower(), (volume, exc.value.paragraph())
    with pytest.raises(Unsupported, match="has no zvols"):
        zvol.validate({"target": "zvol"}, {}, fuse=True, version="zfs-fuse 0.7.0")
    # large blocks (OpenZFS 2.2+ made a 1M volume in the guest)
    zvol.validate({"target": "zvol", "volblocksize": "1M"}, {}, False, "2.3", zvol.MAX_BLOCK_LARGE)


def test_the_volume_holds_the_working_set_and_one_more_block() -> None:
    assert zvol.volsize_for(96 * MiB, 8192) == 97 * MiB
    assert zvol.volsize_for(96 * MiB + 5, 65536) == 98 * MiB
    assert zvol.volsize_for(10 * MiB, 4 * MiB) == 16 * MiB  # whole 4M blocks
    assert zvol.block_asked({"target": "zvol"}, {"recordsize": "16K"}) == "16K"
    assert zvol.block_asked({"target": "zvol", "volblocksize": "8K"}, {"recordsize": "16K"}) == "8K"
    assert zvol.block_asked({"target": "zvol"}, {}) is None


def test_target_and_volblocksize_reach_the_zfs_spec_and_nothing_else() -> None:
    cfg = matrix.Config((("backend", "zfs"), ("layout", "raidz1:4"), ("target", "zvol"),
                         ("volblocksize", "8K")))  # fmt: skip
    spec = spec_for(cfg, ["/dev/a", "/dev/b", "/dev/c", "/dev/d"], "pbx", Path("/mnt"))
    assert dict(spec.volume) == {"target": "zvol", "volblocksize": "8K"}
    assert "volblocksize" not in spec.fs_options and "target" not in spec.fs_options
    btrfs = matrix.Config((("backend", "btrfs"), ("layout", "raid1"), ("target", "zvol")))
    with pytest.raises(UsageError, match="no use for target"):
        spec_for(btrfs, ["/dev/a", "/dev/b"], "pbx", Path("/mnt"))


@pytest.mark.usefixtures("zfs_fuse")
def test_zvol_studies_are_refused_on_zfs_fuse_before_anything_exists(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    p = poolbench("study", "volblocksize", "--db", str(db), "--scratch-dir", str(tmp_path / "s"))
    assert p.returncode == EXIT_UNSUPPORTED, p.stdout + p.stderr
    assert "has no ZFS volumes" in p.stderr and "Traceback" not in p.stderr
    p = poolbench("study", "geometry", "--targets", "dataset,zvol", "--dry-run")
    assert p.returncode == EXIT_UNSUPPORTED and "no zvols" in p.stderr, p.stderr
    # a study file asking zfs-fuse for a zvol: refused at preflight, nothing made
    study = tmp_path / "z.toml"
    study.write_text('name = "z"\n[disks]\ncount = 3\nsize = "256M"\n[factors]\n'
                     'layout = ["raidz1:3"]\ntarget = ["zvol"]\n[workloads]\n'
                     'names = ["rand-read-4k"]\nsize = "16M"\n')  # fmt: skip
    scratch = tmp_path / "scratch"
    p = poolbench("run", str(study), "--db", str(db), "--scratch-dir", str(scratch))
    assert p.returncode == EXIT_UNSUPPORTED and "has no zvols" in p.stderr, p.stdout + p.stderr
    assert not scratch.exists() or not any(scratch.iterdir())
    # and the default geometry on zfs-fuse measures datasets alone
    p = poolbench("study", "geometry", "--print-toml")
    assert p.returncode == 0 and 'target = [\n    "dataset",\n]' in p.stdout, p.stdout


def test_a_study_refuses_a_zvol_with_file_workloads_before_building(tmp_path: Path) -> None:
    from poolbench.engine import pool_ops

    cfg = matrix.Config((("backend", "zfs"), ("layout", "raidz1:3"), ("target", "zvol")))
    spec = spec_for(cfg, ["/dev/a", "/dev/b", "/dev/c"], "pbx", Path("/mnt"))
    with pytest.raises(UsageError, match="meta-stat-seq cannot run on a block device"):
        pool_ops.check_volume(spec, parse_list("rand-read-4k,meta-stat-seq"), "16M")
    with pytest.raises(UsageError, match="needs \\[workloads\\] size"):
        pool_ops.check_volume(spec, parse_list("rand-read-4k"), None)
    pool_ops.check_volume(spec, parse_list("rand-read-4k"), "16M")


@pytest.mark.slow  # fio on a block device, its bytes counted (16 s)
@pytest.mark.usefixtures("machine")  # a loop device made here
def test_a_session_on_a_block_device_counts_its_bytes_exactly(tmp_path: Path) -> None:
    """fio on a raw loop device (made here): the jobs name the device, writes are counted
    once at it, and the cold read, after the device's page cache drop, reads every byte
    from it."""
    img = tmp_path / "dev.img"
    subprocess.run(["truncate", "-s", "80M", str(img)], check=True)
    dev = subprocess.run(["losetup", "--find", "--show", str(img)], check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    work = tmp_path / "work"
    work.mkdir()
    store = Store(tmp_path / "r.db")
    try:
        name = Path(dev).name
        subject = Subject(
            work, "loop", devices=Target(str(work), MountInfo(str(work), "ext4", dev, ""),
                                         devices=[name], how="the test's loop device"),
            write_model=(amplification.single_device(dev), ""),
            block_device=BlockDevice(Path(dev), 80 * MiB, 4096),
        )  # fmt: skip
        names = "seq-write,rand-read-4k,seq-read,rand-read-16k,rand-write-4k"
        options = Options(parse_list(names), size=64 * MiB, runtime_s=2, seed=3)
        run_id = store.start_run("bench", "loop", ["test"], {})
        runner = LocalRunner()
        session = Session(runner, store, run_id, subject, options)
        session.preflight()
        session.run_once(0)
        rows = {r["workload"]: r for r in store.measurements(run_id)}
        prepares = [c.argv for c in runner.calls if any("prepare-" in a for a in c.argv)]
    finally:
        subprocess.run(["losetup", "--detach", dev], check=False)
    assert set(rows) == {"seq-write", "rand-read-4k", "seq-read", "rand-read-16k",
                         "rand-write-4k"}  # fmt: skip
    # The data is laid out once: after seq-write overwrote the device, for the first read;
    # the reads after it and the in-place write find it as laid out (a read changes nothing).
    assert len(prepares) == 1 and "prepare-rand-read-4k.fio" in prepares[0][-1], prepares
    for w, r in rows.items():
        job = r["job_file"].splitlines()
        assert f"filename={dev}" in job and "direct=1" in job, (w, job)
        guards = json.loads(r["guards"])
        dev_said = guards["device"]
        if w.endswith("read") or "-read-" in w:
            # every byte fio read came from the device (O_DIRECT, nothing cached)
            assert dev_said["read_bytes"] >= r["app_bytes"] > 0, (w, dev_said)
        else:
            # one copy of each byte written reaches the device, and nothing much else
            assert r["app_bytes"] <= dev_said["write_bytes"] <= 1.02 * r["app_bytes"] + MiB, (
                w, dev_said, r["app_bytes"])  # fmt: skip
    # One pass, or (shorter than the minimum window) the working set written `loops` times.
    sw = rows["seq-write"]
    repeated = json.loads(sw["guards"])["window"].get("repeated")
    loops = repeated["loops"] if repeated else 1
    assert sw["app_bytes"] == loops * 64 * MiB, (repeated, sw["app_bytes"])
    # the workspace (job files) is gone
    assert list(work.iterdir()) == []
    assert sqlite3.connect(tmp_path / "r.db").execute("SELECT COUNT(*) FROM measurements"
                                                      ).fetchone()[0] == 5  # fmt: skip


def _zvol_row(config: str, workload: str, rep: int, value: float, ref: int, logical: int,
              block: int) -> dict[str, object]:  # fmt: skip
    zv = {"volblocksize": block, "volsize": 200 * MiB, "referenced": ref,
          "logicalreferenced": logical}  # fmt: skip
    return {"config": config, "workload": workload, "replicate": rep, "value": value,
            "guards": {"pool": {"zvol": zv}}, "clat": None}  # fmt: skip


def test_volblocksize_notes_put_each_zvols_charge_beside_the_planners() -> None:
    from poolbench.store.facts import facts_from_records
    from poolbench.study.builtin import registry, volblocksize
    from poolbench.study.builtin.context import Context

    ctx = Context(4, "1G", dialect="openzfs")
    meta = {"study_text": registry.study_text("volblocksize", ctx)}
    key = "backend=zfs layout={} ashift=12 compression=off target=zvol volblocksize={}"
    data = 100 * MiB
    rows = [
        # raidz1 of 4, 8K: 4 sectors per block (2 data + 1 parity, padded) × 32/44 deflate
        _zvol_row(key.format("raidz1:4", "8K"), "rand-write-4k", r, 900.0 + r,
                  int(data * 1.4545 * 1.005), data, 8192)
        for r in (0, 1)
    ] + [
        # a mirror charged 10% more than one copy: not what the planner says
        _zvol_row(key.format("mirror:2+mirror:2", "64K"), "rand-write-4k", r, 1500.0 + r,
                  int(data * 1.10), data, 65536)
        for r in (0, 1)
    ]  # fmt: skip
    lines = volblocksize.notes(ctx, facts_from_records(meta, rows))
    text = "\n".join(lines)
    assert (
        "rand-write-4k: mirror:2+mirror:2 zvol 64K 1,500 IOPS > raidz1:4 zvol 8K 900 IOPS"
    ) in text
    assert (
        "  raidz1:4 zvol 8K: charged 1.46 bytes per byte written (referenced ÷ "
        "logicalreferenced, volblocksize 8K); planner 1.45 (as planned)"
    ) in lines
    assert "  mirror:2+mirror:2 zvol 64K: charged 1.10 bytes per byte written" in text
    assert "planner 1.00 (+10.0% from the planner)" in text
    assert "  raidz1:4 zvol 8K: each 8K block writes 16K raw (50% efficient)" in lines
    assert (
        "mirror:2+mirror:2 zvol 64K: rand-write-4k write less than one 64K block, so each "
        "write rewrites a whole block"
    ) in text
    # under 1 MiB written there is no per-byte figure
    few = [_zvol_row(key.format("raidz1:4", "16K"), "rand-read-4k", 0, 10.0, 4096, 8192, 16384)]
    assert "not recorded" in "\n".join(volblocksize.notes(ctx, facts_from_records(meta, few)))
