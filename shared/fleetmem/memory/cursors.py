"""Opaque paging cursors (list_facts, list_pages): a small JSON object in unpadded URL-safe base64,
and the `cursor` parameter that refuses a value that does not decode.

Public API:
- `encode(data) -> str` / `decode(cursor) -> dict | None`: the wire form of a cursor and back (None
  for text that is not base64 of a JSON object).
- `CursorArg(tool, start, known) -> type`: the `cursor` parameter of `tool`. `known(cursor)` reads a
  cursor (None: not one of `tool`'s); a cursor it cannot read is refused (`fm_cursor`) with a fix
  that leaves the cursor out, so the listing starts over from `start` instead of reading as the end.
- `CURSOR_DESCRIPTION`: that parameter's description.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from fleetmem.memory.params import DROP, Hint

CURSOR_DESCRIPTION = "next_cursor from the previous call, passed back unchanged."


def encode(data: dict[str, Any]) -> str:
    raw = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> dict[str, Any] | None:
    text = cursor.strip()
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode())
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def CursorArg(tool: str, start: str, known: Callable[[str], object]) -> Any:
    def _known(value: str | None) -> str | None:
        if value is not None and value.strip() and known(value) is None:
            raise PydanticCustomError(
                "fm_cursor",
                f"cursor is not a next_cursor {tool} returned (it does not decode), so where to resume is unknown.",
            )
        return value

    return Annotated[
        str | None,
        AfterValidator(_known),
        Hint(
            accepts=f"a next_cursor from {tool}",
            cause="cursor is opaque: pass back exactly the next_cursor of the previous call; without it "
            f"the listing starts from {start}.",
            fix=DROP,
        ),
    ]
