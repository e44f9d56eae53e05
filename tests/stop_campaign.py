"""The machinery of the stop campaign (tests/test_stop_campaign.py): a real study started in a
process group of its own, stopped at a seeded point of one phase by one of the ways studies
really end, then everything checked that the stop promises.

A phase is found by what can be seen of it: a command of that phase in the process table,
a descendant of the poolbench process (counted by its main process: fio's job processes and
a wrapper's child are not counted again). A command too quick to be hit on purpose (`zpool
create`, an export) is held open by a wrapper on PATH that sleeps WRAP_S before or after the
real command (a seeded choice), so that the signal lands inside the step: before it ran, or
after it did its work but before poolbench heard back. Within the phase the signal comes at
a seeded random point of its window.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from poolbench.study import matrix
from poolbench.study.model import parse
from poolbench.system import throttle
from poolbench.workloads.library import parse_list

WRAP_S = 1.5  # how long a wrapper holds its command open

# Two trials (2 replicates of one configuration), so that a stop can land in the second one
# with the first one's measurements kept. Capped disks: fio's windows last long enough to be
# hit, and the caps are something the stop must remove.
ZFS_STUDY = """
name = "stopzfs"
replicates = 2
max_replicates = 2

[disks]
count = 3
size = "256M"
source = "loop"
cap = 20

[factors]
backend = ["zfs"]
layout = ["raidz1"]
ashift = [12]
fill = [10]

[workloads]
names = ["seq-write", "seq-read"]
size = "32M"
"""

# One study stopped and resumed in every phase in turn (the default tier): two trials of
# three workloads, the database's among them; disks capped at 40 MiB/s, so that a write or
# the pre-fill lasts a few tenths of a second (a window to land in).
CHAIN_STUDY = """
name = "stopchain"
replicates = 2
max_replicates = 2

[disks]
count = 3
size = "256M"
source = "loop"
cap = 40

[factors]
backend = ["zfs"]
layout = ["raidz1"]
ashift = [12]
fill = [10]

[workloads]
names = ["seq-write", "seq-read", "pgbench-tpcb"]
size = "16M"
runtime = 2
"""

BTRFS_STUDY = """
name = "stopbtrfs"
replicates = 2
max_replicates = 2

[disks]
count = 2
size = "512M"
source = "loop"
cap = 20

[factors]
backend = ["btrfs"]
layout = ["raid1"]

[workloads]
names = ["seq-write", "seq-read"]
size = "16M"
"""

# Built-in studies, cut to one configuration and two trials: their resume command is
# `poolbench study NAME --resume RUN`.
DATABASE = ["study", "database", "--disks", "2x256M", "--layouts", "mirror:2", "--levels", "8K",
            "--fpw", "on", "--logbias", "latency", "--replicates", "2", "--max-replicates", "2",
            "--size", "16M", "--runtime", "2", "--workloads", "pgbench-tpcb"]  # fmt: skip
RESILVER = ["study", "resilver", "--disks", "3x256M", "--layouts", "mirror:2", "--replicates",
            "2", "--max-replicates", "2", "--size", "32M", "--workloads",
            "seq-write,resilver"]  # fmt: skip
DEMO = ["demo"]


@dataclass(frozen=True)
class Phase:
    name: str
    study: str  # "zfs", "btrfs" (study files), "database", "resilver", "demo"
    watch: str  # a regex on the command line of a process of the phase
    wrap: tuple[str, str] | None = None  # (program, first argument): held open WRAP_S
    nth: int = 1  # the phase's nth command (2: the second trial's)
    window: float = WRAP_S  # seconds after the command appears within which to stop it


PHASES = {
    p.name: p
    for p in (
        Phase("pool creation", "zfs", r"zpool create", ("zpool", "create")),
        # the properties are set by `zpool create -o/-O` and read back at once (`zfs get`)
        Phase("property read-back", "zfs", r"zfs get", ("zfs", "get")),
        Phase("fill", "zfs", r"fio .*fill\d+\.fio", window=0.6),
        Phase("fio", "zfs", r"fio .*seq-write", nth=2, window=0.4),
        Phase("cold read export", "zfs", r"zpool export", ("zpool", "export")),
        Phase("cold read import", "zfs", r"zpool import", ("zpool", "import"), nth=2),
        Phase("teardown", "zfs", r"zpool destroy", ("zpool", "destroy")),
        Phase("pgbench", "database", r"pgbench .*-T", nth=2, window=1.5),
        Phase("resilver", "resilver", r"zpool replace", ("zpool", "replace")),
        # `mkfs.btrfs -f ...` makes the filesystem (the preflight's `--version` is not it)
        Phase("btrfs creation", "btrfs", r"mkfs\.btrfs -f", ("mkfs.btrfs", "-f")),
        Phase("btrfs fio", "btrfs", r"fio .*seq-write", nth=2, window=0.4),
        Phase("btrfs cold read", "btrfs", r"umount", ("umount", "")),
        Phase("demo pool creation", "demo", r"zpool create", ("zpool", "create")),
    )
}


@dataclass(frozen=True)
class Way:
    """One way a study is stopped: a signal, to poolbench alone or to its process group."""

    name: str
    signum: int
    group: bool

    def send(self, pid: int) -> None:
        (os.killpg if self.group else os.kill)(pid, self.signum)


WAYS = {
    w.name: w
    for w in (
        Way("SIGTERM to the process", signal.SIGTERM, False),  # kill, timeout
        Way("SIGTERM to the process group", signal.SIGTERM, True),
        Way("SIGHUP to the process group", signal.SIGHUP, True),  # a terminal's hangup
        Way("SIGINT to the process group", signal.SIGINT, True),  # Ctrl-C
    )
}
KILL = Way("kill -9", signal.SIGKILL, False)  # a crash: no handler runs


@dataclass
class Stopped:
    """What one stop did: the exit code, stderr, the rows measured before the signal."""

    returncode: int
    stderr: str
    before: dict[tuple[str, int, str], float]
    mode: str  # how the phase was held: "before", "after" or "live"


class Case:
    """One study, run in `base` (a directory others may enter: PostgreSQL runs as its own
    user), stopped and resumed."""

    def __init__(self, base: Path, phase: Phase, way: Way, seed: int) -> None:
        self.base, self.phase, self.way = base, phase, way
        self.rng = random.Random(f"{seed}:{phase.name}:{way.name}")
        self.db, self.scratch = base / "r.db", base / "scratch"
        self.wrappers = base / "bin"
        self.caps_before = _caps()
        self.sockdirs_before = set(Path("/tmp").glob("pb-pg-*"))

    def argv(self) -> list[str]:
        where = ["--db", str(self.db), "--scratch-dir", str(self.scratch)]
        study = self.phase.study
        files = {"zfs": ZFS_STUDY, "btrfs": BTRFS_STUDY, "chain": CHAIN_STUDY}
        if study in files:
            path = self.base / f"{study}.toml"
            path.write_text(files[study])
            return ["run", str(path), *where, "--seed", "5"]
        named = {"database": DATABASE, "resilver": RESILVER, "demo": DEMO}[study]
        return [*named, *where, *(["--seed", "5"] if study != "demo" else [])]

    def env(self, wrapped: bool) -> dict[str, str]:
        env = dict(os.environ)
        if wrapped:
            env["PATH"] = f"{self.wrappers}:{env['PATH']}"
        return env

    def stop(self, second: bool = False, argv: list[str] | None = None) -> Stopped:
        """Start the study (or `argv`: the command that resumes it), stop it in its phase
        (`second`: a second signal as soon as the teardown says it started), wait for it to
        end."""
        mode = self._wrap()
        err_path = self.base / "stderr"
        with open(err_path, "w") as err, open(self.base / "stdout", "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "poolbench", *(argv or self.argv())],
                stdout=out, stderr=err, text=True, env=self.env(mode != "live"),
                process_group=0,
            )  # fmt: skip
        try:
            _wait_for_phase(proc, self.phase, err_path)
            time.sleep(self.rng.uniform(0, self.phase.window * 0.9))
            before = rows(self.db)
            self.way.send(proc.pid)
            if second:
                _await_text(err_path, "tearing down", proc)  # or "stopping once tearing..."
                assert proc.poll() is None, "the teardown ended before a second signal"
                self.way.send(proc.pid)
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return Stopped(proc.returncode, err_path.read_text(), before, mode)

    def _wrap(self) -> str:
        shutil.rmtree(self.wrappers, ignore_errors=True)  # the last phase's
        if self.phase.wrap is None:
            return "live"
        mode = self.rng.choice(["before", "after"])
        program, first = self.phase.wrap
        real = shutil.which(program)
        assert real, program
        self.wrappers.mkdir()
        held = (
            f'sleep {WRAP_S}; exec "{real}" "$@"'
            if mode == "before"
            else f'"{real}" "$@"; rc=$?; sleep {WRAP_S}; exit $rc'
        )
        test = f'[ "$1" = "{first}" ]' if first else "true"
        w = self.wrappers / program
        w.write_text(f'#!/bin/bash\nif {test}; then {held}; fi\nexec "{real}" "$@"\n')
        w.chmod(0o755)
        return mode

    def leftovers(self) -> list[str]:
        """Anything of this study still on the machine (pools, loop devices, mounts, caps,
        PostgreSQL servers, fio, socket directories, journals, scratch files)."""
        left = [f"pool {n}" for n in self.own_pools()]
        loops = subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
        left += [f"loop {x}" for x in loops.splitlines() if str(self.scratch) in x]
        mounts = Path("/proc/mounts").read_text()
        left += [f"mount {x}" for x in mounts.splitlines() if str(self.scratch) in x]
        left += [f"cap {k}={v}" for k, v in _caps().items() if self.caps_before.get(k) != v]
        left += [f"process {p}: {c}" for p, c in _processes() if str(self.scratch) in c]
        if self.phase.study in ("database", "chain"):  # (another session's are not ours)
            left += [f"socket dir {d}" for d in set(Path("/tmp").glob("pb-pg-*"))
                     - self.sockdirs_before]  # fmt: skip
        journals = self.base / "journals"
        left += [f"journal {j.name}" for j in journals.glob("*")] if journals.is_dir() else []
        if self.scratch.exists():
            left += [f"file {p}" for p in self.scratch.rglob("*")]
        return left

    def own_pools(self) -> list[str]:
        """This run's pools among the imported ones: pb<run><token>t<trial>, by the tokens
        its invocations recorded (another session's pool, such as one a killed run of an
        older poolbench left in the system's cache file, is not this study's)."""
        names = subprocess.run(["zpool", "list", "-H", "-o", "name"], capture_output=True,
                               text=True).stdout.split()  # fmt: skip
        tokens = "|".join(self.tokens()) or "-"
        return [n for n in names if re.fullmatch(rf"pb1(?:{tokens})t\d+", n)]

    def tokens(self) -> list[str]:
        if not self.db.exists():
            return []
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT metadata FROM runs WHERE id = 1").fetchone()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()
        return [str(t) for t in json.loads(row[0]).get("pool_tokens", [])] if row else []

    def cells(self) -> tuple[set[tuple[str, int, str]], set[tuple[str, int, str]]]:
        """The (configuration, replicate, workload) cells the stored study's matrix asks for
        at least (its replicates) and at most (max_replicates: the demo's extra rounds);
        the same when max_replicates = replicates, as in every study here but the demo."""
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True)
        try:
            meta = json.loads(con.execute("SELECT metadata FROM runs WHERE id = 1").fetchone()[0])
        finally:
            con.close()
        study = parse(meta["study_text"], "stored")
        names = [w.name for w in parse_list(",".join(study.workloads.names))]
        configs = matrix.configs(study)

        def upto(n: int) -> set[tuple[str, int, str]]:
            return {(c.key, r, w) for c in configs for r in range(n) for w in names}

        return upto(study.replicates), upto(study.max_replicates)

    def resume(self, stderr: str) -> subprocess.CompletedProcess[str]:
        """Exactly the command the stop printed, as a user pastes it."""
        return subprocess.run([sys.executable, "-m", "poolbench", *resume_words(stderr)],
                              capture_output=True, text=True, timeout=900)  # fmt: skip

    def cleanup(self) -> None:
        """After a failed assertion: what the study left is removed all the same."""
        subprocess.run([sys.executable, "-m", "poolbench", "cleanup", "--db", str(self.db)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip


def resume_words(stderr: str) -> list[str]:
    """The words after `poolbench` of the last command printed to finish the run."""
    lines = re.findall(r"Finish it with: (.+)$", stderr, re.M)
    assert lines, stderr
    words = shlex.split(lines[-1])
    assert words[0] == "poolbench", lines[-1]
    return words[1:]


def run_row(db: Path) -> tuple[str, str | None]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        status, by = con.execute("SELECT status, stopped_by FROM runs WHERE id = 1").fetchone()
    finally:
        con.close()
    return str(status), by


def rows(db: Path) -> dict[tuple[str, int, str], float]:
    """The measurements stored so far (read-only: never the one who creates the store)."""
    if not db.exists():
        return {}
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        found = con.execute("SELECT config, replicate, workload, value FROM measurements")
        return {(c, int(r), w): float(v) for c, r, w, v in found}
    except sqlite3.OperationalError:  # made, its tables not there yet
        return {}
    finally:
        con.close()


@contextmanager
def open_base() -> Iterator[Path]:
    """A directory under /var/tmp that the postgres user may enter, removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="pbstop-", dir="/var/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _caps() -> dict[str, tuple[int, int]]:
    return dict(throttle.caps()) if not throttle.unavailable() else {}


def _processes() -> Iterator[tuple[int, str]]:
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            yield int(p.name), cmd


def _parents() -> dict[int, int]:
    found = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            found[int(p.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def _wait_for_phase(
    proc: subprocess.Popen[str], phase: Phase, err: Path, timeout: float = 240
) -> None:
    """Until the phase's nth command runs under poolbench (counted by main process)."""
    pattern = re.compile(phase.watch)
    seen: set[int] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"the study ended ({proc.returncode}) before {phase.name}: "
                + err.read_text()[-3000:]
            )
        parents = _parents()
        commands = dict(_processes())
        matching = {
            p for p, c in commands.items() if pattern.search(c) and _under(p, proc.pid, parents)
        }
        seen |= {p for p in matching if parents.get(p) not in matching}
        if len(seen) >= phase.nth:
            return
        time.sleep(0.02)
    raise AssertionError(f"the study never reached {phase.name}")


def _under(pid: int, root: int, parents: dict[int, int]) -> bool:
    """Whether `pid` is `root` or one of its descendants."""
    while pid > 1:
        if pid == root:
            return True
        pid = parents.get(pid, 0)
    return False


def _await_text(path: Path, text: str, proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if text in path.read_text():
            return
        time.sleep(0.02)
    raise AssertionError(f"never said {text!r}: {path.read_text()[-2000:]}")
