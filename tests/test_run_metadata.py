"""Run metadata is one record (records/run_metadata.py), decoded once: the store stamps the
version it writes, an old store's unstamped row reads field by field, a wrong type reads as the
field's default, and the report's readers take the fields."""

from __future__ import annotations

import json
from pathlib import Path

from poolbench.records.run_metadata import METADATA_VERSION, RunMetadata
from poolbench.report import header
from poolbench.report.data import load_run
from poolbench.report.screened_disk import claimed_serials
from poolbench.store.db import Store

# A bench row as stores before the record held it: no version, every key a reader takes.
OLD = {
    "machine": {"hostname": "nas", "poolbench_version": "0.9", "kernel": "6.1.0",
                "ram_bytes": 8 * 2**30, "cpus": 4},
    "backends": {"zfs": {"version": "2.2.2", "dialect": "openzfs"}, "md": "not a dict"},
    "fio_version": "fio-3.33",
    "seed": 7,
    "devices": [{"name": "/dev/sdb", "model": "WD", "size_bytes": 2**40, "rotational": 1}, 3],
    "screen": "not screened (--no-screen)",
    "target": {"path": "/tank", "how": "given"},
    "claims": {"claims": [{"serial": "S1"}, {"serial": ""}, {"no": "serial"}]},
    "working_set": {"size_bytes": 2**30, "ram_bytes": 4 * 2**30},
    "options": {"compressibility": 50, "workloads": ["seqwrite", "randread"],
                "stop": {"target": 0.02, "min_runs": 4, "max_runs": 6}},
    "time_limit_scales": [1.0, 0.5, "x"],
    "study_text": "name = 'x'\n",
}  # fmt: skip


def test_an_old_row_reads_field_by_field() -> None:
    m = RunMetadata.decode(json.dumps(OLD))
    assert m.version == 0  # written before the record had one
    assert (m.machine.hostname, m.machine.ram_bytes, m.machine.cpus) == ("nas", 8 * 2**30, 4)
    assert m.machine.arc_max_bytes is None
    assert [b.text() for b in m.backends] == ["zfs 2.2.2 (openzfs)"]  # "md": not a record
    assert (m.fio_version, m.seed) == ("fio-3.33", 7)
    assert [(d.name, d.model, d.rotational) for d in m.devices] == [("/dev/sdb", "WD", True)]
    assert (m.target_path, m.target_how, m.not_screened) == ("/tank", "given", OLD["screen"])
    assert m.claimed_serials == ("S1",)
    assert (m.working_set_bytes, m.working_set_ram_bytes) == (2**30, 4 * 2**30)
    assert (m.compressibility, m.workload_order) == (50, ("seqwrite", "randread"))
    assert (m.stop.ci_target, m.stop.min_runs, m.stop.max_runs) == (0.02, 4, 6)  # StopRule's
    assert m.time_limit_scales == (1.0, 0.5)
    assert m.stored == OLD  # kept whole for the page's record and the export


def test_wrong_types_and_empty_columns_read_as_defaults() -> None:
    for stored in ("", "not json", "[]", "null", {"machine": [], "seed": True, "devices": {}}):
        m = RunMetadata.decode(stored)
        assert m.machine.hostname is None and m.seed is None and m.devices == ()
        assert m.stop.ci_target is None and m.workload_order is None


def test_the_store_stamps_the_version_and_the_report_reads_an_old_row(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    new = store.start_run("bench", "new", ["bench"], {"seed": 3})
    assert json.loads(store.run(new)["metadata"]) == {"seed": 3, "metadata_version": 1}
    store.update_metadata(new, {"seed": 4})
    assert load_run(store, str(new)).metadata.version == METADATA_VERSION
    old = store.start_run("bench", "old", ["bench"], {})
    with store.transaction() as c:  # as an older poolbench left it: no stamp
        c.execute("UPDATE runs SET metadata = ? WHERE id = ?", (json.dumps(OLD), old))
    run = load_run(store, str(old))
    assert run.metadata.version == 0
    assert run.ram_bytes() == 8 * 2**30 and run.working_set_bytes() == 2**30
    assert run.compressibility() == 50 and run.fio_versions() == ["fio-3.33"]
    assert run.ci_target() == 0.02
    assert (run.policy().min_runs, run.policy().max_runs) == (4, 6)
    assert claimed_serials(run) == ["S1"]
    assert header.title(run).endswith(", seed 7")
