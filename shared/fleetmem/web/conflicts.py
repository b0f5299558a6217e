"""Conflicting values on an entity, as `list_facts {entity, conflicts: true}` answers them.

The server groups the listed active facts that give one attribute different values with the
detection behind remember's `probable_update` notice (`sameness.probable_update` on the stored
vectors); the console only labels each group: the attribute the facts share ("Ada's desk" for
"Ada's desk is 3A" / "Ada's desk is 5C"), read from the words the texts begin with in common.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: The arguments that ask list_facts for the groups with the facts (merged into its arguments).
ASK = {"conflicts": True}
_COPULAS = {"is", "are", "was", "were", "now"}


@dataclass(frozen=True)
class Conflict:
    """One attribute of an entity with more than one active value: the facts, newest first."""

    attribute: str
    kind: str
    facts: list[dict[str, Any]]


def _label(texts: list[str]) -> str:
    """The words every text begins with (case-folded compare, the first text's spelling), without a
    trailing copula or colon: the attribute they give values to."""
    words = [t.split() for t in texts]
    shared = 0
    while all(len(w) > shared for w in words) and len({w[shared].casefold() for w in words}) == 1:
        shared += 1
    label = words[0][:shared]
    while label and (label[-1].casefold() in _COPULAS or label[-1] == ":"):
        label.pop()
    return " ".join(label).rstrip(":") or texts[0]


def conflicts(answer: dict[str, Any]) -> list[Conflict]:
    """The conflicts of a list_facts answer asked with `ASK`, in the order their newest fact appears
    (list_facts answers newest first); none when the answer carries no groups."""
    by_id = {f.get("fact_id"): f for f in answer.get("facts") or []}
    out = []
    for group in answer.get("conflicts") or []:
        facts = [by_id[i] for i in group if i in by_id]
        if len(facts) > 1:
            label = _label([str(f.get("fact") or "") for f in facts])
            out.append(Conflict(attribute=label, kind=str(facts[0].get("kind")), facts=facts))
    return out
