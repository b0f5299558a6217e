"""Local adapters: one SQLite file for every store and the search index, a real clock, sortable ids.

`open_local(data_dir)` is the entry point the wiring uses (":memory:" for tests). The SQLite store
(and with it numpy) loads only when a caller asks for it: the Lambda functions import the clock
and ids from this package and must never pay for — or ship — numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleetmem.adapters.local.chat_llm import open_chat_llm
    from fleetmem.adapters.local.sqlite import LocalStores, open_local

__all__ = ["LocalStores", "open_chat_llm", "open_local"]


def __getattr__(name: str) -> Any:
    if name == "open_chat_llm":  # D30: an OpenAI-compatible chat server (standard library HTTP only)
        from fleetmem.adapters.local import chat_llm

        return chat_llm.open_chat_llm
    if name in __all__:
        from fleetmem.adapters.local import sqlite

        return getattr(sqlite, name)
    raise AttributeError(name)
