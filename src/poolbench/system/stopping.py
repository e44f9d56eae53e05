"""Stop signals: SIGINT, SIGTERM and SIGHUP all take the Ctrl-C path.

A study holds pools, loop devices, caps and servers for hours, and is stopped in more ways
than Ctrl-C: `kill` and `timeout` send SIGTERM to poolbench, `systemctl stop` sends it to
every process of the unit, a closed terminal or SSH session sends SIGHUP to the foreground
process group. Every child poolbench starts runs in a session of its own (runner.py), so
none of these reach fio, zpool or a PostgreSQL server: poolbench stops them itself.

`install()` makes each of the three raise `Stopped`, a KeyboardInterrupt, so every `finally`
and every handler of Ctrl-C (the runner stopping its child, the journal's teardown, the run
marked interrupted) serves them all. The first signal is the stop; every later one is
ignored, with a line on stderr that says what is still being done, so a second Ctrl-C can
never abandon a teardown half-way. A first signal that lands inside `deferred()` (a
journal's teardown, a store transaction, a child being started) is held, and raised by the
next `check()` outside it. A signal ignored when poolbench started (`nohup` ignores SIGHUP,
a background job SIGINT) stays ignored: that is what the user asked for.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(KeyboardInterrupt):
    """A stop signal, raised where poolbench was when it arrived (or at the next `check()`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def name_of(exc: BaseException) -> str:
    """The signal that stopped poolbench: a plain KeyboardInterrupt is Ctrl-C (SIGINT)."""
    return signal_name(exc.signum) if isinstance(exc, Stopped) else "SIGINT"


def exit_code(exc: BaseException) -> int:
    """128 + the signal's number, as a shell reports a command a signal ended."""
    return 128 + (exc.signum if isinstance(exc, Stopped) else int(signal.SIGINT))


@dataclass
class _State:
    received: int | None = None  # the first stop signal
    pending: bool = False  # it arrived inside deferred() and is not raised yet
    doing: list[str] = field(default_factory=list)  # what each deferred() block is doing
    ttys: tuple[int, ...] = ()  # standard streams that were a terminal at install()


_state = _State()


def received() -> int | None:
    """The first stop signal poolbench received, if any."""
    return _state.received


def install() -> Callable[[], None]:
    """Handle the stop signals (in the main thread); returns what puts the old handlers back."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    _state.ttys = tuple(fd for fd in (0, 1, 2) if _isatty(fd))
    old = {}
    for sig in STOP_SIGNALS:
        now = signal.getsignal(sig)
        if now is signal.SIG_IGN:
            continue  # nohup, a background job: the user asked for this one to be ignored
        old[sig] = now
        signal.signal(sig, _on_signal)

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        reset()

    return restore


def reset() -> None:
    """Forget every signal received (a test that drives main() twice in one process)."""
    global _state
    _state = _State()


def _on_signal(signum: int, _frame: object) -> None:
    name = signal_name(signum)
    if _state.received is not None:
        _write(
            f"poolbench: {name} ignored: still {_doing()}; poolbench exits when that is "
            "done (kill -9 would leave it half done, for `poolbench cleanup`)."
        )
        return
    _state.received = signum
    if _state.doing:
        _state.pending = True
        _write(
            f"poolbench: {name}: stopping once {_doing()} is done, then tearing down what "
            "this run created; every finished measurement is kept. A second signal is "
            "ignored until this is done."
        )
        return
    _write(
        f"poolbench: {name}: stopping the running command, then tearing down what this run "
        "created; every finished measurement is kept. A second signal is ignored until this "
        "is done."
    )
    raise Stopped(signum)


def _doing() -> str:
    return _state.doing[-1] if _state.doing else "stopping"


@contextlib.contextmanager
def deferred(doing: str = "") -> Iterator[None]:
    """A block that a first stop signal must not cut in two (a teardown, a transaction, a
    child being started): the signal is held and raised by the next `check()` outside it."""
    _state.doing.append(doing or (_state.doing[-1] if _state.doing else "the step under way"))
    try:
        yield
    finally:
        _state.doing.pop()


def check() -> None:
    """Raise a stop signal that arrived inside `deferred()`, once outside every such block."""
    if _state.pending and not _state.doing:
        _state.pending = False
        assert _state.received is not None
        raise Stopped(_state.received)


def stopping() -> bool:
    """Whether a stop signal arrived: what runs now is the way out."""
    return _state.received is not None


def say(message: str) -> None:
    """A line on stderr that never fails: a terminal that hung up (SIGHUP after an SSH
    session closed) answers EIO, and what poolbench does on the way out must not stop there.
    Through sys.stderr, so that it shows above a progress bar (rich redirects it)."""
    try:
        print(message, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        _leave_terminal()


def _write(message: str) -> None:
    """Straight to file descriptor 2, from the signal handler: no Python buffer that the
    interrupted code may be in the middle of writing. A terminal that hung up answers EIO."""
    line = ("\n" if 2 in _state.ttys else "") + message + "\n"
    try:
        os.write(2, line.encode(errors="replace"))
    except OSError:
        _leave_terminal()


def _leave_terminal() -> None:
    """The standard streams that were the terminal go to /dev/null: nothing on the way out
    (the teardown's words, the run's last lines) may fail writing to a terminal that is gone."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR)
        for fd in _state.ttys:
            os.dup2(null, fd)
        os.close(null)


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
