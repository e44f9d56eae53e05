#!/bin/bash
# Runs inside the guest (as root, cwd /root): copy the repository from the read-only share,
# run pytest with the image's venv, leave a JUnit report in $OZVM_OUT, exit with pytest's code.
set -u
mkdir -p /root/poolbench
tar -C /mnt/repo --exclude=./.git --exclude=./.venv --exclude=.mypy_cache --exclude=.ruff_cache \
    --exclude=.pytest_cache --exclude=.hypothesis --exclude=__pycache__ -cf - . \
  | tar -C /root/poolbench -xf - || { echo "copying the repository failed"; exit 3; }
cd /root/poolbench
echo "guest: OpenZFS $(cat /sys/module/zfs/version) ($(zfs version 2>/dev/null | head -1)), " \
     "$(python --version), kernel $(uname -r), disks: $OZVM_DISKS"
python -m pytest -p no:cacheprovider --junitxml="$OZVM_OUT/junit.xml" -o junit_family=xunit2 "$@"
