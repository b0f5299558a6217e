"""Clocks: the real one for running servers and a settable one for tests."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from fleetmem.timefmt import to_ms


class SystemClock:
    """Wall-clock time, aware UTC, truncated to milliseconds (the stored and emitted precision)."""

    def now(self) -> datetime:
        return to_ms(datetime.now(UTC))


class FixedClock:
    """A clock that only moves when told to (`set`, `advance`)."""

    def __init__(self, start: datetime) -> None:
        self._now = to_ms(start)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, dt: datetime) -> None:
        with self._lock:
            self._now = to_ms(dt)

    def advance(self, **delta: float) -> datetime:
        """Move forward by `timedelta(**delta)` (e.g. `advance(days=8)`); returns the new time."""
        with self._lock:
            self._now = to_ms(self._now + timedelta(**delta))
            return self._now
