"""The thin, lazily loaded CLI (issue 11): the registry in cli/main.py matches the commands,
`poolbench --help` imports no command module and no heavy library, commands do not import
each other."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from pathlib import Path

import click
from click.testing import CliRunner

from poolbench.cli import main as cli_main

CLI = Path(__file__).resolve().parent.parent / "src" / "poolbench" / "cli"
HEAVY = ("scipy", "numpy", "pydantic", "rich", "sqlite3", "logging")


def _first_paragraph(cmd: click.Command) -> str:
    return " ".join(inspect.cleandoc(cmd.help or "").split("\n\n")[0].split())


def test_the_registry_summary_is_each_commands_real_help() -> None:
    for name, (target, summary) in cli_main.COMMANDS.items():
        cmd = cli_main.load_command(target)
        assert cmd.name == name or (name, cmd.name) == ("import", "import"), target
        assert cmd.short_help is None, f"{name}: set no short_help; the registry takes the help"
        assert summary == _first_paragraph(cmd), name


def test_every_command_of_every_module_is_registered() -> None:
    registered = {t for t, _ in cli_main.COMMANDS.values()}
    found = set()
    for path in CLI.glob("*_cmd.py"):
        module = __import__(f"poolbench.cli.{path.stem}", fromlist=["_"])
        commands = {a: v for a, v in vars(module).items() if isinstance(v, click.Command)}
        # A group's own subcommands (hosts check) are reached through the group.
        nested = {id(c) for g in commands.values() if isinstance(g, click.Group)
                  for c in g.commands.values()}  # fmt: skip
        found |= {
            f"{module.__name__}:{a}"
            for a, v in commands.items()
            if _defined_in(v, module.__name__) and id(v) not in nested
        }
    assert found == registered


def _help(group: click.Group) -> str:
    result = CliRunner().invoke(group, ["--help"], terminal_width=100)
    assert result.exit_code == 0, result.output
    return result.output


def test_help_lists_the_same_lines_lazily_as_with_every_command_loaded() -> None:
    lazy = cli_main.LazyGroup(name="poolbench", lazy=cli_main.COMMANDS, help=cli_main.cli.help)
    before = _help(lazy)
    assert not lazy.commands  # --help loaded nothing
    for name in cli_main.COMMANDS:
        lazy.get_command(click.Context(lazy), name)
    assert set(lazy.commands) == set(cli_main.COMMANDS)
    assert _help(lazy) == before
    for name in cli_main.COMMANDS:
        assert f"\n  {name} " in before


PROBE = """
import io, json, sys, contextlib
from poolbench.cli.main import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    try:
        main([sys.argv[1]])
    except SystemExit as exc:
        code = exc.code
heavy = json.loads(sys.argv[2])
mods = [m for m in sys.modules if m.split('.')[0] in heavy or m.endswith('_cmd')]
print(json.dumps({"code": code, "out": out.getvalue(), "mods": mods}))
"""


def test_help_and_version_import_no_command_and_no_heavy_library() -> None:
    for flag in ("--help", "--version"):
        r = subprocess.run(
            [sys.executable, "-c", PROBE, flag, json.dumps(HEAVY)],
            capture_output=True,
            text=True,
            check=True,
        )
        found = json.loads(r.stdout)
        assert found["code"] == 0, r.stderr
        assert found["mods"] == [], flag
        assert ("poolbench, version" in found["out"]) == (flag == "--version")
        assert ("Commands:" in found["out"]) == (flag == "--help")


def test_commands_do_not_import_each_other() -> None:
    """Shared code lives in cli/common.py, cli/study_exec.py, cli/claiming.py, cli/fleet_bench.py
    or the engine; a command module never imports another command module."""
    crossing = []
    for path in CLI.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            crossing += [
                f"{path.name} -> {n}"
                for n in names
                if n.startswith("poolbench.cli.") and n.endswith("_cmd") and path.name != "main.py"
            ]
    assert crossing == []


def _defined_in(cmd: click.Command, module: str) -> bool:
    return getattr(cmd.callback, "__module__", None) == module
