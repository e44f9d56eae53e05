"""`poolbench doctor` on made-up machines (the files it reads in a temporary directory, the
programs it runs answered by a RecordingRunner): the ZFS flavour, release and features it
reports, what it says is missing and the one command it suggests, which never removes a
package (checked with apt's own simulation) and never names zfs-fuse where OpenZFS is."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from poolbench import capabilities
from poolbench.cli import doctor_cmd
from poolbench.engine import doctor
from poolbench.engine.doctor import Where
from poolbench.errors import EXIT_UNSUPPORTED, Unsupported
from poolbench.system.runner import CommandResult, RecordingRunner

DATA = Path(__file__).parent / "data"
# The dpkg status of a Debian 12 machine with OpenZFS 2.3.2 from bookworm-backports: the
# OpenZFS guest image's own (vm/ozvm.sh), descriptions and conffiles left out, with the real
# zfs-zed stanza of bookworm-backports added (`apt-cache show zfs-zed`; the image installs
# no recommends). zfsutils-linux declares `Conflicts: nordugrid-arc-client, zfs, zfs-fuse`.
OPENZFS_STATUS = DATA / "dpkg-status-openzfs-2.3.2"
OPENZFS_232 = "zfs-2.3.2-2~bpo12+2\nzfs-kmod-2.3.2-2~bpo12+2\n"
EVERY_PROGRAM = {p for c in capabilities.CAPABILITIES for p in c.programs} - {"zfs-fuse"}
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'


def _result(argv: tuple[str, ...], rc: int = 0, out: str = "", err: str = "") -> CommandResult:
    return CommandResult(argv, rc, out, err, 0.0)


def runner(
    zpool_version: str | None, answers: bool = True, installed: set[str] = EVERY_PROGRAM
) -> RecordingRunner:
    """`zpool version` answers as OpenZFS `zpool_version` (None: it does not know the command,
    as zfs-fuse); `zpool list -H` answers when a module or daemon does."""
    version = ("zpool", "version")
    listing = ("zpool", "list", "-H")
    return RecordingRunner(
        responses={
            version: _result(version, 0, zpool_version)
            if zpool_version
            else _result(version, 2, "", "unrecognized command 'version'"),
            listing: _result(listing, 0 if answers else 1),
            ("zpool", "upgrade", "-v"): "This system is currently running ZFS pool version 23.\n",
            ("fio", "--version"): "fio-3.33\n",
            ("mdadm", "--version"): _result(("mdadm",), 0, "", "mdadm - v4.2 - 2021-12-30\n"),
            ("mkfs.btrfs", "--version"): "mkfs.btrfs, part of btrfs-progs v6.2\n",
        },
        installed=installed,
    )


def machine(
    tmp: Path,
    *,
    module: str | None = "2.3.2-2~bpo12+2",
    status: Path | None = None,
    root: bool = True,
    os_release: str = DEBIAN,
    arc: bool = True,
    pg: bool = True,
    blkio: bool = True,
    tarball: bool = False,
    md: bool = True,
) -> Where:
    """The files doctor reads, made up under `tmp`."""
    sys_module = tmp / "sys" / "module"
    (sys_module / "loop").mkdir(parents=True)
    if module is not None:
        (sys_module / "zfs").mkdir()
        (sys_module / "zfs" / "version").write_text(module + "\n")
    dpkg = tmp / "status"
    dpkg.write_text(status.read_text() if status else "")
    (tmp / "os-release").write_text(os_release)
    arcstats, params = tmp / "arcstats", tmp / "parameters"
    params.mkdir()
    if arc:
        arcstats.write_text("13 1 0x01 147 39984 1 2\nname type data\nc_max 4 1073741824\n")
        (params / "zfs_arc_max").write_text("0\n")
    blk = tmp / "blkio"
    blk.mkdir()
    if blkio:
        for f in ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device"):
            (blk / f).write_text("")
    pg_lib = tmp / "postgresql"
    if pg:
        (pg_lib / "15" / "bin").mkdir(parents=True)
        for f in ("initdb", "pgbench"):
            (pg_lib / "15" / "bin" / f).write_text("")
    src = tmp / "linux-source-6.1.tar.xz"
    if tarball:
        src.write_text("")
    (tmp / "loop-control").write_text("")
    mdstat = tmp / "mdstat"
    if md:
        mdstat.write_text("Personalities : [raid6] [raid5] [raid4]\nunused devices: <none>\n")
    return Where(
        sys_module=sys_module,
        dpkg_status=dpkg,
        os_release=tmp / "os-release",
        arcstats=arcstats,
        parameters=params,
        blkio=blk,
        pg_lib=pg_lib,
        tarball=src,
        loop_control=tmp / "loop-control",
        scratch=tmp / "scratch",
        proc_mdstat=mdstat,
        euid=0 if root else 1000,
    )


def found(checkup: doctor.Checkup) -> dict[str, bool]:
    return {f.id: f.found for f in checkup.findings}


def test_every_capability_is_reported_once_in_the_lists_order(tmp_path: Path) -> None:
    c = doctor.examine(runner(OPENZFS_232), machine(tmp_path, status=OPENZFS_STATUS))
    assert [f.id for f in c.findings] == [cap.id for cap in capabilities.CAPABILITIES]


def test_openzfs_2_3_has_every_zfs_feature_and_nothing_names_zfs_fuse(tmp_path: Path) -> None:
    where = machine(tmp_path, status=OPENZFS_STATUS, pg=False)
    c = doctor.examine(runner(OPENZFS_232), where)
    zfs = [cap.id for cap in capabilities.CAPABILITIES if cap.group == capabilities.ZFS]
    assert zfs == [
        "draid",
        "special-vdevs",
        "zvols",
        "sync",
        "arcstats",
        "arc-limit",
        "prefetch-tunable",
        "raidz-expansion",
        "direct-io",
        "fragmentation",
    ]
    assert all(found(c)[i] for i in zfs), [f for f in c.findings if f.id in zfs]
    assert c.zfs_in_use == "openzfs" and c.zfs.avail.version == "zfs-2.3.2-2~bpo12+2"
    assert c.get("zfs").found and c.core_missing == []
    assert c.zfs.host.openzfs and "dpkg has zfsutils-linux 2.3.2-2~bpo12+2" in c.zfs.host.traces()
    # what is missing here is added by its package, never by anything that touches ZFS
    pg = c.get("postgresql")
    assert not pg.found and pg.add == "apt-get install --no-remove postgresql postgresql-contrib"
    text = json.dumps([f.__dict__ for f in c.findings])
    assert "zfs-fuse" not in " ".join(f.add or "" for f in c.findings)
    assert "scripts/install.sh --zfs-fuse" not in text


def test_an_older_openzfs_lacks_what_came_later_and_says_which_release(tmp_path: Path) -> None:
    v = "zfs-2.1.11-1\nzfs-kmod-2.1.11-1\n"
    c = doctor.examine(runner(v), machine(tmp_path, module="2.1.11-1"))
    assert found(c)["draid"] and found(c)["special-vdevs"] and found(c)["zvols"]
    for cap_id in ("raidz-expansion", "direct-io"):
        f = c.get(cap_id)
        assert not f.found and f.detail == "needs OpenZFS 2.3.0 or newer; this is zfs-2.1.11-1"
        assert f.add == ""  # a ZFS release: no command, the host's ZFS is the user's choice
    old = doctor.examine(runner("zfs-0.7.13-1\nzfs-kmod-0.7.13-1\n"), machine(tmp_path / "o"))
    assert not found(old)["special-vdevs"] and not found(old)["draid"] and found(old)["zvols"]


def test_zfs_fuse_counts_as_the_core_and_lacks_every_openzfs_feature(tmp_path: Path) -> None:
    status = tmp_path / "fuse-status"
    status.write_text("Package: zfs-fuse\nStatus: install ok installed\nVersion: 0.7.0-25+b1\n")
    where = machine(tmp_path, module=None, status=status, arc=False)
    c = doctor.examine(runner(None, answers=False, installed=EVERY_PROGRAM | {"zfs-fuse"}), where)
    assert c.zfs_in_use == "zfs-fuse" and c.get("zfs").found  # a run starts its daemon
    assert "each run starts and stops it" in c.get("zfs").detail
    assert c.get("draid").detail == "zfs-fuse (pool version 23) lacks dRAID"
    assert [i for i, ok in found(c).items() if capabilities.get(i).group == "zfs" and ok] == []
    assert not c.zfs.host.openzfs and c.zfs.host.fuse == "package 0.7.0-25+b1"


def test_no_zfs_at_all_suggests_the_hosts_openzfs_and_keeps_the_core(tmp_path: Path) -> None:
    c = doctor.examine(
        runner(None, answers=False, installed=EVERY_PROGRAM - {"zpool", "zfs"}),
        machine(tmp_path, module=None),
    )
    z = c.get("zfs")
    assert not z.found and c.zfs_in_use == "none"
    assert z.add == "apt-get install --no-remove zfsutils-linux zfs-dkms"
    assert "zfs-fuse (pool version 23, user space) is the fallback" in z.detail
    assert c.core_missing == []  # a directory to bench is enough for the core
    assert found(c)["directory"]


def test_openzfs_installed_but_not_loaded_says_modprobe(tmp_path: Path) -> None:
    c = doctor.examine(
        runner(OPENZFS_232, answers=False), machine(tmp_path, module=None, status=OPENZFS_STATUS)
    )
    z = c.get("zfs")
    assert not z.found and z.add == "modprobe zfs"
    assert "is installed but does not answer" in z.detail and "zfs-fuse" not in z.add


def test_without_fio_the_core_is_missing_and_doctor_exits_7(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    where = machine(tmp_path, status=OPENZFS_STATUS)
    c = doctor.examine(runner(OPENZFS_232, installed=EVERY_PROGRAM - {"fio"}), where)
    assert c.core_missing == ["fio"]
    assert c.get("fio").add == "apt-get install --no-remove fio"
    monkeypatch.setattr(doctor_cmd, "examine", lambda _runner: c)
    r = CliRunner().invoke(doctor_cmd.doctor, ["--json"])
    # cli/main.py turns the error into its exit code (tests/test_cli_contract.py)
    assert isinstance(r.exception, Unsupported) and r.exception.exit_code == EXIT_UNSUPPORTED
    assert r.exception.capability == "fio"
    doc = json.loads(r.stdout)
    assert doc["core_ok"] is False and doc["core_missing"] == ["fio"]
    assert "apt-get install --no-remove fio" in str(r.exception)
    ok = replace(c, findings=[replace(f, found=True) if f.id == "fio" else f for f in c.findings])
    monkeypatch.setattr(doctor_cmd, "examine", lambda _runner: ok)
    assert CliRunner().invoke(doctor_cmd.doctor, []).exit_code == 0


def test_not_root_and_not_debian(tmp_path: Path) -> None:
    where = machine(tmp_path, status=OPENZFS_STATUS, root=False, pg=False)
    c = doctor.examine(runner(OPENZFS_232), where)
    assert not found(c)["root"] and c.get("root").add.startswith("sudo poolbench")
    assert c.get("postgresql").add.startswith("sudo apt-get install --no-remove postgresql")
    fedora = machine(tmp_path / "f", os_release='ID=fedora\nPRETTY_NAME="Fedora 40"\n', pg=False)
    c = doctor.examine(runner(OPENZFS_232), fedora)
    assert c.distribution == "Fedora 40" and not c.apt
    assert c.get("postgresql").add == (
        "install postgresql, postgresql-contrib (Debian's names) with this system's package manager"
    )


def test_a_kernel_without_md_is_not_cured_by_a_package(tmp_path: Path) -> None:
    c = doctor.examine(runner(OPENZFS_232), machine(tmp_path, md=False))
    md = c.get("md")
    if md.found:  # this kernel has md_mod among its modules: then it is found
        pytest.skip("this machine's kernel has an md module")
    assert md.add == "" and "has no md driver" in md.detail
    c = doctor.examine(
        runner(OPENZFS_232, installed=EVERY_PROGRAM - {"mdadm"}), machine(tmp_path / "m")
    )
    assert c.get("md").add == "apt-get install --no-remove mdadm"


def test_the_text_report_names_each_capability_with_its_id(tmp_path: Path) -> None:
    c = doctor.examine(runner(OPENZFS_232), machine(tmp_path, status=OPENZFS_STATUS, pg=False))
    text = doctor_cmd._text(c)
    for cap in capabilities.CAPABILITIES:
        assert f"{cap.name} [{cap.id}]" in text
    assert "MISSING PostgreSQL and pgbench [postgresql]" in text
    assert "add: apt-get install --no-remove postgresql postgresql-contrib" in text
    assert "ZFS in use: openzfs (zfs-2.3.2-2~bpo12+2); OpenZFS is installed" in text


@pytest.mark.slow  # apt's own solver, once for every install doctor suggests
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="needs apt-get (Debian, Ubuntu)")
def test_every_suggested_install_removes_nothing_on_an_openzfs_host(tmp_path: Path) -> None:
    """apt's own simulation against the OpenZFS host's dpkg status: each package doctor
    suggests there installs without removing or downgrading anything."""
    where = machine(tmp_path, status=OPENZFS_STATUS, pg=False, tarball=False)
    c = doctor.examine(runner(OPENZFS_232, installed={"zpool", "zfs"}), where)
    commands = [f.add for f in c.findings if f.add and f.add.startswith("apt-get install")]
    packages = sorted({p for cmd in commands for p in cmd.split()[3:]})
    assert {"fio", "postgresql", "mdadm", "blktrace", "xfsprogs"} <= set(packages), commands
    p = subprocess.run(
        [
            "apt-get",
            "-s",
            "--no-remove",
            "-o",
            f"Dir::State::status={OPENZFS_STATUS}",
            "install",
            *packages,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr
    assert "Remv " not in p.stdout and "DOWNGRADED" not in p.stdout
    assert "Inst zfs-fuse" not in p.stdout
