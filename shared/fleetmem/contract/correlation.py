"""The correlation id of the call in progress (D1): set by `dispatch` (or the edge that forwards a
call) for the duration of one call; the logs stamp it on every line, and every answer carries it."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

_correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("fleetmem_correlation_id", default=None)


def new_correlation_id() -> str:
    return "c_" + uuid.uuid4().hex


def current_correlation_id() -> str | None:
    return _correlation_id.get()


@contextmanager
def correlation(correlation_id: str) -> Iterator[str]:
    token = _correlation_id.set(correlation_id)
    try:
        yield correlation_id
    finally:
        _correlation_id.reset(token)
