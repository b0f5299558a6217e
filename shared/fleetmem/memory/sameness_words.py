"""The words and patterns the sameness rule reads facts with (`sameness`): months, date words,
number words, change markers, pivots, update verbs. Data only; the rule is in `sameness`."""

from __future__ import annotations

import re

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
    "pushed",
    "postponed",
    "delayed",
    "bumped",
    "shifted",
    "extended",
    "slipped",
    "increased",
    "raised",
    "reduced",
    "decreased",
    "lowered",
    "dropped",
    "upgraded",
    "downgraded",
    "become",
}
#: marker phrases (the new text is matched after case/whitespace folding)
_MARKER_PHRASES = ("no longer", "instead of", "rather than", "changed from", "moved from")
#: words that add a second value beside the first instead of replacing it
_ADDITIVE = {"also", "too", "additionally", "another", "both", "additional", "extra"}
_ADDITIVE_PHRASES = ("as well", "in addition")
#: marker adverbs removed before the word prefixes are compared ("is now 5" ~ "is 4")
_MARKER_ADVERBS = {"now", "currently", "actually", "instead", "anymore", "newly", "still"}
#: pivots that name no attribute by themselves ("Alice is ...", "Acme has ..."): the subject or
#: the words the two values share must name it
_GENERIC_PIVOTS = {
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
    "moved",
    "changed",
    "switched",
    "rescheduled",
    "became",
    "becomes",
    "renamed",
    "replaced",
    "set",
}
#: copulas and attribute verbs: what follows them is the value of the subject's attribute
_PIVOTS = _GENERIC_PIVOTS | {
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
    "costs",
    "cost",
    "owns",
    "runs",
    "leads",
    "reports",
    "sits",
    "starts",
    "ends",
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
    "based",
    "located",
    "opens",
    "closes",
    "lasts",
    "begins",
    "expires",
    "meets",
    "renews",
    "launches",
    "lands",
    "departs",
}
#: bare copulas: before one, only the subject names the attribute ("The deadline is ...")
_COPULAS = {"is", "are", "was", "were"}
_PREPOSITIONS = {"to", "in", "at", "on", "from", "for", "by", "with", "as", "into", "until", "till", "under"}
#: articles and titles between a pivot and its value ("is based in the London office", "is Dr. Kerr")
_FILLERS = {"the", "a", "an", "dr", "mr", "mrs", "ms", "prof"}
#: words that never name an attribute
_FUNCTION_WORDS = (
    set("a an the this that these those it its he she they we i you his her their our my your".split())
    | set("and or of not no will would can could should may might must do does did".split())
    | _PIVOTS
    | _PREPOSITIONS
    | _MARKERS
)
#: a value is at most this many words ("Principal Engineer", "Saturday 23:00")
_VALUE_WORDS = 4
#: below `DEDUP_THRESHOLD` a genuine update (rule 4) still supersedes down to this cosine: MiniLM
#: puts "Alice lives in Berlin" and "Alice now lives in Lisbon" at 0.74. Nothing else merges there.
UPDATE_THRESHOLD = 0.55

# Update phrasings, rewritten to the copula before the two texts are compared: "moved to",
# "was pushed to", "has been postponed until", "changed from X to", "is now scheduled for",
# "became" -> "is".
_UPDATE_VERBS = (
    r"moved|moves|pushed(?:\s+back)?|postponed|delayed|rescheduled|changed|changes|updated|switched|switches|"
    r"bumped|shifted|extended|slipped|increased|raised|reduced|decreased|lowered|dropped|cut|upgraded|"
    r"downgraded|renamed|reset|set|brought\s+forward"
)
_UPDATE_PHRASE = re.compile(
    rf"\b(?:(?:has|have|had)\s+)?(?:(?:been|was|were|is|are|got|gets)\s+)?(?:now\s+)?(?:{_UPDATE_VERBS})"
    r"(?:\s+from\s+[^,;]+?)?\s+(?:to|for|until|till)\b",
    re.IGNORECASE,
)
_SCHEDULED = re.compile(
    r"\b(?:is|are|was|were)\s+(?:now\s+)?(?:scheduled|planned|slated|due)\s+(?:for|on|to|at)\b", re.IGNORECASE
)
_BECAME = re.compile(r"\b(?:(?:has|have)\s+become|became|becomes)\b", re.IGNORECASE)
# "X no longer A; (it/she ...) now B" -> "X now B"
_NO_LONGER = re.compile(
    r"^(?P<subject>.*?)\s*\b(?:is\s+|are\s+|does\s+|do\s+)?no\s+longer\b[^;,.]*[;,.]\s*(?:and\s+|but\s+)?"
    r"(?:(?:she|he|they|it|this|that)\s+)?(?P<rest>\S.*)$",
    re.IGNORECASE,
)
# the old value named beside the new one: "instead of 09:30", "rather than email", "(was 4B)"
_INSTEAD = re.compile(
    r"\s*,?\s*\b(?:instead\s+of|rather\s+than|in\s+place\s+of)\b[^,;.]*|\s*\((?:was|previously|formerly)\b[^)]*\)",
    re.IGNORECASE,
)
