"""The `poolbench` command: parse options, run, turn errors into exit codes.

Exit codes: 0 success, 1 a known failure (PoolbenchError, one clear paragraph), 2 bad usage
(click), 3 a bug (traceback kept in the log), 4 a study that finished with K trials failed
(each torn down and stored with its reason; `run --resume RUN` measures them), 130
interrupted by Ctrl-C.
"""

from __future__ import annotations

import logging
import sys
import traceback

import click

from poolbench import __version__
from poolbench.errors import (
    EXIT_BUG,
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_TRIALS_FAILED,
    PoolbenchError,
    TrialsFailed,
)
from poolbench.store.opening import DATABASE_ERRORS


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="poolbench")
@click.option("-v", "--verbose", count=True, help="Log every command run (-vv: and its output).")
def cli(verbose: int) -> None:
    """Which layout of my disks is best, and by how much?

    poolbench builds pool layouts, measures them honestly with fio (working set vs RAM, cold
    caches, incompressible data, device-verified bytes, repeated until the confidence interval
    is tight) and compares them with statistics.
    """
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def _register() -> None:
    # Each command lives in its own module; this list is the registry (no magic discovery).
    from poolbench.cli import (
        bench_cmd,
        demo_cmd,
        disks_cmd,
        hosts_cmd,
        import_cmd,
        plan_cmd,
        report_cmd,
        run_cmd,
        study_cmd,
        workloads_cmd,
    )

    for command in (
        demo_cmd.demo,
        bench_cmd.bench,
        run_cmd.run,
        run_cmd.runs,
        run_cmd.cleanup,
        study_cmd.study,
        workloads_cmd.workloads,
        plan_cmd.plan,
        disks_cmd.disks,
        report_cmd.report,
        report_cmd.compare,
        report_cmd.export,
        hosts_cmd.hosts,
        import_cmd.import_,
    ):
        cli.add_command(command)


def _check_command_name(args: list[str]) -> None:
    """A blank or '-' command name is a mistake (click would print the help and exit 0)."""
    name = next((a for a in args if a == "-" or not a.startswith("-")), None)
    if name is not None and (name == "-" or not name.strip()):
        raise click.UsageError(
            f"{name!r} is not a poolbench command. Run 'poolbench --help' for the list."
        )


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        _check_command_name(sys.argv[1:] if argv is None else argv)
        cli.main(args=argv, prog_name="poolbench", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("Interrupted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except TrialsFailed as exc:  # not an error of the run: its other trials are all measured
        click.echo(exc.paragraph(), err=True)
        sys.exit(EXIT_TRIALS_FAILED)
    except PoolbenchError as exc:
        click.echo(f"error: {exc.paragraph()}", err=True)
        sys.exit(EXIT_FAILURE)
    except DATABASE_ERRORS as exc:  # the store failed after it was opened (locked, full...)
        click.echo(
            f"error: the result store could not be used: {exc}. Nothing more was stored; "
            "check that no other poolbench holds it and that its disk has space.",
            err=True,
        )
        sys.exit(EXIT_FAILURE)
    except SystemExit:
        raise
    except Exception:  # a bug: say so, and keep the traceback
        click.echo(traceback.format_exc(), err=True)
        click.echo(
            "poolbench hit an internal error (a bug). Please report it with the traceback above.",
            err=True,
        )
        sys.exit(EXIT_BUG)
    sys.exit(0)
