"""Host side of the OpenZFS guest tier, cheap: the guest tests are skipped here with the
reason that says where they run, and the tier's scripts parse. Nothing here boots the VM."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import IN_OPENZFS_GUEST, SKIP_REASON

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
# Slow by the tier script's timeouts (a fake guest that never answers), on no disk of the
# machine's: beside the machine's chain, outside the fast tier.
pytestmark = pytest.mark.slow


@pytest.mark.skipif(IN_OPENZFS_GUEST, reason="checks the host side")
def test_guest_tests_are_skipped_on_the_host_with_the_tier_reason() -> None:
    env = {k: v for k, v in os.environ.items() if k != "POOLBENCH_OPENZFS_GUEST"}
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         str(HERE / "test_openzfs_planner.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert SKIP_REASON in p.stdout
    assert " passed" not in p.stdout and " failed" not in p.stdout, p.stdout


@pytest.mark.parametrize("script", ["ozvm.sh", "run-openzfs-tier.sh", "guest/pytest.sh"])
def test_tier_scripts_parse(script: str) -> None:
    p = subprocess.run(["bash", "-n", str(ROOT / "vm" / script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


FAKE_OZVM = """#!/usr/bin/env bash
# stands in for vm/ozvm.sh: `build` does nothing; `run` plays the outcome listed in $PLAN
[[ $1 == build ]] && exit 0
n=$(( $(cat "$COUNT" 2>/dev/null || echo 0) + 1 )); echo $n >"$COUNT"
outcome=$(sed -n "${n}p" "$PLAN")
D=$POOLBENCH_OZVM_DIR/last-run
mkdir -p "$D/share"; rm -f "$D/share/ready-uptime"
shift 2; printf '%s\n' "$@" >"$COUNT.args"  # run SCRIPT ARGS: the pytest arguments
case $outcome in
  noboot) exit 125;;
  stall) exec sleep 120;;  # no sign of life: the tier's boot watchdog must stop it
  hang) echo 12.5 >"$D/share/ready-uptime"; exit 125;;
  pass) echo 12.5 >"$D/share/ready-uptime"
        echo "========== 3 passed, 1 xfailed in 42.17s ==========" >"$D/output.log"
        exit 0;;
  fail) echo 12.5 >"$D/share/ready-uptime"
        echo "===== 1 failed, 2 passed in 9.00s =====" >"$D/output.log"
        exit 1;;
  repointed)  # this run's own dir, named to the caller; then a second guest takes last-run
        W=$POOLBENCH_OZVM_DIR/runs/$n; mkdir -p "$W/share" "$POOLBENCH_OZVM_DIR/other"
        rm -rf "$D"; ln -sfn "$W" "$D"; echo "$W" >"$OZVM_RUN_DIR_FILE"
        echo 12.5 >"$W/share/ready-uptime"
        echo "===== 5 passed in 1.00s =====" >"$W/output.log"
        ln -sfn "$POOLBENCH_OZVM_DIR/other" "$D"
        exit 0;;
esac
"""


@pytest.mark.parametrize(
    ("plan", "runs", "rc", "said"),
    [
        (["noboot", "pass"], 2, 0, "summary: ========== 3 passed, 1 xfailed in 42.17s"),
        (["noboot", "noboot"], 2, 125, "FAILED: the guest never reported an exit code"),
        (["hang", "pass"], 1, 125, "FAILED: the guest never reported an exit code"),
        (["fail", "pass"], 1, 1, "summary: ===== 1 failed, 2 passed in 9.00s"),
        (["stall", "pass"], 2, 0, "no sign of life from the guest after 2s: stopping it"),
        (["stall", "stall"], 2, 125, "FAILED: the guest never reported an exit code"),
        # a second guest re-pointed last-run meanwhile: the summary is still this run's
        (["repointed"], 1, 0, "summary: ===== 5 passed in 1.00s"),
    ],
)
def test_tier_boots_once_more_only_when_the_guest_did_not_boot(
    tmp_path: Path, plan: list[str], runs: int, rc: int, said: str
) -> None:
    vm = tmp_path / "vm"
    (vm / "guest").mkdir(parents=True)
    (vm / "run-openzfs-tier.sh").write_text((ROOT / "vm" / "run-openzfs-tier.sh").read_text())
    (vm / "ozvm.sh").write_text(FAKE_OZVM)
    (vm / "ozvm.sh").chmod(0o755)
    (tmp_path / "plan").write_text("\n".join(plan) + "\n")
    env = {**os.environ, "POOLBENCH_OZVM_DIR": str(tmp_path / "cache"), "OZVM_BOOT_TIMEOUT": "2",
           "PLAN": str(tmp_path / "plan"), "COUNT": str(tmp_path / "count")}  # fmt: skip
    p = subprocess.run(["bash", str(vm / "run-openzfs-tier.sh")], env=env,
                       capture_output=True, text=True)  # fmt: skip
    assert p.returncode == rc, p.stderr
    assert int((tmp_path / "count").read_text()) == runs
    assert said in p.stderr


# The CI subset as docs/openzfs-tier.md ("CI") states it.
CI_SUBSET = [
    "tests/guest/test_openzfs_backend.py",
    "tests/guest/test_openzfs_planner.py",
    "tests/guest/test_md_guest.py::test_md_fs_compare_through_the_cli[ci]",
    "tests/guest/test_openzfs_studies.py::test_a_study_follows_a_study_on_the_same_disks",
    "tests/guest/test_openzfs_user_path.py",
    "tests/guest/test_openzfs_suspended.py",
]


def test_ci_runs_the_documented_subset(tmp_path: Path) -> None:
    vm = tmp_path / "vm"
    (vm / "guest").mkdir(parents=True)
    script = (ROOT / "vm" / "run-openzfs-tier.sh").read_text()
    (vm / "run-openzfs-tier.sh").write_text(script)
    (vm / "ozvm.sh").write_text(FAKE_OZVM)
    (vm / "ozvm.sh").chmod(0o755)
    (tmp_path / "plan").write_text("pass\npass\n")
    env = {**os.environ, "POOLBENCH_OZVM_DIR": str(tmp_path / "cache"),
           "PLAN": str(tmp_path / "plan"), "COUNT": str(tmp_path / "count")}  # fmt: skip
    args = tmp_path / "count.args"
    for argv, want in ((["--ci", "-x"], [*CI_SUBSET, "-x"]), ([], ["-m", "openzfs"])):
        p = subprocess.run(["bash", str(vm / "run-openzfs-tier.sh"), *argv], env=env,
                           capture_output=True, text=True)  # fmt: skip
        assert p.returncode == 0, p.stderr
        assert args.read_text().split() == want
    for test in CI_SUBSET:  # each names a test (and parameter) that exists
        path, _, name = test.partition("::")
        name, _, param = name.partition("[")
        assert (ROOT / path).is_file()
        assert not name or f"def {name}(" in (ROOT / path).read_text(), test
        if param:
            assert f'"{param.rstrip("]")}"' in (ROOT / path).read_text(), test
