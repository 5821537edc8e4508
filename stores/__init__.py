"""Stores: the DuckDB document/run/event store, the object store and the secret store.

Only the hub opens the DuckDB file (DESIGN.md section 3); everyone else reaches these through it.
"""
