"""Host lists, the controller's output as fio 3.33 prints it, probe replies (pure, no root)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from poolbench.errors import UsageError
from poolbench.fleet import clientout, hosts, probe
from poolbench.fleet.records import FleetOptions
from poolbench.fleet.session import FleetSession
from poolbench.fleet.table import group_host_warnings
from poolbench.workloads.library import parse_list


# -- host lists ---------------------------------------------------------------------------------
def test_host_forms() -> None:
    h = hosts.parse_host("nas1")
    assert (h.address, h.port, h.path, h.label, h.connect) == (
        "nas1",
        8765,
        None,
        "nas1",
        "nas1,8765",
    )
    h = hosts.parse_host("10.0.0.5:8766 /tank/bench")
    assert (h.port, h.path, h.label, h.connect) == (
        8766,
        "/tank/bench",
        "10.0.0.5:8766",
        "10.0.0.5,8766",
    )
    h = hosts.parse_host("[fd00::2]:9000")
    assert (h.address, h.port, h.label, h.connect) == (
        "fd00::2",
        9000,
        "[fd00::2]:9000",
        "ip6:fd00::2,9000",
    )
    assert hosts.parse_host("fd00::2").connect == "ip6:fd00::2,8765"


@pytest.mark.parametrize(
    "text, needle",
    [
        ("0.0.0.0", "wildcard"),
        ("[::]:8765", "wildcard"),
        ("h:99999", "not a port"),
        ("h:x", "not a port"),
        ("h relative/path", "not absolute"),
        ("h /a /b", "is not a host"),
        ("[fd00::2", "not a valid"),
    ],
)
def test_bad_hosts_are_refused_with_the_reason(text: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        hosts.parse_host(text)


def test_host_file_comments_paths_and_duplicates(tmp_path: Path) -> None:
    f = tmp_path / "fleet.hosts"
    f.write_text("# fleet\n\nnas1 /tank  # first\nnas2:8766\n")
    fleet = hosts.load(str(f))
    assert [(h.label, h.path) for h in fleet] == [("nas1", "/tank"), ("nas2:8766", None)]
    assert fleet[1].target("/default") == "/default"
    with pytest.raises(UsageError, match="No target path for host nas2:8766"):
        fleet[1].target(None)
    assert [h.label for h in hosts.load("a, b:1")] == ["a", "b:1"]
    with pytest.raises(UsageError, match="listed twice"):
        hosts.load("a,a:8765")
    f.write_text("nas1\nbad:port\n")
    with pytest.raises(UsageError, match=r"fleet.hosts:2: 'port'"):
        hosts.load(str(f))
    with pytest.raises(UsageError, match="No hosts"):
        hosts.load(" , ")


# -- the controller's output --------------------------------------------------------------------
def _entry(
    host: str, jobname: str, io_bytes: int, runtime_ms: int, error: int = 0
) -> dict[str, Any]:
    side = {
        "io_bytes": io_bytes,
        "total_ios": io_bytes // 4096,
        "runtime": runtime_ms,
        "bw_bytes": io_bytes * 1000 // max(runtime_ms, 1),
        "iops": 1.0,
        "bw_dev": 2.0,
        "lat_ns": {"mean": 5.0},
    }
    zero = {k: 0 for k in side} | {"lat_ns": {"mean": 0.0}}
    return {
        "jobname": jobname,
        "error": error,
        "read": side,
        "write": zero,
        "hostname": host,
        "port": 8765,
    }


def _stdout(entries: list[dict[str, Any]], disks: list[dict[str, Any]] | None = None) -> str:
    body = {
        "fio version": "fio-3.33",
        "client_stats": entries,
        "disk_util": disks or [],
    }
    # As fio prints it: the servers' text lines first, each prefixed by the server's name.
    head = (
        "<nas1> rr: (g=0): rw=randread, bs=(R) 4096B-4096B\n<nas1> Starting 1 process\n<nas1> \n\n"
    )
    return head + json.dumps(body, indent=2) + "\n"


FLEET = [hosts.parse_host(a) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3")]


def test_per_host_figures_all_clients_ignored_disks_attributed() -> None:
    entries = [
        _entry("10.0.0.2", "rr", 8 * 2**20, 1000),
        _entry("10.0.0.1", "rr", 4 * 2**20, 2000),
        _entry("10.0.0.3", "rr", 2 * 2**20, 500),
        _entry("10.0.0.3", clientout.ALL_CLIENTS, 14 * 2**20, 2000),
    ]
    disks = [
        {
            "name": "sda",
            "read_ios": 7,
            "write_ios": 0,
            "util": 50.0,
            "hostname": "10.0.0.1",
            "port": 8765,
        }
    ]
    out = clientout.parse(_stdout(entries, disks), "", FLEET, "read")
    assert out.errors == {} and out.controller_version == "fio-3.33"
    assert out.figures["10.0.0.1"].io_bytes == 4 * 2**20
    assert out.figures["10.0.0.1"].runtime_s == 2.0
    assert out.figures["10.0.0.3"].io_bytes == 2 * 2**20  # not the "All clients" sum
    assert out.disks == {"10.0.0.1": [clientout.DiskUtil("sda", 7, 0, 50.0)]}
    assert out.figures["10.0.0.1"].latency is None  # these entries carry no clat_ns


def test_per_host_latency_is_that_hosts_clat() -> None:
    entries = [_entry("10.0.0.1", "rr", 4 * 2**20, 2000), _entry("10.0.0.2", "rr", 2**20, 1000)]
    for i, e in enumerate(entries):
        pct = {"50.000000": 1000 * (i + 1), "99.000000": 9000 * (i + 1), "99.900000": 20000}
        e["read"]["clat_ns"] = {"N": 1024, "min": 1, "max": 30000, "mean": 2000.0,
                                "stddev": 10.0, "percentile": pct}  # fmt: skip
    out = clientout.parse(_stdout(entries), "", FLEET[:2], "read")
    lat1, lat2 = out.figures["10.0.0.1"].latency, out.figures["10.0.0.2"].latency
    assert lat1 is not None and lat2 is not None
    assert (lat1.p(50), lat1.p(99), lat2.p(99)) == (1000, 9000, 18000)
    assert lat1.samples == 1024 and lat1.bins == {}  # plain json: percentiles, no bins


def test_missing_hosts_are_named_with_what_fio_said() -> None:
    stdout = _stdout([_entry("10.0.0.1", "rr", 4096, 10)])
    stderr = (
        "fio: connect: No route to host\nfio: failed to connect to 10.0.0.2:8765\n"
        "client: host=10.0.0.3 disconnected\n"
    )
    out = clientout.parse(stdout, stderr, FLEET, "read")
    assert list(out.figures) == ["10.0.0.1"]
    assert out.errors["10.0.0.2"].startswith("host 10.0.0.2 did not answer")
    assert "No route to host" in out.errors["10.0.0.2"]
    assert out.errors["10.0.0.3"].startswith("host 10.0.0.3 went away during the run")


def test_a_refused_job_and_a_failed_job() -> None:
    stdout = (
        "<nas2> fio: /nope is not a directory\n<nas2> fio: failed parsing directory=/nope\n"
        + _stdout([_entry("10.0.0.1", "rr", 4096, 10), _entry("10.0.0.3", "rr", 0, 0, error=28)])
    )
    out = clientout.parse(stdout, "", FLEET, "read")
    assert (
        "host 10.0.0.2 returned no result (its fio server refused the job)"
        in out.errors["10.0.0.2"]
    )
    assert "/nope is not a directory" in out.errors["10.0.0.2"]
    assert "No space left on device (errno 28)" in out.errors["10.0.0.3"]
    assert list(out.figures) == ["10.0.0.1"]


def test_no_json_at_all_names_every_host() -> None:
    out = clientout.parse("", "fio: something broke\n", FLEET[:2], "write")
    assert set(out.errors) == {"10.0.0.1", "10.0.0.2"}
    assert "something broke" in out.errors["10.0.0.1"]


# -- probes ---------------------------------------------------------------------------------
def test_probe_reply_and_skew() -> None:
    line = "hostname=nas1, be=0, 64-bit, os=Linux, arch=x86-64, fio=fio-3.33, flags=1\n"
    assert probe.parse_probe_reply("junk\n" + line) == {
        "hostname": "nas1",
        "bits": "64",
        "os": "Linux",
        "arch": "x86-64",
        "fio": "fio-3.33",
    }
    assert probe.parse_probe_reply("nothing here") is None
    assert probe.skew(100_500, 100.0, 101.0) == (0.0, 1.0)
    assert probe.skew(95_000, 100.0, 101.0) == (-5.0, 1.0)
    assert probe.skew(104_000, 100.0, 101.0) == (3.0, 1.0)
    job = probe.probe_job("/tank", Path("/tmp/x/probe"))
    assert "ioengine=null" in job and "directory=/tank" in job and "log_unix_epoch=1" in job


def test_version_and_skew_notes() -> None:
    a = probe.HostInfo("a", "a", 8765, "/t", reachable=True, fio_version="fio-3.33")
    b = probe.HostInfo(
        "b", "b", 8765, "/t", reachable=True, fio_version="fio-3.36", clock_skew_s=7.0
    )
    assert probe.version_note([a], "fio-3.33") == ""
    assert "fio versions differ" in probe.version_note([a, b], "fio-3.33")
    assert "b's clock is +7.0 s off" in b.skew_warning and a.skew_warning == ""


def test_fleet_refuses_metadata_workloads() -> None:
    opts = FleetOptions(parse_list("seq-write,meta-create-seq"), size=2**20)
    with pytest.raises(UsageError, match="meta-create-seq"):
        FleetSession(None, None, 1, FLEET, "/t", opts)  # type: ignore[arg-type]


def test_host_warnings_are_grouped() -> None:
    got = group_host_warnings(["host a: X", "host b: X", "host a: Y", "plain"])
    assert got == ["hosts a, b: X", "host a: Y", "plain"]
