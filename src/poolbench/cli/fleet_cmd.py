"""`poolbench fleet`: poolbench itself on every host of a fleet, over SSH (docs/fleet.md).

Agentless, as Ansible and pbench fan out: OpenSSH's client with shared connections
(fleet/ssh.py), poolbench installed on each host by the user, no daemon of ours anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from poolbench.cli.common import db_option, open_store
from poolbench.errors import CommandLineError, PoolbenchError, UsageError
from poolbench.fleet import answer_view, fleet_run, host_side, sshhosts
from poolbench.fleet.readiness import HostCheck, check_fleet
from poolbench.fleet.ssh import open_transport
from poolbench.store.db import Store
from poolbench.system.runner import LocalRunner

SSH_CONFIG_HELP = "ssh's configuration file (ssh -F) in place of ~/.ssh/config."


@click.group()
def fleet() -> None:
    """poolbench on every host of a fleet, over SSH: check the hosts, run a study on all.

    HOSTFILE holds one host per line: `[user@]host[:port] [disks=DISKS] [poolbench=PATH]`
    (docs/fleet.md). Keys, users and jump hosts come from your ~/.ssh/config; every call runs
    with BatchMode (never a prompt) and a time limit.
    """


@fleet.command("check")
@click.argument("hostfile", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
@click.option("--ssh-config", type=click.Path(dir_okay=False, path_type=Path), help=SSH_CONFIG_HELP)
def check(hostfile: Path, as_json: bool, ssh_config: Path | None) -> None:
    """Whether every host in HOSTFILE is ready for a study: reachable over SSH, its clock,
    poolbench there (the same version as here, its core, root), its ZFS, and its disks
    checked by its own safety layer. Read-only on every host. Exit 1 if any is not ready.

    Example: poolbench fleet check fleet.ssh
    """
    hosts = sshhosts.load(hostfile)
    if ssh_config is not None and not ssh_config.is_file():
        raise PoolbenchError(
            f"--ssh-config {ssh_config} is not a file.", "Give ssh's configuration file (ssh -F)."
        )
    with open_transport(LocalRunner(), ssh_config) as transport:
        checks = check_fleet(transport, hosts)
    if as_json:
        click.echo(json.dumps({"hosts": [c.to_json() for c in checks]}, indent=2))
        for c in checks:  # the reasons the error below points at, on stderr beside the JSON
            for p in c.problems:
                click.echo(f"{c.label}: {p}", err=True)
    else:
        _render(checks)
    failed = [c for c in checks if not c.ready]
    if failed:
        raise PoolbenchError(
            f"{len(failed)} of {len(checks)} host(s) are not ready: "
            + ", ".join(c.label for c in failed)
            + " (each with its reason above).",
            "Fix what is named for each host, then run `poolbench fleet check` again.",
        )


def _render(checks: list[HostCheck]) -> None:
    console = Console(width=None if sys.stdout.isatty() else 120)
    t = Table(title="fleet hosts (over SSH)", title_justify="left")
    for col in ("host", "ready", "poolbench", "ZFS", "clock skew", "disks"):
        t.add_column(col)
    for c in checks:
        skew = "–"
        if c.skew_s is not None and c.skew_bound_s is not None:
            skew = f"{c.skew_s:+.2f} s (±{c.skew_bound_s:.2f})"
        t.add_row(
            escape(c.label),
            "[green]yes[/]" if c.ready else "[red]no[/]",
            escape(c.version or "–"),
            escape(c.zfs or "–"),
            skew,
            escape(c.disks),
        )
    console.print(t)
    for c in checks:
        for p in c.problems:
            console.print(f"[red]{escape(c.label)}:[/] {escape(p)}", highlight=False)
        for w in c.warnings:
            console.print(f"[yellow]warning:[/] {escape(c.label)}: {escape(w)}", highlight=False)


def _fleet_options(f: Callable[..., None]) -> Callable[..., None]:
    """The options `fleet run` and `fleet study` share."""
    for option in reversed([
        click.option("--seed", type=click.IntRange(0, 2**63 - 1), default=None,
                     help="Trial order seed, the same on every host (default: random, "
                     "recorded)."),
        click.option("--poll", "poll_s", type=click.FloatRange(0.2, 600), default=2.0,
                     show_default=True, help="Seconds between two polls of each host."),
        click.option("--link-grace", "link_grace_s", type=click.FloatRange(0, 86400),
                     default=120.0, show_default=True,
                     help="Seconds a host may not answer before it is left to --resume."),
        click.option("--ssh-config", type=click.Path(dir_okay=False, path_type=Path),
                     help=SSH_CONFIG_HELP),
        click.option("--together", is_flag=True,
                     help="Every host starts its study at one instant (their clock skew "
                     "measured and stated)."),
        click.option("--json", "as_json", is_flag=True,
                     help="Print the hosts and the fleet's answer as JSON (progress on stderr)."),
        click.option("--no-screen", is_flag=True,
                     help="Real disks: the hosts do not screen their disks first (as `run`)."),
        db_option,
    ]):  # fmt: skip
        f = option(f)
    return f


@fleet.command("run")
@click.argument("hostfile", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.argument("study_file", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option("--resume", "resume_tag", metavar="TAG", default=None,
              help="Finish fleet run TAG: collect what ended, resume what stopped.")  # fmt: skip
@_fleet_options
def run(
    hostfile: Path | None, study_file: Path | None, resume_tag: str | None, seed: int | None,
    poll_s: float, link_grace_s: float, ssh_config: Path | None, together: bool,
    as_json: bool, no_screen: bool, db: Path | None,
) -> None:  # fmt: skip
    """Run STUDY_FILE on every host of HOSTFILE at once, with the same seed, and collect
    every host's results into the local store, tagged by host.

    Each host's study runs detached there (a dropped link never stops it); its progress is
    polled and printed with the host's name. A host not ready, unreachable or whose link
    stays down is named and the others go on; `--resume TAG` finishes it (a `fleet study`
    too). Ctrl-C stops every host's study cleanly.

    Example: poolbench fleet run fleet.ssh examples/parity.toml
    """
    if (resume_tag is None) == (hostfile is None or study_file is None):
        raise CommandLineError(
            "Give HOSTFILE and STUDY_FILE for a new fleet run, or --resume TAG alone.",
            "Example: poolbench fleet run fleet.ssh study.toml",
        )
    _check_ssh_config(ssh_config)
    # Everything the command line names is checked before the store is opened (or made).
    if resume_tag is not None:
        state, path = _resumed(_store_path(db), resume_tag)
    else:
        assert hostfile is not None and study_file is not None
        state = _new(hostfile, study_file, seed)
        state.run_options = ["--no-screen"] if no_screen else []
        path = fleet_run.state_path(_store_path(db), state.tag)
    store = open_store(db)
    _drive(store, state, path, Driving(ssh_config, poll_s, link_grace_s, together, as_json),
           resume=resume_tag is not None)  # fmt: skip


@fleet.command("study", context_settings={"ignore_unknown_options": True})
@click.argument("hostfile", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("name")
@click.argument("study_options", nargs=-1, type=click.UNPROCESSED)
@_fleet_options
def study(
    hostfile: Path, name: str, study_options: tuple[str, ...], seed: int | None,
    poll_s: float, link_grace_s: float, ssh_config: Path | None, together: bool,
    as_json: bool, no_screen: bool, db: Path | None,
) -> None:  # fmt: skip
    """Run built-in study NAME on every host of HOSTFILE at once, as `poolbench study NAME
    STUDY_OPTIONS` there, with the same seed and each host's disks= (see `fleet run`).

    Example: poolbench fleet study fleet.ssh parity --widths 4,6
    """
    import random

    taken = [o for o in study_options if o.split("=")[0] in ("--disks", "--seed", "--db")]
    if taken:
        raise CommandLineError(
            f"{taken[0].split('=')[0]} is not a study option here: each host's disks come from "
            "its disks= in the host file, the seed and the store from fleet study itself.",
            "Give --seed before NAME; put each host's disks in the host file.",
        )
    if "--" in study_options:
        raise CommandLineError(
            "`--` cannot stand among a fleet study's options: each host's study command is "
            "built from them, and `--` there would end its options early.",
            "Give the study's options without `--`.",
        )
    _check_ssh_config(ssh_config)
    sshhosts.load(hostfile)  # a bad host file is refused before anything is made
    store = open_store(db)
    state = fleet_run.FleetRun(
        fleet_run.new_tag(), name, "", str(hostfile.resolve()),
        random.SystemRandom().randrange(2**31) if seed is None else seed,
        builtin=[name, *study_options], run_options=["--no-screen"] if no_screen else [],
    )  # fmt: skip
    path = fleet_run.state_path(store.path, state.tag)
    _drive(store, state, path, Driving(ssh_config, poll_s, link_grace_s, together, as_json),
           resume=False)  # fmt: skip


def _check_ssh_config(ssh_config: Path | None) -> None:
    if ssh_config is not None and not ssh_config.is_file():
        raise UsageError(f"--ssh-config {ssh_config} is not a file.",
                         "Give ssh's configuration file (ssh -F).")  # fmt: skip


@dataclass(frozen=True)
class Driving:
    """How `fleet run` and `fleet study` drive their hosts (their shared options)."""

    ssh_config: Path | None
    poll_s: float
    link_grace_s: float
    together: bool
    as_json: bool


def _drive(
    store: Store, state: fleet_run.FleetRun, path: Path, how: Driving, *, resume: bool
) -> None:
    """Start (or resume) every host, poll them to the end, then the hosts and the answer;
    on any way out (Ctrl-C included) every host's study is told to stop and the state kept.
    With --json the progress goes to stderr and stdout is one JSON document."""
    if not state.targets:  # a new run: the hosts as the host file says now, kept
        fleet_run.remember_hosts(state, sshhosts.load(Path(state.hostfile)))
    hosts = fleet_run.fleet_hosts(state)

    def say(line: str) -> None:
        click.echo(line, err=how.as_json)

    with open_transport(LocalRunner(), how.ssh_config) as transport:
        ctl = fleet_run.Controller(transport, store, state, hosts, say, how.poll_s,
                                   how.link_grace_s, save=lambda: state.save(path))  # fmt: skip
        try:
            if not resume:
                say(f"fleet run {state.tag}: {len(hosts)} host(s), seed {state.seed} "
                    f"(resume: poolbench fleet run --resume {state.tag})")  # fmt: skip
                ctl.begin(check_fleet(transport, list(hosts.values())), how.together)
            else:
                ctl.resume()
            state.save(path)
            ctl.wait(lambda: state.save(path))
        except KeyboardInterrupt:  # Ctrl-C, SIGTERM, SIGHUP: every host's study stops too
            ctl.stop_all()
            raise
        except Exception as exc:
            # Not the user's stop: the hosts' studies go on there, as after a lost link.
            say(f"fleet run {state.tag} stopped here ({type(exc).__name__}); every host's "
                f"study goes on there: `poolbench fleet run --resume {state.tag}` collects "
                "them")  # fmt: skip
            raise
        finally:
            state.save(path)
    _show(store, state, how.as_json)
    error = fleet_run.summary_error(state)
    if error is not None:
        raise error


def _show(store: Store, state: fleet_run.FleetRun, as_json: bool) -> None:
    """The hosts and the fleet's answer: tables, or with --json one document on stdout."""
    measured, warned = fleet_run.measured(store, state), fleet_run.warned(store, state)
    if not as_json:
        _render_hosts(state)
        answer_view.render(measured, warned)
        return
    skip = ("offset", "last_answer", "attempt")  # the controller's own bookkeeping
    hosts_doc = [
        {k: v for k, v in dataclasses.asdict(h).items() if k not in skip}
        for h in state.hosts.values()
    ]
    click.echo(
        json.dumps(
            {
                "tag": state.tag,
                "seed": state.seed,
                "study": state.study_file,
                "hosts": hosts_doc,
                "answer": answer_view.to_json(measured, warned),
            },
            indent=2,
        )
    )


def _new(hostfile: Path, study_file: Path, seed: int | None) -> fleet_run.FleetRun:
    import random

    from poolbench.study.model import parse

    sshhosts.load(hostfile)  # a bad host file is refused before anything is made
    try:
        text = study_file.read_text()
    except OSError as e:
        raise UsageError(f"Cannot read the study file {study_file}: {e.strerror}.") from None
    parse(text, str(study_file))  # a bad study is refused here, not on every host
    return fleet_run.FleetRun(
        fleet_run.new_tag(), study_file.name, text, str(hostfile.resolve()),
        random.SystemRandom().randrange(2**31) if seed is None else seed,
    )  # fmt: skip


def _store_path(db: Path | None) -> Path:
    from poolbench.store.db import default_path

    return default_path() if db is None else db


def _resumed(store_path: Path, tag: str) -> tuple[fleet_run.FleetRun, Path]:
    path = fleet_run.state_path(store_path, tag) if host_side.TAG_RE.match(tag) else None
    if path is None or not path.is_file():
        raise UsageError(f"No fleet run {tag} in {store_path.parent / 'fleet'}.",
                         "Give the tag `poolbench fleet run` printed.")  # fmt: skip
    return fleet_run.FleetRun.load(path), path


def _render_hosts(state: fleet_run.FleetRun) -> None:
    console = Console(width=None if sys.stdout.isatty() else 120)
    t = Table(title=f"fleet run {state.tag} (seed {state.seed})", title_justify="left")
    for col in ("host", "state", "run there", "status", "run here"):
        t.add_column(col)
    for h in state.hosts.values():
        t.add_row(escape(h.label), escape(h.state), str(h.remote_run or "–"),
                  escape(h.remote_status or "–"), str(h.local_run or "–"))  # fmt: skip
    console.print(t)


# The host side of `fleet run`, called over SSH by the controller (fleet/host_side.py).


@fleet.command("host-put", hidden=True)
@click.argument("tag")
def host_put(tag: str) -> None:
    """The study file on stdin, written into fleet run TAG's directory; prints its path."""
    click.echo(str(host_side.put_study(tag, sys.stdin.read())))


@fleet.command("host-start", hidden=True, context_settings={"ignore_unknown_options": True})
@click.argument("tag")
@click.option("--at", type=float, default=None, help="Start at this epoch time (this host's).")
@click.option("--attempt", default=None, help="This start's name (host-stop can cancel it).")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def host_start(tag: str, at: float | None, attempt: str | None, args: tuple[str, ...]) -> None:
    """`poolbench ARGS` started detached as fleet run TAG's study; prints its pid."""
    click.echo(json.dumps({"pid": host_side.start(tag, list(args), at=at, attempt=attempt)}))


@fleet.command("host-status", hidden=True)
@click.argument("tag")
@click.option("--from", "offset", type=click.IntRange(0), default=0)
def host_status(tag: str, offset: int) -> None:
    """Fleet run TAG here: running?, its log from --from, its store's runs (JSON)."""
    click.echo(json.dumps(host_side.status(tag, offset).to_json()))


@fleet.command("host-fetch", hidden=True)
@click.argument("tag")
def host_fetch(tag: str) -> None:
    """Fleet run TAG's store here, a consistent copy, base64 on stdout (SSH carries text)."""
    import base64

    click.echo(base64.b64encode(host_side.store_snapshot(tag)).decode())


@fleet.command("host-stop", hidden=True)
@click.argument("tag")
@click.option("--attempt", default=None, help="Cancel this start too, should it come later.")
def host_stop(tag: str, attempt: str | None) -> None:
    """Ctrl-C to fleet run TAG's study here."""
    click.echo(json.dumps({"stopped": host_side.stop(tag, attempt=attempt)}))
