"""The `poolbench` command: parse options, run, turn errors into exit codes.

Exit codes are errors.EXIT_CODES (docs/cli.md): every PoolbenchError carries its own
(`exit_code`), click's usage errors give 2, a bug 3, a stop signal 128 + its number (Ctrl-C
130, SIGHUP 129, SIGTERM 143). This is the one place that turns an error into an exit status.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, NoReturn

import click
from click.utils import make_default_short_help

from poolbench import __version__
from poolbench.errors import (
    EXIT_BUG,
    EXIT_FAILURE,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PoolbenchError,
    TrialsFailed,
)

# The registry of commands: name -> ("module:attribute", the first paragraph of its help).
# Each module is imported only when its command runs (or its own --help is asked for), so
# `poolbench --help` and `--version` do not pay for scipy, numpy, pydantic and rich. The
# summary is what `poolbench --help` lists; tests/test_cli_lazy.py checks that it equals the
# command's real help, so the two cannot drift.
COMMANDS: dict[str, tuple[str, str]] = {
    "demo": (
        "poolbench.cli.demo_cmd:demo",
        "Run a short real study on sparse-file disks: the embedded default.",
    ),
    "bench": (
        "poolbench.cli.bench_cmd:bench",
        "Benchmark the filesystem mounted at PATH, honestly.",
    ),
    "run": (
        "poolbench.cli.run_cmd:run",
        "Build every configuration of a study, measure it, store it, tear it down.",
    ),
    "runs": ("poolbench.cli.run_cmd:runs", "List the runs in the result store."),
    "cleanup": (
        "poolbench.cli.run_cmd:cleanup",
        "Tear down what a crashed poolbench left behind (pools, mounts, loop devices, files).",
    ),
    "study": (
        "poolbench.cli.study_cmd:study",
        "Run a built-in study: one question storage builders ask, answered with statistics.",
    ),
    "workloads": (
        "poolbench.cli.workloads_cmd:workloads",
        "List every workload poolbench can run, with its definition.",
    ),
    "plan": (
        "poolbench.cli.plan_cmd:plan",
        "What each layout of your disks gives you, before you buy or wipe anything.",
    ),
    "doctor": (
        "poolbench.cli.doctor_cmd:doctor",
        "Every capability poolbench uses, found on this machine or missing, with what "
        "provides it, what a missing one disables and the one command that adds it here.",
    ),
    "disks": (
        "poolbench.cli.disks_cmd:disks",
        "List every block device and whether poolbench may use it.",
    ),
    "history": (
        "poolbench.cli.history_cmd:history",
        "The same measurement over time: steps and drifts, and what changed when they happened.",
    ),
    "report": (
        "poolbench.cli.report_cmd:report",
        "Tables of a run: each configuration's mean ± 95% CI and its change against a "
        "baseline level with significance; with --html, a self-contained page with charts.",
    ),
    "compare": (
        "poolbench.cli.report_cmd:compare",
        "Two runs side by side (two machines, two dates, before/after a tuning): the change "
        'of B against A for each matching workload, with its 95% interval or "no significant '
        'difference". Runs that measured different things are refused unless --force.',
    ),
    "export": (
        "poolbench.cli.report_cmd:export",
        "Every measurement of a run with its metadata, in stable, documented columns "
        "(docs/export.md).",
    ),
    "hosts": (
        "poolbench.cli.hosts_cmd:hosts",
        "Check the hosts of a fleet before `poolbench bench --hosts`.",
    ),
    "fleet": (
        "poolbench.cli.fleet_cmd:fleet",
        "poolbench on every host of a fleet, over SSH: check the hosts, run a study on all.",
    ),
    "record": (
        "poolbench.cli.record_cmd:record",
        "Record the block I/O of DEVICE for --seconds with blktrace, changing nothing on it.",
    ),
    "import": (
        "poolbench.cli.import_cmd:import_",
        "Bring the runs of another result store (OTHER.db) into the local one.",
    ),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use (click's LazyGroup pattern)."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            command = load_command(self.lazy[cmd_name][0])
            add_verbose(command)
            self.add_command(command, cmd_name)
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's own listing, with each unloaded command's summary taken from the registry."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None and loaded.hidden:
                continue
            short = (
                loaded.get_short_help_str(limit)
                if loaded is not None
                else make_default_short_help(self.lazy[name][1], limit)
            )
            rows.append((name, short))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


VERBOSE_HELP = "Log every command run (-vv: and its output)."


def _log_level(verbose: int) -> None:
    import logging  # here, not at the top: --help and --version never need it (25 ms)

    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)  # basicConfig does nothing the second time


def _verbose_after(ctx: click.Context, _param: click.Parameter, count: int) -> None:
    """-v given after the command name: counted with any given before it."""
    if count:
        before = ctx.parent.params.get("verbose", 0) if ctx.parent is not None else 0
        _log_level(int(before or 0) + count)


def add_verbose(command: click.Command) -> None:
    """`poolbench report 1 -v` as `poolbench -v report 1`: every command takes -v too."""
    if not any("--verbose" in p.opts for p in command.params):
        command.params.append(
            click.Option(["-v", "--verbose"], count=True, expose_value=False,
                         callback=_verbose_after, help=VERBOSE_HELP)
        )  # fmt: skip


def load_command(target: str) -> click.Command:
    """Import "module:attribute" and return the click command it names."""
    module_name, _, attribute = target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{target} is not a click command")
    return command


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="poolbench")
@click.option("-v", "--verbose", count=True, help=VERBOSE_HELP)
def cli(verbose: int) -> None:
    """Which layout of my disks is best, and by how much?

    poolbench builds pool layouts, measures them honestly with fio (working set vs RAM, cold
    caches, incompressible data, device-verified bytes, repeated until the confidence interval
    is tight) and compares them with statistics.
    """
    _log_level(verbose)
    from poolbench.system import watchdog  # light: the standard library only

    watchdog.scale()  # a POOLBENCH_TIME_LIMIT_SCALE that is not a number is refused first


def _check_command_name(args: list[str]) -> None:
    """A blank or '-' command name is a mistake (click would print the help and exit 0)."""
    name = next((a for a in args if a == "-" or not a.startswith("-")), None)
    if name is not None and (name == "-" or not name.strip()):
        raise click.UsageError(
            f"{name!r} is not a poolbench command. Run 'poolbench --help' for the list."
        )


def main(argv: list[str] | None = None) -> None:
    # Every stop signal takes the Ctrl-C path from here on (system/stopping.py), before any
    # command can create something.
    from poolbench.system import stopping

    restore = stopping.install()
    try:
        _main(argv)
    finally:
        # A caller in the same process (a test, argv given) gets its handlers back; the
        # program keeps its own to its last instruction: a late second signal, with the
        # default handler back, would kill it after its teardown with no exit code of ours.
        if argv is not None:
            restore()


def _main(argv: list[str] | None) -> None:
    try:
        _check_command_name(sys.argv[1:] if argv is None else argv)
        cli.main(args=argv, prog_name="poolbench", standalone_mode=False)
        _stopped_at_the_end()
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:
        _interrupted(exc)
    except click.ClickException as exc:
        exc.message = _shorten_words(exc.message)  # click quotes the value it refused
        exc.show()
        # click's usage errors are 2 (EXIT_USAGE); its other exceptions (a file it cannot
        # open) are input errors here, not click's generic 1, which means a failed run.
        sys.exit(EXIT_USAGE if isinstance(exc, click.UsageError) else EXIT_INPUT)
    except TrialsFailed as exc:  # not an error of the run: its other trials are all measured
        click.echo(exc.paragraph(), err=True)
        sys.exit(_or_signal(exc.exit_code))
    except PoolbenchError as exc:
        click.echo(f"error: {exc.paragraph()}", err=True)
        sys.exit(_or_signal(exc.exit_code))
    except SystemExit as exc:
        if exc.code == 1 and _stdout_is_devnull():
            sys.exit(EXIT_OK)  # rich's answer to a closed pipe (Console.on_broken_pipe)
        raise
    except BrokenPipeError:
        _closed_pipe()
    except Exception as exc:
        _report_unexpected(exc)
    sys.exit(EXIT_OK)


def _interrupted(exc: BaseException) -> NoReturn:
    """Ctrl-C, SIGTERM or SIGHUP (click turns one inside a prompt into Abort): everything
    was torn down on the way here; exit 128 + the signal's number."""
    from poolbench.system import stopping

    sig = stopping.received()
    if isinstance(exc, KeyboardInterrupt):
        name, code = stopping.name_of(exc), stopping.exit_code(exc)
    elif sig is not None:
        name, code = stopping.signal_name(sig), 128 + sig
    else:  # click's Abort without a signal: a prompt's input ended (EOF)
        name, code = "SIGINT", EXIT_INTERRUPTED
    stopping.say(f"Interrupted ({name}).")
    sys.exit(code)


def _or_signal(code: int) -> int:
    """An error raised on the way out of a stop signal (a teardown that left something,
    named in the error) still exits 128 + the signal's number: what stopped the run."""
    from poolbench.system import stopping

    sig = stopping.received()
    return code if sig is None else 128 + sig


def _stopped_at_the_end() -> None:
    """A signal held until a teardown ended, after which nothing checked for it (the last
    trial's): the command's work is done and shown; it still ends as the signal asked."""
    from poolbench.system import stopping

    sig = stopping.received()
    if sig is not None:
        stopping.say(f"Interrupted ({stopping.signal_name(sig)}) as the command ended.")
        sys.exit(128 + sig)


def _stdout_is_devnull() -> bool:
    """Whether standard output now points at /dev/null, as rich leaves it after the reader
    of a pipe went away (`poolbench report 1 | head -1`)."""
    import os

    try:
        out, null = os.fstat(sys.stdout.fileno()), os.stat(os.devnull)
    except (OSError, ValueError):
        return False
    return (out.st_rdev, out.st_ino) == (null.st_rdev, null.st_ino)


def _closed_pipe() -> None:
    """The reader went away (`poolbench report 1 | head -1`): not an error of ours. Python
    would complain again when it flushes stdout at exit, so stdout is pointed at /dev/null
    first; the exit status is 0, as `cat file | head -1` gives."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(EXIT_OK)


def _shorten_words(message: str, limit: int = 200) -> str:
    """A refused value quoted back whole could be 120,000 digits: cut any word longer than
    `limit` characters to its start and "..."."""
    return " ".join(w if len(w) <= limit else w[: limit - 4] + "...'" for w in message.split(" "))


def _refused_name(exc: Exception) -> None:
    """Names the operating system refuses, wherever a path given by the user reaches it (a
    --scratch-dir, a file to import, a device in a study): one paragraph, not a traceback."""
    import errno

    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        name = str(exc.filename or "")
        shown = name if len(name) <= 60 else f"{name[:57]}..."
        click.echo(
            f"error: the path '{shown}' ({len(name)} characters) is longer than this system "
            "allows (a name at most 255 bytes, a path at most 4096). Give a shorter path.",
            err=True,
        )
        sys.exit(EXIT_INPUT)
    if isinstance(exc, ValueError) and "embedded null byte" in str(exc):
        click.echo(
            "error: a path or name given to poolbench contains a NUL byte, which no file or "
            "device name can hold. Check the paths in the command line and the study file.",
            err=True,
        )
        sys.exit(EXIT_INPUT)


def _report_unexpected(exc: Exception) -> NoReturn:
    # Imported here: the store (and its database module) is not needed for --help or --version.
    import traceback

    from poolbench.store.opening import DATABASE_ERRORS

    _refused_name(exc)
    if isinstance(exc, DATABASE_ERRORS):  # the store failed after it was opened (locked...)
        click.echo(
            f"error: the result store could not be used: {exc}. Nothing more was stored; "
            "check that no other poolbench holds it and that its disk has space.",
            err=True,
        )
        sys.exit(EXIT_FAILURE)
    # A bug: say so, and keep the traceback.
    click.echo(traceback.format_exc(), err=True)  # called inside the except clause
    click.echo(
        "poolbench hit an internal error (a bug). Please report it with the traceback above.",
        err=True,
    )
    sys.exit(EXIT_BUG)
