"""A built-in study as the editable TOML file `poolbench run` takes (examples/<name>.toml),
written by tomli_w: values are quoted and escaped by the library, not by hand."""

from __future__ import annotations

from collections.abc import Sequence

import tomli_w

from poolbench.study.builtin.base import Builtin, StudyFile


def to_toml(builtin: Builtin, data: StudyFile, said: Sequence[str] = ()) -> str:
    """The study file: two comment lines (the question, the command), a comment for each
    change building it made to the request (Context.announce), then the data."""
    head = f"# {builtin.question}\n# Built-in study: poolbench study {builtin.name} --disks ...\n"
    notes = "".join(f"# note: {line}\n" for line in said)
    return head + notes + tomli_w.dumps(data.toml_data())
