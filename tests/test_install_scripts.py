"""scripts/setup.sh and scripts/install.sh on a machine whose ZFS is OpenZFS, proven with apt's
own simulation: `--dry-run` runs `apt-get -s` against the dpkg status of a real Debian 12 host
with OpenZFS 2.3.2 (tests/data/dpkg-status-openzfs-2.3.2: zfsutils-linux, zfs-zed, zfs-dkms
and their libraries; see tests/test_doctor.py). No package may be removed and zfs-fuse is
not installed; on a machine with no ZFS at all zfs-fuse is installed by setup.sh, and by
install.sh only when asked, which shows the simulation can see it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OPENZFS_STATUS = Path(__file__).parent / "data" / "dpkg-status-openzfs-2.3.2"
ZFS_STANZAS = (
    "zfsutils-linux",
    "zfs-zed",
    "zfs-dkms",
    "libzfs6linux",
    "libzpool6linux",
    "libnvpair3linux",
    "libuutil3linux",
)


def _zfs_fuse_has_a_candidate() -> bool:
    if shutil.which("apt-cache") is None:
        return False
    out = subprocess.run(["apt-cache", "policy", "zfs-fuse"], capture_output=True, text=True)
    return "Candidate:" in out.stdout and "Candidate: (none)" not in out.stdout


pytestmark = [
    pytest.mark.slow,  # apt's own solver, run once or more per case
    pytest.mark.skipif(
        not _zfs_fuse_has_a_candidate(),
        reason="needs apt with Debian's package lists (apt-cache policy zfs-fuse has a candidate)",
    ),
]


def _no_zfs_status() -> str:
    """The same machine without OpenZFS: its ZFS stanzas taken out."""
    stanzas = OPENZFS_STATUS.read_text().strip().split("\n\n")
    return "\n\n".join(s for s in stanzas if s.split("\n", 1)[0][9:] not in ZFS_STANZAS) + "\n"


def host(tmp: Path, openzfs: bool) -> dict[str, str]:
    """The environment of a script on a made-up host: its dpkg directory, its /sys/module and
    (OpenZFS) a `zpool` that answers `zpool version` as OpenZFS 2.3.2 does."""
    admindir, sys_module, bin_ = tmp / "dpkg", tmp / "module", tmp / "bin"
    for d in (admindir, sys_module, bin_):
        d.mkdir()
    if openzfs:
        (admindir / "status").write_text(OPENZFS_STATUS.read_text())
        (sys_module / "zfs").mkdir()
        (sys_module / "zfs" / "version").write_text("2.3.2-2~bpo12+2\n")
        zpool = bin_ / "zpool"
        zpool.write_text(
            '#!/bin/sh\n[ "$1" = version ] || exit 1\n'
            "echo zfs-2.3.2-2~bpo12+2; echo zfs-kmod-2.3.2-2~bpo12+2\n"
        )
        zpool.chmod(0o755)
    else:
        (admindir / "status").write_text(_no_zfs_status())
    # /usr/sbin is left out: this machine's own zpool (zfs-fuse's) must not answer for it
    return {
        **os.environ,
        "PATH": f"{bin_}:/usr/bin:/bin",
        "POOLBENCH_DPKG_ADMINDIR": str(admindir),
        "POOLBENCH_SYS_MODULE": str(sys_module),
    }


def run(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def installs(out: str) -> set[str]:
    return {line.split()[1] for line in out.splitlines() if line.startswith("Inst ")}


def test_the_fixture_is_a_host_apt_would_strip_of_its_zfs(tmp_path: Path) -> None:
    """The harm itself, seen by the same simulation: `apt-get install zfs-fuse` on this
    host removes zfsutils-linux, zfs-zed and zfs-dkms; --no-remove makes apt refuse."""
    status = f"Dir::State::status={OPENZFS_STATUS}"
    p = subprocess.run(
        ["apt-get", "-s", "-o", status, "install", "zfs-fuse"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    removed = {line.split()[1] for line in p.stdout.splitlines() if line.startswith("Remv ")}
    assert removed == {"zfsutils-linux", "zfs-zed", "zfs-dkms"}, p.stdout[-1500:]
    p = subprocess.run(
        ["apt-get", "-s", "--no-remove", "-o", status, "install", "zfs-fuse"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode != 0 and "Packages need to be removed but remove is disabled" in p.stderr


def test_setup_on_an_openzfs_host_removes_nothing_and_skips_zfs_fuse(tmp_path: Path) -> None:
    p = run("setup.sh", host(tmp_path, openzfs=True), "--dry-run")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    out = p.stdout
    assert "setup: skipped zfs-fuse: this machine has OpenZFS" in out
    assert "  - dpkg has zfsutils-linux 2.3.2-2~bpo12+2" in out
    assert "  - the zfs kernel module is loaded (/sys/module/zfs: 2.3.2-2~bpo12+2)" in out
    assert "  - `zpool version` answers zfs-2.3.2-2~bpo12+2" in out
    assert "apt's simulation of: apt-get install --no-remove" in out
    assert "Remv " not in out and "DOWNGRADED" not in out
    assert "zfs-fuse" not in installs(out) and {"chromium", "blktrace"} <= installs(out)
    assert "nothing was changed" in out


def test_setup_on_a_host_without_zfs_installs_zfs_fuse(tmp_path: Path) -> None:
    p = run("setup.sh", host(tmp_path, openzfs=False), "--dry-run")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    assert "skipped zfs-fuse" not in p.stdout
    assert "zfs-fuse" in installs(p.stdout) and "Remv " not in p.stdout


def test_install_on_an_openzfs_host_never_installs_zfs_fuse_even_when_asked(
    tmp_path: Path,
) -> None:
    p = run("install.sh", host(tmp_path, openzfs=True), "--dry-run", "--with", "all", "--zfs-fuse")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    out = p.stdout
    assert "ZFS: this machine's OpenZFS; poolbench uses it as it is." in out
    assert "Skipped zfs-fuse (--zfs-fuse): this machine has OpenZFS" in out
    assert "Remv " not in out and "DOWNGRADED" not in out
    got = installs(out)
    assert "zfs-fuse" not in got
    # every optional part asked for, as the list names them (fio and mdadm: already there)
    assert {"blktrace", "postgresql-contrib", "linux-source-6.1"} <= got, sorted(got)
    assert "Dry run: would run python3 -m venv /opt/poolbench" in out


def test_install_installs_zfs_fuse_only_when_asked_on_a_host_with_no_zfs(
    tmp_path: Path,
) -> None:
    env = host(tmp_path, openzfs=False)
    plain = run("install.sh", env, "--dry-run")
    assert plain.returncode == 0, plain.stderr
    assert "ZFS: none on this machine" in plain.stdout and "rerun with --zfs-fuse" in plain.stdout
    assert "zfs-fuse" not in installs(plain.stdout)
    asked = run("install.sh", env, "--dry-run", "--zfs-fuse")
    assert asked.returncode == 0, asked.stderr
    assert "zfs-fuse" in installs(asked.stdout) and "Remv " not in asked.stdout


def test_a_plan_that_removes_a_package_is_refused_before_apt_runs(tmp_path: Path) -> None:
    """The last guard, for a package list that would harm: the shared apt helper refuses
    zfs-fuse on the OpenZFS host instead of installing it (apt's --no-remove refusal)."""
    env = {**host(tmp_path, openzfs=True), "PB_REPO": str(ROOT), "PB_SIMULATE": "1"}
    p = subprocess.run(
        ["bash", "-c", ". scripts/lib/packages.sh; pb_apt_install zfs-fuse"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 1
    assert "Refused: apt would have to remove or downgrade packages" in p.stderr
    assert "Nothing was installed" in p.stderr


def test_install_refuses_an_unknown_part(tmp_path: Path) -> None:
    p = run("install.sh", host(tmp_path, openzfs=True), "--dry-run", "--with", "nosuch")
    assert p.returncode != 0 and "unknown part 'nosuch'" in p.stderr


def test_the_readmes_install_commands_remove_nothing_on_an_openzfs_host(tmp_path: Path) -> None:
    """The README's first screen as a user on an OpenZFS host follows it: each apt-get line
    of its Install section, in apt's simulation against that host's dpkg status (without its
    fio, so that the line has something to do), removes nothing and brings no zfs-fuse; the
    bare machine's line is setup.sh (tested above)."""
    stanzas = OPENZFS_STATUS.read_text().strip().split("\n\n")
    status = tmp_path / "status"
    status.write_text("\n\n".join(s for s in stanzas if not s.startswith("Package: fio\n")))
    assert "zfsutils-linux" in status.read_text() and "Package: fio\n" not in status.read_text()
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    commands = [
        line.split("#", 1)[0].split()
        for line in section.splitlines()
        if line.split()[:1] in (["apt-get"], ["sudo"]) and "apt-get" in line.split()[:2]
    ]
    assert commands, "the README's Install section has no apt-get line"
    assert "`bash scripts/setup.sh`" in section
    for argv in commands:
        argv = argv[argv.index("apt-get") :]
        assert argv[1] == "install" and "--no-remove" in argv, argv
        p = subprocess.run(
            ["apt-get", "-s", "-o", f"Dir::State::status={status}", *argv[1:]],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stdout[-1500:] + p.stderr
        assert "Remv " not in p.stdout and "zfs-fuse" not in installs(p.stdout), p.stdout
        assert "fio" in installs(p.stdout), p.stdout[-1500:]  # the line did its work
