"""One default-store rule: the store and the traces beside it read POOLBENCH_DB through
storepath.default_store, so a set but empty POOLBENCH_DB is refused by both (it used to be
refused by the store and taken as the XDG default by the traces)."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolbench import storepath
from poolbench.errors import EXIT_INPUT
from poolbench.safety.inventory import protected_paths
from poolbench.store.db import db_option, default_path
from poolbench.store.histograms import histogram_dir
from poolbench.workloads import tracefile

STORE = "holds poolbench's result store"


def test_unset_is_the_xdg_store_for_the_store_and_its_traces(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("POOLBENCH_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    want = tmp_path / "xdg" / "poolbench" / "results.db"
    assert default_path() == want
    assert tracefile.traces_dir() == want.parent / "traces"
    assert histogram_dir(None) == want.parent / "histograms"
    assert protected_paths(None, None)[STORE] == want


def test_set_names_the_store_and_its_traces(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    mine = tmp_path / "here" / "r.db"
    monkeypatch.setenv("POOLBENCH_DB", str(mine))
    assert default_path() == mine
    assert tracefile.traces_dir() == tmp_path / "here" / "traces"
    assert protected_paths(None, None)[STORE] == mine
    # an explicit --db wins over the variable, in both
    other = tmp_path / "other" / "o.db"
    assert tracefile.traces_dir(other) == tmp_path / "other" / "traces"


@pytest.mark.parametrize("value", ["", "  ", "\t"])
def test_set_but_empty_is_refused_by_the_store_and_by_the_traces(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("POOLBENCH_DB", value)
    for default in (default_path, tracefile.traces_dir, lambda: histogram_dir(None)):
        with pytest.raises(storepath.EmptyStorePath) as caught:
            default()
        assert caught.value.exit_code == EXIT_INPUT
        assert 'POOLBENCH_DB is set but empty (POOLBENCH_DB="")' in caught.value.problem
        assert "unset it" in caught.value.fix
    with pytest.raises(storepath.EmptyStorePath):
        protected_paths(None, None)
    # a trace named by NAME cannot be looked up either: the store it lives beside is unknown
    with pytest.raises(storepath.EmptyStorePath):
        tracefile.resolve("morning")
    # with a --db, nothing asks the variable
    assert tracefile.traces_dir(Path("/x/r.db")) == Path("/x/traces")
    assert db_option(Path("/x/r.db")) == " --db /x/r.db"
