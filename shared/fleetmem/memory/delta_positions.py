"""Change positions of delta (D14, D19): TTL-expiry positions, the fact tie-break inside a
millisecond, and merging two change lists of one sequence.

Public API: `expiry_key(position, *, raw=False)`, `NO_SEQ`, `FACT_TIE`, `fact_tie(slug)`,
`merge_changes(a, b, limit)`.
"""

from __future__ import annotations

from typing import Any

from fleetmem.timefmt import parse_iso

#: The seq of an expiry position given without one ("<ISO>"): after everything of that millisecond.
NO_SEQ = 2**63 - 1

#: `since_slug` of a position between facts created in the same millisecond: "#f<seq>" (no slug
#: starts with "#", and "#" sorts before every character a slug can start with, so the pages
#: keyset reads it as "every page of that millisecond is still pending").
FACT_TIE = "#f"


def expiry_key(position: str, *, raw: bool = False) -> Any:
    """A TTL-expiry position "<ISO>#<seq>" (or "<ISO>": after everything of that millisecond) as
    (datetime, seq) — comparable, or with `raw` the (datetime, seq | None) the store takes."""
    when, _, seq = position.partition("#")
    at = parse_iso(when)
    if at is None or (seq and not seq.isdigit()):
        raise ValueError("not an expiry position")
    if raw:
        return at, int(seq) if seq else None
    return at, int(seq) if seq else NO_SEQ


def fact_tie(slug: str) -> int | None:
    rest = slug[len(FACT_TIE) :] if slug.startswith(FACT_TIE) else ""
    return int(rest) if rest.isdigit() and len(rest) <= 18 else None


def merge_changes(a: list[tuple[int, Any]], b: list[tuple[int, Any]], limit: int) -> tuple[list[tuple[int, Any]], bool]:
    """Two change lists of one sequence (each ascending, fetched `limit + 1`) as one: ascending,
    at most `limit`, cut before the first number either list could not show past; and whether
    anything lies beyond."""
    tops = [lst[limit][0] for lst in (a, b) if len(lst) > limit]
    merged = sorted(a + b, key=lambda e: e[0])
    if tops:
        merged = [e for e in merged if e[0] < min(tops)]
    return merged[:limit], bool(tops) or len(merged) > limit
