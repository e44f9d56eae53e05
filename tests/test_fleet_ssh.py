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
