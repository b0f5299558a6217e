"""Conflicting values on an entity, as the console finds them in what `list_facts` answers.

remember's own detection (`probable_update`) compares stored vectors, which no tool returns, and the
console may not import the memory package (pyproject.toml's import contracts), so the console reads
the active facts' text instead: two or more active facts of one kind (not events) that say "<the
same attribute> is <a value>" (`is`, `are`, `was`, `were`, or a colon; "is now" counts as "is")
with different values are one conflict. "Ada's desk is 3A" and "Ada's desk is 5C" conflict; "Ada
prefers tea" and "Ada prefers coffee" do not (no copula), and neither do two events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: "<attribute> is|are|was|were [now] <value>" or "<attribute>: <value>", the first such split.
_SPLIT = re.compile(r"^(?P<attr>.+?)(?:\s+(?:is|are|was|were)(?:\s+now)?\s+|\s*:\s+)(?P<value>.+)$", re.IGNORECASE)


def _fold(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")


@dataclass(frozen=True)
class Conflict:
    """One attribute of an entity with more than one active value: the facts, newest first."""

    attribute: str
    kind: str
    facts: list[dict[str, Any]]


def attribute_of(text: str) -> tuple[str, str] | None:
    """(attribute, value) of a fact's text, both case- and space-folded, or None."""
    found = _SPLIT.match(text.strip())
    if found is None:
        return None
    return _fold(found["attr"]), _fold(found["value"])


def conflicts(facts: list[dict[str, Any]]) -> list[Conflict]:
    """The attributes that more than one ACTIVE fact gives different values, in the order their
    newest fact appears in `facts` (list_facts answers newest first)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    shown: dict[tuple[str, str], str] = {}
    for f in facts:
        if f.get("status") != "active" or f.get("kind") == "event":
            continue
        split = attribute_of(str(f.get("fact") or ""))
        if split is None:
            continue
        key = (str(f.get("kind")), split[0])
        groups.setdefault(key, []).append(f)
        shown.setdefault(key, _SPLIT.match(str(f["fact"]).strip())["attr"])  # type: ignore[index]
    out = []
    for key, group in groups.items():
        values = {attribute_of(str(f["fact"]))[1] for f in group}  # type: ignore[index]
        if len(values) > 1:
            out.append(Conflict(attribute=shown[key], kind=key[0], facts=group))
    return out
