"""`poolbench doctor` on made-up machines (the files it reads in a temporary directory, the
programs it runs answered by a RecordingRunner): the ZFS flavour, release and features it
reports, what it says is missing and the one command it suggests, which never removes a
package (checked with apt's own simulation) and never names zfs-fuse where OpenZFS is."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests import deadfuse
from tests.conftest import poolbench
from tests.plugins.tiers import machine_fixture
from tests.plugins.zfs_fuse import OwnDaemon
from tests.procs import processes_matching

from poolbench import capabilities
from poolbench.cli import doctor_cmd
from poolbench.engine import doctor
from poolbench.engine.doctor import Where
from poolbench.errors import EXIT_UNSUPPORTED, Unsupported
from poolbench.system import watchdog
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.system.watchdog import CommandTimedOut

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


def _hangs(argv: tuple[str, ...]) -> CommandResult:
    """What the runner raises for a command that did not return within its limit."""
    raise CommandTimedOut(argv, watchdog.limit_for(argv, None), 60.0)


def test_a_zpool_that_hangs_is_reported_not_fatal_and_waited_for_once(tmp_path: Path) -> None:
    """A pool that holds every zpool command (suspended, its disk gone) is when a user runs
    doctor: the report still comes, ZFS named as not answering, no package suggested (the
    host has its ZFS), and the hung command is not asked twice (each ask is a full limit)."""
    r, c = _one_hangs(("zpool", "list", "-H"), tmp_path)
    z = c.get("zfs")
    assert not z.found and z.add == "" and c.zfs.silent and c.zfs_in_use == "none"
    assert z.detail.startswith("`zpool list -H` did not finish within its time limit of 60 s")
    assert "`zpool status -x` names it" in z.detail
    assert r.argvs.count(("zpool", "list", "-H")) == 1 and r.argvs.count(("zpool", "version")) == 1
    # the host's OpenZFS is still seen (module, packages), so nothing suggests zfs-fuse
    assert c.zfs.host.openzfs and "zfs-fuse" not in json.dumps([f.__dict__ for f in c.findings])
    for cap in (cap for cap in capabilities.CAPABILITIES if cap.group == "zfs"):
        assert c.get(cap.id).detail.startswith("no ZFS answers here (the [zfs] line"), cap.id
    assert c.core_missing == [] and found(c)["directory"] and found(c)["fio"]


def _one_hangs(argv: tuple[str, ...], tmp: Path) -> tuple[RecordingRunner, doctor.Checkup]:
    """doctor on an OpenZFS 2.3 host where `argv` does not return within its limit."""
    r = runner(OPENZFS_232)
    r.responses[argv] = _hangs
    return r, doctor.examine(r, machine(tmp, status=OPENZFS_STATUS))


def test_zpool_version_itself_hanging_suggests_no_install(tmp_path: Path) -> None:
    r, c = _one_hangs(("zpool", "version"), tmp_path)
    z = c.get("zfs")
    assert not z.found and z.add == "" and "`zpool version` did not finish" in z.detail
    assert r.argvs.count(("zpool", "version")) == 1  # not asked again for the host's traces
    assert c.zfs.host.userland == "" and c.zfs.host.module == "2.3.2-2~bpo12+2"


def test_a_zpool_without_zfs_is_still_asked_its_version_once(tmp_path: Path) -> None:
    """The check stops before `zpool version` where `zfs` is missing; the host's traces
    still ask it (an OpenZFS userland half-installed is a trace), once."""
    r = runner(OPENZFS_232, installed=EVERY_PROGRAM - {"zfs"})
    c = doctor.examine(r, machine(tmp_path, module=None))
    assert not c.get("zfs").found and c.zfs.host.userland == "zfs-2.3.2-2~bpo12+2"
    assert r.argvs.count(("zpool", "version")) == 1


def test_another_program_that_hangs_is_one_missing_finding(tmp_path: Path) -> None:
    _, c = _one_hangs(("mkfs.btrfs", "--version"), tmp_path)
    b = c.get("btrfs")
    assert not b.found and b.add == "" and "`mkfs.btrfs --version` did not finish" in b.detail
    assert found(c)["zfs"] and found(c)["md"] and c.core_missing == []


def test_doctor_on_a_hung_zpool_prints_its_report_within_the_limit(tmp_path: Path) -> None:
    """The real command, with a `zpool` on PATH that never answers: the JSON report comes,
    after the one scaled limit (0.05 × 60 s = 3 s) and not two, and no zpool is left."""
    if shutil.which("fio") is None:
        pytest.skip("fio is not installed (scripts/setup.sh installs it)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("zpool", "zfs"):
        (bin_dir / name).write_text(f"#!/bin/sh\nexec sleep 300 # {tmp_path}\n")
        (bin_dir / name).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "POOLBENCH_TIME_LIMIT_SCALE": "0.05"}
    start = time.monotonic()
    p = poolbench("doctor", "--json", env=env, timeout=120)
    took = time.monotonic() - start
    doc = json.loads(p.stdout)
    zfs = next(c for c in doc["capabilities"] if c["id"] == "zfs")
    assert doc["zfs"]["answers"] is False and doc["zfs"]["in_use"] == "none"
    assert zfs["found"] is False and zfs["add"] is None
    assert "`zpool version` did not finish within its time limit of 3.0 s" in zfs["detail"]
    # the core is fio and a ZFS or a directory: the directory is there
    assert p.returncode == (0 if doc["core_ok"] else EXIT_UNSUPPORTED), p.stderr
    assert 3.0 <= took < 3.0 + watchdog.TERM_GRACE_S + 20, took
    assert [pid for pid, _ in processes_matching(f"# {tmp_path}")] == []


@machine_fixture(slow=False)
def dead_mount(tmp_path: Path) -> Iterator[Path]:
    """A FUSE mount whose daemon has ended (tests/deadfuse.py), under the test's directory."""
    if why := deadfuse.unavailable():
        pytest.skip(why)
    with deadfuse.dead_fuse_mount(tmp_path / "kstat") as mount:
        yield mount


def test_counters_on_a_dead_fuse_mount_are_missing_not_a_crash(
    tmp_path: Path, dead_mount: Path
) -> None:
    """A crashed zfs-fuse leaves /zfs-kstat mounted and dead: every look there raises
    ENOTCONN (Path.exists() too). doctor reports the counters missing and how to clear it."""
    status = tmp_path / "fuse-status"
    status.write_text("Package: zfs-fuse\nStatus: install ok installed\nVersion: 0.7.0-25+b1\n")
    counters = dead_mount / "zfs" / "arcstats"
    with pytest.raises(OSError):  # what the kernel answers there: the case is real
        counters.exists()
    fuse = replace(machine(tmp_path / "f", module=None, status=status), arcstats=counters)
    c = doctor.examine(runner(None, answers=False, installed=EVERY_PROGRAM | {"zfs-fuse"}), fuse)
    arc = c.get("arcstats")
    assert not arc.found and c.get("zfs").found
    assert arc.detail == (
        f"{counters} cannot be read (Transport endpoint is not connected): a FUSE mount left by "
        f"a daemon that has ended; `umount -l {dead_mount}` clears it"
    )
    assert json.loads(json.dumps(doctor_cmd._document(c)))["core_ok"] is True
    openzfs = replace(machine(tmp_path / "o", status=OPENZFS_STATUS), arcstats=counters)
    c = doctor.examine(runner(OPENZFS_232), openzfs)
    assert not c.get("arcstats").found and "cannot be read" in c.get("arcstats").detail
    assert found(c)["draid"] and c.core_missing == []


def test_doctor_after_a_crashed_zfs_fuse_prints_its_report(own_zfs_fuse: OwnDaemon) -> None:
    """The real command on this machine, no daemon running and /zfs-kstat left mounted and
    dead as a crashed zfs-fuse leaves it: the report comes (it used to die on the look at
    the counters), the ZFS still counts (a run starts its daemon), the counters named."""
    if why := deadfuse.unavailable():
        pytest.skip(why)
    with own_zfs_fuse.stopped(), deadfuse.dead_fuse_mount(Path("/zfs-kstat"), "kstat"):
        p = poolbench("doctor", "--json", timeout=300)
    assert p.stdout.startswith("{"), f"exit {p.returncode}: {p.stderr[-3000:]}"
    doc = json.loads(p.stdout)
    by_id = {c["id"]: c for c in doc["capabilities"]}
    assert doc["zfs"]["in_use"] == "zfs-fuse" and by_id["zfs"]["found"] is True
    assert by_id["arcstats"]["found"] is False
    assert by_id["arcstats"]["detail"].startswith(
        "/zfs-kstat/zfs/arcstats cannot be read (Transport endpoint is not connected)"
    )
    assert p.returncode == (0 if doc["core_ok"] else EXIT_UNSUPPORTED), p.stderr


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
