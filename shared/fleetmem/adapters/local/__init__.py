"""Local adapters: one SQLite file for every store and the search index, a real clock, sortable ids.

`open_local(data_dir)` is the entry point the wiring uses (":memory:" for tests).
"""

from fleetmem.adapters.local.sqlite import LocalStores, open_local

__all__ = ["LocalStores", "open_local"]
