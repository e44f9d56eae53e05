"""The one capability list (poolbench/capabilities.py): refusals name what doctor names, the
ZFS releases it gives agree with the planner's, and the host's ZFS is found from /sys, dpkg
and `zpool version` alike (fake ones here), also by the entry points the scripts run."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from poolbench import capabilities
from poolbench.backends.base import Availability
from poolbench.backends.zfs import features
from poolbench.errors import Unsupported
from poolbench.planner.rules import raidz_expansion_supported, rules_for_reported
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.system.runner import CommandResult, RecordingRunner
from poolbench.zfs import host

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "poolbench"
OPENZFS_STATUS = Path(__file__).parent / "data" / "dpkg-status-openzfs-2.3.2"
FUSE = Availability(
    False, "the zfs-fuse daemon is not running", "zfs-fuse, pool version ?", "zfs-fuse"
)


def test_ids_are_unique_and_each_group_has_a_title() -> None:
    ids = [c.id for c in capabilities.CAPABILITIES]
    assert len(ids) == len(set(ids))
    assert {c.group for c in capabilities.CAPABILITIES} == set(capabilities.GROUP_TITLES)
    for part, cap_ids in capabilities.PARTS.items():
        assert all(capabilities.get(i).packages for i in cap_ids), part


def test_docs_install_lists_every_capability_in_its_group() -> None:
    import re

    text = (ROOT / "docs" / "install.md").read_text()
    rows = re.findall(r"^\| (\w+) \| `([a-z0-9-]+)` \|", text, re.M)
    assert rows == [(c.group, c.id) for c in capabilities.CAPABILITIES]


def test_the_releases_it_names_are_the_planners() -> None:
    """dRAID and special vdevs: the planner's rule sets; RAIDZ expansion: its own check."""
    since = {c.id: c.since for c in capabilities.CAPABILITIES if c.since}
    assert since == {
        "draid": "2.1.0",
        "special-vdevs": "0.8.0",
        "raidz-expansion": "2.3.0",
        "direct-io": "2.3.0",
    }
    assert rules_for_reported("zfs-2.1.0-1").draid and not rules_for_reported("2.0.7").draid
    assert rules_for_reported("0.8.0").alloc_classes
    assert not rules_for_reported("0.7.13").alloc_classes
    assert raidz_expansion_supported("2.3.0") and not raidz_expansion_supported("2.2.7")


# A built-in study asked for what zfs-fuse lacks: (study, its options, the capability).
REFUSED = [
    ("parity", {"layouts": "raidz2:6,draid2:4d:6c:0s"}, "draid"),
    ("geometry", {"targets": "dataset,zvol"}, "zvols"),
    ("volblocksize", {}, "zvols"),
    ("special", {}, "special-vdevs"),
    ("expand", {}, "raidz-expansion"),
    ("l2arc", {}, "arc-limit"),
    ("prefetch", {}, "prefetch-tunable"),
    ("sync-slog", {"levels": "always"}, "sync"),
    ("aging", {"frag": "30"}, "fragmentation"),
]


@pytest.mark.parametrize(("study", "options", "cap_id"), REFUSED)
def test_a_refusal_names_the_capability_as_doctor_does(
    study: str, options: dict[str, str], cap_id: str
) -> None:
    ctx = Context(6, "1G", dialect="zfs-fuse", options=options)
    with pytest.raises(Unsupported) as e:
        registry.study_text(study, ctx)
    assert e.value.capability == cap_id and e.value.exit_code == 7
    name = capabilities.get(cap_id).name
    assert str(e.value).endswith(
        f"`poolbench doctor` shows what this machine has: {name} [{cap_id}]."
    )
    # ... and doctor, on the same ZFS, reports that id missing, in the same words
    judged = {f.id: f for f in features.judge(FUSE)}
    assert not judged[cap_id].found and name in judged[cap_id].detail


def _calls(name: str) -> list[tuple[Path, ast.Call]]:
    out = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if called == name:
                    out.append((path, node))
    return out


def test_every_refusal_names_a_capability_of_the_list() -> None:
    """`unsupported(ID, ...)`, `doctor_hint(ID)`, `install_hint(PROGRAM)`, `unavailable(...)`:
    each literal id is in the list; a bare Unsupported is raised only where nothing is
    missing from the machine (a value OpenZFS would ignore, this build's layout grammar) or
    by doctor itself (with its capability)."""
    ids = set(capabilities.BY_ID)
    for name in ("unsupported", "doctor_hint", "refuse_on_zfs_fuse"):
        for path, call in _calls(name):
            literal = [
                a.value
                for a in call.args + [k.value for k in call.keywords]
                if isinstance(a, ast.Constant) and a.value in ids
            ]
            first = call.args[0] if call.args else None
            if path.name == "capabilities.py" or (isinstance(first, ast.Name)):
                continue  # the helpers themselves, or an id passed through
            assert literal, f"{path.relative_to(ROOT)}:{call.lineno}: no capability id"
    bare = sorted(f"{p.relative_to(SRC)}" for p, _ in _calls("Unsupported"))
    assert bare == [
        "capabilities.py",
        "cli/doctor_cmd.py",
        "factors/arc_max.py",
        "study/builtin/sync_slog.py",
    ]


def test_a_missing_program_is_hinted_with_its_package_and_doctors_words() -> None:
    assert capabilities.install_hint("mkfs.xfs") == (
        "Install it (Debian package: xfsprogs). `poolbench doctor` shows what this machine "
        "has: xfs [xfs]."
    )
    assert capabilities.install_hint("no-such-program") == "Install it or fix PATH."
    assert capabilities.packages_for(["fs-compare", "record"]) == [
        "btrfs-progs",
        "xfsprogs",
        "e2fsprogs",
        "mdadm",
        "blktrace",
    ]
    assert capabilities.packages_for(["all"])[-1] == "linux-source-6.1"
    assert "zfs-fuse" not in capabilities.packages_for(["all"])


# -- the host's ZFS ------------------------------------------------------------------------
def _sys(tmp: Path, version: str | None) -> Path:
    d = tmp / "module"
    d.mkdir()
    if version is not None:
        (d / "zfs").mkdir()
        (d / "zfs" / "version").write_text(version + "\n")
    return d


def _zpool(version: str | None) -> RecordingRunner:
    argv = ("zpool", "version")
    res = CommandResult(argv, 0, version, "", 0) if version else CommandResult(argv, 2, "", "", 0)
    return RecordingRunner(responses={argv: res}, installed={"zpool", "zfs"})


def _status(tmp: Path, text: str) -> Path:
    p = tmp / "status"
    p.write_text(text)
    return p


@pytest.mark.parametrize(
    ("module", "userland", "dpkg", "flavour"),
    [
        ("2.3.2-2~bpo12+2", "zfs-2.3.2-2~bpo12+2", "openzfs", "openzfs"),
        ("2.2.7-pve2", None, "", "openzfs"),  # a loaded module alone
        (None, "zfs-2.2.2-0ubuntu9", "", "openzfs"),  # a build of its own, no package
        (None, None, "openzfs", "openzfs"),  # installed, not loaded, not answering
        (None, None, "dkms-only", "openzfs"),
        (None, None, "fuse", "zfs-fuse"),
        (None, None, "removed", "none"),  # zfsutils-linux removed, its config files kept
        (None, None, "", "none"),
    ],
)
def test_the_hosts_zfs_from_any_one_trace(
    tmp_path: Path, module: str | None, userland: str | None, dpkg: str, flavour: str
) -> None:
    texts = {
        "openzfs": OPENZFS_STATUS.read_text(),
        "dkms-only": "Package: zfs-dkms\nStatus: install ok installed\nVersion: 2.1.11-1\n",
        "fuse": "Package: zfs-fuse\nStatus: install ok installed\nVersion: 0.7.0-25+b1\n",
        "removed": "Package: zfsutils-linux\nStatus: deinstall ok config-files\nVersion: 2.1\n",
        "": "",
    }
    got = host.probe(_zpool(userland), _sys(tmp_path, module), _status(tmp_path, texts[dpkg]))
    assert got.flavour == flavour, got
    assert bool(got.traces()) == (flavour == "openzfs")
    if dpkg == "openzfs":
        assert got.packages["zfsutils-linux"] == "2.3.2-2~bpo12+2"
        assert set(got.packages) == {
            "zfsutils-linux",
            "zfs-dkms",
            "zfs-zed",
            "libzfs6linux",
            "libzpool6linux",
            "libnvpair3linux",
            "libuutil3linux",
        }


def _fake_path(tmp: Path, userland: str | None) -> str:
    """A PATH with the system's programs but a `zpool` of our own (or none)."""
    bin_ = tmp / "bin"
    bin_.mkdir()
    if userland:
        (bin_ / "zpool").write_text(
            f'#!/bin/sh\n[ "$1" = version ] && echo {userland} && exit 0\nexit 1\n'
        )
        (bin_ / "zpool").chmod(0o755)
    return f"{bin_}:/usr/bin:/bin"


@pytest.mark.parametrize(
    ("userland", "flavour"), [("zfs-2.3.2-2~bpo12+2", "openzfs"), (None, "none")]
)
def test_the_scripts_entry_point_runs_from_the_checkout_without_dependencies(
    tmp_path: Path, userland: str | None, flavour: str
) -> None:
    """What scripts/setup.sh and install.sh run before anything is installed: the system's
    python3 with only the checkout's src/ on its path (no click, rich, numpy...)."""
    env = {"PATH": _fake_path(tmp_path, userland), "PYTHONPATH": str(ROOT / "src")}
    args = [
        "-S",
        "-m",
        "poolbench.zfs.host",
        "--sys-module",
        str(_sys(tmp_path, None)),
        "--dpkg-status",
        str(_status(tmp_path, "")),
    ]
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    p = subprocess.run([python, *args, "--flavour"], capture_output=True, text=True, env=env)
    assert (p.returncode, p.stdout.strip()) == (0, flavour), p.stderr
    packages = subprocess.run(
        [python, "-S", "-m", "poolbench.capabilities", "packages", "database", "record"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert packages.stdout.split() == ["postgresql", "postgresql-contrib", "blktrace"]
    bad = subprocess.run(
        [python, "-S", "-m", "poolbench.capabilities", "packages", "nosuch"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "unknown part 'nosuch'" in bad.stderr
