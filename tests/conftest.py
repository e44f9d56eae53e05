"""The suite's shared helpers; its tiers, machine lock and machine fixtures are plugins
(tests/plugins/: tiers.py chooses each test's tier from the fixtures it uses, docs/testing.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = [
    "tests.plugins.tiers", "tests.plugins.machine", "tests.plugins.zfs_fuse",
    "tests.plugins.cache_guard", "tests.plugins.ssh_hosts", "pytester",
]  # fmt: skip

HAS_FIO = shutil.which("fio") is not None

# A suite started as a background job of a shell without job control (`cmd &` in a script,
# nohup) inherits SIGINT ignored, and every poolbench it starts would ignore it too, as Unix
# wants of background jobs: the Ctrl-C tests would then see a run finish instead of stop.
# A handler here (not "ignore") makes each child start with the default, whatever started us.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# The suite checks mechanics and computed figures, not how steady a disk is: every poolbench
# it starts holds its windows to no minimum unless a test asks for one (--min-window, or a
# study file's min_window). The window rule itself is tested where it is set on purpose.
os.environ.setdefault("POOLBENCH_MIN_WINDOW", "0")

# Compiled bytecode is kept (in __pycache__, git-ignored) even where PYTHONDONTWRITEBYTECODE
# is set: the suite starts a few hundred `python -m poolbench`, and without it each compiles
# the modules it imports from source again (about twice the CPU of one that reads them:
# 1.2 s against 0.6 s for `poolbench runs` here), and each pytest worker rewrites the asserts
# of every test module again. The workers and every child inherit this; nothing else changes.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

needs_fio = pytest.mark.skipif(not HAS_FIO, reason="fio is not installed (Debian: fio)")


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=check, capture_output=True, text=True)


def poolbench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "poolbench", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def loops_backed_by(directory: Path) -> list[str]:
    out = sh("losetup", "--list", "--noheadings", "--output", "NAME,BACK-FILE", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if str(directory) in line]


def stored_rows(db: Path, workload: str) -> list[dict[str, Any]]:
    """One workload's stored measurements, their guards and warnings decoded from JSON."""
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    q = "SELECT * FROM measurements WHERE workload = ?"
    rows = [dict(r) for r in con.execute(q, (workload,))]
    for r in rows:
        r["guards"] = json.loads(r["guards"] or "{}")
        r["warnings"] = json.loads(r["warnings"] or "[]")
    return rows
