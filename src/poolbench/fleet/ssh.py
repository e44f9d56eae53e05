"""OpenSSH's client as the fleet's transport: every call an argument list through the Runner.

The remote command is an argv joined with shlex.join (the remote shell splits it back into
exactly those words), never a shell string built from input. Connections are shared through
a ControlMaster socket in a private directory, so a host's many short calls cost one
handshake. BatchMode: no prompt ever waits for a person. ServerAliveInterval/CountMax: a cut
link is seen within ALIVE_INTERVAL * ALIVE_COUNT seconds, not at TCP's minutes. Every call has
a time limit. Any other option (user, key, jump host) is the user's ~/.ssh/config's.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
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


def ssh_options(control_dir: Path, config: Path | None = None) -> list[str]:
    """The options every call carries (module docstring); `config`: ssh's -F, in place of
    ~/.ssh/config."""
    return [*(["-F", str(config)] if config else []),
        "-o", "BatchMode=yes",
        "-o", f"ConnectTimeout={CONNECT_TIMEOUT}",
        "-o", f"ServerAliveInterval={ALIVE_INTERVAL}",
        "-o", f"ServerAliveCountMax={ALIVE_COUNT}",
        "-o", "ControlMaster=auto",
        # %C: a hash of host, port and user: short enough for a socket path, one per target.
        "-o", f"ControlPath={control_dir}/%C",
        "-o", f"ControlPersist={CONTROL_PERSIST}",
    ]  # fmt: skip


def ssh_argv(
    target: SshTarget, remote: Sequence[str], control_dir: Path, config: Path | None = None
) -> list[str]:
    """The local argv that runs `remote` (an argv) on `target`."""
    if not remote:
        raise ValueError("an empty remote command")
    return [*_ssh_prefix(target, control_dir, config), shlex.join(remote)]


def _ssh_prefix(
    target: SshTarget, control_dir: Path, config: Path | None, *extra: str
) -> list[str]:
    argv = ["ssh", *ssh_options(control_dir, config), *extra]
    if target.port:
        argv += ["-p", str(target.port)]
    if target.user:
        argv += ["-l", target.user]
    # `--` ends ssh's options: a host name cannot be taken for one.
    return [*argv, "--", target.host]


@dataclass
class Transport:
    """The calls of one poolbench command to its hosts: one private directory of shared
    connections, closed and removed by `open_transport` whatever happened."""

    runner: Runner
    control_dir: Path
    config: Path | None = None
    used: set[SshTarget] = field(default_factory=set)

    def run(
        self,
        target: SshTarget,
        remote: Sequence[str],
        *,
        timeout: float,
        input_text: str | None = None,
    ) -> CommandResult:
        """Run `remote` on `target` under `timeout` seconds (connection included); never
        raises for the remote's exit status (SSH_FAILED: the connection failed)."""
        self.used.add(target)
        return self.runner.run(
            ssh_argv(target, remote, self.control_dir, self.config),
            check=False,
            input_text=input_text,
            timeout=timeout,
        )

    def close(self, target: SshTarget) -> None:
        """Ends the shared connection to `target`, if one is open: nothing is left running."""
        self.runner.run(
            _ssh_prefix(target, self.control_dir, self.config, "-O", "exit"),
            check=False,
            timeout=CONNECT_TIMEOUT,
        )


@contextlib.contextmanager
def open_transport(runner: Runner, config: Path | None = None) -> Iterator[Transport]:
    """A Transport whose shared connections end, and whose directory goes, on the way out."""
    control_dir = Path(tempfile.mkdtemp(prefix="poolbench-ssh-"))  # mode 700: its sockets
    transport = Transport(runner, control_dir, config)
    try:
        yield transport
    finally:
        try:
            for target in sorted(transport.used, key=lambda t: t.label):
                transport.close(target)
        finally:
            shutil.rmtree(control_dir, ignore_errors=True)
