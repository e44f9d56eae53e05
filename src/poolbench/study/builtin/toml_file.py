"""A built-in study as the editable TOML file `poolbench run` takes (examples/<name>.toml),
written by tomli_w: values are quoted and escaped by the library, not by hand."""

from __future__ import annotations

import tomli_w

from poolbench.study.builtin.base import Builtin, StudyDict


def to_toml(builtin: Builtin, data: StudyDict) -> str:
    """The study file: two comment lines (the question, the command), then the data."""
    head = f"# {builtin.question}\n# Built-in study: poolbench study {builtin.name} --disks ...\n"
    return head + tomli_w.dumps(data)
