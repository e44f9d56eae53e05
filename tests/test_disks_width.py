"""`poolbench disks` fits the terminal: a short table of every device, then each one's reasons
as wrapped lines under its name, never a column cut at the right edge or a reason cut
mid-word (read-only: it writes nothing)."""

from __future__ import annotations

import json

import pytest
from tests.conftest import poolbench


@pytest.mark.usefixtures("device_inventory")  # read twice: nobody may change it meanwhile
def test_disks_fits_80_columns_and_keeps_every_reason() -> None:
    p = poolbench("disks", env={"COLUMNS": "80"})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    doc = json.loads(poolbench("disks", "--json").stdout)
    flat = "".join(p.stdout.split())  # wrapping only adds line breaks and indents
    for d in doc["devices"]:
        assert d["path"] in p.stdout
        for reason in d.get("reasons", []):
            assert "".join(str(reason["detail"]).split()) in flat, reason
