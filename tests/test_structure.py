"""The tree keeps the shape issue 26 gave it: modules small enough to read whole, backends
asked for what they can do rather than tested for their class, and ZFS spoken only in zfs/.

* No module in src/poolbench is over 500 lines, except those named in LONG_MODULES with the
  reason; the test fails once one of them is short, so the list can only shrink.
* No `isinstance(x, ZfsBackend)` (or any concrete `...Backend`) outside backends/: the trial
  loop asks `backends.base.capability(backend, SupportsX)`.
* No `zpool`/`zfs`/`zdb` command line outside zfs/ (an argument list that starts with the
  program, a `which("zpool")`, an import of `zfs.commands`): callers use `zfs.ops`.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "poolbench"
LIMIT = 500
ZFS_PROGRAMS = {"zpool", "zfs", "zdb"}
# What follows the program in a command line; ["zfs", "btrfs"] (backends) and ("zfs",
# "fuse.zfs") (mount types) are not command lines.
SUBCOMMANDS = {
    "add", "attach", "clear", "create", "destroy", "detach", "export", "get", "import",
    "iostat", "labelclear", "list", "mount", "offline", "online", "remove", "replace",
    "rollback", "scrub", "send", "set", "snapshot", "status", "sync", "unmount", "upgrade",
    "version", "wait",
}  # fmt: skip

# Debt still open: each is one concept that grew, not yet split by job.
LONG_MODULES: dict[str, str] = {
    "planner/performance.py": "the speed model and its raidz block-layout fast path",
    "workloads/library.py": "every workload definition and its name grammar in one table",
    "planner/capacity.py": "OpenZFS's space arithmetic, one transcribed function after another",
    "safety/inventory.py": "every reason a device is in use (sysfs, signatures, ZFS labels)",
    "report/html.py": "the page's sections and its inline style and self-check script",
    "fleet/session.py": "the fleet's controller run, per-host records and its own guards",
    "store/db.py": "the schema, its migrations and the queries of measurements",
    "safety/claims.py": "claiming, overrides, confirmation and the guarded runner",
    "report/svg.py": "every chart kind of the HTML report",
}


def _modules() -> dict[str, int]:
    return {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}


def _trees(exclude: str) -> list[tuple[str, ast.AST]]:
    """(path, syntax tree) of every module outside src/poolbench/`exclude`."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if rel.parts[0] != exclude:
            out.append((str(rel), ast.parse(path.read_text())))
    return out


def test_no_module_is_over_500_lines_but_the_named_debt() -> None:
    long = {name: n for name, n in _modules().items() if n > LIMIT}
    assert sorted(set(long) - set(LONG_MODULES)) == [], "split it by job (see LONG_MODULES)"


def test_each_long_module_is_still_long() -> None:
    lines = _modules()
    short = [name for name in LONG_MODULES if lines.get(name, 0) <= LIMIT]
    assert short == [], "no longer over 500 lines (or gone): remove it from LONG_MODULES"


def _concrete_backend(node: ast.expr) -> str | None:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
    return name if name and name.endswith("Backend") and name != "Backend" else None


def test_no_isinstance_on_a_concrete_backend_outside_backends() -> None:
    found = []
    for rel, tree in _trees("backends"):
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance"):
                continue
            if len(node.args) != 2:
                continue
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            found += [f"{rel}:{node.lineno} {c}" for k in kinds if (c := _concrete_backend(k))]
    assert found == [], "ask backends.base.capability(backend, SupportsX) instead"


def _const(node: ast.expr) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _zfs_argv(node: ast.AST) -> bool:
    """An argument list for zpool/zfs/zdb: the program, then a subcommand, an option or a
    value computed at run time (a list of backend names such as ["zfs", "btrfs"] is not
    one)."""
    if not isinstance(node, ast.List | ast.Tuple) or not node.elts:
        return False
    if _const(node.elts[0]) not in ZFS_PROGRAMS:
        return False
    if len(node.elts) == 1:
        return _const(node.elts[0]) != "zfs"  # ["zfs"] is the backend list of a study
    second = _const(node.elts[1])
    return not isinstance(second, str) or second in SUBCOMMANDS or second.startswith("-")


def _imports_commands(node: ast.ImportFrom) -> bool:
    if node.module == "poolbench.zfs.commands":
        return True
    return node.module == "poolbench.zfs" and any(a.name == "commands" for a in node.names)


def test_no_zfs_command_line_outside_the_zfs_layer() -> None:
    found = []
    for rel, tree in _trees("zfs"):
        for node in ast.walk(tree):
            if _zfs_argv(node):
                found.append(f"{rel}:{getattr(node, 'lineno', 0)} argument list")
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "which"
                and node.args
                and _const(node.args[0]) in ZFS_PROGRAMS
            ):
                found.append(f"{rel}:{node.lineno} which({_const(node.args[0])!r})")
            elif isinstance(node, ast.ImportFrom) and _imports_commands(node):
                found.append(f"{rel}:{node.lineno} imports zfs.commands")
    assert found == [], "run ZFS through poolbench.zfs.ops (one call per operation)"


def test_the_rules_see_what_they_forbid() -> None:
    """The checks above find the shapes they look for (and not a study's backend list)."""
    text = 'a = ["zpool", "status", n]\nb = ["zfs", "btrfs"]\nc = ["zfs"]\nd = ["zdb", x]'
    text += '\ne = ("zfs", "fuse.zfs")'
    found = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.List | ast.Tuple)]
    assert [_zfs_argv(n) for n in found] == [True, False, False, True, False]
    call = ast.parse("isinstance(b, (ZfsBackend, Backend))").body[0]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    kinds = call.value.args[1]
    assert isinstance(kinds, ast.Tuple)
    assert [_concrete_backend(k) for k in kinds.elts] == ["ZfsBackend", None]
