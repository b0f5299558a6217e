"""When do two facts say the same thing? The dedup/supersession rule of `remember` (docs/protocol.md: remember).

Public API:
- `decide(new_text, new_kind, old_text, old_kind, similarity, *, attributed=True) -> Decision`: one
  of `"duplicate"` (the new fact restates the old one; keep the old), `"supersede"` (the new fact
  replaces the old one) or `"distinct"` (two facts; keep both). The caller has already made sure
  the two facts are about the same entity (`attributed`) or both about none, in the same tenant and
  visibility.
- `distinguishing_tokens(text) -> set[str]`: the tokens that tell two similar sentences apart.
- `UPDATE_THRESHOLD`: the lowest cosine at which a genuine update still supersedes.

The rule, in order:
1. Identical text after case/whitespace folding -> `duplicate` (also without an embedder, D7).
2. Cosine similarity below `UPDATE_THRESHOLD` (0.55) -> `distinct`.
3. At `DEDUP_THRESHOLD` (0.95) or more, distinguishing tokens — numbers, dates, amounts,
   identifiers (anything with a digit, ALL-CAPS or camelCase words), quoted strings, proper nouns
   (capitalized words that are not common sentence words) and number words — are compared. A
   proper noun counts as shared when the other text contains the same word in any case. If they
   agree, it is the same statement, reworded: same kind -> `supersede` (the newer wording wins),
   different kind -> `duplicate`. If they differ, it is two facts unless rule 4 holds.
4. A GENUINE UPDATE — same attribute of the same subject, new value — supersedes at any cosine
   from `UPDATE_THRESHOLD` up (MiniLM puts "lives in Berlin" and "now lives in Lisbon" at 0.74).
   Below 0.95 nothing else merges. It is recognised only when all of these hold:
     a. same kind, and the kind is not `event` (two events with different dates or numbers are
        two events);
     b. the new text carries an update marker ("now", "currently", "moved", "changed", "pushed",
        "postponed", "rescheduled", "updated", "no longer", "instead of", "became", ...) and no
        additive word ("also", "too", "another", "as well": a second value beside the first);
     c. both texts, with update phrasings rewritten to the copula ("moved to", "was pushed to",
        "changed from X to", "is scheduled for", "became" -> "is"), "X no longer A; it is now B"
        read as "X is now B", the old value of "instead of X" dropped and marker adverbs removed,
        share a word prefix that ends in a pivot — a copula or attribute verb ("is", "has",
        "lives", "works", "prefers", ":" ...) — followed only by prepositions and articles, or by
        a unit noun before a number ("runs on port 8443");
     d. what differs after that prefix (minus a shared tail) is one value on each side: at most
        four words, no preposition inside ("20:00 on Fridays", "for the EU region" are a second
        fact), numbers only with the same nouns around them ("3 owners" / "12 replicas" differ),
        and a preposition on one side only ("is in room 4B" / "moved to room 5A") only when both
        values are numbers, dates or names;
     e. the attribute is named: by a specific verb ("lives", "prefers"), a noun in the subject
        ("phone", "deadline") or a noun the values share ("2 direct reports" / "5 direct
        reports"). "Alice is now in Dublin" after "Alice is a staff engineer" names none.
     f. below 0.95, facts on no entity also need a name or identifier in the subject ("The Orion
        deadline", not "The deadline"): nothing else says the two are about the same thing.
   A differing token in the subject ("Invoice 2026-118 … is now paid" vs "Invoice 2026-119 …")
   or right after a noun ("has now paid invoice 2026-119") makes them two facts.

The rule prefers keeping two facts over merging two: a missed update leaves an older fact active
(recall shows both, newest first); a wrong merge hides a true fact. An agent that knows which fact
a new one replaces says so with remember's `supersedes`, which needs no rule at all.
"""

from __future__ import annotations

import re
from typing import Literal

from fleetmem.memory.sameness_words import (
    _ADDITIVE,
    _ADDITIVE_PHRASES,
    _BECAME,
    _COMMON,
    _COPULAS,
    _DATE_WORDS,
    _FILLERS,
    _FUNCTION_WORDS,
    _GENERIC_PIVOTS,
    _INSTEAD,
    _MARKER_ADVERBS,
    _MARKER_PHRASES,
    _MARKERS,
    _MONTHS,
    _NO_LONGER,
    _NUMBER_WORDS,
    _PIVOTS,
    _PREPOSITIONS,
    _QUOTED,
    _SCHEDULED,
    _UPDATE_PHRASE,
    _VALUE_WORDS,
    _WEEKDAYS,
    _WORD,
    _WS,
    UPDATE_THRESHOLD,
)
from fleetmem.protocol import DEDUP_THRESHOLD

Decision = Literal["duplicate", "supersede", "distinct"]


def _fold(text: str) -> str:
    return _WS.sub(" ", text.casefold()).strip()


def _date_token(m: re.Match[str]) -> str:
    month = (m.group("m1") or m.group("m2")).casefold()[:3]
    day = int(m.group("d1") or m.group("d2"))
    year = m.group("y1") or m.group("y2") or ""
    return f" date_{month}_{day}{'_' + year if year else ''} "


def _words(text: str) -> list[str]:
    """Word tokens in order, dates like "June 3" collapsed into one token, possessives dropped."""
    text = _DATE_WORDS.sub(_date_token, text)
    out = []
    for raw in _WORD.findall(text):
        w = raw.rstrip(".,;!?)'’-")
        for suffix in ("'s", "’s"):
            if w.casefold().endswith(suffix):
                w = w[: -len(suffix)]
        if w:
            out.append(w)
    return out


def _number(token: str) -> str:
    t = token.casefold().lstrip("$€£#")
    if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", t):
        t = t.replace(",", "")
    return t


def _is_identifier(word: str) -> bool:
    if any(c.isdigit() for c in word):
        return True
    letters = [c for c in word if c.isalpha()]
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return True  # ACME, SKU, Q (single letters are not identifiers)
    return any(c.isupper() for c in word[1:]) or "_" in word  # camelCase, snake_case


def distinguishing_tokens(text: str) -> set[str]:
    tokens: set[str] = set()
    for m in _QUOTED.finditer(text):
        quoted = next(g for g in m.groups() if g is not None)
        tokens.add("q:" + _fold(quoted))
    for w in _words(text):
        low = w.casefold()
        if low.startswith("date_"):
            tokens.add(low)
        elif _is_identifier(w):
            tokens.add(_number(w))
        elif low in _NUMBER_WORDS or low in _WEEKDAYS:
            tokens.add(low)
        elif w[:1].isupper() and low not in _COMMON and low not in _MARKERS:
            tokens.add("p:" + low)  # proper noun
    return tokens


def _differ(a: str, b: str) -> bool:
    ta, tb = distinguishing_tokens(a), distinguishing_tokens(b)
    words_a = {w.casefold() for w in _words(a)}
    words_b = {w.casefold() for w in _words(b)}

    def missing(t: str, other_tokens: set[str], other_words: set[str]) -> bool:
        if t in other_tokens:
            return False
        if t.startswith("p:"):
            return t[2:] not in other_words  # "Tea" vs "tea": the same word, not a new name
        return True

    return any(missing(t, tb, words_b) for t in ta) or any(missing(t, ta, words_a) for t in tb)


def _has_marker(text: str) -> bool:
    folded = _fold(text)
    return bool(_MARKERS & {w.casefold() for w in _words(text)}) or any(p in folded for p in _MARKER_PHRASES)


def _is_additive(text: str) -> bool:
    """A second value beside the first, not a new one: "Alice now ALSO speaks Portuguese"."""
    folded = _fold(text)
    return bool(_ADDITIVE & {w.casefold() for w in _words(text)}) or any(p in folded for p in _ADDITIVE_PHRASES)


def _canonical(text: str) -> list[str]:
    """The words of `text` (original case) with update phrasings rewritten to the copula, the old
    value of "instead of X" dropped and marker adverbs removed:
    "The deadline was pushed to May 3 instead of May 1" -> The deadline is May 3."""
    m = _NO_LONGER.match(text)
    if m:
        text = f"{m['subject']} {m['rest']}"  # "X no longer A; it is now B" -> "X is now B"
    text = _INSTEAD.sub("", text)
    for phrase in (_UPDATE_PHRASE, _SCHEDULED, _BECAME):
        text = phrase.sub(" is ", text)
    # "status: green" reads as "status is green"
    return ["is" if w == ":" else w for w in _words(text) if w.casefold() not in _MARKER_ADVERBS and w != "new"]


def _is_value(word: str) -> bool:
    """A token that can be an attribute's whole value: a number, date, id, name, weekday or month."""
    low = word.casefold()
    if low.startswith("date_") or _is_identifier(word):
        return True
    if low in _NUMBER_WORDS or low in _WEEKDAYS or low.rstrip("s") in _WEEKDAYS or low in _MONTHS:
        return True
    return word[:1].isupper() and low not in _COMMON and low not in _MARKERS


def _is_content(word: str) -> bool:
    """A lower-case content word ("phone", "deadline", "reports"): it names the attribute."""
    return word[:1].islower() and word.replace("-", "").isalpha() and word.casefold() not in _FUNCTION_WORDS


def _same_shape(a: list[str], b: list[str]) -> bool:
    """Two values of the same words, but for numbers, dates or names in the same places."""
    return len(a) == len(b) and all(
        x.casefold() == y.casefold() or (_is_value(x) and _is_value(y)) for x, y in zip(a, b, strict=True)
    )


def _align(a: list[str], b: list[str]) -> tuple[int, int]:
    """(common prefix, common suffix) lengths of two word lists, case-folded; they never overlap."""
    fa, fb = [w.casefold() for w in a], [w.casefold() for w in b]
    p = 0
    while p < min(len(fa), len(fb)) and fa[p] == fb[p]:
        p += 1
    s = 0
    while s < min(len(fa), len(fb)) - p and fa[-1 - s] == fb[-1 - s]:
        s += 1
    return p, s


def _is_update(new_text: str, old_text: str, *, need_name: bool = False, marked: bool = True) -> bool:
    """The new text gives a NEW VALUE to the same attribute of the same subject (rule 3, "genuine
    update"). `need_name`: the subject must also contain a name or identifier (facts on no entity).
    `marked=False` (the `probable_update` notice, never a merge): no update marker is needed, but
    the attribute must then be a noun of the subject before a bare copula ("The Apollo launch
    deadline is A" / "... is B", "Project Atlas status: green" / "... is now red")."""
    if (marked and not _has_marker(new_text)) or _is_additive(new_text):
        return False
    new, old = _canonical(new_text), _canonical(old_text)
    p, s = _align(new, old)
    dn, do = new[p : len(new) - s], old[p : len(old) - s]  # the differing middles: the two values
    one_sided = bool(dn and do) and (dn[0].casefold() in _PREPOSITIONS) != (do[0].casefold() in _PREPOSITIONS)
    if one_sided:
        # A preposition on one side only ("is in room 4B" / "moved to room 5A" -> "is room 5A"):
        # compare without it; it is fine only when both values are numbers, dates or names.
        if dn[0].casefold() in _PREPOSITIONS:
            new = new[:p] + new[p + 1 :]
        else:
            old = old[:p] + old[p + 1 :]
        p, s = _align(new, old)
        dn, do = new[p : len(new) - s], old[p : len(old) - s]
    if not dn or not do or len(dn) > _VALUE_WORDS or len(do) > _VALUE_WORDS:
        return False
    n = [w.casefold() for w in new]
    values = [w for w in (*dn, *do) if w.casefold() not in _PREPOSITIONS and w.casefold() not in _FILLERS]
    valued = all(_is_value(w) for w in values)
    if one_sided and not valued:
        return False
    # Walk back from the divergence over prepositions and articles ("is at", "lives in the") to the
    # pivot; a unit noun right before a number is part of the attribute ("runs on port 8443").
    i = p - 1
    if i >= 0 and n[i] not in _PIVOTS | _PREPOSITIONS | _FILLERS and valued:
        i -= 1
    while i >= 0 and (n[i] in _PREPOSITIONS or n[i] in _FILLERS):
        i -= 1
    if i < 0 or n[i] not in _PIVOTS:
        return False
    # The values themselves: one slot each. A preposition in a value is another relation ("works
    # at Acme" / "works with Bob") or a qualifier that makes it another fact ("20:00 on Fridays",
    # "2027-02-01 for the EU region").
    # For the notice only, a value of one shape on both sides is still one value: a range ("9 to 5"
    # / "10 to 6").
    if any(w.casefold() in _PREPOSITIONS for w in (*dn, *do)) and (marked or not _same_shape(dn, do)):
        return False
    if any(any(c.isdigit() for c in w) for w in values) and not valued:
        return False  # "3 owners" / "12 replicas": numbers of different things
    subject = new[:i]
    if need_name and not any(_is_value(w) for w in subject):
        return False
    # The attribute must be named: by the verb ("lives", "prefers"), a noun in the subject ("phone",
    # "deadline") or a noun the values share ("2 direct reports" / "5 direct reports"). A bare
    # "Alice is ..." could be any attribute.
    shared_tail = new[len(new) - s :]
    if not marked:
        return n[i] in _COPULAS and any(_is_content(w) for w in subject)
    return n[i] not in _GENERIC_PIVOTS or any(_is_content(w) for w in (*subject, *shared_tail))


def decide(
    new_text: str, new_kind: str, old_text: str, old_kind: str, similarity: float | None, *, attributed: bool = True
) -> Decision:
    if _fold(new_text) == _fold(old_text):
        return "duplicate"
    if similarity is None or similarity < UPDATE_THRESHOLD:
        return "distinct"
    update_kind = new_kind == old_kind and new_kind != "event"
    if similarity >= DEDUP_THRESHOLD:
        if not _differ(new_text, old_text):
            return "supersede" if new_kind == old_kind else "duplicate"
        return "supersede" if update_kind and _is_update(new_text, old_text) else "distinct"
    # Below the dedup gate only a genuine update merges; on no entity its subject must name something.
    if update_kind and _is_update(new_text, old_text, need_name=not attributed):
        return "supersede"
    return "distinct"


def probable_update(
    new_text: str, new_kind: str, old_text: str, old_kind: str, similarity: float | None, *, attributed: bool = True
) -> bool:
    """A pair `decide` keeps as two facts that still reads as a new value of one attribute of the
    same subject: remember answers it with a `probable_update` notice naming the older fact (and
    the same call with `supersedes` as its fix), never by superseding. Two shapes:

    - no update marker, the attribute a noun of the subject before a bare copula, one value each
      side ("The Apollo launch deadline is 2027-01-15" / "... is 2027-02-01");
    - an update marker and a role: "X is the A (for Y)" / "X is now the B" (both values noun
      phrases after an article; the old one may carry a qualifier the new one drops).
    """
    if _fold(new_text) == _fold(old_text) or similarity is None or similarity < UPDATE_THRESHOLD:
        return False
    if new_kind != old_kind or new_kind == "event" or _is_additive(new_text):
        return False
    if _is_update(new_text, old_text, need_name=not attributed, marked=False):
        return True
    return _has_marker(new_text) and _is_role_change(new_text, old_text)


def _is_role_change(new_text: str, old_text: str) -> bool:
    """ "Maya Lin is the product manager for Atlas" -> "Maya Lin is now the engineering director"."""
    new, old = _canonical(new_text), _canonical(old_text)
    p, _ = _align(new, old)
    n = [w.casefold() for w in new]
    o = [w.casefold() for w in old]
    if p == 0 or (n[p - 1] not in _COPULAS and not (p >= 2 and n[p - 1] in _FILLERS and n[p - 2] in _COPULAS)):
        return False
    if n[p - 1] not in _FILLERS:  # each value opens with its own article
        if p >= len(n) or p >= len(o) or n[p] not in _FILLERS or o[p] not in _FILLERS:
            return False
        p += 1
    dn, do = new[p:], old[p:]
    cut = next((k for k, w in enumerate(do) if w.casefold() in _PREPOSITIONS), len(do))  # "... for Atlas"
    do = do[:cut]
    return (
        0 < len(dn) <= _VALUE_WORDS
        and 0 < len(do) <= _VALUE_WORDS
        and n[p:] != o[p : p + cut]
        and all(_is_content(w) for w in (*dn, *do))
    )
