"""The result store: SQLite, migrations, one transaction per finished measurement."""
