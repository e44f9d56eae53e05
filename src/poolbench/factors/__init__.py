"""Trial factors: the levels a study varies that the trial loop applies itself, not a
backend (a backend takes its own options: recordsize, chunk, metadata_profile...). One
module per factor behind one protocol (base.py), gathered in registry.py, as backends/ is."""
