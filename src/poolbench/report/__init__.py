"""Presenting results: terminal tables (rich), JSON."""
