"""The one name for JSON of unknown shape at poolbench's edges.

`JsonObject` is a decoded JSON object (a `json.loads` result, a JSON column of the store, the
`--json` output being built) whose keys poolbench does not own. A value whose shape poolbench
knows is a dataclass or a TypedDict instead; tests/test_structure.py counts the bare spelling
and checks where the alias is used.
"""

from __future__ import annotations

from typing import Any

JsonObject = dict[str, Any]
