"""A fleet run's part on one host: the study started detached, asked about, stopped.

`poolbench fleet run` (on the controller) calls these through SSH as hidden `poolbench fleet
host-*` commands. The study must not hang on the SSH session: with no terminal, a closed or
cut link sends it no SIGHUP, and once sshd's window is full a study writing its progress to
the session would block mid-trial holding its pools. So it runs detached (its own session,
output to a log), and the controller polls it: a lost link costs only the polling; the
study goes on and `fleet run --resume` collects it.

One fleet study runs on a host at a time: it holds RUN_ROOT/.host.lock (flock) for its life.
Everything of a fleet run lives in one directory on the host, RUN_ROOT/TAG: the study file,
its own result store (store.db, with its journals beside it: `poolbench cleanup --db
RUN_ROOT/TAG/store.db` tears down whatever a killed study left), the log, and state.json
(the study's process: boot id, pid and start time, so a reused pid is never taken for it).
"""

from __future__ import annotations

import contextlib
import fcntl
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
ATTEMPT_RE = re.compile(r"^[0-9a-f]{4,32}$")
LOG_CHUNK = 64 << 10  # bytes of log one status call returns at most
STORE, LOG, STATE, STUDY = "store.db", "log", "state.json", "study.toml"
HOST_LOCK = ".host.lock"  # in RUN_ROOT: held by the fleet study running on this host
CANCELLED = "cancelled"  # CANCELLED.ATTEMPT: that start must not begin (see `start`)


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


def start(
    tag: str,
    args: list[str],
    root: Path = RUN_ROOT,
    at: float | None = None,
    attempt: str | None = None,
) -> int:
    """Start `poolbench ARGS --db RUN_DIR/store.db` detached; its pid. With `at` (seconds
    since the epoch, this host's clock) it waits for that instant first, so that every host
    of a fleet starts together.

    One fleet study at a time on a host: it holds HOST_LOCK for its whole life (a second
    one, of this tag or another, e.g. started again after a lost link, is refused: two
    studies would share the disks). `attempt` names this start, so that a controller
    stopped while this call was on its way can cancel it (`stop`): the study checks for
    the cancellation after its pid is on record and before it begins."""
    if attempt is not None and not ATTEMPT_RE.match(attempt):
        raise UsageError(f"'{attempt}' is not a start attempt's name.")
    d = run_dir(tag, root)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = _host_lock(root, tag)  # a study of this tag still going holds it too
    try:
        return _fork_study(d, args, at, attempt, lock)
    finally:
        os.close(lock)  # the study's copy holds the lock from here on


def _host_lock(root: Path, tag: str) -> int:
    """HOST_LOCK taken for fleet run `tag` (the fd); refused, naming the holder, when a
    fleet study already runs here."""
    fd = os.open(root / HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another"
        os.close(fd)
        raise UsageError(
            f"Fleet run {holder} is still going on this host: one fleet study at a time "
            "shares a host's disks.",
            f"Let it finish (poolbench fleet run --resume {holder}) or stop it there first.",
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, tag.encode(), 0)
    return fd


def _fork_study(d: Path, args: list[str], at: float | None, attempt: str | None, lock: int) -> int:
    argv = [sys.executable, "-m", "poolbench", *args, "--db", str(d / STORE)]
    log = os.open(d / LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the study: its own session, no terminal, its output to the log
        try:
            os.setsid()
            os.close(go_w)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(log, 1)
            os.dup2(log, 2)
            os.chdir(d)
            os.set_inheritable(lock, True)  # held across the exec, for the study's life
            os.read(go_r, 1)  # its pid is on record now: a stop from here on finds it
            if at is not None:
                _wait_until(at)
            if attempt is not None and (d / f"{CANCELLED}.{attempt}").exists():
                _log("fleet start: cancelled by the controller before the study began")
                os._exit(0)
            # exec, not the Runner: a detached study outlives this call by design, and the
            # Runner waits for what it starts. Its own commands all go through its Runner.
            os.execv(sys.executable, argv)
        finally:
            os._exit(127)  # only if exec failed
    os.close(log)
    os.close(go_r)
    try:
        owner = lifecycle.owner_id(pid)  # the child waits on the pipe: it is there to read
        tmp = d / f"{STATE}.tmp"
        tmp.write_text(json.dumps({"owner": owner, "pid": pid, "argv": argv}))
        tmp.replace(d / STATE)
    finally:
        os.write(go_w, b"g")
        os.close(go_w)
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
    more: bool = False  # the log has more after next_offset (read it before collecting)

    def to_json(self) -> dict[str, object]:
        return {"running": self.running, "log": self.log, "next": self.next_offset,
                "runs": self.runs, "more": self.more}  # fmt: skip


def status(tag: str, offset: int = 0, root: Path = RUN_ROOT) -> HostStatus:
    d = run_dir(tag, root)
    if not d.is_dir():
        raise UsageError(f"No fleet run {tag} on this host.", "Give the tag fleet run printed.")
    running = lifecycle.owner_alive(_owner(d))
    text, nxt, more = "", offset, False
    with contextlib.suppress(FileNotFoundError), (d / LOG).open("rb") as f:
        f.seek(offset)
        chunk = f.read(LOG_CHUNK)
        cut = log_cut(chunk, running or len(chunk) == LOG_CHUNK)
        text, nxt = chunk[:cut].decode(errors="replace"), offset + cut
        more = os.fstat(f.fileno()).st_size > nxt
    return HostStatus(running, text, nxt, _runs(d / STORE), more)


def log_cut(chunk: bytes, partial: bool) -> int:
    """How much of `chunk` to send. All of it when it is the log's end; while more may
    follow, whole lines only (the rest comes with the next call), unless one line fills
    the chunk: then all of it but a character cut in two (UTF-8), so a long line never
    stalls the log and nothing is decoded in halves."""
    if not partial:
        return len(chunk)
    cut = chunk.rfind(b"\n") + 1
    if cut or len(chunk) < LOG_CHUNK:
        return cut
    n = len(chunk)
    for back in range(1, min(4, n) + 1):
        b = chunk[n - back]
        if b & 0xC0 == 0x80:
            continue  # a continuation byte: look for its lead
        if b >= 0xC0:  # a lead byte: is its whole character here?
            need = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
            return n if back >= need else n - back
        return n
    return n


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


def stop(tag: str, root: Path = RUN_ROOT, attempt: str | None = None) -> bool:
    """Ctrl-C to the study's session (its own clean stop: torn down, what was finished
    kept; its commands get it as they would from a terminal); False when none is running.
    `attempt`: that start is cancelled too, should it arrive after this call."""
    d = run_dir(tag, root)
    if attempt is not None:
        if not ATTEMPT_RE.match(attempt):
            raise UsageError(f"'{attempt}' is not a start attempt's name.")
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        (d / f"{CANCELLED}.{attempt}").touch()  # before the owner is read: see `start`
    owner = _owner(d)
    if not lifecycle.owner_alive(owner):
        return False
    assert owner is not None
    pid = int(owner.split(":")[1])
    try:
        os.killpg(pid, signal.SIGINT)  # its session's group: setsid made it pid
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)  # not yet its own session's leader
    return True
