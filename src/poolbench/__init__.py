"""poolbench: build each candidate pool layout, measure it honestly with fio, compare."""

__version__ = "0.1.0"
