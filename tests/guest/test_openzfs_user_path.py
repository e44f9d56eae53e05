"""The whole user path on OpenZFS 2.3 (guest tier), exactly as a user on an OpenZFS host takes
it: the wheel (built from the sources alone, not the checkout) installed into a fresh
virtualenv with no index, then from an empty directory `poolbench doctor`, `disks`, `study
parity --disks /dev/vdb,...` on four whole disks through the safety layer, `report --json`,
`export --json` and `cleanup`. doctor, disks, report and export run with no checkout on disk
(an empty tmpfs over the test's tree and the share it came from, in the command's own mount
namespace); the study and cleanup, which mount, run beside the checkout, from the
virtualenv all the same. While the study runs, every benchmark pool is watched: none
may use the system's cache file (`zpool get cachefile` is the default "-", or
/etc/zfs/zpool.cache lists it), from which it would come back at boot.

What must hold is what the layout gives, in bytes: each pool's usable space as the report
shows it equals the planner's whole-disk rule for raidz1 and raidz2 of four 2 GiB disks to
the byte, each survives its parity in failures, and the member disks wrote what raidz1 and
raidz2 of 4 must write for 128K records at ashift 12 (1.375 and 2.0625 times the data). The
speeds are printed, not asserted: under software emulation the guest's disks share one host
disk and its vCPUs compute parity, so no speed ratio between the two is a property of the
layouts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tests.wheelkit import (
    CHECKOUTS,
    ROOT,
    Installed,
    build_wheel,
    install,
    installed_package_dir,
    run,
    without_checkout,
)

from poolbench import capabilities
from poolbench.planner.capacity import plan_pool
from poolbench.planner.layout import parse_layout
from poolbench.planner.rules import rules_for_reported

from .studykit import (
    SHORTFALL,
    blank,
    check_figures,
    disk_bytes,
    leftovers,
    raidz_write_cost,
    scratch_disks,
)

pytestmark = pytest.mark.openzfs

SYSTEM_CACHE = Path("/etc/zfs/zpool.cache")
ZFS_FEATURES = [c.id for c in capabilities.CAPABILITIES if c.group == capabilities.ZFS]


class CacheWatch:
    """Samples, once a second while a study runs, each benchmark pool's `cachefile` property
    and whether the system's cache file names it."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}  # pool -> the cachefile values read
        self.in_system_cache: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CacheWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(
                ["zpool", "get", "-H", "-o", "name,value", "cachefile"],
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
            for line in out.splitlines():
                name, _, value = line.partition("\t")
                if name.startswith("pb"):
                    self.seen.setdefault(name, set()).add(value)
            if SYSTEM_CACHE.exists():
                data = SYSTEM_CACHE.read_bytes()
                self.in_system_cache |= {n for n in self.seen if n.encode() in data}
            self._stop.wait(1.0)


def _doctor(inst: Installed) -> None:
    p = inst.poolbench("doctor", "--json", hide_checkout=True)
    doc = json.loads(p.stdout)
    assert doc["core_ok"] and doc["core_missing"] == []
    zfs = doc["zfs"]
    assert zfs["in_use"] == "openzfs" and zfs["answers"] and zfs["openzfs_installed"]
    assert re.match(r"zfs-2\.3\.\d", zfs["version"]), zfs
    assert any(t.startswith("the zfs kernel module is loaded") for t in zfs["openzfs_traces"])
    assert any(t.startswith("dpkg has zfsutils-linux 2.3.") for t in zfs["openzfs_traces"])
    caps = {c["id"]: c for c in doc["capabilities"]}
    missing = [i for i in ZFS_FEATURES if not caps[i]["found"]]
    assert missing == [], [caps[i] for i in missing]
    assert caps["fio"]["found"] and caps["root"]["found"] and caps["md"]["found"]
    # on a host with OpenZFS nothing suggests zfs-fuse, nor a command that could remove one
    adds = [c["add"] for c in doc["capabilities"] if c["add"]]
    assert not [a for a in adds if "zfs-fuse" in a or "remove" in a.replace("--no-remove", "")]
    text = inst.poolbench("doctor", hide_checkout=True).stdout
    assert f"ZFS in use: openzfs ({zfs['version']}); OpenZFS is installed or loaded here" in text
    assert "ok      dRAID [draid]" in text and "ok      RAIDZ expansion [raidz-expansion]" in text


def _disks(inst: Installed, disks: list[str]) -> None:
    doc = json.loads(inst.poolbench("disks", "--json", hide_checkout=True).stdout)
    by_path = {d["path"]: d for d in doc["devices"]}
    for d in disks:
        assert by_path[d]["status"] == "free", by_path[d]
    root = by_path["/dev/vda"]
    assert root["status"] != "free"
    assert any(r["kind"] == "mounted" and not r["overridable"] for r in root["reasons"]), root


def _report(inst: Installed, db: Path, disks: list[str], version: str) -> None:
    doc = json.loads(
        inst.poolbench("report", "latest", "--json", "--db", str(db), hide_checkout=True).stdout
    )
    assert doc["run"]["status"] == "finished"
    size = disk_bytes(disks[0])
    rankings = {r["workload"]: r for r in doc["verdict"]["rankings"]}
    assert set(rankings) == {"seq-write", "seq-read"}
    for rk in rankings.values():
        assert {s["config"] for s in rk["ranked"]} == {
            f"backend=zfs layout=raidz{p}:4 ashift=12" for p in (1, 2)
        }
        for s in rk["ranked"]:
            p = int(re.search(r"raidz(\d)", s["config"]).group(1))  # type: ignore[union-attr]
            plan = plan_pool(
                parse_layout(f"raidz{p}:4", (size,) * 4),
                12,
                rules_for_reported(version),
                whole_disk=True,
            )
            assert (s["usable_bytes"], s["usable_source"]) == (plan.usable_bytes, "pool"), s
            assert s["failures_survived"] == p
            print(f"{rk['workload']} {s['config']}: {s['figure_text']} {s['vs_best_text']}")


def _figures(inst: Installed, db: Path, disks: list[str]) -> str:
    """Every stored figure verified at the disks; returns the ZFS version the pools had."""
    doc = json.loads(
        inst.poolbench("export", "latest", "--json", "--db", str(db), hide_checkout=True).stdout
    )
    rows: list[dict[str, Any]] = doc["measurements"] if isinstance(doc, dict) else doc
    assert len(rows) == 2 * 2 * 2  # configurations × replicates × (seq-write, seq-read)
    check_figures(rows)
    for r in rows:
        pool = r["pool"]
        assert pool["dialect"] == "openzfs" and pool["zfs_version"].startswith("zfs-2.3.")
        assert sorted(pool["leaves"]) == sorted(f"{d}1" for d in disks)  # partitioned whole
        if r["workload"] == "seq-write":
            p = int(re.search(r"raidz(\d)", r["config"]).group(1))  # type: ignore[union-attr]
            cost = raidz_write_cost(4, p)
            ratio = r["guards"]["device"]["ratio_to_app"]
            assert SHORTFALL * cost <= ratio <= 1.2 * cost, (r["config"], cost, ratio)
            print(
                f"{r['config']} #{r['replicate']}: the disks wrote {ratio:.3f} x the data "
                f"(raidz cost {cost:.4f})"
            )
    return str(rows[0]["pool"]["zfs_version"])


def test_a_user_installs_the_wheel_and_measures_raidz1_against_raidz2(tmp_path: Path) -> None:
    disks = scratch_disks(4)
    blank(disks)
    started = time.monotonic()
    wheel = build_wheel(tmp_path)
    built = time.monotonic()
    inst = install(wheel, tmp_path)
    pkg = installed_package_dir(inst)
    assert pkg.is_relative_to(inst.venv) and not pkg.is_relative_to(ROOT)
    assert set(CHECKOUTS) == {ROOT, Path("/mnt/repo")}  # the tree and its share, both hidden
    hidden = run(without_checkout(["ls", "-A", *map(str, CHECKOUTS)]), timeout=60).stdout
    assert [line for line in hidden.splitlines() if line and not line.endswith(":")] == []
    print(f"wheel built in {built - started:.0f} s, installed in {time.monotonic() - built:.0f} s")
    _doctor(inst)
    _disks(inst, disks)
    db, scratch = tmp_path / "results.db", tmp_path / "scratch"
    t0 = time.monotonic()
    with CacheWatch() as watch:
        p = inst.poolbench(
            "study",
            "parity",
            "--disks",
            ",".join(disks),
            "--size",
            "32M",
            "--replicates",
            "2",
            "--max-replicates",
            "2",
            "--seed",
            "1",
            "--db",
            str(db),
            "--scratch-dir",
            str(scratch),
            timeout=2400,
        )
    print(f"study parity: {time.monotonic() - t0:.0f} s\n{p.stdout[-2500:]}")
    out = Path(os.environ.get("OZVM_OUT", tmp_path))
    (out / "user-path-study.log").write_text(p.stdout + "\n--- stderr ---\n" + p.stderr)
    assert leftovers(scratch) == []
    _report(inst, db, disks, _figures(inst, db, disks))
    assert inst.poolbench("cleanup", "--db", str(db)).stdout.strip() == "nothing to clean up"
    assert leftovers(scratch) == []
    # benchmark pools never come back at boot: none was in the system's cache file
    assert len(watch.seen) >= 2, watch.seen  # the sampler saw the pools (one per trial)
    system = {n: v for n, v in watch.seen.items() if v & {"-", "", str(SYSTEM_CACHE)}}
    assert system == {} and watch.in_system_cache == set(), (watch.seen, watch.in_system_cache)
