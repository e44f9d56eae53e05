"""The tree keeps the shape issue 26 gave it: modules small enough to read whole, backends
asked for what they can do rather than tested for their class, and ZFS spoken only in zfs/.

* No module in src/poolbench is over 500 lines, except those named in LONG_MODULES with the
  reason; the test fails once one of them is short, so the list can only shrink.
* No `isinstance(x, ZfsBackend)` (or any concrete `...Backend`) outside backends/: the trial
  loop asks `backends.base.capability(backend, SupportsX)`.
* Untyped mappings (`dict[str, Any]`, `Mapping[str, Any]`, `JsonObject`, `StudyDict`) are
  few (UNTYPED_CEILING, which only goes down) and each module that keeps one is named in
  UNTYPED_MODULES with the reason: a value of known shape is a dataclass or a TypedDict whose
  readers call fields; JSON of unknown shape at the edge stays `records.jsontypes.JsonObject`.
* engine/'s subsystems (the disk screen, record and replay) live in their own packages, and
  no two of its modules are anagrams of each other (run_study/study_run were).
* No `zpool`/`zfs`/`zdb` command line outside zfs/ (an argument list that starts with the
  program, a `which("zpool")`, an import of `zfs.commands`): callers use `zfs.ops`.
"""

from __future__ import annotations

import ast
import functools
import re
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
LONG_MODULES: dict[str, str] = {}

# The four spellings of an untyped mapping. A value of known shape is a dataclass (decoded
# once, at the boundary) or a TypedDict, and its readers call fields; only JSON of truly
# unknown shape at the edge keeps one, in a module named below with the reason.
UNTYPED = re.compile(r"dict\[str, Any\]|Mapping\[str, Any\]|JsonObject|StudyDict")
# Lines spelling one in src (the grep of issue 40); its goal is 80. Lower it as they go.
UNTYPED_CEILING = 48
# Every module that spells one, and why; "debt:" marks a value whose shape is known.
UNTYPED_MODULES: dict[str, str] = {
    "backends/base.py": "debt: the pool's description (the guards' `pool`), each stack's own",
    "cli/fleet_bench.py": "debt: `bench`'s click parameters (**params), read by key",
    "cli/study_cmd.py": "click's keyword options (**opts), each study's own among them",
    "engine/subject.py": "per replicate the `guards` JSON as stored (records/findings.py)",
    "fleet/clientout.py": "fio's client/server JSON document (its `client_stats` entries are "
    "decoded into FioJob records, its `disk_util` into DiskUtil)",
    "guards/geometry.py": "debt: the pool's description (the guards' `pool`), read by key",
    "planner/filesizes.py": "a saved histogram's JSON notes, unpacked into ScanNotes(**)",
    "records/__init__.py": "the package's docstring names the alias",
    "records/findings.py": "the `guards` column's JSON, written and read by the store",
    "records/fingerprint.py": "the fingerprint's JSON in the run's metadata (to_json)",
    "records/jsontypes.py": "where the alias is defined",
    "records/latency.py": "the `clat` column's JSON as stored, decoded by from_json",
    "records/measurement.py": "the stored workload definition (a JSON column) and to_json",
    "records/run_metadata.py": "the column as stored (any version, unknown keys kept), shown "
    "whole by the HTML page and `export --json`; decoded once here",
    "report/data.py": "a workload's stored definition; the pool as its backend described it",
    "store/factrows.py": "a stored measurement's `guards` JSON as the store decodes it, and "
    "its sections no record reads yet (pool, cpu, capacity, expand, queue_depth)",
    "store/screens.py": "a screen's options as stored (each command's own settings)",
    "study/model.py": "a study file's TOML as parsed, before pydantic validates it",
    "workloads/fioentry.py": "one job entry of fio's JSON, decoded once into FioJob",
    "workloads/fioparse.py": "fio's --output-format=json document as found in its output",
}


def _modules() -> dict[str, int]:
    return {str(p.relative_to(SRC)): len(p.read_text().splitlines()) for p in SRC.rglob("*.py")}


@functools.cache
def _parsed() -> tuple[tuple[Path, ast.AST], ...]:
    """Every module's syntax tree, parsed once for all the rules here (read, never changed)."""
    return tuple((p.relative_to(SRC), ast.parse(p.read_text())) for p in sorted(SRC.rglob("*.py")))


def _trees(exclude: str) -> list[tuple[str, ast.AST]]:
    """(path, syntax tree) of every module outside src/poolbench/`exclude`."""
    return [(str(rel), tree) for rel, tree in _parsed() if rel.parts[0] != exclude]


def test_no_module_is_over_500_lines_but_the_named_debt() -> None:
    long = {name: n for name, n in _modules().items() if n > LIMIT}
    assert sorted(set(long) - set(LONG_MODULES)) == [], "split it by job (see LONG_MODULES)"


def test_each_long_module_is_still_long() -> None:
    lines = _modules()
    short = [name for name in LONG_MODULES if lines.get(name, 0) <= LIMIT]
    assert short == [], "no longer over 500 lines (or gone): remove it from LONG_MODULES"


# engine/'s subsystems, each a package of its own: a module of one at engine/'s top level
# (the prefix its files had before they moved) belongs in it.
ENGINE_SUBSYSTEMS = {"screen": ("screen_",), "replay": ("record", "replay", "blkftrace")}


def test_engine_keeps_its_subsystems_in_their_packages() -> None:
    engine = SRC / "engine"
    top = [p.stem for p in engine.glob("*.py")]
    for package, prefixes in ENGINE_SUBSYSTEMS.items():
        assert (engine / package / "__init__.py").is_file(), package
        stray = [m for m in top if m.startswith(prefixes) and m != "records"]
        assert stray == [], f"engine/{package}/ holds these: {stray}"
    # one name per job: no two top-level modules spelled with the same letters
    spelled = sorted("".join(sorted(m)) for m in top)
    assert len(spelled) == len(set(spelled)), "two engine modules are anagrams of each other"


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


def _untyped_lines() -> dict[str, int]:
    """Module → how many of its lines spell an untyped mapping."""
    found: dict[str, int] = {}
    for p in sorted(SRC.rglob("*.py")):
        n = sum(1 for line in p.read_text().splitlines() if UNTYPED.search(line))
        if n:
            found[str(p.relative_to(SRC))] = n
    return found


def test_untyped_mappings_stay_few_and_named() -> None:
    found = _untyped_lines()
    assert sum(found.values()) <= UNTYPED_CEILING, "type it (dataclass, TypedDict): see UNTYPED"
    assert sorted(set(found) - set(UNTYPED_MODULES)) == [], "type it, or name it with the reason"
    assert sorted(set(UNTYPED_MODULES) - set(found)) == [], "no longer needs its entry"


def test_one_measurement_record() -> None:
    """Issue 26: the engine, the store and the reports share one Measurement record."""
    found = [
        rel
        for rel, tree in _trees("")
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name == "Measurement"
    ]
    assert found == ["records/measurement.py"], "one record: poolbench.records.measurement"
