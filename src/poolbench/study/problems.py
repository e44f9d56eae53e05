"""A study file's problems in poolbench's words, each with its file and line: pydantic's
validation errors reworded (what the key must hold, how to write it in TOML), in file order,
and the line of the key a problem is about. Pure."""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best effort: the line of the TOML key an error location points at."""
    keys = [str(k) for k in loc if isinstance(k, str)]
    if not keys:
        return None
    table, key = keys[:-1], keys[-1]
    current: list[str] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        m = re.match(r"^\[([^\]]+)\]", line)
        if m:
            current = [p.strip() for p in m.group(1).split(".")]
            if current == keys:
                return n
            continue
        if current == table and re.match(rf"^{re.escape(key)}\s*=", line):
            return n
    if table:
        return line_of(text, tuple(table))
    return None


def located(text: str, origin: str, loc: tuple[str, ...], problem: str) -> str:
    line = line_of(text, loc)
    return f"{origin}{f':{line}' if line else ''}: {problem}"


# Error lists are cut here: a file with thousands of unknown keys gets the first few and a count,
# and locating each shown error costs one pass over the text (linear, not keys x lines).
MAX_SHOWN_PROBLEMS = 8

# pydantic's wording -> poolbench's (what the key must hold, and how to write it in TOML).
_TYPE_WORDS = {
    "string_type": "text in quotes",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "list_type": 'a list in brackets, e.g. ["a", "b"]',
    "dict_type": "a table ([name] or {key = value})",
    "model_type": "a table ([name] or {key = value})",
}
_PHRASES = (
    ("Input should be greater than or equal to", "must be at least"),
    ("Input should be less than or equal to", "must be at most"),
    ("Input should be greater than", "must be more than"),
    ("Input should be less than", "must be less than"),
    ("Input should be", "must be"),
    ("cannot convert float NaN to integer", "must be a finite size, not nan"),
    ("cannot convert float infinity to integer", "must be a finite size, not inf"),
    ("String should", "must"),
    ("List should", "must"),
)
_UNION_TAGS = {"str", "int", "float", "bool", "list[str]", "dict[str,union[str,int]]"}


def _where(loc: tuple[Any, ...]) -> str:
    """factors.layout.0.str -> factors.layout[1] (TOML's words: the first item is item 1)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part + 1}]"
        elif part not in _UNION_TAGS:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def _sentence(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key (a typo?); remove it or check the spelling against examples/"
    if kind == "missing":
        return "is required; add it"
    if kind in _TYPE_WORDS:
        return f"must be {_TYPE_WORDS[kind]}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    for theirs, ours in _PHRASES:
        msg = msg.replace(theirs, ours)
    return msg


def problems(exc: ValidationError, text: str, origin: str) -> list[str]:
    merged: dict[str, list[str]] = {}
    locs: dict[str, tuple[Any, ...]] = {}
    for err in exc.errors():
        where = _where(tuple(err["loc"]))
        said = merged.setdefault(where, [])
        sentence = _sentence(err)
        if sentence not in said:
            said.append(sentence)
        locs.setdefault(where, tuple(x for x in err["loc"] if x not in _UNION_TAGS))
    items = list(merged.items())
    lines = [line_of(text, locs[where]) for where, _ in items[:MAX_SHOWN_PROBLEMS]]
    shown = []
    # In file order (a problem without a line last), each said once with its line.
    order = sorted(range(len(lines)), key=lambda i: (lines[i] is None, lines[i] or 0))
    for i in order:
        (where, sentences), line = items[i], lines[i]
        if len(sentences) > 1 and all(x.startswith("must be ") for x in sentences):
            what = "must be " + " or ".join(x.removeprefix("must be ") for x in sentences)
        else:
            what = "; ".join(sentences)
        shown.append(f"{origin}{f':{line}' if line else ''}: {where}: {what.rstrip('.')}.")
    if len(items) > MAX_SHOWN_PROBLEMS:
        shown.append(f"... and {len(items) - MAX_SHOWN_PROBLEMS} more.")
    return shown
