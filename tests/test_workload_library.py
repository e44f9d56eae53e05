import configparser

import pytest

from poolbench.errors import UsageError
from poolbench.workloads import fiojob
from poolbench.workloads.iozone import IOZONE_TESTS
from poolbench.workloads.library import catalogue, get, parse_list
from poolbench.workloads.workload import parse_record_size

PARAMS = fiojob.JobParams(directory="/mnt/x", size_bytes=64 * 2**20)


def job(text: str) -> configparser.ConfigParser:
    cp = configparser.ConfigParser(interpolation=None)
    cp.read_string(text)
    return cp


@pytest.mark.parametrize(
    "name", ["seq-write", "seq-read", "rand-read-4k", "rand-write-4k", "reread"]
)
def test_names_scripts_rely_on_exist(name: str) -> None:
    assert get(name).name == name


def test_every_catalogue_entry_round_trips_through_its_name() -> None:
    names = [w.name for w in catalogue()]
    assert len(names) == len(set(names))
    for n in names:
        assert get(n).name == n
        assert get(n).summary


def test_unknown_workload_lists_the_forms() -> None:
    with pytest.raises(UsageError, match="poolbench workloads"):
        get("seq-wrte")
    with pytest.raises(UsageError, match="iozone test"):
        get("iozone-sideways-4k")
    with pytest.raises(UsageError, match="power of two"):
        get("rand-read-3k")
    with pytest.raises(UsageError, match="twice"):
        parse_list("seq-read,seq-read")


def test_record_sizes() -> None:
    assert parse_record_size("4k") == 4096
    assert parse_record_size("8m") == 8 * 2**20
    with pytest.raises(UsageError):
        parse_record_size("128m")


@pytest.mark.parametrize("w", catalogue(), ids=lambda w: w.name)
def test_no_workload_ever_writes_zeros_and_writes_are_durable(w) -> None:  # type: ignore[no-untyped-def]
    g = job(fiojob.render(w, PARAMS))["global"]
    if not w.is_metadata:
        assert g["refill_buffers"] == "1"
        assert g["zero_buffers"] == "0"
        assert "buffer_compress_percentage" not in g
    if w.direction == "write":
        assert g["end_fsync"] == "1"
    if w.direction == "read":
        assert g["allow_file_create"] == "0"  # never let fio lay out a file it should read


def test_declared_compressibility() -> None:
    p = fiojob.JobParams(directory="/x", size_bytes=2**26, compressibility=50)
    g = job(fiojob.render(get("seq-write"), p))["global"]
    assert g["buffer_compress_percentage"] == "50"
    assert g["refill_buffers"] == "1"


def test_reread_keeps_the_cache_and_cold_reads_do_not() -> None:
    assert job(fiojob.render(get("reread"), PARAMS))["global"]["invalidate"] == "0"
    assert "invalidate" not in job(fiojob.render(get("seq-read"), PARAMS))["global"]
    assert get("reread").cached_by_design and not get("reread").cold
    assert get("seq-read").cold


def test_backwards_read_region_has_a_tail_record() -> None:
    w = get("iozone-bread-64k")
    g = job(fiojob.render(w, PARAMS))["global"]
    assert g["rw"] == f"read:-{128 * 1024}"
    assert int(g["size"]) == PARAMS.size_bytes + 65536
    assert int(g["io_size"]) == PARAMS.size_bytes


def test_stride_read_reads_one_record_in_17_once() -> None:
    g = job(fiojob.render(get("iozone-strideread-64k"), PARAMS))["global"]
    assert g["rw"] == f"read:{16 * 65536}"
    assert int(g["io_size"]) == (PARAMS.size_bytes // 65536 // 17) * 65536


def test_streams_split_the_working_set() -> None:
    cp = job(fiojob.render(get("streams-read-4"), PARAMS))
    jobs = [s for s in cp.sections() if s != "global"]
    assert len(jobs) == 4
    assert int(cp["global"]["size"]) == PARAMS.size_bytes // 4
    assert len({cp[s]["filename"] for s in jobs}) == 4


def test_random_queue_depth_uses_libaio_direct() -> None:
    p = fiojob.JobParams(directory="/x", size_bytes=2**26, iodepth=16, numjobs=4)
    g = job(fiojob.render(get("rand-read-4k"), p))["global"]
    assert (g["ioengine"], g["iodepth"], g["direct"], g["numjobs"]) == ("libaio", "16", "1", "4")
    assert g["time_based"] == "1"


def test_metadata_jobs_use_fio_file_engines() -> None:
    for op, engine in (("create", "filecreate"), ("stat", "filestat"), ("delete", "filedelete")):
        for order, fst in (("seq", "sequential"), ("rand", "random")):
            g = job(fiojob.render(get(f"meta-{op}-{order}"), PARAMS))["global"]
            assert g["ioengine"] == engine
            assert g["file_service_type"] == fst


def test_iozone_set_is_complete() -> None:
    assert set(IOZONE_TESTS) >= {
        "write",
        "rewrite",
        "read",
        "reread",
        "randread",
        "randwrite",
        "bread",
        "strideread",
        "fwrite",
        "frewrite",
        "fread",
        "freread",
    }
    assert get("iozone-fwrite-1m").fio["ioengine"] == "sync"
    assert get("iozone-write-1m").fio["ioengine"] == "psync"
