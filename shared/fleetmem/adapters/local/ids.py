"""Time-sortable unique ids (ULID layout: 48-bit millisecond time + 80 random bits, Crockford base32)."""

from __future__ import annotations

import secrets
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS = 80
_RANDOM_MAX = (1 << _RANDOM_BITS) - 1


def _b32(value: int, length: int) -> str:
    out = []
    for _ in range(length):
        out.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


class SortableIds:
    """`new_id("f")` -> "f_01JD5...": 26 characters after the prefix, lexicographically ordered by
    creation time; ids minted within one millisecond by this instance still sort in mint order
    (the random part is incremented), so listing by id is listing by age.

    A prefix that already ends with "_" is used as is.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_rand = 0

    def _next(self) -> int:
        ms = time.time_ns() // 1_000_000
        with self._lock:
            if ms <= self._last_ms:
                ms = self._last_ms
                rand = self._last_rand + 1
                if rand > _RANDOM_MAX:  # 2^80 ids in one millisecond: borrow the next millisecond
                    ms += 1
                    rand = secrets.randbits(_RANDOM_BITS - 1)
            else:
                rand = secrets.randbits(_RANDOM_BITS - 1)  # top bit clear leaves room to increment
            self._last_ms, self._last_rand = ms, rand
        return (ms << _RANDOM_BITS) | rand

    def new_id(self, prefix: str) -> str:
        sep = "" if not prefix or prefix.endswith("_") else "_"
        return f"{prefix}{sep}{_b32(self._next(), 26)}"
