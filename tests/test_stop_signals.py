"""Stop signals without root (system/stopping.py, engine/lifecycle.py, engine/cleanup.py, the
resume commands): SIGTERM and SIGHUP take the Ctrl-C path, a signal inside a teardown or a
transaction is held until it ends, later signals are ignored and said so, a run records the
signal that stopped it and the process that runs it, and the command printed to resume a
run is one that resumes it. A study on directories (real fio) is stopped in-process and
resumed with exactly its missing measurements; the real-pool campaign is
tests/test_stop_campaign.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click
import pytest

from poolbench.cli import main as cli_main
from poolbench.engine import lifecycle, study_lifecycle, trial_loop
from poolbench.errors import EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED, PoolbenchError
from poolbench.safety.journal_words import describe
from poolbench.store.db import Store, resume_command
from poolbench.study.model import parse
from poolbench.system import stopping, terminal

TEXT = (
    'name = "s"\n[disks]\ncount = 0\n[factors]\nbackend = ["directory"]\nlayout = ["/tmp"]\n'
    '[workloads]\nnames = ["seq-write"]\n'
)


@contextmanager
def handlers() -> Iterator[None]:
    restore = stopping.install()
    try:
        yield
    finally:
        restore()


def _signal_self(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.2)  # the handler runs at the next bytecode, well within this


# -- the signals ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
)
def test_each_stop_signal_raises_the_ctrl_c_path_with_its_name(
    sig: int, code: int, capfd: pytest.CaptureFixture[str]
) -> None:
    with handlers(), pytest.raises(KeyboardInterrupt) as raised:
        _signal_self(sig)
    name = signal.Signals(sig).name
    assert isinstance(raised.value, stopping.Stopped)
    assert (stopping.name_of(raised.value), stopping.exit_code(raised.value)) == (name, code)
    assert f"poolbench: {name}: stopping the running command" in capfd.readouterr().err
    assert (EXIT_HANGUP, EXIT_INTERRUPTED, EXIT_TERMINATED) == (129, 130, 143)


def test_a_plain_keyboard_interrupt_is_ctrl_c() -> None:
    assert stopping.name_of(KeyboardInterrupt()) == "SIGINT"
    assert stopping.exit_code(KeyboardInterrupt()) == 130


def test_a_signal_inside_deferred_is_held_until_check_outside_it(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with handlers():
        with stopping.deferred("tearing down pool pbx"):
            _signal_self(signal.SIGTERM)  # no exception here: the block finishes
            stopping.check()  # still inside: nothing raised
            finished = True
        assert finished and stopping.received() == signal.SIGTERM
        with pytest.raises(stopping.Stopped):
            stopping.check()
        stopping.check()  # raised once only
    assert "stopping once tearing down pool pbx is done" in capfd.readouterr().err


def test_later_signals_are_ignored_and_say_what_is_still_done(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with handlers():
        with pytest.raises(stopping.Stopped):
            _signal_self(signal.SIGINT)
        with stopping.deferred("tearing down pool pby, 3 loop devices"):
            _signal_self(signal.SIGINT)  # a second Ctrl-C: ignored
            _signal_self(signal.SIGTERM)
        stopping.check()  # nothing held: the first was raised already
    err = capfd.readouterr().err
    assert "poolbench: SIGINT ignored: still tearing down pool pby, 3 loop devices;" in err
    assert "poolbench: SIGTERM ignored: still tearing down pool pby" in err


def test_a_signal_ignored_at_start_stays_ignored() -> None:
    """nohup ignores SIGHUP: the user asked for the run to survive the terminal."""
    old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with handlers():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            _signal_self(signal.SIGHUP)
            assert stopping.received() is None
    finally:
        signal.signal(signal.SIGHUP, old)


def test_a_transaction_is_not_cut_in_two(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    run_id = lifecycle.start(store, "bench", "x", {}, ["poolbench"])
    with handlers(), pytest.raises(stopping.Stopped):
        with store.transaction() as c:
            c.execute("UPDATE runs SET name = 'during' WHERE id = ?", (run_id,))
            _signal_self(signal.SIGTERM)
            c.execute("UPDATE runs SET error = 'both' WHERE id = ?", (run_id,))
        stopping.check()
    row = store.run(run_id)
    assert (row["name"], row["error"]) == ("during", "both")


# -- the runner's stop of its child ----------------------------------------------------------
# A child that takes 1.5 s to end on SIGTERM (fio finishing its jobs, a PostgreSQL server
# shutting down): `term` is written as it hears SIGTERM, `clean` when it ended on its own.
_SLOW_TO_END = (
    "trap 'touch term; sleep 1.5; touch clean; exit 0' TERM; touch ready; "
    "while :; do sleep 0.05; done"
)


def _when(path: Path, then: Callable[[], None]) -> threading.Thread:
    """`then()` from another thread as soon as `path` exists (the signal handler still runs
    in the main thread, wherever it is: here, inside the runner's wait)."""

    def wait() -> None:
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        then()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_later_signals_never_cut_the_childs_stop_short(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM while the child runs: the runner sends it SIGTERM and gives it 10 s. A second
    SIGTERM and a Ctrl-C during those seconds are ignored (said so): the child ends on its
    own, not by SIGKILL, and poolbench goes on down the first signal's path."""
    from poolbench.system.runner import LocalRunner

    me = os.getpid()
    first = _when(tmp_path / "ready", lambda: os.kill(me, signal.SIGTERM))
    later = _when(
        tmp_path / "term", lambda: [os.kill(me, s) for s in (signal.SIGTERM, signal.SIGINT)]
    )
    t0 = time.monotonic()
    with handlers(), pytest.raises(stopping.Stopped) as raised:
        LocalRunner().run(["bash", "-c", f"cd {tmp_path} && {_SLOW_TO_END}"])
    first.join(), later.join()
    assert raised.value.signum == signal.SIGTERM
    assert (tmp_path / "clean").exists()  # it ended by itself, its 1.5 s through
    assert 1.5 <= time.monotonic() - t0 < 10
    err = capfd.readouterr().err
    for name in ("SIGTERM", "SIGINT"):
        assert (
            f"poolbench: {name} ignored: still waiting for bash to end (SIGKILL after 10 s)" in err
        )


def test_a_first_signal_during_a_timed_out_childs_stop_is_held_until_it_ended(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A command past its time limit is being stopped when SIGHUP comes: the stop finishes
    (the child ends on its own), the time-out goes on as it would, and the signal is raised
    by the next check."""
    from poolbench.system.runner import LocalRunner
    from poolbench.system.watchdog import CommandTimedOut

    me = os.getpid()
    later = _when(tmp_path / "term", lambda: os.kill(me, signal.SIGHUP))
    raised: BaseException | None = None
    with handlers():
        try:  # (a Stopped escaping here would end the whole test session: caught)
            LocalRunner().run(["bash", "-c", f"cd {tmp_path} && {_SLOW_TO_END}"], timeout=0.5)
        except BaseException as exc:
            raised = exc
        later.join()
        assert isinstance(raised, CommandTimedOut), repr(raised)  # the watchdog's time-out
        assert (tmp_path / "clean").exists()
        with pytest.raises(stopping.Stopped):
            stopping.check()
    assert "poolbench: SIGHUP: stopping once waiting for bash to end" in capfd.readouterr().err


# -- the run's row --------------------------------------------------------------------------
def test_a_run_records_the_signal_that_stopped_it_and_who_ran_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    kept: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        run_id = lifecycle.start(store, "study", "s", {}, ["poolbench"])
        assert store.run(run_id)["owner"] == lifecycle.owner_id()
        with (
            pytest.raises(stopping.Stopped),
            lifecycle.tracked(store, run_id, on_interrupt=kept.append),
        ):
            raise stopping.Stopped(sig)
        row = store.run(run_id)
        assert (row["status"], row["stopped_by"]) == ("interrupted", signal.Signals(sig).name)
    assert kept == [0, 0]
    run_id = lifecycle.start(store, "study", "s", {}, ["poolbench"])
    with pytest.raises(KeyboardInterrupt), lifecycle.tracked(store, run_id):
        raise KeyboardInterrupt
    assert store.run(run_id)["stopped_by"] == "SIGINT"


def test_an_error_on_the_way_out_of_a_signal_keeps_the_run_interrupted(tmp_path: Path) -> None:
    """A teardown that left something raises its error while the signal unwinds: the run is
    interrupted by the signal, with that error (what is left, and the way back)."""
    store = Store(tmp_path / "r.db")
    run_id = lifecycle.start(store, "study", "s", {}, ["poolbench"])
    with handlers():
        with stopping.deferred("x"):
            _signal_self(signal.SIGHUP)
        with pytest.raises(PoolbenchError), lifecycle.tracked(store, run_id):
            raise PoolbenchError("teardown left pool pbz", "poolbench cleanup")
    row = store.run(run_id)
    assert (row["status"], row["stopped_by"]) == ("interrupted", "SIGHUP")
    assert "teardown left pool pbz" in row["error"]


def test_a_signal_held_to_the_end_of_the_body_stops_the_run(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    run_id = lifecycle.start(store, "study", "s", {}, ["poolbench"])
    with (
        handlers(),
        pytest.raises(stopping.Stopped),
        lifecycle.tracked(store, run_id),
        stopping.deferred("the last trial's teardown"),
    ):
        _signal_self(signal.SIGTERM)
    assert store.run(run_id)["stopped_by"] == "SIGTERM"


def test_owner_ids_tell_a_live_process_from_a_gone_one() -> None:
    me = lifecycle.owner_id()
    assert me is not None and lifecycle.owner_alive(me)
    boot, pid, start = me.split(":")
    assert not lifecycle.owner_alive(f"another-boot:{pid}:{start}")  # after a reboot
    assert not lifecycle.owner_alive(f"{boot}:{pid}:{int(start) + 1}")  # a reused pid
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = lifecycle.owner_id(child.pid)
    child.wait()
    assert gone is None or not lifecycle.owner_alive(gone)
    assert not lifecycle.owner_alive(None) and not lifecycle.owner_alive("x:y")


# -- cleanup marks abandoned runs ----------------------------------------------------------------
def _dead_owner() -> str:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    owner = lifecycle.owner_id(child.pid)
    child.kill()
    child.wait()
    assert owner is not None
    return owner


def test_cleanup_marks_runs_whose_process_is_gone_and_prints_their_resume(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    store = Store(db)
    argvs = [
        ["poolbench", "-v", "study", "parity", "--disks", "4x1G", "--scratch-dir", "/v/s t"],
        ["poolbench", "demo", "--scratch-dir=/v/d"],
        ["poolbench", "run", "x.toml"],
        ["poolbench", "run", "y.toml"],  # still running (this process)
        ["poolbench", "run", "z.toml"],  # from before owners were recorded
    ]
    ids = [lifecycle.start(store, "study", "s", {}, a) for a in argvs]
    for run_id in ids[:3]:
        store.set_owner(run_id, _dead_owner())
    store.set_owner(ids[4], None)
    store.close()
    c = subprocess.run([sys.executable, "-m", "poolbench", "cleanup", "--db", str(db)],
                       capture_output=True, text=True, check=True)  # fmt: skip
    lines = [x for x in c.stdout.splitlines() if "marked interrupted" in x]
    assert [x.split()[1] for x in lines] == ["1", "2", "3"]
    tail = [x.split("Finish it with: ")[1] for x in lines]
    assert tail == [
        f"poolbench study parity --resume 1 --db {db} --scratch-dir '/v/s t'",
        f"poolbench demo --resume 2 --db {db} --scratch-dir /v/d",
        f"poolbench run --resume 3 --db {db}",
    ]
    store = Store(db, "read")
    assert [r["status"] for r in store.runs()] == ["interrupted"] * 3 + ["running"] * 2
    assert store.run(1)["stopped_by"] is None and "ended without finishing" in store.run(1)["error"]


def test_a_run_still_running_is_not_resumed_twice(tmp_path: Path) -> None:
    store = Store(tmp_path / "r.db")
    text = TEXT
    run_id = lifecycle.start(store, "study", "s", {"study_text": text, "seed": 1}, ["x"])
    with pytest.raises(PoolbenchError, match="still running"):
        trial_loop.load_resume(store, run_id)
    store.set_owner(run_id, _dead_owner())
    assert trial_loop.load_resume(store, run_id)[2] == 1


def test_a_resume_measures_with_the_window_the_run_measured_with(tmp_path: Path) -> None:
    """--min-window 0 (or POOLBENCH_MIN_WINDOW) is in the stored study, not in its text."""
    store = Store(tmp_path / "r.db")
    text = TEXT
    meta = {"study_text": text, "seed": 1, "study": {"workloads": {"min_window": 0.0}}}
    run_id = lifecycle.start(store, "study", "s", meta, ["x"])
    store.finish_run(run_id, "interrupted", None, "SIGTERM")
    assert parse(text).workloads.min_window == 3.0
    assert trial_loop.load_resume(store, run_id)[0].workloads.min_window == 0.0


# -- the commands that resume ---------------------------------------------------------------------
def test_the_resume_command_is_the_one_the_run_was_started_with(tmp_path: Path) -> None:
    text = TEXT
    db = tmp_path / "r.db"
    base = study_lifecycle.StudyRequest(parse(text), text, db, argv=["x"])
    assert (
        base.resume_command(db, 4)
        == resume_command(db, 4)
        == (f"poolbench run --resume 4 --db {db}")
    )
    study = study_lifecycle.StudyRequest(parse(text), text, db, scratch_dir=Path("/var/tmp/a b"),
                                   screen=False, command="study parity", argv=["x"])  # fmt: skip
    assert study.resume_command(db, 4) == (
        f"poolbench study parity --resume 4 --db {db} --scratch-dir '/var/tmp/a b' --no-screen"
    )


def _study_cli(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """The CLI in-process (main() as the console script runs it): exit code and stderr."""
    with pytest.raises(SystemExit) as exited:
        cli_main.main(list(args))
    code = exited.value.code
    return int(code) if isinstance(code, int) else 1, " ".join(capfd.readouterr().err.split())


def _stored_study(db: Path, name: str) -> None:
    text = TEXT.replace('"s"', f'"{name}"')
    store = Store(db)
    run_id = lifecycle.start(store, "study", name, {"study_text": text, "seed": 1}, ["x"])
    store.finish_run(run_id, "interrupted", None, "SIGTERM")
    store.close()


def test_study_and_demo_resume_refuse_what_they_cannot_resume(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.db"
    _stored_study(db, "stopzfs")
    code, err = _study_cli(capfd, "study", "parity", "--resume", "1", "--disks", "4x1G",
                           "--db", str(db))  # fmt: skip
    assert (
        code == 2
        and "--resume 1 finishes the run as it was started, so --disks cannot change it" in err
    ), err
    code, err = _study_cli(capfd, "study", "parity", "--resume", "1", "--db", str(db))
    assert code == 5 and "run of study 'stopzfs', not of 'parity'" in err, err
    assert f"Resume it with: poolbench run --resume 1 --db {db}" in err
    code, err = _study_cli(capfd, "demo", "--resume", "1", "--db", str(db))
    assert code == 5 and "is not a demo run" in err, err
    code, err = _study_cli(capfd, "study", "parity", "--resume", "7", "--db", str(db))
    assert code == 5 and "No run 7" in err, err


def test_a_stop_inside_a_command_exits_with_its_code_and_says_so(
    capfd: pytest.CaptureFixture[str],
) -> None:
    @click.command("pbtest-stop")
    def stop_me() -> None:
        _signal_self(signal.SIGHUP)
        raise AssertionError("not stopped")

    cli_main.cli.add_command(stop_me)
    try:
        with pytest.raises(SystemExit) as exited:
            cli_main.main(["pbtest-stop"])
    finally:
        cli_main.cli.commands.pop("pbtest-stop")
    assert exited.value.code == 129
    assert "Interrupted (SIGHUP)." in capfd.readouterr().err
    assert signal.getsignal(signal.SIGHUP) is not stopping._on_signal  # put back


# -- what poolbench says --------------------------------------------------------------------
def test_a_teardown_is_said_in_words() -> None:
    entries = [
        {"kind": "path", "path": "/s/pb1t0"},
        {"kind": "loop_intent", "backing_file": "/s/d0"},
        {"kind": "loop", "device": "/dev/loop3", "backing_file": "/s/d0"},
        {"kind": "loop_intent", "backing_file": "/s/d1"},
        {
            "kind": "throttle",
            "device": "/dev/loop3",
            "majmin": "7:3",
            "bytes_per_s": 1,
            "root": "/",
        },
        {"kind": "dir", "path": "/s/pb1t0/m"},
        {"kind": "pool_intent", "name": "pb1t0", "members": []},
        {"kind": "pool", "name": "pb1t0", "guid": 1, "members": []},
        {"kind": "postgres", "datadir": "/d", "sockdir": "/s", "bindir": "/b"},
    ]
    assert describe(entries) == (  # type: ignore[arg-type]
        "pool pb1t0, 2 loop devices, a PostgreSQL server, a disk cap, 2 files and directories"
    )
    assert describe([]) == "nothing"


def _proc_tree(tmp: Path, chain: list[tuple[int, str, int]]) -> Path:
    for pid, name, ppid in chain:
        (tmp / str(pid)).mkdir(parents=True)
        (tmp / str(pid) / "stat").write_text(f"{pid} ({name}) S {ppid} 0 0")
    return tmp


def test_a_hangup_risk_is_an_ssh_terminal_outside_tmux_or_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(terminal, "_has_terminal", lambda: True)
    ssh = {"SSH_CONNECTION": "10.0.0.1 5 10.0.0.2 22", "SSH_TTY": "/dev/pts/3"}
    plain = _proc_tree(tmp_path / "a", [(30, "poolbench", 20), (20, "bash", 10), (10, "sshd", 1)])
    assert terminal.hangup_risk(ssh, plain, 30) == (
        "it runs in this SSH session's terminal, outside tmux or screen"
    )
    assert terminal.hangup_risk({}, plain, 30) is None  # not over SSH
    assert terminal.hangup_risk({**ssh, "TMUX": "/tmp/tmux-0/default,1,0"}, plain, 30) is None
    assert terminal.hangup_risk({**ssh, "STY": "123.pts-3"}, plain, 30) is None
    # sudo drops TMUX: the tmux server among the ancestors still counts
    tree = [(30, "python3", 25), (25, "sudo", 20), (20, "bash", 15), (15, "tmux: server", 1)]
    assert terminal.hangup_risk(ssh, _proc_tree(tmp_path / "b", tree), 30) is None
    monkeypatch.setattr(terminal, "_has_terminal", lambda: False)  # setsid, systemd-run
    assert terminal.hangup_risk(ssh, plain, 30) is None


# -- a study on directories, stopped in-process -------------------------------------------------
class _Hooks:
    def __init__(self, on_trial: Callable[[int], None]) -> None:
        self.on_trial, self.notes, self.stopped = on_trial, [], []  # type: ignore[var-annotated]

    def note(self, message: str) -> None:
        self.notes.append(message)

    def command(self, argv: str) -> None:
        pass

    def claim(self, *args: object) -> object:
        raise AssertionError("no devices")

    @contextmanager
    def progress(self) -> Iterator[Callable[[str, int, int], None]]:
        yield lambda *_: None

    def trial_done(self) -> Callable[[int, int, str, str], None]:
        return lambda done, total, what, headline: self.on_trial(done)

    def interrupted(self, run_id: int, kept: int, resume: str) -> None:
        self.stopped.append((run_id, kept, resume))


def _dir_study(tmp: Path) -> str:
    a, b = tmp / "a", tmp / "b"
    a.mkdir(), b.mkdir()
    return (
        'name = "stopdir"\nreplicates = 2\nmax_replicates = 2\nci_target = 50\n'
        f'[disks]\ncount = 0\n[factors]\nbackend = ["directory"]\nlayout = ["{a}", "{b}"]\n'
        '[workloads]\nnames = ["seq-write", "seq-read"]\nsize = "1M"\nmin_window = 0\n'
    )


@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_a_study_stopped_between_trials_resumes_with_exactly_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM after the second of four trials (as the trial ends: the next trial never
    starts); the resume measures the other two, each cell once, the kept ones untouched.
    The SSH line is said before a long study starts (a threshold of 0 makes this one long)."""
    text = _dir_study(tmp_path)
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    monkeypatch.setattr(terminal, "hangup_risk", lambda: "it runs in an SSH terminal")
    monkeypatch.setattr(study_lifecycle, "LONG_STUDY_S", 0.0)
    hooks = _Hooks(lambda done: _signal_self(signal.SIGTERM) if done == 2 else None)
    req = study_lifecycle.StudyRequest(parse(text), text, db, seed=3, scratch_dir=scratch,
                                 argv=["poolbench", "run", "s.toml"])  # fmt: skip
    with handlers(), pytest.raises(stopping.Stopped):
        study_lifecycle.run_study(req, hooks)
    said = [n for n in hooks.notes if "SSH" in n]
    assert len(said) == 1 and re.fullmatch(
        r"note: this study should take about \d+ s and it runs in an SSH terminal: if the "
        r"connection drops, the hangup stops it \(torn down, resumable\)\. Start it in tmux or "
        r"screen, or see docs/long-runs\.md \(nohup, systemd-run\)\.",
        said[0],
    ), said
    assert hooks.stopped == [(1, 4, f"poolbench run --resume 1 --db {db} --scratch-dir {scratch}")]
    con = sqlite3.connect(db)
    kept = dict(((c, r, w), v) for c, r, w, v in con.execute(
        "SELECT config, replicate, workload, value FROM measurements"))  # fmt: skip
    assert con.execute("SELECT status, stopped_by FROM runs").fetchone() == (
        "interrupted",
        "SIGTERM",
    )
    con.close()
    assert len(kept) == 4 and not scratch.exists()
    again = _Hooks(lambda done: None)
    monkeypatch.setattr(terminal, "hangup_risk", lambda: None)
    resumed = study_lifecycle.StudyRequest(parse(text), text, db, 1, 3, scratch, argv=["x"])
    out = study_lifecycle.run_study(resumed, again)
    rows = {(r["config"], r["replicate"], r["workload"]): r["value"]
            for r in out.store.measurements(1)}  # fmt: skip
    assert len(rows) == 2 * 2 * 2 and kept.items() <= rows.items()
    assert out.store.run(1)["status"] == "finished" and again.notes == []
    assert json.loads(out.store.run(1)["metadata"])["seed"] == 3


@pytest.mark.slow  # a real study under a pseudo-terminal, hung up
@pytest.mark.skipif(shutil.which("fio") is None, reason="needs fio")
@pytest.mark.usefixtures("machine")  # it drops the page cache: the machine's chain
def test_a_terminal_that_hangs_up_stops_the_study_as_ctrl_c_would(tmp_path: Path) -> None:
    """poolbench on a terminal of its own (its session's controlling terminal, a progress bar
    drawn on it) whose other end closes, as an SSH connection that drops: the kernel's
    hangup is SIGHUP, every later write to the terminal fails (EIO), and still the run ends
    interrupted by SIGHUP with its measurement kept, exit 129; then it resumes."""
    import fcntl
    import pty
    import select
    import termios

    text = _dir_study(tmp_path).replace('size = "1M"', 'size = "32M"')
    (tmp_path / "s.toml").write_text(text)
    db = tmp_path / "r.db"
    master, slave = pty.openpty()

    def own_terminal() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [sys.executable, "-m", "poolbench", "run", str(tmp_path / "s.toml"), "--db", str(db)],
        stdin=slave, stdout=slave, stderr=slave, preexec_fn=own_terminal,
        env={**os.environ, "TERM": "xterm"},
    )  # fmt: skip
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and _count(db) < 1:
        if select.select([master], [], [], 0.05)[0]:
            shown += os.read(master, 65536)
    assert _count(db) >= 1, shown.decode(errors="replace")[-2000:]
    assert b"\x1b[" in shown  # a terminal: the progress bar was drawn
    os.close(master)  # the connection drops
    assert proc.wait(timeout=120) == 129
    con = sqlite3.connect(db)
    assert con.execute("SELECT status, stopped_by FROM runs").fetchone() == (
        "interrupted",
        "SIGHUP",
    )
    con.close()
    assert _count(db) >= 1
    r = subprocess.run([sys.executable, "-m", "poolbench", "run", "--resume", "1", "--db", str(db)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0 and _count(db) == 2 * 2 * 2, r.stderr[-2000:]


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return int(con.execute("SELECT count(*) FROM measurements").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def test_a_store_from_before_stop_signals_were_recorded_still_reads(tmp_path: Path) -> None:
    """A store without 0008_run_stops: read as it is (migrated in memory, the file left
    alone), its runs stopped by nobody known; opened for writing, it gains the columns."""
    db = tmp_path / "old.db"
    store = Store(db)
    lifecycle.start(store, "study", "s", {}, ["poolbench"])
    store.close()
    con = sqlite3.connect(db)
    con.execute("ALTER TABLE runs DROP COLUMN stopped_by")
    con.execute("ALTER TABLE runs DROP COLUMN owner")
    con.execute("DELETE FROM schema_migrations WHERE name = '0008_run_stops'")
    con.commit()
    con.close()
    read = Store(db, "read")
    assert (read.run(1)["stopped_by"], read.run(1)["owner"]) == (None, None)
    read.close()
    columns = [r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(runs)")]
    assert "stopped_by" not in columns  # reading changed nothing
    Store(db).finish_run(1, "interrupted", None, "SIGTERM")
    assert Store(db, "read").run(1)["stopped_by"] == "SIGTERM"
