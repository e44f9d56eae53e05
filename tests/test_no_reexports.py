"""No re-export shims: every `from poolbench.X import NAME` (and every `X.NAME` read through
an imported module) takes NAME from the module that defines it, not from one that imported it
from elsewhere (`from .space import KiB as KiB` let 43 names of planner/space.py be spelled
`planner.capacity.KiB`). A reader who follows an import lands on the definition.

A package's `__init__.py` that lists its public face in `__all__` (`poolbench.stats`,
`poolbench.stats.changepoint`, `poolbench.backends.zfs`) is that package's API, not a shim."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
CHECKED = (SRC / "poolbench", ROOT / "tests", ROOT / "bench")


def _file_of(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements that bind module attributes: the body, and the bodies of its `if` (`if
    TYPE_CHECKING:`), `try` and `with` blocks; not what a function or class binds inside."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, ast.If | ast.With):
            out += _module_level(node.body) + _module_level(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                out += _module_level(block)
    return out


@cache
def _imported_not_defined(module: str) -> frozenset[str]:
    """Names MODULE imports from poolbench modules and does not define itself; empty for a
    package whose __init__ declares `__all__` (its public face)."""
    path = _file_of(module)
    if path is None:
        return frozenset()
    imported: set[str] = set()
    defined: set[str] = set()
    for node in _module_level(ast.parse(path.read_text()).body):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("poolbench"):
            # a module bound by name (`from poolbench.guards import cache`) is no shim
            where = node.module
            imported |= {a.asname or a.name for a in node.names if not _is_module(where, a.name)}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        else:
            targets = [n for n in ast.walk(node) if isinstance(n, ast.Name)]
            defined |= {n.id for n in targets if isinstance(n.ctx, ast.Store)}
    if path.name == "__init__.py" and "__all__" in defined:
        return frozenset()
    return frozenset(imported - defined)


def _is_module(module: str, name: str) -> bool:
    return _file_of(f"{module}.{name}") is not None


def _all_of(path: Path) -> list[str]:
    """The names a module's `__all__` lists (none if it has no `__all__`)."""
    for node in ast.parse(path.read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
            and isinstance(node.value, ast.List | ast.Tuple)
        ):
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


def _offences(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text())
    rel = path.relative_to(root)
    aliases: dict[str, str] = {}  # local name -> poolbench module it is bound to
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not node.module.startswith("poolbench"):
                continue
            for a in node.names:
                if _is_module(node.module, a.name):
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                elif a.name in _imported_not_defined(node.module):
                    found.append(f"{rel}:{node.lineno}: {a.name} from {node.module}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("poolbench.") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and node.attr in _imported_not_defined(aliases[node.value.id])
        ):
            found.append(f"{rel}:{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_every_import_names_the_defining_module() -> None:
    found = [o for top in CHECKED for p in sorted(top.rglob("*.py")) for o in _offences(p)]
    assert found == [], "import these from the module that defines them:\n" + "\n".join(found)


def test_a_module_exports_only_what_it_defines() -> None:
    """A module's `__all__` names its own definitions: listing an imported name there is the
    same shim as `import NAME as NAME` (a package's `__init__.py` is its public face)."""
    found = []
    for path in sorted((SRC / "poolbench").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        shims = _imported_not_defined(module)
        found += [f"{path.relative_to(ROOT)}: {n}" for n in _all_of(path) if n in shims]
    assert found == [], "drop these from __all__ and import them from their definer"


def test_the_rule_sees_a_shim(tmp_path: Path) -> None:
    """The check finds what it forbids: a name taken from a module that only imported it, both
    as `from M import NAME` and as `M.NAME`, and lets a defined name through."""
    assert "KiB" not in _imported_not_defined("poolbench.planner.space")
    assert "format_size" in _imported_not_defined("poolbench.planner.capacity")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from poolbench.planner.capacity import format_size, plan_pool\n"
        "from poolbench.planner import capacity\n"
        "capacity.format_size\ncapacity.plan_pool\n"
    )
    assert _offences(probe, tmp_path) == [
        "probe.py:1: format_size from poolbench.planner.capacity",
        "probe.py:3: capacity.format_size",
    ]
