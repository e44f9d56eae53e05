"""The ssh transport's argv (pure): options every call carries, the remote argv quoted so the
remote shell splits it back into exactly its words. The real client against real servers is in
tests/test_fleet_ssh_hosts.py."""

from __future__ import annotations

import shlex
from pathlib import Path

from poolbench.fleet.ssh import SshTarget, ssh_argv


def test_every_call_is_batch_shared_and_watches_the_link() -> None:
    argv = ssh_argv(SshTarget("nas1", "root", 2222), ["true"], Path("/run/pb/ctl"))
    opts = {argv[i + 1] for i, a in enumerate(argv) if a == "-o"}
    assert {"BatchMode=yes", "ControlMaster=auto", "ControlPath=/run/pb/ctl/%C"} <= opts
    assert {"ConnectTimeout=10", "ServerAliveInterval=2", "ServerAliveCountMax=3"} <= opts
    assert argv[-3:] == ["--", "nas1", "true"]
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "root"


def test_the_remote_command_splits_back_into_its_words() -> None:
    words = ["printf", "%s\\n", "a b", "it's", "$(touch /tmp/x)", ";id", "-- -x", ""]
    remote = ssh_argv(SshTarget("h"), words, Path("/c"))[-1]
    assert shlex.split(remote) == words


def test_the_host_file_gives_each_host_its_disks_and_its_poolbench(tmp_path: Path) -> None:
    from poolbench.fleet.sshhosts import load

    f = tmp_path / "fleet.ssh"
    f.write_text(
        "# three hosts\n"
        "root@nas1  disks=/dev/sdb,/dev/sdc\n"
        "admin@[fd00::13]:2222 disks=4x8G poolbench=/opt/pb/bin/poolbench  # pipx\n"
        "\n10.0.0.5\n"
    )
    a, b, c = load(f)
    assert (a.target, a.disks, a.poolbench) == (SshTarget("nas1", "root"), "/dev/sdb,/dev/sdc",
                                                "poolbench")  # fmt: skip
    assert b.target == SshTarget("fd00::13", "admin", 2222) and b.disks == "4x8G"
    assert b.poolbench == "/opt/pb/bin/poolbench" and b.label == "admin@fd00::13:2222"
    assert c.target == SshTarget("10.0.0.5") and c.disks is None


def test_a_bad_host_file_is_refused_with_its_line_and_the_fix(tmp_path: Path) -> None:
    import pytest

    from poolbench.errors import UsageError
    from poolbench.fleet.sshhosts import load

    f = tmp_path / "fleet.ssh"
    cases = {
        "nas1 disk=/dev/sdb\n": "'disk=/dev/sdb' is not a setting of host nas1",
        "nas1 poolbench=bin/poolbench\n": "is not an absolute path",
        "nas1:99999\n": "is not a port number",
        "@nas1\n": "has an empty user name",
        "-oProxyCommand=x\n": "names no host",  # never an ssh option in the host's place
        "nas1\nnas1 disks=2x1G\n": ":2: host nas1 is listed twice",
        "# nothing\n": "No hosts in",
    }
    for text, message in cases.items():
        f.write_text(text)
        with pytest.raises(UsageError, match=message.replace("(", r"\(")) as e:
            load(f)
        assert e.value.exit_code == 5
    with pytest.raises(UsageError, match="Cannot read the host file"):
        load(tmp_path / "missing")


def _remote_host(answers: dict[str, tuple[int, str, str]]):  # type: ignore[no-untyped-def]
    """A Transport whose ssh calls are answered by the remote argv's first words."""
    from poolbench.fleet.ssh import Transport
    from poolbench.system.runner import CommandResult, RecordingRunner

    def answer(argv: tuple[str, ...]) -> CommandResult:
        remote = shlex.split(argv[-1])
        for key, (rc, out, err) in sorted(answers.items(), key=lambda kv: len(kv[0])):
            if shlex.join(remote).startswith(key):
                return CommandResult(argv, rc, out, err, 0.0)
        raise AssertionError(f"unscripted remote call {remote}")

    runner = RecordingRunner({"ssh": answer})
    return Transport(runner, Path("/nonexistent/ctl")), runner


def _doctor(version: str, core_ok: bool = True, root: bool = True) -> str:
    import json

    return json.dumps({
        "poolbench": version, "core_ok": core_ok, "core_missing": [] if core_ok else ["fio"],
        "host": {"root": root}, "zfs": {"in_use": "openzfs", "version": "zfs-2.3.2-1"},
    })  # fmt: skip


def test_a_host_is_ready_only_with_the_same_poolbench_its_core_root_and_free_disks() -> None:
    import itertools

    import poolbench
    from poolbench.fleet.readiness import check_host
    from poolbench.fleet.sshhosts import parse_line

    host = parse_line("root@nas1 disks=/dev/sdb,/dev/sdc")
    # This machine's clock reads 100.0 then 100.2 around the remote date: skew +5.0 +- 0.1.
    clock = itertools.chain([99.0], itertools.cycle([100.0, 100.2]))
    ok = {"date": (0, "105.1\n", ""), "poolbench doctor": (0, _doctor(poolbench.__version__), ""),
          "poolbench disks /dev/sdb /dev/sdc": (0, "", "")}  # fmt: skip
    transport, runner = _remote_host(ok)
    c = check_host(transport, host, lambda: next(clock))
    assert c.ready and c.zfs == "openzfs (zfs-2.3.2-1)" and c.disks == "2 free"
    assert (round(c.skew_s or 0, 3), round(c.skew_bound_s or 0, 3)) == (5.0, 0.1)
    assert "5.0 s off" in c.warnings[0]  # over 2 s: said, but a host stays ready
    assert all(a[0] == "ssh" and "BatchMode=yes" in a for a in runner.argvs)
    for answers, problem in [
        ({"poolbench doctor": (0, _doctor("0.0.1"), "")}, "poolbench 0.0.1 there"),
        ({"poolbench doctor": (7, _doctor(poolbench.__version__, core_ok=False), "")},
         "it lacks fio"),
        ({"poolbench doctor": (0, _doctor(poolbench.__version__, root=False), "")},
         "not root there"),
        ({"poolbench doctor": (127, "", "sh: 1: poolbench: not found")},
         "poolbench is not installed there"),
        ({"poolbench doctor": (0, "Traceback ...", "")}, "did not answer as poolbench does"),
        ({"poolbench disks": (6, "", "error: Refusing 1 of the 2 named devices:\n /dev/sdc is "
                                     "in use: mounted at /srv\n")},
         "its disks cannot be claimed there: Refusing 1 of the 2 named devices: /dev/sdc is in "
         "use: mounted at /srv"),
    ]:  # fmt: skip
        transport, _ = _remote_host({**ok, **answers})
        c = check_host(transport, host, lambda: next(clock))
        assert not c.ready and problem in c.problems[0], (problem, c.problems)
    transport, _ = _remote_host({"date": (255, "", "ssh: connect to host nas1 port 22: No route "
                                                    "to host\r\n")})  # fmt: skip
    c = check_host(transport, host, lambda: next(clock))
    assert not c.reachable and "No route to host. Check the address" in c.problems[0]
