"""The fsync guard: fio's fsync count against the writes a sync workload made."""

from poolbench.guards import fsyncs


def test_one_fsync_per_write_but_each_jobs_last_passes() -> None:
    found, warnings = fsyncs.check(every=1, writes=1024, fsyncs=1023, jobs=1)
    assert warnings == []
    assert found == {"fsyncs": 1023, "writes": 1024, "every": 1, "expected_at_least": 1023}


def test_too_few_fsyncs_is_not_a_sync_figure() -> None:
    _found, warnings = fsyncs.check(every=1, writes=1024, fsyncs=10, jobs=1)
    assert len(warnings) == 1
    assert "10 fsyncs for 1,024 writes" in warnings[0] and "at least 1,023" in warnings[0]


def test_fsync_every_n_writes_and_several_jobs() -> None:
    # fsync=8 over 4 jobs writing 4096 in all: 512 fsyncs, less each job's tail.
    assert fsyncs.check(every=8, writes=4096, fsyncs=508, jobs=4)[1] == []
    assert fsyncs.check(every=8, writes=4096, fsyncs=507, jobs=4)[1] != []
