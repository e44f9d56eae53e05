"""poolbench as a user gets it: the wheel built from the sources alone, installed into a fresh
virtualenv with no package index (the pinned dependencies' wheels from a local wheelhouse),
run from an empty directory with no checkout on its path, and (`hide_checkout`) with no
checkout on disk at all: each checkout this machine has is covered by an empty tmpfs in a
mount namespace of the command's own, so a file read from the source tree would fail there.
Shared by tests/test_wheel.py and the guest tier's user path
(tests/guest/test_openzfs_user_path.py)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# scripts/setup.sh fills .venv/wheelhouse; the guest image keeps its own (vm/ozvm.sh `venv`)
WHEELHOUSES = (ROOT / ".venv" / "wheelhouse", Path("/opt/poolbench-wheels"))
# Every copy of the checkout on this machine: the tree the tests run from and, in the guest,
# the read-only share it was copied from (vm/guest/pytest.sh)
CHECKOUTS = tuple(p for p in (ROOT, Path("/mnt/repo")) if p.is_dir())
# Run "$@" after an empty, read-only tmpfs is mounted on each directory before the "--".
_HIDE = (
    'while [ "$1" != -- ]; do mount -t tmpfs -o ro,size=4k,mode=0755 none "$1" || exit 126; '
    'shift; done; shift; exec "$@"'
)


def wheelhouse() -> Path:
    given = os.environ.get("POOLBENCH_WHEELHOUSE")
    for d in ([Path(given)] if given else []) + list(WHEELHOUSES):
        if d.is_dir() and any(d.glob("*.whl")):
            return d
    pytest.fail(
        "no wheelhouse of poolbench's dependencies (.venv/wheelhouse): run scripts/setup.sh, "
        "which keeps them there, or set POOLBENCH_WHEELHOUSE"
    )


def run(argv: list[str], timeout: float = 600, **kw: object) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)  # type: ignore[call-overload]
    assert p.returncode == 0, f"{argv}: exit {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p  # type: ignore[no-any-return]


def build_wheel(tmp: Path) -> Path:
    """The wheel, built from a copy of what a source release holds (pyproject.toml,
    README.md, src/) with no index: setuptools from the test extra, no build isolation."""
    tree = tmp / "source"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    dist = tmp / "dist"
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(dist),
            str(tree),
        ]
    )
    (wheel,) = dist.glob("poolbench-*-py3-none-any.whl")
    return wheel


def without_checkout(argv: list[str]) -> list[str]:
    """`argv` run in a mount namespace of its own in which every checkout is an empty
    directory (the machine's mounts are not touched: the namespace goes with the command).
    Root gets a plain mount namespace; another user one in a user namespace of its own, in
    which it is uid 0 (so there `poolbench doctor` reports root)."""
    if not shutil.which("unshare"):
        pytest.fail("unshare (util-linux) is needed to run a command with the checkout hidden")
    user = [] if os.geteuid() == 0 else ["--map-root-user"]
    hide = ["sh", "-c", _HIDE, "sh", *map(str, CHECKOUTS), "--"]
    return ["unshare", *user, "--mount", "--propagation", "private", "--", *hide, *argv]


@dataclass(frozen=True)
class Installed:
    venv: Path
    cwd: Path  # an empty directory, the commands' working directory
    env: dict[str, str]

    def poolbench(
        self, *args: str, check: bool = True, timeout: float = 600, hide_checkout: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """The installed poolbench; `hide_checkout`: with no checkout on disk (a command
        that mounts nothing: a study's mounts would vanish with its namespace, unseen)."""
        argv = [str(self.venv / "bin" / "poolbench"), *args]
        if hide_checkout:
            argv = without_checkout(argv)
        if check:
            return run(argv, timeout=timeout, cwd=self.cwd, env=self.env)
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, cwd=self.cwd, env=self.env
        )


def install(wheel: Path, tmp: Path) -> Installed:
    """A fresh virtualenv with the wheel and its dependencies from the wheelhouse only. The
    interpreter is the system's (the one that made this test's venv), never this venv's."""
    base = Path(getattr(sys, "_base_executable", sys.executable))
    venv = tmp / "venv"
    run([str(base), "-m", "venv", str(venv)])
    # --no-compile: Python compiles what it imports on first use; compiling all of scipy
    # up front takes minutes under the guest's emulation and proves nothing here
    run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--no-compile",
            "--no-index",
            "--find-links",
            str(wheelhouse()),
            str(wheel),
        ]
    )
    cwd = tmp / "empty"
    cwd.mkdir()
    (tmp / "home").mkdir()
    env = {
        "PATH": f"{venv / 'bin'}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(tmp / "home"),  # the result store goes under it (XDG data dir)
        "LANG": "C.UTF-8",
        "POOLBENCH_MIN_WINDOW": os.environ.get("POOLBENCH_MIN_WINDOW", "0"),
    }
    return Installed(venv, cwd, env)


def shared_install(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Installed]:
    """The wheel built and installed once per test session. In parallel both workers ask for
    it: the first builds it (about a minute) under a lock in the session's shared temporary
    directory, the other waits and takes the same one, so the machine's chain (its dry run
    from the wheel) never builds a second copy of what the other worker already made."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    tmp, done = shared / "wheel-shared", shared / "wheel-shared.json"
    with open(shared / "wheel-shared.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            tmp.mkdir()
            wheel = build_wheel(tmp)
            inst = install(wheel, tmp)
            made = {"wheel": str(wheel), "venv": str(inst.venv), "cwd": str(inst.cwd),
                    "env": inst.env}  # fmt: skip
            done.write_text(json.dumps(made))
        made = json.loads(done.read_text())
    inst = Installed(Path(made["venv"]), Path(made["cwd"]), dict(made["env"]))
    return Path(made["wheel"]), inst


def installed_package_dir(inst: Installed) -> Path:
    p = run(
        [
            str(inst.venv / "bin" / "python"),
            "-c",
            "import poolbench, pathlib; print(pathlib.Path(poolbench.__file__).parent)",
        ],
        cwd=inst.cwd,
        env=inst.env,
    )
    return Path(p.stdout.strip())
