"""The typed records of one measurement, from trial to report (pure: no I/O).

The engine fills a `Measurement`, the store persists it (`Store.add_measurement`) and reads
it back (`Store.measurement_records`), and the reports read the same record; its stored JSON
(`to_json`/`from_json`, `from_row`) is the record's own. `jsontypes.JsonObject` names a value
that really is JSON of unknown shape at the edge.
"""
