"""A fleet run's part on one host: the study started detached, asked about, stopped.

`poolbench fleet run` (on the controller) calls these through SSH as hidden `poolbench fleet
host-*` commands. The study must not hang on the SSH session: with no terminal, a closed or
cut link sends it no SIGHUP, and once sshd's window is full a study writing its progress to
the session would block mid-trial holding its pools. So it runs detached (its own session,
output to a log), and the controller polls it: a lost link costs only the polling; the
study goes on and `fleet run --resume` collects it.

Everything of a fleet run lives in one directory on the host, RUN_ROOT/TAG: the study file,
its own result store (store.db, with its journals beside it: `poolbench cleanup --db
RUN_ROOT/TAG/store.db` tears down whatever a killed study left), the log, and state.json
(the study's process: boot id, pid and start time, so a reused pid is never taken for it).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from poolbench.engine import lifecycle
from poolbench.errors import UsageError
from poolbench.store.opening import snapshot

RUN_ROOT = Path("/var/lib/poolbench/fleet")
TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
LOG_CHUNK = 64 << 10  # bytes of log one status call returns at most
STORE, LOG, STATE, STUDY = "store.db", "log", "state.json", "study.toml"


def run_dir(tag: str, root: Path = RUN_ROOT) -> Path:
    if not TAG_RE.match(tag):
        raise UsageError(f"'{tag}' is not a fleet run's tag.", "A tag is letters, digits, . _ -")
    return root / tag


def put_study(tag: str, text: str, root: Path = RUN_ROOT) -> Path:
    """The study file the controller sent, written where the run reads it."""
    d = run_dir(tag, root)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = d / STUDY
    path.write_text(text)
    return path


def _owner(d: Path) -> str | None:
    try:
        return str(json.loads((d / STATE).read_text())["owner"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def start(tag: str, args: list[str], root: Path = RUN_ROOT, at: float | None = None) -> int:
    """Start `poolbench ARGS --db RUN_DIR/store.db` detached; its pid. With `at` (seconds
    since the epoch, this host's clock) it waits for that instant first, so that every host
    of a fleet starts together. A run of this tag still going is refused (two studies would
    share one store and its disks)."""
    d = run_dir(tag, root)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    if lifecycle.owner_alive(_owner(d)):
        raise UsageError(
            f"Fleet run {tag} is still going on this host.",
            "Wait for it (poolbench fleet run --resume TAG polls it) or stop it first.",
        )
    argv = [sys.executable, "-m", "poolbench", *args, "--db", str(d / STORE)]
    log = os.open(d / LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    pid = os.fork()
    if pid == 0:  # the study: its own session, no terminal, its output to the log
        try:
            os.setsid()
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(d)
            if at is not None:
                _wait_until(at)
            # exec, not the Runner: a detached study outlives this call by design, and the
            # Runner waits for what it starts. Its own commands all go through its Runner.
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)  # only if exec failed
    os.close(log)
    owner = None
    for _ in range(100):  # its start time is readable once the child runs
        owner = lifecycle.owner_id(pid)
        if owner:
            break
    tmp = d / f"{STATE}.tmp"
    tmp.write_text(json.dumps({"owner": owner, "pid": pid, "argv": argv}))
    tmp.replace(d / STATE)
    return pid


def _wait_until(at: float) -> None:
    """In the detached child, before its exec: its lines go to fd 1, the log, whatever
    Python's sys.stdout was in the parent."""
    late = time.time() - at
    if late > 0:
        _log(f"fleet start: {late:.2f} s late for the common start time")
        return
    when = time.strftime("%H:%M:%S", time.localtime(at))
    _log(f"fleet start: waiting {-late:.1f} s for the common start time {when}")
    while (left := at - time.time()) > 0:
        time.sleep(min(left, 1.0))
    _log(f"fleet start: started {time.time() - at:.3f} s after it (this host's clock)")


def _log(line: str) -> None:
    os.write(1, (line + "\n").encode())


@dataclass(frozen=True)
class HostStatus:
    running: bool
    log: str  # the log from `offset`, at most LOG_CHUNK bytes
    next_offset: int
    runs: list[dict[str, object]]  # the store's runs: id, status, name

    def to_json(self) -> dict[str, object]:
        return {"running": self.running, "log": self.log, "next": self.next_offset,
                "runs": self.runs}  # fmt: skip


def status(tag: str, offset: int = 0, root: Path = RUN_ROOT) -> HostStatus:
    d = run_dir(tag, root)
    if not d.is_dir():
        raise UsageError(f"No fleet run {tag} on this host.", "Give the tag fleet run printed.")
    running = lifecycle.owner_alive(_owner(d))
    text, nxt = "", offset
    with contextlib.suppress(FileNotFoundError), (d / LOG).open("rb") as f:
        f.seek(offset)
        chunk = f.read(LOG_CHUNK)
        # Whole lines only while the study writes: the rest comes with the next call.
        cut = chunk.rfind(b"\n") + 1 if running else len(chunk)
        text, nxt = chunk[:cut].decode(errors="replace"), offset + cut
    return HostStatus(running, text, nxt, _runs(d / STORE))


def _runs(path: Path) -> list[dict[str, object]]:
    if not path.exists():
        return []
    from poolbench.store.db import Store

    store = Store(path, "read")
    try:
        return [{"id": r["id"], "status": r["status"], "name": r["name"]} for r in store.runs()]
    finally:
        store.close()


def store_snapshot(tag: str, root: Path = RUN_ROOT) -> bytes:
    """The run's store as one consistent SQLite file, for the controller to import."""
    path = run_dir(tag, root) / STORE
    if not path.is_file():
        raise UsageError(f"Fleet run {tag} has no store on this host yet.")
    return snapshot(path)


def stop(tag: str, root: Path = RUN_ROOT) -> bool:
    """Ctrl-C to the study (its own clean stop: torn down, what was finished kept);
    False when none is running."""
    owner = _owner(run_dir(tag, root))
    if not lifecycle.owner_alive(owner):
        return False
    assert owner is not None
    with contextlib.suppress(ProcessLookupError):
        os.kill(int(owner.split(":")[1]), signal.SIGINT)
    return True
