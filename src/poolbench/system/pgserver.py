"""A throw-away PostgreSQL cluster for one pgbench measurement, through the Runner.

The cluster's data directory lives in the measured filesystem (what is measured); its Unix
socket, server log and pgbench's transaction logs live in a short directory under /tmp (the
socket path must stay under 108 bytes, and nothing but the database may write to the pool).
No TCP port is opened (listen_addresses = ''). PostgreSQL refuses to run as root, so a root
poolbench runs every PostgreSQL program as the `postgres` user (`runuser -u postgres --`).

The server is journaled before `initdb` (safety/journal.py `postgres_intent`): teardown and
`poolbench cleanup` stop a server still running on that data directory (`stop`) and remove
the cluster, also after a kill -9 of poolbench.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from poolbench import capabilities, is_digits
from poolbench.errors import UsageError
from poolbench.system import watchdog
from poolbench.system.runner import Runner

USER = "postgres"
PORT = "5432"  # names the socket file only: no TCP port is opened
DB = "postgres"
PG_LIB = Path("/usr/lib/postgresql")
STOP_WAIT_S = 30.0
GRACE_S = 5.0  # after pg_ctl, and after each signal, before the next step
INSTALL = (
    "Install PostgreSQL (Debian: apt-get install --no-remove postgresql postgresql-contrib; "
    "scripts/install.sh --with database does it), or drop the pgbench workloads."
)


@dataclass(frozen=True)
class Cluster:
    bindir: Path  # initdb, pg_ctl, postgres, pgbench, psql
    datadir: Path  # in the measured filesystem
    sockdir: Path  # socket, server log, transaction logs (short, under /tmp)

    def tool(self, name: str) -> str:
        return str(self.bindir / name)


def bindir(pg_lib: Path = PG_LIB) -> Path:
    """The newest installed PostgreSQL's programs (Debian: /usr/lib/postgresql/N/bin);
    Unsupported (exit 7) when PostgreSQL or pgbench is not installed."""
    found = []
    for d in pg_lib.glob("*/bin") if pg_lib.is_dir() else []:
        if is_digits(d.parent.name) and (d / "initdb").exists():
            found.append((int(d.parent.name), d))
    if not found:
        raise capabilities.unsupported(
            "postgresql",
            f"The pgbench workloads need PostgreSQL's server programs, and none is installed "
            f"(no {pg_lib}/N/bin/initdb); nothing was created.",
            INSTALL,
        )
    best = max(found)[1]
    if not (best / "pgbench").exists():
        raise capabilities.unsupported(
            "postgresql", f"PostgreSQL in {best} has no pgbench; nothing was created.", INSTALL
        )
    return best


def as_owner() -> list[str]:
    """The argv prefix that runs a PostgreSQL program as its owner: root cannot."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(USER)
    except KeyError:
        raise capabilities.unsupported(
            "postgresql",
            f"PostgreSQL refuses to run as root and this machine has no '{USER}' user.",
            INSTALL,
        ) from None
    return ["runuser", "-u", USER, "--"]


def check_reachable(directory: Path) -> None:
    """Refuse a data directory the postgres user could not reach: every directory above it
    must let others enter (root-owned pytest or home directories often do not)."""
    if os.geteuid() != 0:
        return
    for parent in [directory, *directory.parents]:
        try:
            mode = parent.stat().st_mode
        except OSError:
            continue
        if not mode & stat.S_IXOTH:
            raise UsageError(
                f"PostgreSQL runs as the '{USER}' user, which cannot reach {directory}: "
                f"{parent} does not let others enter (mode {stat.S_IMODE(mode):o}).",
                "Measure under a directory others may enter, e.g. --scratch-dir "
                "/var/tmp/poolbench for a study.",
            )


def new_sockdir() -> Path:
    """A short, private directory for the socket and logs, owned by the server's user."""
    d = Path(tempfile.mkdtemp(prefix="pb-pg-", dir="/tmp"))
    _give(d)
    return d


def _give(path: Path) -> None:
    if os.geteuid() == 0:
        pw = pwd.getpwnam(USER)
        os.chown(path, pw.pw_uid, pw.pw_gid)


def init(runner: Runner, c: Cluster, settings: dict[str, str]) -> None:
    """initdb the data directory (made here, owned by the server's user) and write its
    settings: Unix socket only, in `sockdir`, and `settings` (full_page_writes, ...)."""
    if not runner.dry_run:
        c.datadir.mkdir()
        _give(c.datadir)
    runner.run([*as_owner(), c.tool("initdb"), "-D", str(c.datadir), "-U", USER, "-A", "trust",
                "-E", "UTF8", "--no-instructions"])  # fmt: skip
    lines = {"listen_addresses": "''", "unix_socket_directories": f"'{c.sockdir}'",
             "port": PORT} | {k: v for k, v in settings.items()}  # fmt: skip
    conf = c.datadir / "postgresql.conf"
    if not runner.dry_run:
        with open(conf, "a") as fh:
            fh.write("\n# poolbench\n" + "".join(f"{k} = {v}\n" for k, v in lines.items()))


def start(runner: Runner, c: Cluster) -> None:
    """pg_ctl start, waiting until the server accepts connections. The server outlives the
    pg_ctl call on purpose (reap_group=False); `stop` ends it."""
    runner.run([*as_owner(), c.tool("pg_ctl"), "-D", str(c.datadir), "-l",
                str(c.sockdir / "server.log"), "-w", "-t", "60", "start"],
               reap_group=False)  # fmt: skip


def client(c: Cluster, program: str, *args: str) -> list[str]:
    """argv of a client program (pgbench, psql) talking to the cluster over its socket."""
    return [*as_owner(), c.tool(program), "-h", str(c.sockdir), "-p", PORT, "-U", USER, *args]


def postmaster_pid(datadir: Path) -> int | None:
    """The running server's pid as its postmaster.pid names it, if that process is this
    data directory's postgres (a stale file, or a reused pid, is not)."""
    try:
        first = (datadir / "postmaster.pid").read_text().split("\n", 1)[0].strip()
        cmdline = Path(f"/proc/{int(first)}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    names = [a.decode(errors="replace") for a in cmdline]
    if names and os.path.basename(names[0]).startswith("postgres") and str(datadir) in names:
        return int(first)
    return None


def stop_argv(bindir_: Path, datadir: Path) -> list[str]:
    """pg_ctl's immediate stop, waited for within STOP_WAIT_S."""
    return [*as_owner(), str(bindir_ / "pg_ctl"), "-D", str(datadir), "-m", "immediate",
            "-w", "-t", str(int(STOP_WAIT_S)), "stop"]  # fmt: skip


def stop(runner: Runner, bindir_: Path, datadir: Path, sockdir: Path,
         remove_datadir: bool = True) -> None:  # fmt: skip
    """Stop the server running on `datadir` (if any) and remove its socket directory, and
    the cluster unless `remove_datadir` is False (it goes with its pool). pg_ctl's immediate
    mode ends every backend at once (the cluster is thrown away); a server pg_ctl could not
    stop gets SIGQUIT, then SIGKILL. Every step is bounded: a server asleep in a pool that
    stopped answering is named and left (its pool's teardown says what releases it)."""
    if runner.dry_run:  # the stop a running server gets; nothing was made to remove
        runner.run(stop_argv(bindir_, datadir), check=False)
        return
    pid = postmaster_pid(datadir)
    if pid is not None:
        runner.run(stop_argv(bindir_, datadir), check=False)
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            if not _wait_gone(pid):
                _signal(pid, sig)
        if not _wait_gone(pid):
            stuck = watchdog.describe_process(pid)
            watchdog.announce(
                "the PostgreSQL server could not be killed and was left behind: "
                + (stuck.describe() if stuck else f"pid {pid}")
            )
    if remove_datadir:  # a bench's own file system; a study's pool takes it with it
        shutil.rmtree(datadir, ignore_errors=True)
    shutil.rmtree(sockdir, ignore_errors=True)


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _wait_gone(pid: int) -> bool:
    deadline = time.monotonic() + GRACE_S
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited server its parent has not reaped yet)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def data_bytes(datadir: Path) -> int:
    """Bytes of the databases' files (base/): what the load put there."""
    total = 0
    for root, _dirs, files in os.walk(datadir / "base"):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, f)).st_size
    return total
