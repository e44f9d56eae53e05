"""The built-in studies: the experiments storage builders run, one command each.

A built-in study is a function from a Context (the disks, what this machine's ZFS and kernel
offer, the study's own options) to a study file: the same TOML `poolbench run` takes, so
everything a built-in study does, an edited copy of `examples/<name>.toml` can do. Nothing here
runs anything or reads the machine; the study file goes through the one engine.

- context.py   Context: what a study is built for; the --disks and option parsing.
- base.py      Builtin: what the registry knows about a study; the study file skeleton.
- <study>.py   one module per study: `build(ctx) -> StudyFile`, its notes, its `BUILTIN`.
- registry.py  name → Builtin, a plain dict (adding a study: its module + one line there).
- toml_file.py the study dict as an editable TOML file (tomli_w).

Notes are pure functions of (Context, StudyFacts): the facts the store holds about the
finished run (poolbench.store.facts), never /sys or raw rows.
"""
