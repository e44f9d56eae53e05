"""The project holds itself to its own rules: lint and strict typing pass, docs tell the truth."""

from __future__ import annotations

import re
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


def test_every_command_is_named_in_the_readme_and_documented_in_the_cli_page() -> None:
    from poolbench.cli.main import COMMANDS

    readme = (ROOT / "README.md").read_text()
    table = (ROOT / "docs" / "cli.md").read_text().split("\n## Commands\n", 1)[1]
    table = table.split("\n## ", 1)[0]
    for name in COMMANDS:
        assert f"poolbench {name}" in readme, f"'poolbench {name}' is not in the README"
        assert f"| `poolbench {name}" in table, f"'poolbench {name}' is not in docs/cli.md"


def test_the_readme_is_a_first_screen_and_every_link_resolves() -> None:
    """The README says what poolbench answers, how to install it and the two commands; the
    reference is in docs/, and every relative link of the README and of docs/ leads to a
    file that exists."""
    readme = ROOT / "README.md"
    assert len(readme.read_bytes()) <= 12 * 1024
    pages = [readme, *sorted((ROOT / "docs").glob("*.md"))]
    links: dict[Path, set[Path]] = {}
    for page in pages:
        links[page] = set()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                path = (page.parent / target).resolve()
                assert path.exists(), f"{page.name}: {target}"
                links[page].add(path)
    # every page of docs/ is reached from the README by following links
    seen, todo = {readme}, [readme]
    while todo:
        for nxt in links.get(todo.pop(), set()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    assert set(pages) <= seen, sorted(p.name for p in set(pages) - seen)


def test_the_version_is_the_newest_release_of_the_changelog() -> None:
    """A release is cut by dating CHANGELOG.md's Unreleased entries under a version and
    giving the package that version: `poolbench --version`, the wheel's name and doctor all
    say the release a user can look up."""
    import tomllib

    from poolbench import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    releases = re.findall(
        r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d\d-\d\d$", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    assert releases, "CHANGELOG.md has no dated release"
    assert project["version"] == __version__ == releases[0]
