"""The workload library (fio job definitions), job rendering, parsing and running."""
