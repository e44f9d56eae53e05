"""A recorded trace replayed for real by the trial loop, in process (the fast tier): a study on
the directory backend replays a stored trace with real fio, timed and flat out, and every
replicate stores its fidelity, computed from fio's own per-I/O log. What fio must have issued
is the trace itself: count, bytes, sizes and locality are asserted exactly; the timing is
left to the real-pool test (tests/test_replay_real.py), a shared machine's clock being what
it is."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from poolbench.engine import lifecycle, trial_loop
from poolbench.report import html, replay_view
from poolbench.report.data import load_run
from poolbench.store.db import Store
from poolbench.study.model import parse
from poolbench.system.runner import LocalRunner
from poolbench.workloads import replay, tracefile
from poolbench.workloads.tracestats import TraceIO, summarize

pytestmark = pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")

MS = 1_000_000
# 20 sequential 4 KiB writes, then 10 reads of 8 KiB 64 KiB apart, 2 ms apart.
IOS = [TraceIO(i * 2 * MS, True, i * 4096, 4096) for i in range(20)] + [
    TraceIO((20 + i) * 2 * MS, False, i * 65536, 8192) for i in range(10)
]


@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_a_study_replays_a_trace_timed_and_flat_out_and_stores_its_fidelity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOLBENCH_DB", str(tmp_path / "r.db"))
    d = tracefile.traces_dir() / "t"
    d.mkdir(parents=True)
    (d / "trace.iolog").write_text(replay.iolog(IOS))
    recorded = summarize(IOS)
    tracefile.save_summary(d, {"trace": recorded.to_json()})
    layout = tmp_path / "a"
    layout.mkdir()
    text = (
        'name = "replay"\nreplicates = 2\nmax_replicates = 2\nci_target = 50\n'
        f'[disks]\ncount = 0\n[factors]\nbackend = ["directory"]\nlayout = ["{layout}"]\n'
        '[workloads]\nnames = ["trace:t", "trace-fast:t"]\nsize = "1M"\nmin_window = 0\n'
    )
    store = Store(tmp_path / "r.db")
    sr = trial_loop.StudyRun(
        LocalRunner(), store, parse(text), text,
        trial_loop.Paths(scratch=tmp_path / "scratch", journals=tmp_path / "journals"), seed=7,
    )  # fmt: skip
    avail = sr.preflight()
    sr.run_id = lifecycle.start(store, "study", "replay", sr.metadata(avail), ["test"])
    sr.run()
    rows = store.measurement_records(sr.run_id)
    assert sorted(r.workload for r in rows) == ["trace-fast:t"] * 2 + ["trace:t"] * 2
    for r in rows:
        assert r.ops == 30 and r.app_bytes == 20 * 4096 + 10 * 8192
        rep = r.findings.other["replay"]
        assert rep["mode"] == ("fast" if r.workload == "trace-fast:t" else "timed")
        got = rep["achieved"]
        assert (got["ios"], got["bytes"], got["reads"]) == (30, 20 * 4096 + 10 * 8192, 10)
        assert got["sizes"] == {"4k": 20, "8k": 10}
        # 19 writes follow the one before; the first read goes back 80 KiB to 0, the others
        # land 56 KiB past the previous read's end: all near (within 1 MiB)
        assert got["locality"] == recorded.locality == {"sequential": 19, "near": 10, "far": 0}
        checks = {c["what"]: c["ok"] for c in rep["checks"]}
        assert checks["I/O count"] and checks["bytes"] and checks["read share"]
    assert not list((tmp_path / "journals").glob("*.jsonl"))
    # the report shows each replaying cell's fidelity, in the terminal and on the page
    run = load_run(store, str(sr.run_id))
    shown = replay_view.cells(run)
    assert sorted(lines[0].split(" on ")[0] for lines in shown) == ["trace-fast:t", "trace:t"]
    heads = sorted(lines[1].split(" replays faithful ")[1] for lines in shown)
    assert heads == ["(fast)", "(timed)"]
    assert all(len(line) <= 80 for lines in shown for line in lines[1:])  # [0]: the config
    page = html.render(run, None)
    assert 'id="replay"' in page and "I/O count" in page
