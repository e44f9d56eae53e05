"""`fleet run`'s two halves without SSH: the host side (a detached start, its status and log
from an offset, a consistent copy of its store) on this machine in a temporary root, and the
controller against scripted hosts (a lost link within and past its grace, a study that
stopped and is resumed, a store collected and tagged). The real thing over real ssh to
namespaced hosts is in tests/test_fleet_ssh_hosts.py."""

from __future__ import annotations

import base64
import itertools
import json
import shlex
import time
from pathlib import Path

import pytest

from poolbench.errors import UsageError
from poolbench.fleet import host_side
from poolbench.fleet.fleet_run import Controller, FleetRun, HostRun, summary_error
from poolbench.fleet.ssh import Transport
from poolbench.fleet.sshhosts import parse_line
from poolbench.store.db import Store
from poolbench.system.runner import CommandResult, RecordingRunner


def test_a_detached_start_logs_and_ends_and_its_status_reads_from_an_offset(
    tmp_path: Path,
) -> None:
    # `poolbench runs` as the study: it gets `--db` the run's store, which does not exist yet.
    pid = host_side.start("t1", ["runs"], root=tmp_path)
    d = tmp_path / "t1"
    assert json.loads((d / "state.json").read_text())["pid"] == pid
    deadline = time.monotonic() + 60
    while (st := host_side.status("t1", root=tmp_path)).running:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert f"There is no result store at {d / 'store.db'}" in st.log
    assert st.next_offset == len(st.log.encode()) and st.runs == []
    again = host_side.status("t1", offset=st.next_offset, root=tmp_path)
    assert again.log == "" and again.next_offset == st.next_offset
    assert oct(d.stat().st_mode & 0o777) == "0o700"
    assert host_side.stop("t1", root=tmp_path) is False  # nothing running to stop


def test_one_fleet_study_at_a_time_on_a_host_and_a_bad_tag_is_refused(tmp_path: Path) -> None:
    # The first study waits for its start time, holding the host's lock: a second start, of
    # its tag or of another (say, a new fleet run after a lost link), is refused by name.
    host_side.start("t2", ["runs"], root=tmp_path, at=time.time() + 30)
    for tag in ("t2", "other"):
        with pytest.raises(UsageError, match="Fleet run t2 is still going on this host"):
            host_side.start(tag, ["runs"], root=tmp_path)
    assert not (tmp_path / "other" / "state.json").exists()
    assert host_side.stop("t2", root=tmp_path) is True  # Ctrl-C to its session, waiting
    _wait_ended("t2", tmp_path)
    host_side.start("other", ["runs"], root=tmp_path)  # the lock went with it
    _wait_ended("other", tmp_path)
    for tag in ["../etc", "", "a/b", "-x", "a" * 65]:
        with pytest.raises(UsageError, match="is not a fleet run's tag"):
            host_side.run_dir(tag, tmp_path)


def test_a_start_cancelled_before_it_arrives_never_begins(tmp_path: Path) -> None:
    # The controller, stopped while its start call was on the way, cancels that start by
    # name; the start arriving after that writes its pid but begins nothing.
    assert host_side.stop("t6", root=tmp_path, attempt="beef0001") is False
    host_side.start("t6", ["runs"], root=tmp_path, attempt="beef0001")
    st = _wait_ended("t6", tmp_path)
    assert st.log == "fleet start: cancelled by the controller before the study began\n"
    # Another start of that tag (a resume) is not cancelled by it.
    host_side.start("t6", ["runs"], root=tmp_path, attempt="beef0002")
    assert "There is no result store" in _wait_ended("t6", tmp_path).log
    with pytest.raises(UsageError, match="not a start attempt"):
        host_side.stop("t6", root=tmp_path, attempt="../x")


def _wait_ended(tag: str, root: Path) -> host_side.HostStatus:
    deadline = time.monotonic() + 60
    while (st := host_side.status(tag, root=root)).running:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return st


def test_the_log_is_cut_at_whole_lines_and_never_stalls_or_splits_a_character() -> None:
    full = host_side.LOG_CHUNK
    assert host_side.log_cut(b"one\ntwo", partial=True) == 4  # "two" waits for its end
    assert host_side.log_cut(b"one\ntwo", partial=False) == 7  # the log's end: all of it
    assert host_side.log_cut(b"x" * full, partial=True) == full  # one long line: sent on
    e_acute = "\u00e9".encode()  # two bytes
    euro = "\u20ac".encode()  # three bytes
    for char in (e_acute, euro, "\U0001f600".encode()):
        for kept in range(1, len(char)):  # the chunk ends inside the character
            chunk = (b"x" * full)[: full - kept] + char[:kept]
            assert host_side.log_cut(chunk, partial=True) == full - kept
        chunk = (b"x" * full)[: full - len(char)] + char  # ends with the whole character
        assert host_side.log_cut(chunk, partial=True) == full


def test_status_says_there_is_more_log_after_a_full_chunk(tmp_path: Path) -> None:
    d = tmp_path / "t8"
    d.mkdir()
    (d / "log").write_bytes(b"a" * (host_side.LOG_CHUNK - 1) + b"\n" + b"tail\n")
    first = host_side.status("t8", root=tmp_path)  # no study runs: it ended
    assert (first.running, first.next_offset, first.more) == (False, host_side.LOG_CHUNK, True)
    rest = host_side.status("t8", offset=first.next_offset, root=tmp_path)
    assert (rest.log, rest.more) == ("tail\n", False)


def test_the_store_is_sent_as_one_consistent_copy(tmp_path: Path) -> None:
    d = tmp_path / "t3"
    d.mkdir()
    store = Store(d / "store.db")
    run_id = store.start_run("study", "s", ["poolbench", "run"], {})
    store.finish_run(run_id, "finished")
    data = host_side.store_snapshot("t3", root=tmp_path)  # while the store is open
    store.close()
    assert data.startswith(b"SQLite format 3\x00")
    copy = tmp_path / "copy.db"
    copy.write_bytes(data)
    assert [(r["id"], r["status"]) for r in Store(copy, "read").runs()] == [(1, "finished")]


# -- the controller, against scripted hosts ------------------------------------------------


class Hosts:
    """Answers the controller's `poolbench fleet host-*` calls per host address, from
    scripts: each host a list of answers per subcommand, consumed in order."""

    def __init__(self, scripts: dict[str, dict[str, list[tuple[int, str, str]]]]) -> None:
        self.scripts = scripts
        self.calls: list[tuple[str, list[str]]] = []

    def __call__(self, argv: tuple[str, ...]) -> CommandResult:
        host = argv[argv.index("--") + 1]
        remote = shlex.split(argv[-1])
        self.calls.append((host, remote))
        sub = remote[2]
        answers = self.scripts[host][sub]
        rc, out, err = answers.pop(0) if len(answers) > 1 else answers[0]
        return CommandResult(argv, rc, out, err, 0.0)


def _status(running: bool, log: str, nxt: int, runs: list[tuple[int, str]]) -> tuple[int, str, str]:
    doc = {"running": running, "log": log, "next": nxt,
           "runs": [{"id": i, "status": s, "name": "x"} for i, s in runs]}  # fmt: skip
    return 0, json.dumps(doc), ""


def _store_b64(tmp_path: Path, status: str) -> str:
    s = Store(tmp_path / f"remote-{status}.db")
    run_id = s.start_run("study", "fleet-x", ["poolbench", "run", "--seed", "7"], {})
    s.finish_run(run_id, status)
    s.close()
    return base64.b64encode((tmp_path / f"remote-{status}.db").read_bytes()).decode()


def _controller(tmp_path: Path, hosts: Hosts, clock: itertools.count[float]) -> Controller:
    runner = RecordingRunner({"ssh": hosts})
    run = FleetRun("tag1", "study.toml", "name = 'x'\n", str(tmp_path / "hosts"), 7)
    fleet = {f"root@{h}": parse_line(f"root@{h} disks=2x1G") for h in hosts.scripts}
    for label in fleet:
        run.hosts[label] = HostRun(label)
    said: list[str] = []
    ctl = Controller(Transport(runner, tmp_path / "ctl"), Store(tmp_path / "local.db"), run,
                     fleet, said.append, poll_s=1, link_grace_s=10,
                     clock=lambda: next(clock), sleep=lambda s: None)  # fmt: skip
    ctl.said = said  # type: ignore[attr-defined]
    return ctl


def test_the_controller_collects_a_host_and_leaves_one_whose_link_stays_down(
    tmp_path: Path,
) -> None:
    lost = (255, "", "Connection to 10.0.0.2 closed by remote host.\r\n")
    hosts = Hosts({
        "a": {"host-put": [(0, "/var/lib/poolbench/fleet/tag1/study.toml\n", "")],
              "host-start": [(0, '{"pid": 10}', "")],
              "host-status": [_status(True, "trial 1\n", 8, [(1, "running")]),
                              _status(False, "done\n", 13, [(1, "finished")])],
              "host-fetch": [(0, _store_b64(tmp_path, "finished"), "")]},
        "b": {"host-put": [(0, "/var/lib/poolbench/fleet/tag1/study.toml\n", "")],
              "host-start": [(0, '{"pid": 11}', "")],
              "host-status": [lost]},
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 3.0))  # 3 s per clock read
    ctl.begin([])
    ctl.wait(lambda: None)
    a, b = ctl.run.hosts["root@a"], ctl.run.hosts["root@b"]
    assert (a.state, a.remote_run, a.local_run, a.offset) == ("collected", 1, 1, 13)
    assert (b.state, b.reason) == ("failed", "link lost: its study goes on there")
    said = ctl.said  # type: ignore[attr-defined]
    assert "[root@a] trial 1" in said and "[root@a] done" in said
    assert "[root@a] finished: run 1 there is run 1 here" in said
    assert sum("[root@b] link lost (ssh: Connection to 10.0.0.2 closed" in s for s in said) == 1
    # The same seed and each host's own disks; the log asked from where it was left.
    starts = [r for _, r in hosts.calls if r[2] == "host-start"]
    assert all(r[r.index("--seed") + 1] == "7" and r[r.index("--disks") + 1] == "2x1G"
               for r in starts)  # fmt: skip
    froms = [r[r.index("--from") + 1] for h, r in hosts.calls if h == "a" and "--from" in r]
    assert froms == ["0", "8"]
    origin = json.loads(ctl.store.runs()[0]["origin"])
    assert (origin["fleet_host"], origin["fleet_tag"]) == ("root@a", "tag1")
    err = summary_error(ctl.run)
    assert err is not None and "1 of 2 host(s) did not finish fleet run tag1" in str(err)
    assert "--resume tag1" in err.fix


def test_resume_resumes_a_stopped_study_there_and_collects_an_ended_one(
    tmp_path: Path,
) -> None:
    hosts = Hosts({
        "a": {"host-status": [_status(False, "", 0, [(1, "interrupted")]),
                              _status(False, "", 0, [(1, "finished")])],
              "host-put": [(0, "/var/lib/poolbench/fleet/tag1/study.toml\n", "")],
              "host-start": [(0, '{"pid": 12}', "")],
              "host-fetch": [(0, _store_b64(tmp_path, "finished"), "")]},
        "b": {"host-status": [_status(False, "", 0, [(1, "finished")])],
              "host-fetch": [(0, _store_b64(tmp_path, "finished"), "")]},
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    for hr in ctl.run.hosts.values():
        hr.state = "stopped"
    ctl.resume()
    ctl.wait(lambda: None)
    starts = [r for h, r in hosts.calls if r[2] == "host-start"]
    assert len(starts) == 1 and "--resume" in starts[0] and "--disks" not in starts[0]
    assert starts[0][starts[0].index("--resume") + 1] == "1"
    assert {h.state for h in ctl.run.hosts.values()} == {"collected"}
    assert summary_error(ctl.run) is None


def test_a_study_still_tearing_down_at_resume_is_resumed_when_it_stops(tmp_path: Path) -> None:
    # Resumed right after a Ctrl-C: host a's study is still tearing down (running), then
    # ends interrupted; the same resume resumes it there, once, and collects it.
    hosts = Hosts({
        "a": {"host-status": [_status(True, "tearing down\n", 13, [(1, "running")]),
                              _status(False, "", 13, [(1, "interrupted")]),
                              _status(False, "", 13, [(1, "finished")])],
              "host-put": [(0, "/var/lib/poolbench/fleet/tag1/study.toml\n", "")],
              "host-start": [(0, '{"pid": 12}', "")],
              "host-fetch": [(0, _store_b64(tmp_path, "finished"), "")]},
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.run.hosts["root@a"].state = "stopped"
    ctl.resume()
    ctl.wait(lambda: None)
    starts = [r for _, r in hosts.calls if r[2] == "host-start"]
    assert len(starts) == 1 and starts[0][starts[0].index("--resume") + 1] == "1"
    assert ctl.run.hosts["root@a"].state == "collected"
    assert "[root@a] its study stopped there (run 1 interrupted): resuming it" in ctl.said  # type: ignore[attr-defined]


def test_a_host_collected_before_its_state_was_saved_is_not_lost(tmp_path: Path) -> None:
    # The controller died after the import and before saving: the resume imports nothing
    # new and takes the run already here, instead of a host silently missing its figures.
    b64 = _store_b64(tmp_path, "finished")
    hosts = Hosts({"a": {"host-status": [_status(False, "", 0, [(1, "finished")])],
                         "host-fetch": [(0, b64, "")]}})  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.run.hosts["root@a"].state = "running"
    ctl.resume()
    first = ctl.run.hosts["root@a"].local_run
    ctl.run.hosts["root@a"].state = "running"  # as the saved state still says
    ctl.run.hosts["root@a"].local_run = None
    ctl.resume()
    a = ctl.run.hosts["root@a"]
    assert (a.state, a.local_run, len(ctl.store.runs())) == ("collected", first, 1)


def test_one_host_answering_nonsense_is_that_hosts_failure_only(tmp_path: Path) -> None:
    hosts = Hosts({
        "a": {"host-put": [(0, "/p\n", "")], "host-start": [(0, '{"pid": 1}', "")],
              "host-status": [(0, "<html>proxy error</html>", "")]},
        "b": {"host-put": [(0, "/p\n", "")], "host-start": [(0, '{"pid": 2}', "")],
              "host-status": [_status(False, "done\n", 5, [(1, "finished")])],
              "host-fetch": [(0, _store_b64(tmp_path, "finished"), "")]},
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.begin([])
    ctl.wait(lambda: None)
    a, b = ctl.run.hosts["root@a"], ctl.run.hosts["root@b"]
    assert a.state == "failed" and "not a fleet run's status: '<html>proxy error" in a.reason
    assert b.state == "collected"
    assert not [r for _, r in hosts.calls if r[2] == "host-stop"]  # nobody was stopped


def test_a_long_log_is_read_to_its_end_before_the_store_is_collected(tmp_path: Path) -> None:
    hosts = Hosts({
        "a": {"host-put": [(0, "/p\n", "")], "host-start": [(0, '{"pid": 1}', "")],
              "host-status": [
                  (0, json.dumps({"running": False, "log": "part 1\n", "next": 7,
                                  "runs": [{"id": 1, "status": "finished", "name": "x"}],
                                  "more": True}), ""),
                  _status(False, "part 2\n", 14, [(1, "finished")])],
              "host-fetch": [(0, _store_b64(tmp_path, "finished"), "")]},
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.begin([])
    ctl.wait(lambda: None)
    said = ctl.said  # type: ignore[attr-defined]
    assert said.index("[root@a] part 1") < said.index("[root@a] part 2")
    assert said.index("[root@a] part 2") < said.index(
        "[root@a] finished: run 1 there is run 1 here"
    )
    froms = [r[r.index("--from") + 1] for _, r in hosts.calls if "--from" in r]
    assert froms == ["0", "7"]


def test_a_stop_while_a_start_is_on_its_way_cancels_that_start(tmp_path: Path) -> None:
    class CtrlCOnStart(Hosts):
        def __call__(self, argv: tuple[str, ...]) -> CommandResult:
            result = super().__call__(argv)
            if shlex.split(argv[-1])[2] == "host-start" and argv[argv.index("--") + 1] == "b":
                raise KeyboardInterrupt  # the user's Ctrl-C while b's start is on its way
            return result

    saved: list[str] = []
    hosts = CtrlCOnStart({
        h: {"host-put": [(0, "/p\n", "")], "host-start": [(0, '{"pid": 1}', "")],
            "host-stop": [(0, '{"stopped": true}', "")]} for h in ("a", "b")
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.save = lambda: saved.append(ctl.run.hosts["root@b"].state)
    with pytest.raises(KeyboardInterrupt):
        ctl.begin([])
    ctl.stop_all()
    assert saved[-1] == "starting"  # on disk before the call went out
    start_b = next(r for h, r in hosts.calls if h == "b" and r[2] == "host-start")
    attempt = start_b[start_b.index("--attempt") + 1]
    stops = {h: r for h, r in hosts.calls if r[2] == "host-stop"}
    assert stops["b"][3:] == ["tag1", "--attempt", attempt]  # that very start cancelled
    assert stops["a"][3:] == ["tag1"]  # a running study: its Ctrl-C
    assert {h.state for h in ctl.run.hosts.values()} == {"stopped"}


def test_a_study_that_ended_before_the_ctrl_c_is_not_called_stopped(tmp_path: Path) -> None:
    """The whole suite once met it: one host's study finished a moment before the Ctrl-C
    reached it. host-stop there finds nothing running ({"stopped": false}); the controller
    must not print that host as stopped, and leaves it to be collected."""
    hosts = Hosts({
        "a": {"host-stop": [(0, '{"stopped": false}', "")]},
        "b": {"host-stop": [(0, '{"stopped": true}', "")]},
    })  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    for hr in ctl.run.hosts.values():
        hr.state = "running"
    ctl.stop_all()
    said = " ".join(ctl.said)  # type: ignore[attr-defined]
    assert "[root@a] its study had already ended there: `--resume` collects it" in said
    assert "[root@a] stopped" not in said and "[root@b] stopped (Ctrl-C there" in said
    assert ctl.run.hosts["root@a"].state == "running"  # polled and collected by --resume
    assert ctl.run.hosts["root@b"].state == "stopped"


def test_resume_reaches_the_hosts_the_run_began_with(tmp_path: Path) -> None:
    from poolbench.fleet import fleet_run
    from poolbench.fleet.sshhosts import load

    f = tmp_path / "fleet.ssh"
    f.write_text("root@nas1:2222 disks=/dev/sdb,/dev/sdc\nadmin@nas2 poolbench=/opt/pb\n")
    run = FleetRun("tag1", "s.toml", "", str(f), 7)
    began = load(f)
    fleet_run.remember_hosts(run, began)
    run.save(tmp_path / "state.json")
    f.write_text("root@nas3\n")  # the host file changed since
    hosts = fleet_run.fleet_hosts(FleetRun.load(tmp_path / "state.json"))
    assert hosts == {h.label: h for h in began}
    assert list(hosts) == ["root@nas1:2222", "admin@nas2"]
    assert (hosts["root@nas1:2222"].target.port, hosts["root@nas1:2222"].disks) == (
        2222,
        "/dev/sdb,/dev/sdc",
    )
    assert (hosts["admin@nas2"].target.user, hosts["admin@nas2"].poolbench) == ("admin", "/opt/pb")


# -- the fleet's answer, on hand-worked figures ----------------------------------------------


def test_the_fleets_answer_names_the_slow_host_and_blocks_by_host() -> None:
    import math

    from poolbench.fleet import answer

    # Two layouts on three hosts; host c is half as fast in everything. raid1/raid0 is
    # 0.5 on a and c, 0.4 on b: log ratios ln 0.5, ln 0.4, ln 0.5.
    measured = {
        "a": {("raid0", "w"): ("MiB/s", [40.0, 40.0]), ("raid1", "w"): ("MiB/s", [20.0, 20.0])},
        "b": {("raid0", "w"): ("MiB/s", [40.0, 40.0]), ("raid1", "w"): ("MiB/s", [16.0, 16.0])},
        "c": {("raid0", "w"): ("MiB/s", [19.0, 21.0]), ("raid1", "w"): ("MiB/s", [10.0, 10.0])},
    }
    rows = answer.rows(measured)
    # c on raid0: mean 20, sd sqrt(2), t(0.975, 1) = 12.706: its interval reaches 32.7, over
    # 0.75 x 40 = 30, so two noisy runs do not name it there; on raid1 its 10, 10 lie below
    # 0.75 x median(20, 16) = 13.5: named. a and b are never below their peers' line.
    c0 = rows[0].hosts[2]
    assert (c0.mean, round(c0.high, 1)) == (20.0, 32.7)
    assert [(r.config, r.slow) for r in rows] == [("raid0", ()), ("raid1", ("c",))]
    (change,) = answer.verdict(rows)
    d = [math.log(0.5), math.log(0.4), math.log(0.5)]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    half = 4.302652729911275 * sd / math.sqrt(3)  # t(0.975, 2)
    assert (change.config, change.best, change.hosts) == ("raid1", "raid0", 3)
    assert change.ratio == pytest.approx(math.exp(mean))
    assert (change.low, change.high) == pytest.approx(
        (math.exp(mean - half), math.exp(mean + half))
    )
    assert change.significant


def test_a_built_in_study_runs_as_the_hosts_own_study_command(tmp_path: Path) -> None:
    hosts = Hosts({"a": {"host-start": [(0, '{"pid": 10}', "")]}})
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.run.builtin = ["parity", "--widths", "4,6"]
    ctl.start("root@a")
    (start,) = [r for _, r in hosts.calls]  # no study file is sent
    assert start[2:4] == ["host-start", "tag1"] and start[4] == "--attempt"
    assert _study_args(start) == [
        "study",
        "parity",
        "--widths",
        "4,6",
        "--seed",
        "7",
        "--disks",
        "2x1G",
    ]
    ctl.start("root@a", resume=3)
    assert _study_args(hosts.calls[-1][1]) == ["study", "parity", "--widths", "4,6", "--seed", "7",
                                      "--resume", "3"]  # fmt: skip


def test_fleet_study_refuses_options_the_fleet_gives_itself(tmp_path: Path) -> None:
    import subprocess
    import sys

    f = tmp_path / "fleet.ssh"
    f.write_text("root@nas1 disks=4x1G\n")
    # (--seed and --db, wherever they stand, are fleet study's own options.)
    for bad in (["--disks", "6x1G"], ["--", "--disks=6x1G"], ["--", "--seed", "3"]):
        p = subprocess.run(
            [sys.executable, "-m", "poolbench", "fleet", "study", str(f), "parity", *bad,
             "--db", str(tmp_path / "r.db")],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert p.returncode == 2 and "is not a study option here" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr
    assert not (tmp_path / "r.db").exists()  # refused before a store was made


def test_a_start_time_is_waited_for_on_the_host(tmp_path: Path) -> None:
    at = time.time() + 1.0
    host_side.start("t4", ["runs"], root=tmp_path, at=at)
    while host_side.status("t4", root=tmp_path).running:
        time.sleep(0.05)
    log = (tmp_path / "t4" / "log").read_text()
    waited, started, rest = log.split("\n", 2)
    assert waited.startswith("fleet start: waiting ") and "for the common start time" in waited
    late = float(started.split()[3])  # "fleet start: started 0.004 s after it ..."
    assert 0 <= late < 0.5 and "There is no result store" in rest  # then the command ran
    # Too late already: it says so and starts at once.
    host_side.start("t5", ["runs"], root=tmp_path, at=time.time() - 2)
    while host_side.status("t5", root=tmp_path).running:
        time.sleep(0.05)
    first = (tmp_path / "t5" / "log").read_text().splitlines()[0]
    assert first.startswith("fleet start: 2.") and first.endswith(
        "s late for the common start time"
    )


def test_together_gives_every_host_one_start_time_and_states_the_clocks(tmp_path: Path) -> None:
    from poolbench.fleet.readiness import HostCheck

    hosts = Hosts({h: {"host-put": [(0, "/x/study.toml\n", "")],
                       "host-start": [(0, '{"pid": 1}', "")]} for h in ("a", "b")})  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    checks = [HostCheck("root@a", True, skew_s=0.010, skew_bound_s=0.002),
              HostCheck("root@b", True, skew_s=-0.030, skew_bound_s=0.004)]  # fmt: skip
    before = time.time()
    ctl.begin(checks, together=True)
    ats = {float(r[r.index("--at") + 1]) for _, r in hosts.calls if r[2] == "host-start"}
    assert len(ats) == 1
    (at,) = ats
    assert before + 3 + 6 <= at <= time.time() + 3 + 6  # the lead: 3 s and 3 s per host
    said = ctl.said  # type: ignore[attr-defined]
    assert ("root@a +0.010 s (±0.002), root@b -0.030 s (±0.004); so they start within "
            "0.068 s") in said[0]  # fmt: skip
    ctl.start("root@a", resume=2)  # a resumed study does not wait for a past start time
    assert "--at" not in hosts.calls[-1][1]


def test_a_host_without_disks_runs_the_studys_own(tmp_path: Path) -> None:
    hosts = Hosts({"a": {"host-put": [(0, "/x/study.toml\n", "")],
                         "host-start": [(0, '{"pid": 1}', "")]}})  # fmt: skip
    ctl = _controller(tmp_path, hosts, itertools.count(0.0, 1.0))
    ctl.hosts["root@a"] = parse_line("root@a")
    ctl.start("root@a")
    assert _study_args(hosts.calls[-1][1]) == ["run", "/x/study.toml", "--seed", "7"]


def _study_args(remote: list[str]) -> list[str]:
    """The command a host-start call starts there: what follows its `--`."""
    return remote[remote.index("--") + 1 :]


def test_a_refused_fleet_run_leaves_no_store_and_no_state(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    hosts = tmp_path / "fleet.ssh"
    hosts.write_text("root@127.0.0.1:1 disks=2x1G\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[bogus]\n')
    home = tmp_path / "store"
    env = {**os.environ, "POOLBENCH_DB": str(home / "results.db")}
    for args, code, said in [
        (["--resume", "nosuch"], 5, "No fleet run nosuch in"),
        (["--resume", "../../etc/x"], 5, "No fleet run ../../etc/x"),
        ([str(hosts), str(bad)], 5, "The study file is not valid"),
        ([str(hosts), str(tmp_path / "none.toml")], 5, "Cannot read the study file"),
        ([str(tmp_path / "none.ssh"), str(bad)], 5, "Cannot read the host file"),
    ]:
        p = subprocess.run([sys.executable, "-m", "poolbench", "fleet", "run", *args],
                           capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
        assert (p.returncode, said in p.stderr) == (code, True), (args, p.stderr)
        assert "Traceback" not in p.stderr and not home.exists(), args


def test_the_fleets_answer_as_json_holds_the_printed_figures() -> None:
    from poolbench.fleet import answer_view

    measured = {
        "a": {("raid0", "w"): ("MiB/s", [40.0, 42.0]), ("raid1", "w"): ("MiB/s", [20.0])},
        "b": {("raid0", "w"): ("MiB/s", [10.0, 10.0]), ("raid1", "w"): ("MiB/s", [5.0])},
    }
    doc = answer_view.to_json(measured, {"b": {("raid0", "w"): ["too short"]}})
    json.dumps(doc, allow_nan=False)  # strict JSON: no NaN where an interval is unknown
    r0, r1 = doc["rows"]  # type: ignore[misc]
    a0, b0 = r0["hosts"]
    assert (a0["mean"], a0["n"], a0["slow"], a0["warnings"]) == (41.0, 2, False, [])
    assert (b0["mean"], b0["slow"], b0["warnings"]) == (10.0, True, ["too short"])
    assert r1["hosts"][0]["ci_low"] is None  # one replicate: no interval
    (v,) = doc["verdict"]  # type: ignore[misc]
    # raid1/raid0: 20/41 on a, 5/10 on b: two log ratios, t(0.975, 1) = 12.706
    import math

    d = [math.log(20 / 41), math.log(0.5)]
    assert v["ratio"] == pytest.approx(math.exp(sum(d) / 2)) and v["hosts"] == 2
    half = 12.706204736174707 * abs(d[0] - d[1]) / math.sqrt(2) / math.sqrt(2)
    assert v["ci_high"] == pytest.approx(math.exp(sum(d) / 2 + half))
    assert "slow-member rule" in doc["rules"]["slow_host"]  # type: ignore[index]
