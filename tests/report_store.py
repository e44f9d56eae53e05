"""A fixed result store for the report tests: runs and measurements inserted through Store.

Run 1  study "parity": layout raidz1/raidz2 × ashift 9/12, seq-write and seq-read, one cell
       with 4 replicates, one unverified cell, a warning containing rich markup.
Run 2  study "curves" with hostile names everywhere: layout (one level is an SVG payload) ×
       recordsize 128K/1M × fill 10/50/90, iozone-write at 64K and 1M, usable space.
Run 3  run 1 repeated after a tuning (other kernel, other values): comparable with run 1.
Run 4  like run 1 but 50% compressible data and another seq-write definition: incomparable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.store.db import Store
from poolbench.system.runner import CallRecord

HOSTILE = "<img src=x onerror=document.title='pwned'>"
HOSTILE_LEVEL = "<svg/onload=document.title='pwned2'>"  # no spaces: a valid factor level
GiB = 1024**3
STARTED = 1735812000.0  # 2025-01-02 10:00 UTC

SEQ_WRITE = {
    "name": "seq-write",
    "family": "streaming",
    "direction": "write",
    "unit": "MiB/s",
    "fio": {"rw": "write", "bs": "1048576", "ioengine": "psync"},
}
SEQ_READ = {
    "name": "seq-read",
    "family": "streaming",
    "direction": "read",
    "unit": "MiB/s",
    "fio": {"rw": "read", "bs": "1048576", "ioengine": "psync"},
}


def _machine(kernel: str = "Linux 6.1.0-test") -> dict[str, Any]:
    return {
        "poolbench_version": "0.1.0",
        "python": "3.11.2",
        "kernel": kernel,
        "hostname": "testhost",
        "cpus": 4,
        "ram_bytes": 8 * GiB,
        "arc_max_bytes": None,
    }


def _study(
    name: str, factors: dict[str, list[Any]], workloads: list[str], compressibility: int = 0
) -> dict[str, Any]:
    return {
        "name": name,
        "description": "",
        "seed": 42,
        "replicates": 3,
        "max_replicates": 6,
        "ci_target": 5.0,
        "disks": {
            "count": 4,
            "size": "512M",
            "source": "loop",
            "devices": [],
            "vdev_source": "whole",
            "slice_size": None,
        },
        "factors": factors,
        "workloads": {
            "names": workloads,
            "size": "256M",
            "runtime": 10,
            "compressibility": compressibility,
            "iodepth": 1,
            "jobs": 1,
            "metadata_files": 2000,
        },
    }


def _guards(compressibility: int, pool: dict[str, Any], cold: bool) -> dict[str, Any]:
    g: dict[str, Any] = {
        "pool": pool,
        "data": {
            "compressibility_percent": compressibility,
            "pattern": "fio refill_buffers (fresh random data per write), never zeros",
        },
        "fio": {"version": "fio-3.33", "within_run_bw_dev_bytes_s": 1.0, "lat_mean_ns": 1.0},
    }
    if cold:
        g["cache"] = {"method": "zpool export/import", "verified": True}
    return g


def _add(
    store: Store,
    run_id: int,
    config: str,
    wdef: dict[str, Any],
    values: list[float],
    *,
    compressibility: int = 0,
    pool: dict[str, Any] | None = None,
    device: bool = True,
    warnings: dict[int, list[str]] | None = None,
) -> None:
    for rep, v in enumerate(values):
        store.add_measurement(
            run_id,
            Measurement(
                config=config,
                workload=wdef["name"],
                replicate=rep,
                value=v,
                unit=wdef["unit"],
                app_bytes=256 * 1024**2,
                ops=256,
                seconds=256 / v,
                device_bytes=int(256 * 1024**2 * 1.02) if device else None,
                device_mib_s=round(v * 1.02, 3) if device else None,
                warnings=(warnings or {}).get(rep, []),
                findings=Findings.from_json(
                    _guards(compressibility, pool or {}, wdef["direction"] == "read")
                ),
                workload_def=wdef,
                job_file=f"[{wdef['name']}]\nrw={wdef['fio']['rw']}\n",
            ),
        )


def _fix_times(store: Store, run_id: int) -> None:
    store.conn.execute(
        "UPDATE runs SET started_at=?, finished_at=? WHERE id=?",
        (STARTED + run_id * 3600, STARTED + run_id * 3600 + 600, run_id),
    )
    store.conn.execute(
        "UPDATE measurements SET created_at=? WHERE run_id=?",
        (STARTED + run_id * 3600 + 60, run_id),
    )
    store.conn.execute(
        "UPDATE commands SET started_at=? WHERE run_id=?", (STARTED + run_id * 3600 + 1, run_id)
    )


PARITY_TEXT = """name = "parity"
seed = 42
[disks]
count = 4
size = "512M"
[factors]
layout = ["raidz1", "raidz2"]
ashift = [9, 12]
[workloads]
names = ["seq-write", "seq-read"]
"""


def _parity(
    store: Store,
    *,
    kernel: str,
    write: dict[str, list[float]],
    read: dict[str, list[float]],
    compressibility: int = 0,
    write_def: dict[str, Any] | None = None,
) -> int:
    study = _study(
        "parity",
        {"layout": ["raidz1", "raidz2"], "ashift": [9, 12]},
        ["seq-write", "seq-read"],
        compressibility,
    )
    meta = {
        "machine": _machine(kernel),
        "study": study,
        "study_text": PARITY_TEXT,
        "seed": 42,
        "backends": {"zfs": {"ok": True, "reason": "", "version": "0.7.0", "dialect": "zfs-fuse"}},
        "planned_trials": [],
    }
    run_id = store.start_run("study", "parity", ["poolbench", "run", "parity.toml"], meta)
    for cfg, values in write.items():
        layout = cfg.split()[1].split("=")[1]
        pool = {"usable_bytes": (3 if layout == "raidz1" else 2) * 480 * 1024**2}
        _add(
            store,
            run_id,
            cfg,
            write_def or SEQ_WRITE,
            values,
            compressibility=compressibility,
            pool=pool,
        )
    for cfg, values in read.items():
        warn = {}
        if cfg.endswith("raidz2 ashift=12"):
            warn = {
                1: [
                    "the cache drop before this cold read could not be verified "
                    "([red]not markup[/red])"
                ]
            }
        _add(
            store,
            run_id,
            cfg,
            SEQ_READ,
            values,
            compressibility=compressibility,
            device=not cfg.endswith("raidz1 ashift=9"),
            warnings=warn,
        )
    store.add_commands(
        run_id,
        [
            CallRecord(
                ("zpool", "create", "-o", "ashift=9", "pb1t0", "raidz1", "/dev/loop0"),
                STARTED,
                0.25,
                0,
            ),
            CallRecord(("fio", "--output-format=json", "seq-write.fio"), STARTED, 2.5, 0),
        ],
    )
    store.finish_run(run_id, "finished")
    _fix_times(store, run_id)
    return run_id


def K(layout: str, ashift: int) -> str:
    return f"backend=zfs layout={layout} ashift={ashift}"


RUN1_WRITE = {
    K("raidz1", 9): [300, 305, 295],
    K("raidz1", 12): [310, 312, 308],
    K("raidz2", 9): [210, 214, 206],
    K("raidz2", 12): [220, 221, 219, 220],
}
RUN1_READ = {
    K("raidz1", 9): [400, 420, 380],
    K("raidz1", 12): [410, 400, 420],
    K("raidz2", 9): [405, 395, 415],
    K("raidz2", 12): [390, 420, 400],
}


def _curves(store: Store) -> int:
    layouts = ["mirror", HOSTILE_LEVEL]
    factors = {"layout": layouts, "recordsize": ["128K", "1M"], "fill": ["10", "50", "90"]}
    wls = ["iozone-write-64k", "iozone-write-1m"]
    study = _study("curves", factors, wls)
    text = f'name = "curves"\n# {HOSTILE}\n[factors]\nlayout = ["mirror", "{HOSTILE_LEVEL}"]\n'
    meta = {
        "machine": _machine(),
        "study": study,
        "study_text": text,
        "seed": 7,
        "backends": {"zfs": {"ok": True, "version": "0.7.0", "dialect": "zfs-fuse"}},
        "devices": [
            {
                "name": "loop0",
                "size_bytes": 512 * 1024**2,
                "logical_sector": 512,
                "physical_sector": 4096,
                "rotational": False,
                "model": HOSTILE,
            }
        ],
    }
    run_id = store.start_run("study", HOSTILE, ["poolbench", "run", HOSTILE], meta)
    for li, layout in enumerate(layouts):
        for rs_i, rs in enumerate(["128K", "1M"]):
            for fill in ["10", "50", "90"]:
                cfg = f"backend=zfs layout={layout} recordsize={rs} fill={fill}"
                for bs, bsn in ((64 * 1024, "64k"), (1024**2, "1m")):
                    base = 200 + 60 * li + 30 * rs_i + (40 if bsn == "1m" else 0)
                    base *= 1 - int(fill) / 200
                    wdef = {
                        "name": f"iozone-write-{bsn}",
                        "family": "iozone",
                        "direction": "write",
                        "unit": "MiB/s",
                        "fio": {"rw": "write", "bs": str(bs), "ioengine": "psync"},
                    }
                    _add(
                        store,
                        run_id,
                        cfg,
                        wdef,
                        [base * f for f in (0.98, 1.0, 1.02)],
                        pool={"usable_bytes": (960 if layout == "mirror" else 1440) * 1024**2},
                        warnings={0: [f"hostile warning {HOSTILE}"]} if li == 1 else None,
                    )
    store.add_commands(run_id, [CallRecord(("zpool", "create", HOSTILE), STARTED, 0.1, 0)])
    store.finish_run(run_id, "finished")
    _fix_times(store, run_id)
    return run_id


def build(path: Path) -> Store:
    store = Store(path)
    _parity(store, kernel="Linux 6.1.0-test", write=RUN1_WRITE, read=RUN1_READ)
    _curves(store)
    _parity(
        store,
        kernel="Linux 6.12.0-tuned",
        write={
            K("raidz1", 9): [330, 335, 325],
            K("raidz1", 12): [312, 309, 311],
            K("raidz2", 9): [212, 209, 211],
            K("raidz2", 12): [240, 242, 238],
        },
        read={
            K("raidz1", 9): [402, 418, 399],
            K("raidz1", 12): [300, 305, 295],
            K("raidz2", 9): [405, 395, 415],
            K("raidz2", 12): [390, 420, 400],
        },
    )
    _parity(
        store,
        kernel="Linux 6.1.0-test",
        write=RUN1_WRITE,
        read=RUN1_READ,
        compressibility=50,
        write_def={**SEQ_WRITE, "fio": {**SEQ_WRITE["fio"], "bs": "131072"}},
    )
    return store
