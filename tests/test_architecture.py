"""docs/architecture.md matches the tree (issue 11): every package has a paragraph, and every
import of one poolbench package by another is an edge its paragraph allows - either by design
(`may import:`) or as a named known exception, and each known exception is still real."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "poolbench"
DOC = ROOT / "docs" / "architecture.md"


def _packages() -> set[str]:
    dirs = {p.parent.name for p in SRC.glob("*/__init__.py")}
    modules = {p.stem for p in SRC.glob("*.py")} - {"__init__", "__main__"}
    return dirs | modules


def _sections() -> dict[str, tuple[set[str], set[str]]]:
    """name -> (may import, known exceptions), from the doc's `## name` sections."""
    found: dict[str, tuple[set[str], set[str]]] = {}
    for block in re.split(r"^## ", DOC.read_text(), flags=re.M)[1:]:
        name, _, body = block.partition("\n")
        may = re.search(r"^may import: (.*)$", body, re.M)
        exc = re.search(r"^known exceptions: (.*?)(?:\n\n|\Z)", body, re.M | re.S)
        assert may and exc, f"## {name}: needs 'may import:' and 'known exceptions:' lines"
        allowed = {w.strip() for w in may.group(1).split(",")} - {"-"}
        exceptions = set(re.findall(r"(?:^|;\s*)(\w+) \(", exc.group(1).strip()))
        assert exceptions or exc.group(1).strip() == "-", name
        found[name.strip()] = (allowed, exceptions)
    return found


def _edges() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the files that import it."""
    packages = _packages()
    edges: dict[str, dict[str, set[str]]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "poolbench":
                    names = [f"poolbench.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for n in names:
                parts = n.split(".")
                if parts[0] == "poolbench" and len(parts) > 1 and parts[1] in packages - {own}:
                    edges.setdefault(own, {}).setdefault(parts[1], set()).add(str(rel))
    return edges


def test_every_package_has_a_paragraph_and_every_paragraph_a_package() -> None:
    assert set(_sections()) == _packages() - {"__main__"}


def test_imports_stay_within_what_each_paragraph_allows() -> None:
    sections = _sections()
    wrong = [
        f"{pkg} -> {dep} ({', '.join(sorted(files))})"
        for pkg, deps in _edges().items()
        if pkg in sections
        for dep, files in deps.items()
        if dep not in sections[pkg][0] | sections[pkg][1]
    ]
    assert wrong == [], "imports docs/architecture.md does not allow"


def test_each_known_exception_is_still_real_and_not_also_allowed() -> None:
    edges = _edges()
    for pkg, (allowed, exceptions) in _sections().items():
        assert not allowed & exceptions, pkg
        for dep in exceptions:
            assert dep in edges.get(pkg, {}), f"{pkg} -> {dep} is gone: remove the exception"


def test_the_pure_packages_import_no_io_package() -> None:
    io = {"system", "zfs", "store", "engine", "backends", "safety", "guards", "fleet"}
    sections = _sections()
    for pure in ("planner", "stats"):
        assert not sections[pure][0] & io, pure
    # study is pure by design; its one I/O edge is the named exception (store facts)
    assert not sections["study"][0] & io
