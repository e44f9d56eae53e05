"""Whether a long run would die with the terminal it was started from.

A study started in an SSH session's terminal gets SIGHUP when the connection drops: it then
stops as for Ctrl-C (system/stopping.py), torn down and resumable, but stopped. tmux or
screen keep the terminal alive; `nohup` ignores SIGHUP; `systemd-run` and `setsid` leave no
controlling terminal to hang up. `hangup_risk()` says when none of these protects the run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping
from pathlib import Path

from poolbench import is_digits

# Programs that keep a terminal alive after the connection that showed it is gone.
KEEPERS = ("tmux", "screen", "mosh-server", "byobu", "zellij", "abduco", "dtach")


def hangup_risk(
    env: Mapping[str, str] | None = None, proc: Path = Path("/proc"), pid: int | None = None
) -> str | None:
    """Why a hangup would stop this process (an SSH terminal, with nothing that keeps it
    alive or ignores the hangup), or None."""
    env = os.environ if env is None else env
    if not (env.get("SSH_CONNECTION") or env.get("SSH_TTY") or env.get("SSH_CLIENT")):
        return None
    if env.get("TMUX") or env.get("STY") or env.get("ZELLIJ"):
        return None
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN or not _has_terminal():
        return None  # nohup, or no controlling terminal to hang up (setsid, systemd-run)
    keeper = _keeper_above(proc, os.getpid() if pid is None else pid)
    if keeper is not None:
        return None
    return "it runs in this SSH session's terminal, outside tmux or screen"


def _has_terminal() -> bool:
    try:
        os.close(os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY))
    except OSError:
        return False
    return True


def _keeper_above(proc: Path, pid: int) -> str | None:
    """The first program of KEEPERS among this process's ancestors (a shell inside tmux
    whose TMUX variable was unset, sudo dropping the environment)."""
    seen = 0
    while pid > 1 and seen < 64:
        try:
            stat = (proc / str(pid) / "stat").read_text()
        except OSError:
            return None
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        if any(name.lower().startswith(k) for k in KEEPERS):
            return name
        fields = stat[stat.rfind(")") + 1 :].split()
        pid = int(fields[1]) if len(fields) > 1 and is_digits(fields[1]) else 0
        seen += 1
    return None
