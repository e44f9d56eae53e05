# Put on PYTHONPATH by tests/plugins/cache_guard.py for the Pythons a test starts.
import pb_cache_drop_audit

pb_cache_drop_audit.install()
