"""poolbench: build each candidate pool layout, measure it honestly with fio, compare."""

__version__ = "0.5.0"


def is_digits(text: str) -> bool:
    """Whether `text` is one or more ASCII digits 0-9. `str.isdigit()` also takes '²' and
    '١٢', which int() then refuses (or reads as 12): every number poolbench reads from text
    is checked with this, never with `isdigit()`."""
    return text.isascii() and text.isdigit()
