"""md's initial resync is reported as a figure of its own, with whether measurements ran
during it (the description the md backend stores with every measurement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.report.data import load_run
from poolbench.report.header import lines
from poolbench.store.db import Store


def _run(tmp_path: Path, pools: dict[str, dict[str, Any]]) -> list[tuple[str, str]]:
    store = Store(tmp_path / "r.db")
    run = store.start_run("study", "s", ["poolbench"], {"study": {"name": "s"}})
    for config, pool in pools.items():
        store.add_measurement(
            run,
            Measurement(
                config,
                "seq-write",
                0,
                50.0,
                "MiB/s",
                1,
                1,
                1.0,
                None,
                None,
                [],
                Findings(pool=pool),
                {},
                "",
            ),  # fmt: skip
        )
    store.finish_run(run, "finished")
    return lines(load_run(store, str(run)), None)


def test_resync_seconds_size_and_rate_per_configuration(tmp_path: Path) -> None:
    waited = {
        "mode": "waited (mdadm --wait) before any measurement",
        "seconds": 12.34,
        "member_bytes": 1 << 30,
        "mib_per_s": 83.0,
        "measured_during_resync": False,
    }
    clean = {
        "mode": "skipped (--assume-clean: parity/mirrors not computed until written)",
        "seconds": None,
        "member_bytes": 1 << 30,
        "measured_during_resync": False,
    }
    got = dict(
        _run(
            tmp_path,
            {
                "backend=md layout=raid6 fs=ext3": {"initial_resync": waited},
                "backend=md layout=raid5 fs=xfs": {"initial_resync": clean},
                "backend=zfs layout=raidz2 fs=zfs": {"usable_bytes": 1},
            },
        )
    )
    text = got["md initial resync"]
    assert "backend=md layout=raid6 fs=ext3: 12.3 s for 1G per member (83.0 MiB/s)" in text
    assert "backend=md layout=raid5 fs=xfs: skipped (--assume-clean" in text
    assert text.count("no measurement ran during it") == 2
    assert "zfs" not in text  # ZFS needs no initial resync: nothing to report


def test_no_md_no_resync_line(tmp_path: Path) -> None:
    assert "md initial resync" not in dict(_run(tmp_path, {"backend=zfs": {"usable_bytes": 1}}))


def test_the_data_line_says_untar_writes_its_own_files(tmp_path: Path) -> None:
    """--compressibility describes fio's buffers; an untar workload writes the source tree's
    own files (text that compresses 2-4x), and the header must not let one stand for both."""
    store = Store(tmp_path / "r.db")
    meta = {"study": {"name": "s", "workloads": {"compressibility": 0}}}
    run = store.start_run("study", "s", ["poolbench"], meta)
    for name, kind in (("seq-write", "fio"), ("untar", "untar")):
        store.add_measurement(run, Measurement(
            "backend=zfs layout=raidz1", name, 0, 50.0, "MiB/s", 1, 1, 1.0, None, None, [],
            Findings(pool={"compressratio": "2.10x"}), {"kind": kind}, "",
        ))  # fmt: skip
    store.finish_run(run, "finished")
    data = dict(lines(load_run(store, str(run)), None))["data"]
    assert data.startswith("0% compressible, fresh random buffers per write (never zeros) "
                           "(fio's data; untar writes the source tree's files")  # fmt: skip
    assert "achieved compressratio 2.10x" in data
