"""What a session-start hook injects from a `context_pack` answer (the hook and the console share it).

Pure: no I/O, no import of any layer above the contract, so the Claude Code hook and the console's
context preview turn the same answer into the same text.
"""

from __future__ import annotations

from typing import Any


def injected_context(body: dict[str, Any]) -> str | None:
    """The additionalContext text a session start injects for this `context_pack` body, or None when
    the pack holds neither a card nor a fact (nothing is injected then)."""
    text = body.get("text")
    if not isinstance(text, str) or not (body.get("cards") or body.get("facts")):
        return None
    return text
