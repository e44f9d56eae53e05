"""OpenSSH's client as the fleet's transport: every call an argument list through the Runner.

The remote command is an argv joined with shlex.join (the remote shell splits it back into
exactly those words), never a shell string built from input. Connections are shared through
a ControlMaster socket in a private directory, so a host's many short calls cost one
handshake. BatchMode: no prompt ever waits for a person. ServerAliveInterval/CountMax: a cut
link is seen within ALIVE_INTERVAL * ALIVE_COUNT seconds, not at TCP's minutes. Every call has
a time limit. Any other option (user, key, jump host) is the user's ~/.ssh/config's.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poolbench.system.runner import CommandResult, Runner

CONNECT_TIMEOUT = 10  # seconds for the TCP connection and ssh's handshake
ALIVE_INTERVAL = 2  # seconds between keep-alive probes on a quiet connection
ALIVE_COUNT = 3  # probes unanswered before ssh gives the link up (exit 255)
CONTROL_PERSIST = 60  # seconds a shared connection outlives its last call
SSH_FAILED = 255  # ssh's own exit status: the connection, not the remote command, failed


@dataclass(frozen=True)
class SshTarget:
    """`user@host[:port]`: the user and port are optional (ssh's config then decides)."""

    host: str
    user: str | None = None
    port: int | None = None

    @property
    def label(self) -> str:
        who = f"{self.user}@{self.host}" if self.user else self.host
        return f"{who}:{self.port}" if self.port else who


def ssh_options(control_dir: Path) -> list[str]:
    """The options every call carries (module docstring)."""
    return [
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
        "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
        "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
        "-o", "ControlMaster=auto",
        # %C: a hash of host, port and user: short enough for a socket path, one per target.
        "-o", f"ControlPath={control_dir}/%C",
        "-o", f"ControlPersist={CONTROL_PERSIST}",
    ]  # fmt: skip


def ssh_argv(target: SshTarget, remote: Sequence[str], control_dir: Path) -> list[str]:
    """The local argv that runs `remote` (an argv) on `target`."""
    if not remote:
        raise ValueError("an empty remote command")
    return [*_ssh_prefix(target, control_dir), shlex.join(remote)]


def _ssh_prefix(target: SshTarget, control_dir: Path, *extra: str) -> list[str]:
    argv = ["ssh", *ssh_options(control_dir), *extra]
    if target.port:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    # `--` ends ssh's options: a host name cannot be taken for one.
    return [*argv, "--", target.host]


def run_remote(
    runner: Runner,
    target: SshTarget,
    remote: Sequence[str],
    *,
    control_dir: Path,
    timeout: float,
    check: bool = False,
    input_text: str | None = None,
) -> CommandResult:
    """Run `remote` on `target` under `timeout` seconds (the whole call, connection included)."""
    return runner.run(
        ssh_argv(target, remote, control_dir),
        check=check,
        input_text=input_text,
        timeout=timeout,
    )


def close_master(runner: Runner, target: SshTarget, control_dir: Path) -> None:
    """Ends the shared connection to `target`, if one is open: nothing is left running."""
    runner.run(
        _ssh_prefix(target, control_dir, "-O", "exit"),
        check=False,
        timeout=CONNECT_TIMEOUT,
    )
