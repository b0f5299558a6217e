"""When do two facts say the same thing? The dedup/supersession rule of `remember` (docs/protocol.md: remember).

Public API:
- `decide(new_text, new_kind, old_text, old_kind, similarity) -> Decision`: one of
  `"duplicate"` (the new fact restates the old one; keep the old), `"supersede"` (the new fact
  replaces the old one) or `"distinct"` (two facts; keep both). The caller has already made sure
  the two facts are about the same entity, in the same tenant and visibility.
- `distinguishing_tokens(text) -> set[str]`: the tokens that tell two similar sentences apart.

The rule, in order:
1. Identical text after case/whitespace folding -> `duplicate` (also without an embedder, D7).
2. Cosine similarity below `DEDUP_THRESHOLD` (0.95) -> `distinct`.
3. Distinguishing tokens — numbers, dates, amounts, identifiers (anything with a digit,
   ALL-CAPS or camelCase words), quoted strings, proper nouns (capitalized words that are not
   common sentence words) and number words — are compared. A proper noun counts as shared when
   the other text contains the same word in any case.
   - They agree -> the same statement, reworded: same kind -> `supersede` (the newer wording
     wins), different kind -> `duplicate`.
   - They differ -> two facts, unless the pair is a GENUINE UPDATE: same attribute of the same
     subject, new value. That is recognised only when all of these hold:
       a. same kind, and the kind is not `event` (two events with different dates or numbers are
          two events);
       b. the new text carries an update marker ("now", "currently", "changed", "moved",
          "switched", "no longer", "instead", "rescheduled", "updated", "became", ...);
       c. the two texts, with marker adverbs removed, share a word prefix that contains a pivot —
          a copula or attribute verb ("is", "was", "has", "lives", "works", "prefers", ":" ...) —
          so the subject and its attribute are the same words in both;
       d. the texts diverge right after that pivot or after a preposition that follows it
          ("is 555-0199", "lives in Lisbon", "moved to 10:00"): the differing tokens are the VALUE.
     A differing token in the subject ("Invoice 2026-118 … is now paid" vs "Invoice 2026-119 …")
     or right after a noun ("has now paid invoice 2026-119") makes them two facts.

The rule prefers keeping two facts over merging two: a missed update leaves an older fact active
(recall shows both, newest first); a wrong merge hides a true fact.
"""

from __future__ import annotations

import re
from typing import Literal

from fleetmem.protocol import DEDUP_THRESHOLD

Decision = Literal["duplicate", "supersede", "distinct"]

_WS = re.compile(r"\s+")

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
# "June 3", "June 3rd, 2026", "3 June 2026" -> one date token, so a changed day is ONE differing token.
_DATE_WORDS = re.compile(
    rf"\b(?:(?P<m1>{_MONTH_RE})\.?\s+(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<y1>\d{{4}}))?"
    rf"|(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?P<m2>{_MONTH_RE})\.?(?:,?\s+(?P<y2>\d{{4}}))?)\b",
    re.IGNORECASE,
)
_QUOTED = re.compile(r"\"([^\"]+)\"|“([^”]+)”|`([^`]+)`|(?<![\w])'([^']+)'(?![\w])")
_WORD = re.compile(r"[#$€£@]?\w(?:[\w.'’/@#&+-]|[:,](?=\d))*|:|=", re.UNICODE)

#: capitalized words that are ordinary sentence words, not names
_COMMON = set(
    """
    a an the this that these those it its it's he she they we i you our their his her my your them us
    is are was were be been am has have had do does did will would can could should may might must
    and or but so if then than when while where who what which why how not no yes
    in on at to for of from by with about as into over after before since until during per via
    there here all any each every some many most more less few one also just only still already
    now currently today tomorrow yesterday new old next last please note update updated
    stand-up standup meeting team customer client invoice order ticket
    """.split()
)
_NUMBER_WORDS = set(
    """
    zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    thousand million billion first second third fourth fifth sixth seventh eighth ninth tenth once
    twice half dozen
    """.split()
)
_WEEKDAYS = set("monday tuesday wednesday thursday friday saturday sunday".split())

#: words in the NEW text that say it replaces an older value
_MARKERS = {
    "now",
    "currently",
    "changed",
    "changes",
    "moved",
    "moves",
    "switched",
    "switches",
    "rescheduled",
    "updated",
    "instead",
    "anymore",
    "longer",
    "became",
    "becomes",
    "renamed",
    "replaced",
    "corrected",
    "actually",
    "newly",
    "new",
}
#: marker adverbs removed before the word prefixes are compared ("is now 5" ~ "is 4")
_MARKER_ADVERBS = {"now", "currently", "actually", "instead", "anymore", "newly", "still"}
#: copulas and attribute verbs: what follows them is the value of the subject's attribute
_PIVOTS = {
    ":",
    "=",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "am",
    "has",
    "have",
    "had",
    "uses",
    "use",
    "used",
    "prefers",
    "prefer",
    "preferred",
    "likes",
    "like",
    "lives",
    "live",
    "works",
    "work",
    "moved",
    "changed",
    "switched",
    "rescheduled",
    "costs",
    "cost",
    "owns",
    "runs",
    "leads",
    "reports",
    "sits",
    "starts",
    "ends",
    "became",
    "becomes",
    "renamed",
    "replaced",
    "set",
    "equals",
    "weighs",
    "earns",
    "pays",
    "charges",
    "drives",
    "speaks",
    "reads",
    "wants",
    "needs",
    "targets",
    "holds",
    "stays",
}
_PREPOSITIONS = {"to", "in", "at", "on", "from", "for", "by", "with", "as", "into", "until", "till", "under"}


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


def _is_update(new_text: str, old_text: str) -> bool:
    new_words = [w.casefold() for w in _words(new_text)]
    if not (_MARKERS & set(new_words)) and "no longer" not in _fold(new_text):
        return False
    new_seq = [w for w in new_words if w not in _MARKER_ADVERBS]
    old_seq = [w.casefold() for w in _words(old_text) if w.casefold() not in _MARKER_ADVERBS]
    prefix = 0
    while prefix < min(len(new_seq), len(old_seq)) and new_seq[prefix] == old_seq[prefix]:
        prefix += 1
    if prefix == 0 or prefix == len(new_seq) or prefix == len(old_seq):
        return False
    common = new_seq[:prefix]
    first_pivot = next((i for i, w in enumerate(common) if w in _PIVOTS), None)
    if first_pivot is None:
        return False
    before = common[-1]
    if before in _PIVOTS:
        return True
    # "lives in Berlin" -> "lives in Lisbon": a preposition right after the pivot
    return (
        before in _PREPOSITIONS
        and prefix - 1 > first_pivot
        and all(w in _PIVOTS or w in _PREPOSITIONS for w in common[first_pivot + 1 : prefix])
    )


def decide(new_text: str, new_kind: str, old_text: str, old_kind: str, similarity: float | None) -> Decision:
    if _fold(new_text) == _fold(old_text):
        return "duplicate"
    if similarity is None or similarity < DEDUP_THRESHOLD:
        return "distinct"
    if not _differ(new_text, old_text):
        return "supersede" if new_kind == old_kind else "duplicate"
    if new_kind == old_kind and new_kind != "event" and _is_update(new_text, old_text):
        return "supersede"
    return "distinct"
