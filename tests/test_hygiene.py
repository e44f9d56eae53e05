"""The project holds itself to its own rules: lint and strict typing pass, docs tell the truth."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_is_clean() -> None:
    p = _tool("ruff", "check", "src", "tests", "bench")
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.slow  # the type checker over the whole tree
def test_mypy_strict_is_clean() -> None:
    p = _tool("mypy")
    assert p.returncode == 0, p.stdout + p.stderr


def test_readme_opens_with_the_two_commands_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text().splitlines()
    head = "\n".join(readme[:25])
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = ".venv/bin/python -m pytest -n 2"
    assert test_cmd in head
    # CI runs exactly that command (its exit kept), then the OpenZFS tier's CI subset
    lines = [line.strip() for line in ci.splitlines()]
    assert f"{test_cmd} || suite_rc=$?" in lines
    tier = next(i for i, line in enumerate(lines) if "vm/run-openzfs-tier.sh --ci" in line)
    assert lines.index(f"{test_cmd} || suite_rc=$?") < tier
    assert lines[-1] == "((suite_rc == 0 && guest_rc == 0))"
    assert "bash scripts/setup.sh" in head and "poolbench" in head


def test_every_command_is_documented_in_the_readme() -> None:
    from poolbench.cli.main import COMMANDS

    readme = (ROOT / "README.md").read_text()
    for name in COMMANDS:
        assert f"poolbench {name}" in readme, f"'poolbench {name}' is not in the README"
