"""The only place that starts processes, and read-only probes of the machine."""
