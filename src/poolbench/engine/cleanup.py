"""Recovery after a crash: tear down what an earlier poolbench left behind, and mark the runs
it left "running" as interrupted.

Each trial writes a journal file `run<R>-pid<P>-trial<N>.jsonl` (a scratch filesystem
`scratch-pid<P>.jsonl`, the debugfs `record` mounts `record-pid<P>.jsonl`) before creating
anything and
removes it after a complete teardown. A journal whose process is gone is stale: a crash or
kill -9 happened. `poolbench cleanup` (also run automatically before a study) tears those
down — through the journal, which never touches anything poolbench did not create. Journals
of a poolbench that is still running are left alone. A run whose process is gone (its owner,
engine/lifecycle.py: boot id, pid and start time, so a reboot or a reused pid is seen) is
marked interrupted; `--resume` finishes it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from poolbench.engine import lifecycle
from poolbench.errors import Refused
from poolbench.safety.journal import Journal
from poolbench.store.db import Store, resume_command
from poolbench.study.builtin import registry
from poolbench.system.runner import Runner
from poolbench.workloads.fio import kill_strays
from poolbench.zfs.dialect import ZFS_FUSE

# pgbench-pid<P>: a PostgreSQL server (system/pgserver.py); its name sorts before the
# trial's and the scratch filesystem's, so the server stops before its pool goes.
_NAME = re.compile(
    r"^(?:run\d+-pid(\d+)-trial\d+|(?:scratch|record|bench)-pid(\d+)|pgbench-pid(\d+))\.jsonl$"
)


def _alive(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}/status").exists() else ""
    if "State:\tZ" in status:
        return False
    return b"poolbench" in cmdline


@dataclass
class Outcome:
    journal: Path
    undone: int
    left: list[str]
    # zfs-fuse pools it could not destroy: while one stays (a pool that stopped answering,
    # or one still "busy" after it resumed), zfs-fuse was seen not to answer the file system
    # of any pool made after it, so no study may start (`refuse_stuck`)
    stuck: list[str] = field(default_factory=list)


def stale_journals(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    result = []
    for p in sorted(directory.iterdir()):
        m = _NAME.match(p.name)
        if m and not _alive(int(m.group(1) or m.group(2) or m.group(3))):
            result.append(p)
    return result


def _kill_orphaned_fio(journal: Journal) -> None:
    """A killed poolbench leaves its fio running (fio jobs are session leaders of their own);
    stop the ones whose job files live under what this journal created, so that the pool can
    be unmounted and destroyed."""
    roots = [str(e.get("path") or e.get("mountpoint") or "") for e in journal.entries]
    for root in {r for r in roots if r}:
        kill_strays(Path(root))


def cleanup(runner: Runner, directory: Path) -> list[Outcome]:
    outcomes = []
    for path in stale_journals(directory):
        journal = Journal.load(runner, path)
        if not runner.dry_run:
            _kill_orphaned_fio(journal)
        n = len(journal.entries)
        left = journal.teardown()
        stuck = [why for dialect, why in journal.stuck if dialect == ZFS_FUSE]
        outcomes.append(Outcome(path, n, left, stuck))
        if not left and not runner.dry_run:
            path.unlink(missing_ok=True)
    return outcomes


def refuse_stuck(outcome: Outcome, cleanup_command: str) -> Refused:
    """A study must not start while a zfs-fuse pool of an earlier run is still there: the
    new pools' file systems could then wait for ever (inside poolbench's own process, where
    no time limit reaches)."""
    return Refused(
        f"A zfs-fuse pool an earlier run left could not be destroyed ({outcome.journal.name}),"
        " and while it is there zfs-fuse may not answer the file systems of new pools: a "
        f"study started now could wait on them for ever. {outcome.stuck[0]}",
        f"Release it as said, check that '{cleanup_command}' leaves nothing, then run the "
        "study again (`--resume` continues a run).",
    )


@dataclass
class Abandoned:
    run_id: int
    resume: str  # the command that finishes it


ABANDONED = (
    "its poolbench process ended without finishing it (killed, crashed, or the machine "
    "restarted); found by poolbench cleanup"
)


def abandoned_runs(store: Store) -> list[Abandoned]:
    """Runs still 'running' whose process is gone. Runs from before owners were recorded
    (owner NULL) are left as they are: nothing says whether they still run."""
    found = []
    for r in store.runs():
        if r["status"] == "running" and r["owner"] and not lifecycle.owner_alive(r["owner"]):
            resume = _resume_as(r["argv"], store, int(r["id"])) if r["kind"] == "study" else ""
            found.append(Abandoned(int(r["id"]), resume))
    return found


def mark_interrupted(store: Store, runs: list[Abandoned]) -> None:
    for a in runs:
        store.finish_run(a.run_id, "interrupted", ABANDONED)


def _resume_as(argv_json: str, store: Store, run_id: int) -> str:
    """The command that finishes a study run, as it was started (`run`, `study NAME`,
    `demo`), with the scratch directory it was given."""
    import json
    import shlex

    argv = [str(a) for a in json.loads(argv_json)]
    words = [a for a in argv[1:] if not a.startswith("-")]
    name = next((w for w in words[1:] if w in registry.STUDIES), None)
    command = "run"
    if words[:1] == ["study"] and name is not None:
        command = f"study {name}"
    elif words[:1] == ["demo"]:
        command = "demo"
    line = resume_command(store.path, run_id, command)
    for i, a in enumerate(argv):
        if a == "--scratch-dir" and i + 1 < len(argv):
            line += f" --scratch-dir {shlex.quote(argv[i + 1])}"
        elif a.startswith("--scratch-dir="):
            line += f" --scratch-dir {shlex.quote(a.split('=', 1)[1])}"
    return line
