"""A configuration's factor levels travel as data from the trial to the report (store
0006_config_levels): a layout level with a vdev class ('raidz1:3 + log mirror:2') holds
spaces, so the stored key cannot be split on them. Every factor column, every export's
`config_levels` and every baseline partner comes from the levels the engine stored; rows
stored before the levels were kept are read with the key grammar (study/matrix.parse_key)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomli_w
from hypothesis import given
from hypothesis import strategies as st

from poolbench.records.findings import Findings
from poolbench.records.measurement import Measurement
from poolbench.report import export
from poolbench.report.data import load_run
from poolbench.report.layout import config_columns
from poolbench.report.tables import Footnotes, choose_baseline, workload_table
from poolbench.store.db import Store
from poolbench.study import matrix
from poolbench.study.builtin import registry
from poolbench.study.builtin.context import Context
from poolbench.study.model import parse

WRITE = {"name": "sync-write-4k-j1", "direction": "write", "unit": "IOPS", "fio": {}}


STUDIES = {
    # sync-slog on OpenZFS: sync × layout with and without a log class
    "sync-slog": Context(4, "1G", dialect="openzfs"),
    # special: raidz1:3 alone and with a special mirror, × special_small_blocks
    "special": Context(5, "1G", dialect="openzfs"),
}


def _configs(name: str) -> list[matrix.Config]:
    """The configurations of a built-in study as its study file expands them."""
    return matrix.configs(parse(tomli_w.dumps(registry.build(name, STUDIES[name]).toml_data())))


def _store_run(db: Path, name: str, cfgs: list[matrix.Config], legacy: bool = False) -> Store:
    """A run whose measurements went through the engine's own record (`Store.add_measurement`): each
    configuration measured twice, its figure known (100 + 10 × its position)."""
    store = Store(db)
    run_id = store.start_run("study", name, ["poolbench", "study", name], {})
    for i, cfg in enumerate(cfgs):
        for rep in range(2):
            m = Measurement(
                cfg.key, WRITE["name"], rep, 100.0 + 10 * i + rep, "IOPS", 1 << 20, 256, 1.0,
                None, None, [], Findings(), WRITE, "", config_levels=dict(cfg.levels),
            )  # fmt: skip
            store.add_measurement(run_id, m)
    if legacy:  # as a store written before 0006: the key alone
        store.conn.execute("UPDATE measurements SET config_levels = NULL")
    return store


@pytest.mark.parametrize("legacy", [False, True], ids=["stored-levels", "legacy-key"])
@pytest.mark.parametrize("name", sorted(STUDIES))
def test_every_factor_column_and_export_level_is_the_configuration_s_own(
    tmp_path: Path, name: str, legacy: bool
) -> None:
    cfgs = _configs(name)
    assert any(" + " in (c.get("layout") or "") for c in cfgs)  # a class level with spaces
    store = _store_run(tmp_path / "r.db", name, cfgs, legacy)
    run = load_run(store, "1")
    by_key = {c.key: dict(c.levels) for c in cfgs}
    # the levels of every configuration, and the factors that vary between them
    assert {c: run.levels(c) for c in run.configs} == by_key
    varying = {k for k in by_key[cfgs[0].key] if len({lv[k] for lv in by_key.values()}) > 1}
    assert set(run.factors()) == varying and "layout" in varying
    # the export: every row's config_levels
    rows = export.rows(run)
    assert len(rows) == 2 * len(cfgs)
    for r in rows:
        assert r["config_levels"] == by_key[r["config"]]
    assert (
        json.loads(export.to_json(run))["measurements"][0]["config_levels"]
        == by_key[rows[0]["config"]]
    )
    # a baseline on the layout factor pairs each configuration with its own partner only
    base_layout = by_key[cfgs[0].key]["layout"]
    baseline = choose_baseline(run, f"layout={base_layout}")
    assert baseline is not None
    for c in cfgs:
        partner = baseline.partner(c.key, run, run.configs)
        want = {**dict(c.levels), "layout": base_layout}
        exists = [k for k, lv in by_key.items() if lv == want]
        assert partner == (exists[0] if exists else None)
    assert sum(baseline.partner(c.key, run, run.configs) is not None for c in cfgs) >= 2
    table = workload_table(run, WRITE["name"], baseline, Footnotes())
    assert {r.cell.config for r in table.rows} == set(by_key)
    # the terminal table: one column per varying factor, each row's own level in it
    cols = config_columns(run, run.configs)
    assert [c.header for c in cols] == list(run.factors())
    for col in cols:
        assert [t.plain for t in col.cells] == [by_key[c][col.header] for c in run.configs]


_LEVEL = st.text(
    alphabet=st.characters(whitelist_categories=("L", "N"), whitelist_characters=":+-_. "),
    min_size=1,
    max_size=20,
).filter(lambda s: s.strip() == s and "  " not in s and not s.startswith("+"))


@given(
    st.dictionaries(st.from_regex(r"[a-z_]{1,12}", fullmatch=True), _LEVEL, min_size=1, max_size=6)
)
def test_parse_key_inverts_the_key_for_levels_with_spaces(levels: dict[str, str]) -> None:
    cfg = matrix.Config(tuple(levels.items()))
    assert matrix.parse_key(cfg.key) == levels


def test_parse_key_reads_the_class_layouts_and_refuses_a_path() -> None:
    key = "backend=zfs layout=raidz1:3 + log mirror:2 sync=always"
    assert matrix.parse_key(key) == {
        "backend": "zfs",
        "layout": "raidz1:3 + log mirror:2",
        "sync": "always",
    }
    assert matrix.parse_key("/mnt/data") == {}
    assert matrix.parse_key("/mnt/my disk host=a") == {}
