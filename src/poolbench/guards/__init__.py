"""The methodology guards (DESIGN.md §3): each records what it did and warns when violated."""
