"""The CLI's contract with scripts (issue 29, docs/cli.md): every subcommand `poolbench
--help` lists is run as a script runs it — a subprocess, stdout a pipe, COLUMNS=80 — on a
planted store (tests/report_store.py: no pools, no devices). Its tables fit 80 columns, its
exit codes are the documented ones, and every `--json` parses with exactly the top-level
keys docs/export.md documents for it. Commands that would build pools or probe devices
(demo, run, study, bench, disks, hosts, fleet) are run for their help, their refusals of a bad
command line, and what they can do without either (`study --list`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from poolbench.errors import EXIT_CODES
from report_store import build

ROOT = Path(__file__).resolve().parent.parent
EXPORT_DOC = (ROOT / "docs" / "export.md").read_text()
CLI_DOC = (ROOT / "docs" / "cli.md").read_text()
WIDTH = 80


def documented_codes() -> dict[str, int]:
    """name → code, from the table in docs/cli.md."""
    rows = re.findall(r"^\| (\d+) \| ([a-z ]+) \| (.+) \|$", CLI_DOC, re.M)
    return {name: int(code) for code, name, _ in rows}


CODE = documented_codes()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("contract") / "r.db"
    build(path).close()
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """poolbench as a script runs it: stdout and stderr are pipes, the terminal 80 wide."""
    env = {**os.environ, "COLUMNS": str(WIDTH)}
    env.pop("LINES", None)
    return subprocess.run(
        [sys.executable, "-m", "poolbench", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip


def test_the_exit_code_table_is_the_codes() -> None:
    rows = re.findall(r"^\| (\d+) \| ([a-z ]+) \| (.+) \|$", CLI_DOC, re.M)
    assert [(int(c), n, w) for c, n, w in rows] == list(EXIT_CODES)
    assert len({c for c, _, _ in EXIT_CODES}) == len(EXIT_CODES)  # one meaning per code
    assert (CODE["ok"], CODE["usage"], CODE["interrupted"]) == (0, 2, 130)


def listed_commands() -> list[str]:
    out = cli("--help").stdout
    section = out.split("Commands:")[1]
    return re.findall(r"^  (\S+)", section, re.M)


# Per command: (arguments, what stdout is). "{db}" is the planted store.
TABLE, JSON, TEXT = "table", "json", "text"
RUNS: dict[str, list[tuple[list[str], str]]] = {
    "runs": [(["runs", "--db", "{db}"], TABLE), (["runs", "--json", "--db", "{db}"], JSON)],
    "report": [(["report", "1", "--db", "{db}"], TABLE),
               (["report", "2", "--db", "{db}"], TABLE),  # hostile names, 12 configurations
               (["report", "1", "--json", "--db", "{db}"], JSON)],
    "compare": [(["compare", "1", "3", "--db", "{db}"], TABLE),
                (["compare", "1", "3", "--json", "--db", "{db}"], JSON)],
    "export": [(["export", "1", "--json", "--db", "{db}"], JSON),
               (["export", "1", "--csv", "--db", "{db}"], TEXT)],
    "workloads": [(["workloads"], TABLE), (["workloads", "--json"], JSON)],
    "plan": [(["plan", "--disks", "6x4TB"], TABLE),
             (["plan", "--layout", "raidz2:6x4TB"], TABLE),
             (["plan", "--disks", "6x4TB", "--json"], JSON),
             (["plan", "--layout", "raidz2:6x4TB", "--json"], JSON)],
    "study": [(["study", "--list"], TABLE)],
    "cleanup": [(["cleanup", "--dry-run", "--db", "{db}"], TEXT)],
    "record": [(["record", "--list", "--db", "{db}"], TABLE)],
    "doctor": [(["doctor"], TEXT), (["doctor", "--json"], JSON)],
    "import": [(["import", "{db}", "--json", "--db", "{other}"], JSON)],
    "history": [(["history", "--db", "{db}"], TEXT), (["history", "--json", "--db", "{db}"], JSON)],
    **{name: [] for name in ("demo", "bench", "run", "disks", "hosts", "fleet")},
}  # fmt: skip


def test_every_listed_command_is_covered() -> None:
    assert sorted(listed_commands()) == sorted(RUNS)


def _argv(args: list[str], db: Path, other: Path) -> list[str]:
    return [a.replace("{db}", str(db)).replace("{other}", str(other)) for a in args]


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_command_fits_80_columns_and_exits_0(name: str, db: Path, tmp_path: Path) -> None:
    for args, kind in [([name, "--help"], TEXT), *RUNS[name]]:
        p = cli(*_argv(args, db, tmp_path / "other.db"))
        assert p.returncode == CODE["ok"], (args, p.stderr)
        assert p.stdout.strip(), args
        wide = [line for line in p.stdout.splitlines() if len(line) > WIDTH]
        if kind == TABLE:  # prose (help, an example command line) may run longer
            assert wide == [], (args, wide[:3])
        if kind == JSON:
            check_documented(args, json.loads(p.stdout))


# The section of docs/export.md that documents each `--json`, by command.
SECTIONS = {
    "runs": "# Every other `--json`", "workloads": "# Every other `--json`",
    "plan": "# Every other `--json`", "import": "# Every other `--json`",
    "doctor": "# Every other `--json`", "history": "# Every other `--json`",
    "report": "# `poolbench report RUN --json`",
    "compare": "# `poolbench compare RUN_A RUN_B --json`",
    "export": "# `poolbench export`",
}  # fmt: skip
SUBSECTIONS = {
    "runs": "## `poolbench runs --json`", "workloads": "## `poolbench workloads --json`",
    "plan": "## `poolbench plan ... --json`", "import": "## `poolbench import OTHER.db --json`",
    "doctor": "## `poolbench doctor --json`", "history": "## `poolbench history ... --json`",
}  # fmt: skip


def documented_keys(command: str) -> set[str]:
    """Every name in backticks before the dash of a "- `key` — ..." line of the command's
    section (its subsection, under "Every other `--json`")."""
    text = EXPORT_DOC.split(SECTIONS[command], 1)[1].split("\n# ", 1)[0]
    if command in SUBSECTIONS:
        text = text.split(SUBSECTIONS[command], 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in re.findall(r"^- (.+?) — ", text, re.M):
        names |= set(re.findall(r"`([^`]+)`", line))
    return names


def check_documented(args: list[str], doc: Any) -> None:
    documented = documented_keys(args[0])
    if isinstance(doc, list):  # a list: the keys of its elements are documented as [].key
        assert doc, args
        keys = {f"[].{k}" for item in doc for k in item}
    else:
        keys = set(doc)
    assert keys and keys <= documented, (args, sorted(keys - documented))


def test_a_search_and_one_layout_have_the_documented_plan_keys(db: Path) -> None:
    """Each shape of `plan --json` has its own keys; both are documented, none missing."""
    search = json.loads(cli("plan", "--disks", "6x4TB", "--json").stdout)
    assert set(search) == {"disks", "zfs_rules", "ashift", "whole_disk", "objective",
                           "disk_speed", "candidates"}  # fmt: skip
    assert set(search) <= documented_keys("plan")


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["report", "1", "--ashfit", "12"], "usage", "No such option"),
        (["report", "1", "--metric", "p95"], "usage", "--metric 'p95'"),
        (["compare", "1"], "usage", "Missing argument"),
        (["export", "1"], "usage", "Choose a format"),
        (["bench", "--replicates", "1", "/tmp"], "usage", "--replicates 1"),
        (["run"], "usage", "needs a study file"),
        (["nosuchcommand"], "usage", "No such command"),
        (["report", "99"], "input", "No run 99"),
        (["export", "99", "--csv"], "input", "No run 99"),
        (["compare", "1", "99"], "input", "No run 99"),
        (["history", "/nope"], "input", "No series in the store"),
        (["history", "x", "--fail-on-regression", "200%"], "usage", "--fail-on-regression"),
        (["history", "--fail-on-regression", "10%"], "usage", "needs the NAME"),
        (["bench", "--record-as", "my series", "/tmp"], "usage", "--record-as 'my series'"),
        (["report", "1", "--html", "/nonexistent/r.html"], "input", "does not exist"),
    ],
)
def test_refusals_exit_with_the_documented_code(
    args: list[str], code: str, says: str, db: Path
) -> None:
    p = cli(*args, "--db", str(db))
    assert p.returncode == CODE[code], (args, p.returncode, p.stderr)
    assert says in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == ""  # nothing half-printed before the refusal
