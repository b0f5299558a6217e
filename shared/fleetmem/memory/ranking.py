"""Rank fusion shared by every search caller (both backends rank identically because fusion lives here).

Public functions:
- `rrf(arms: list[list[str]], k: int = 60) -> list[tuple[str, float]]`: Reciprocal Rank Fusion.
  Each arm is a list of ids best first; an id scores sum(1 / (k + rank)) over the arms it appears
  in (rank starts at 1; a repeated id within one arm counts once, at its best rank). Returns
  (id, score) best first; ties keep first-seen order (earlier arm, earlier rank), so output is
  deterministic.
- `fuse(ranking, query, keyword_hits, vector_hits) -> list[tuple[str, float]]`: one of RANKINGS —
  "keyword" (the keyword arm's order), "vector" (the vector arm's order), "rrf" (plain RRF of
  both) or "shipped" (what recall uses). The first three exist for `scripts/bench quality --set
  conversations`, which compares them.
- `shipped(query, keyword_hits, vector_hits)`: RRF of the two arms with three changes, each
  measured on tests/data/conversations.json (docs/search-quality.md) (equal arm weights: a
  keyword weight of 1.5 helped the conversational facts but cost a page paraphrase in the
  `scripts/bench quality` default set):
  1. content words: a keyword hit counts only when it shares a content word (not a stopword, not
     an entity word) with the query. Entity words are query words that appear in a candidate's
     title (a fact's entity slug, a page's title): a question naming a person matches every turn
     of that person in BM25, which plain RRF takes as evidence. Without a vector arm (degraded),
     name-only matches still follow, after the content matches.
  2. entity boost: a hit whose title has an entity word of the query scores x(1 + ENTITY_BOOST).
  3. dates: the words of a date the query names are neither entity words nor content words (a
     page is titled "<speaker>, <date>": "august" is not a name, and "2026" matches every hit of
     the year), and a keyword hit about the asked day counts as a content match. When the query
     names a day ("14 March 2026", "March 14", "2026-03-14"), a hit whose
     text is about that day (`temporal.mentioned_days`: its own date, or a "yesterday"/"two days
     ago"/"last Saturday" resolved against it) scores x(1 + DATE_BOOST); "the week/day/month
     after|before <event>" takes the best hit as the event and boosts hits written in that window
     after (before) it. A hit with both boosts scores x(1 + ENTITY_BOOST) x (1 + DATE_BOOST) = x6
     (`compound`, the shipped ranking): the named person's turn of the asked day, found by the
     keyword arm alone, comes above another person's small talk of that day that both arms found.
     BEST_HIT adds them (x4), as recall ranked before.
  Everything uses only the hits' own title and text, so it costs no extra store call.
- `parts(query) -> list[str]`: the questions a query asks at once ("What breed is Maya's puppy, and
  how often does Daniel have Japanese lessons?" -> two), split where ", and" / "and" / "," / ";"
  is followed by a question word and every part starts with one and has 3+ words; at most
  MAX_PARTS; `[query]` when it asks one thing. A later part that refers back with "it" / "they" /
  "them" / "that" / "this" gets the first part's content words, not its names ("What party did
  Omar organise and how did it go?" -> "What party did Omar organise", "how did it go party
  organise").
- `distinct(ranking, hits)`: every hit that says word for word what a hit above it says (but for
  the dates; `_said`) moved after the others, each group in its order. Recall applies it to its
  fused list (`search.hybrid_search`): three copies of "Hey! How was your week?" in a top 5 leave
  two places that a piece of the answer can take. `repeats_down` scores copies down within one
  search; `distinct` acts on the list the searches of a query make together.
- `LIST_DEPTH`: a list question's topic is searched that many times as deep (k per arm) as the
  query.
- `cover(rankings, late=None) -> list[tuple[str, float]]`: the rankings interleaved (each one's
  best, then each one's second, ...; an id once, at its first place), so every part of a question
  gets its best hit into the top k instead of the hits of one strongly matching part filling it;
  `late` joins from the second round on. Recall (`search.hybrid_search`) covers the whole query's
  shipped ranking and each part's; a query of one part costs nothing more, one of n parts n more
  searches and one batched embedding call. Measured on the held-out conversations
  (docs/search-quality.md).
- `topic(query) -> str | None`: what a question that names someone asks about, without the names
  ("Which hobbies have Maya and Leo taken up?" -> "Which hobbies have and taken up?", "What did
  Priya drink before?" -> "What did drink before?"); names are capitalised words after the first,
  in any script ("Émile", "Łukasz", "Тимур"; not months or weekdays). None for a query that names
  no one, or one that names a day (the day narrows it already).
- `lists(query) -> bool`: whether a question asks for a list: it says "each" / "both" / "all" /
  "every" / "things", starts "what/which <plural noun>", or joins two names with "and".
- `searches(query) -> (texts, topic)`: the texts searched besides the query itself: its parts, then
  its topic.
- `named(query, ranking, titles)`: the topic's ranking kept to the hits titled by an entity the
  query names, those titled by more of its names first (empty when it names none).
- `statements_first(ranking, texts)`: hits whose text is a question ("Was it as good as you
  hoped?") after the others.
- `questions_down(ranking, texts)`: such hits' scores x QUESTION_WEIGHT (0.3). `fuse(SHIPPED, ...)`
  applies it to every search recall makes (the whole query, each part, the topic): the small talk
  of the people a question names ("Anyway, what's new with you?", "How are you feeling about
  it?") matches their names and no longer pushes the second piece of an answer out of the top 5.
  `BEST_HIT` stays without it (the ranking recall shipped before, kept as the baseline).
- `repeats_down(ranking, hits)`: every hit whose text another hit of the ranking also has, word for
  word but for their dates ("Omar (3 May 2026): Miss our Friday drinks, we should restart them."
  and the same line of 31 May), scores x REPEAT_WEIGHT (0.3), the first copy too. `fuse(SHIPPED,
  ...)` applies it after `questions_down` to every search: in a long history the small talk said
  again and again otherwise fills the top 5 with copies of a few lines, ahead of the news said once.
  Recall ranks a list question's topic hits, kept to the people it names and statements first,
  ahead of the whole query's (`search.hybrid_search`): the names fill the whole query's vector with
  those people's small talk, the topic without them finds each person's pieces. Any other question
  that names someone gets the same topic hits into its cover one round late, after the best hit of
  the whole query and of each part: the second piece of "What did Priya drink before and what does
  she drink now?" shares no word with it, and among Priya's lines the topic's vector finds it. One
  more search in the same concurrent round and one more text in the embedding call, for questions
  that name someone.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from itertools import zip_longest

from fleetmem.memory.temporal import MONTH_NAMES, Day, date_words, dates_in, mentioned_days, written_day
from fleetmem.models import SearchHit

_TOKEN = re.compile(r"\w+", re.UNICODE)
_COMBINING = re.compile("[\u0300-\u036f]")

RRF_K = 60


def rrf(arms: list[list[str]], k: int = RRF_K) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    for arm in arms:
        seen: set[str] = set()
        for rank, item in enumerate(arm, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    order = {item: i for i, item in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


KEYWORD, VECTOR, PLAIN, BEST_HIT, SHIPPED = "keyword", "vector", "rrf", "best-hit", "shipped"
#: "best-hit" is `shipped` on the whole query only (no `cover` of its parts), as recall ranked before.
RANKINGS = (KEYWORD, VECTOR, PLAIN, BEST_HIT, SHIPPED)


def fuse(ranking: str, query: str, keyword: list[SearchHit], vector: list[SearchHit]) -> list[tuple[str, float]]:
    """(doc_id, score) best first under one of RANKINGS (see the module docstring) for one query's
    two arms (SHIPPED and BEST_HIT rank one query alike; SHIPPED's `cover` of parts is the caller's)."""
    if ranking == KEYWORD:
        return rrf([[h.doc_id for h in keyword]])
    if ranking == VECTOR:
        return rrf([[h.doc_id for h in vector]])
    if ranking == PLAIN:
        return rrf([[h.doc_id for h in keyword], [h.doc_id for h in vector]])
    if ranking not in (SHIPPED, BEST_HIT):
        raise ValueError(f"unknown ranking {ranking!r}; expected one of {RANKINGS}")
    fused = shipped(query, keyword, vector, compound=ranking == SHIPPED)
    if ranking == BEST_HIT:
        return fused
    hits = {h.doc_id: h for h in [*keyword, *vector]}
    return repeats_down(questions_down(fused, {d: h.text for d, h in hits.items()}), hits)


#: The most questions one query is split into (each costs one more search).
MAX_PARTS = 4
_ASKS = r"(?:what|which|who|whom|whose|where|when|why|how|did|does|do|is|are|was|were|has|have)\b"
_PART_SPLIT = re.compile(r"(?:,\s*(?:and\s+)?|\s+and\s+|;\s*)(?=" + _ASKS + ")", re.I)
_ASKS_START = re.compile(_ASKS, re.I)


def parts(query: str) -> list[str]:
    """The questions `query` asks at once (see the module docstring); `[query]` for one."""
    found = [p.strip(" ?") for p in _PART_SPLIT.split(query)]
    if not 2 <= len(found) <= MAX_PARTS or not all(_ASKS_START.match(p) and len(p.split()) >= 3 for p in found):
        return [query]
    return [found[0], *(_resolved(part, found[0]) for part in found[1:])]


#: A word by which a later part refers back to the first ("and how did it go?").
_REFERS = re.compile(r"\b(?:it|they|them|that|this)\b", re.I)


def _resolved(part: str, first: str) -> str:
    """A later part that refers back ("how did it go") with the first part's content words added,
    not its names ("What party did Omar organise" -> "how did it go party organise"): alone, it
    matches any small talk; names would pull it to the named person's small talk."""
    if not _REFERS.search(part):
        return part
    have = {w.casefold() for w in _TOKEN.findall(part)}
    carried = [
        w
        for w in _TOKEN.findall(first)
        if w.casefold() not in STOPWORDS and w.casefold() not in have and not _capitalised(w)
    ]
    return " ".join([part, *dict.fromkeys(carried)])


#: A question that asks for a list: "each", "both", "all", "every", "things", "what/which"
#: followed by a plural noun ("Which places has Maya been to?"), or two names joined
#: by "and" ("What have Leo and Ana been learning?", `_PAIR`; "on Saturdays and Sundays" too).
_SEVERAL = re.compile(
    r"(?i:\b(?:each|both|all|every|things)\b)"
    r"|^(?i:what|which)\s+(?:[a-z]\w*\s+)?(?!(?:is|was|does|has)\b)[a-z]\w{2,}s\b"
)
_PAIR = re.compile(r"\b(?=(\w{2,}),?\s+and\s+(\w{2,}))")  # overlapping: "cats and Leo and Ana"
_CALENDAR = frozenset(
    (
        "january february march april may june july august september october november december "
        "monday tuesday wednesday thursday friday saturday sunday"
    ).split()
)
#: A word after the first (with its "'s"): a name when it is capitalised (`_capitalised`).
_LATER_WORD = re.compile(r"(?<=\s)[^\W\d_]\w*(?:['’]s)?")
_POSSESSIVE = re.compile(r"['’]s$")


def _capital(word: str) -> bool:
    """Whether a word starts with a capital letter of any script ("Maya", "Émile", "Łukasz", "Тимур")."""
    return word[0].isupper() or word[0].istitle()


def _capitalised(word: str) -> bool:
    """Whether a word (with its "'s") is capitalised (`_capital`) and no month or weekday ("May's",
    "Saturdays"): a name."""
    folded = _POSSESSIVE.sub("", word).casefold()
    return _capital(word) and folded not in _CALENDAR and folded.removesuffix("s") not in _CALENDAR


def topic(query: str) -> str | None:
    """What a question asks about, without the names it gives ("Which places have Maya and Daniel
    been to?" -> "Which places have and been to?"); None when the query names nobody (a capitalised
    word after the first) or names a day."""
    if dates_in(query) or _RELATIVE.search(query):
        return None
    stripped = " ".join(_LATER_WORD.sub(lambda m: " " if _capitalised(m[0]) else m[0], query).split())
    return stripped if stripped != " ".join(query.split()) else None


def lists(query: str) -> bool:
    """Whether `query` asks for a list (see `_SEVERAL`)."""
    return bool(_SEVERAL.search(query)) or any(_capital(a) and _capital(b) for a, b in _PAIR.findall(query))


def searches(query: str) -> tuple[list[str], str | None]:
    """The texts searched besides the query itself: its parts (when it asks several questions) and
    then its topic (when it names someone); the second item is that topic or None."""
    asked = parts(query)
    extra = asked if len(asked) > 1 else []
    about = topic(query)
    return ([*extra, about] if about else extra), about


def named(query: str, ranking: list[tuple[str, float]], titles: dict[str, str]) -> list[tuple[str, float]]:
    """`ranking` (of the query's topic) kept to the hits titled by an entity the query names
    (`titles`: doc id -> title of every hit the query's searches returned); empty when the query
    names none of them (the topic alone is not what was asked). Hits titled by more of the names come
    first, each group in its order."""
    q = _words(query)
    words = {d: _words(t) for d, t in titles.items()}
    entity = q & set().union(*words.values()) if words else set()
    kept = [(d, s) for d, s in ranking if words.get(d, set()) & entity] if entity else []
    # A hit titled by more of the names first ("Daniel Moreau" before another Daniel).
    return sorted(kept, key=lambda e: -len(words[e[0]] & entity))


def _asks(text: str) -> bool:
    """Whether a hit's text is itself a question ("Was it as good as you hoped?")."""
    return text.rstrip().endswith("?")


def statements_first(ranking: list[tuple[str, float]], texts: dict[str, str]) -> list[tuple[str, float]]:
    """`ranking` with the hits whose text is itself a question after the others, each group in its
    order: an answer is stated, not asked."""
    return _after(ranking, {d for d, _ in ranking if _asks(texts.get(d, ""))})


def _after(ranking: list[tuple[str, float]], last: set[str]) -> list[tuple[str, float]]:
    """`ranking` with the hits in `last` after the others, each group in its order."""
    return [e for e in ranking if e[0] not in last] + [e for e in ranking if e[0] in last] if last else ranking


#: A hit whose text is a question scores x QUESTION_WEIGHT in the shipped ranking (0.3 ranked as
#: putting every question after every statement did on the tuning half, and still lets a question
#: that matches far better than any statement rank first).
QUESTION_WEIGHT = 0.3


def questions_down(ranking: list[tuple[str, float]], texts: dict[str, str]) -> list[tuple[str, float]]:
    """`ranking` with the score of every hit whose text is a question (`texts`: doc id -> text) times
    QUESTION_WEIGHT, re-sorted (ties keep their order)."""
    return _scaled(ranking, {d for d, _ in ranking if _asks(texts.get(d, ""))}, QUESTION_WEIGHT)


def _scaled(ranking: list[tuple[str, float]], down: set[str], weight: float) -> list[tuple[str, float]]:
    """`ranking` with the scores of the hits in `down` times `weight`, re-sorted (ties keep their order)."""
    return sorted(((d, s * weight if d in down else s) for d, s in ranking), key=lambda e: -e[1])


#: A hit whose text says word for word what another hit of the same search says, but for their
#: dates (a greeting of another day, a sign-off its speaker ends every chat with, a note saved twice),
#: scores x REPEAT_WEIGHT, every copy: a line said again and again is small talk, not a piece of an
#: answer (0.1 ranked the same as 0.3 on the tuning half).
REPEAT_WEIGHT = 0.3


def _said(hit: SearchHit) -> tuple[str, ...]:
    """The words of a hit's text but its dates', folded, in order."""
    return _said_of(hit.title, hit.text)


@lru_cache(maxsize=1024)
def _said_of(title: str, text: str) -> tuple[str, ...]:
    """`_said` of a hit's title and text: a pure function of the two strings, so a recall's searches
    (the facts and pages arms, `repeats_down` and `distinct` alike) and the next recall's read a
    hit's words once while it stays among the last 1,024
    (a recall reads at most a few hundred hits; a chunk's text is bounded, so is the cache)."""
    dates = date_words(title) | date_words(text)
    return tuple(w for w in _TOKEN.findall(_fold(text)) if w not in dates)


#: Characters of a hit's end compared first: only hits that end alike get their whole text read.
_ENDING = 80


def _ending(hit: SearchHit) -> tuple[str, ...]:
    """The last words of a hit's text but numbers and month names, folded: equal for two hits that
    say the same (`_said`) unless a date in their last words is written otherwise ("5th March")."""
    return _ending_of(hit.text[-_ENDING:])


@lru_cache(maxsize=4096)
def _ending_of(tail: str) -> tuple[str, ...]:
    """`_ending` of a text's last characters (a recall reads the same hits in several searches, and
    `repeats_down` and `distinct` both compare them)."""
    words = _TOKEN.findall(_fold(tail))
    return tuple(w for w in words if not w.isdigit() and w not in MONTH_NAMES)[-6:]


def repeats_down(ranking: list[tuple[str, float]], hits: dict[str, SearchHit]) -> list[tuple[str, float]]:
    """`ranking` with the score of every hit that says what another hit of it says (`_said`) times
    REPEAT_WEIGHT, re-sorted (ties keep their order). Only hits that end alike are read whole, so a
    ranking without repeats costs one short slice per hit."""
    said = _said_alike(ranking, hits)
    times = Counter(said.values())
    return _scaled(ranking, {d for d, s in said.items() if s and times[s] > 1}, REPEAT_WEIGHT)


def _said_alike(ranking: list[tuple[str, float]], hits: dict[str, SearchHit]) -> dict[str, tuple[str, ...]]:
    """What each hit of `ranking` that ends like another hit of it says (`_said`); the hits that end
    unlike every other are not read whole and not listed."""
    endings = {d: _ending(hits[d]) for d, _ in ranking if d in hits}
    alike = Counter(endings.values())
    return {d: _said(hits[d]) for d, e in endings.items() if alike[e] > 1}


#: A list question's topic is searched LIST_DEPTH times as deep as the query (k x 2 per arm): it
#: wants every piece, and in a long history the named people's news lies below the first 30 hits
#: (x2 and x3 ranked the same on the tuning half; x2 costs less).
LIST_DEPTH = 2


def distinct(ranking: list[tuple[str, float]], hits: dict[str, SearchHit]) -> list[tuple[str, float]]:
    """`ranking` with every hit that says what a hit above it says (`_said`: word for word but for
    the dates) moved after the others, each group in its order: a copy adds no piece to an answer."""
    said = _said_alike(ranking, hits)
    seen: set[tuple[str, ...]] = set()
    copies: set[str] = set()
    for d, _ in ranking:
        if said.get(d):
            if said[d] in seen:
                copies.add(d)
            seen.add(said[d])
    return _after(ranking, copies)


def cover(
    rankings: list[list[tuple[str, float]]], late: list[tuple[str, float]] | None = None
) -> list[tuple[str, float]]:
    """The rankings interleaved, best of each first, `late` joining from the second round on; the
    score is 1 / place (see the module docstring)."""
    columns: list[Sequence[tuple[str, float] | None]] = [*rankings, [None, *late]] if late else [*rankings]
    out: dict[str, float] = {}
    for tier in zip_longest(*columns):
        for entry in tier:
            if entry is not None and entry[0] not in out:
                out[entry[0]] = 1.0 / (len(out) + 1)
    return list(out.items())


#: Words that carry no content in a question (lexical evidence ignores them).
STOPWORDS = frozenset(
    "a about after all also am an and any are as at be been before being but by can could did do does "
    "doing for from had has have he her here hers him his how i if in into is it its just me more most "
    "my no nor not now of on or our out over own s same she should so some such t than that the their "
    "theirs them then there these they this those through to too under until up very was we were what "
    "when where which while who whom why will with would you your yours tell told say said share shared "
    "talk talked mention mentioned week day days".split()
)
#: Arm weights of the shipped fusion (tuned on tests/data/conversations.json; see README).
KEYWORD_WEIGHT, VECTOR_WEIGHT = 1.0, 1.0
#: Score multipliers: a hit whose title names an entity of the question; a hit about the asked day.
ENTITY_BOOST, DATE_BOOST = 1.0, 2.0
_RELATIVE = re.compile(r"\b(day|week|month)\s+(after|before)\b", re.I)
_WINDOWS = {"day": (1, 2), "week": (4, 10), "month": (20, 40)}


def _fold(text: str) -> str:
    """Case- and accent-folded (a slug "tomas" names "Tomás")."""
    folded = text.casefold()
    if not folded.isascii():
        folded = _COMBINING.sub("", unicodedata.normalize("NFKD", folded))
    return folded


def _words(text: str) -> set[str]:
    """Content words of `text`, folded."""
    return {w for w in _TOKEN.findall(_fold(text)) if w not in STOPWORDS}


def _about(asked: list[Day], text: str) -> bool:
    """Whether a hit's text is about one of the asked days (`temporal.mentioned_days`)."""
    return any(a.matches(day) for a in asked for day in mentioned_days(text))


def shipped(
    query: str, keyword: list[SearchHit], vector: list[SearchHit], *, compound: bool = True
) -> list[tuple[str, float]]:
    """RRF of the two arms, where a keyword hit counts only when it matches a content word of the
    query (not just a name that titles it), times a boost for hits titled by an entity the query names
    and for hits about a day the query names. With `compound` the two boosts multiply (x6 for a hit
    of the named person about the asked day); without, they add (x4, as BEST_HIT ranks)."""
    asked = dates_in(query)
    # The words of a date the query names are neither names nor content: a page titled by its date
    # ("Omar, 30 August 2026") does not make "august" a name, and "2026" would match every hit of
    # the year. A keyword hit about the asked day counts as a content match.
    day_words = date_words(query) if asked else set()
    q = _words(query) - day_words
    hits: dict[str, SearchHit] = {}
    for h in [*keyword, *vector]:
        hits.setdefault(h.doc_id, h)
    titles = {d: _words(h.title) for d, h in hits.items()}
    entity = q & set().union(*titles.values()) if titles else set()
    content = q - entity
    # One regex over each keyword hit's folded text (cheaper than tokenizing every chunk).
    has_content = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(content))) + r")\b") if content else None
    # The hits about an asked day, read once: they count as content matches and get the date boost.
    about = {d for d, h in hits.items() if _about(asked, h.text)} if asked else set()
    matched = {h.doc_id for h in keyword if h.doc_id in about or (has_content and has_content.search(_fold(h.text)))}
    lexical = [h.doc_id for h in keyword if h.doc_id in matched]
    if not vector:  # keyword-only (degraded): a name-only match is still the best there is
        lexical += [h.doc_id for h in keyword if h.doc_id not in matched]
    scores: dict[str, float] = {}
    for weight, arm in ((KEYWORD_WEIGHT, lexical), (VECTOR_WEIGHT, [h.doc_id for h in vector])):
        for rank, d in enumerate(dict.fromkeys(arm), start=1):
            scores[d] = scores.get(d, 0.0) + weight / (RRF_K + rank)
    for d in scores:
        boost = 1.0
        if entity and entity & titles[d]:
            boost += ENTITY_BOOST
        if d in about:
            boost = boost * (1.0 + DATE_BOOST) if compound else boost + DATE_BOOST
        scores[d] *= boost
    shift = _RELATIVE.search(query)
    if shift and scores:
        # "the week after <event>": the best hit is the event; boost what was written in the window.
        anchor = max(scores, key=lambda d: scores[d])
        anchor_day = written_day(hits[anchor].text)
        if anchor_day is not None:
            lo, hi = _WINDOWS[shift[1].lower()]
            sign = 1 if shift[2].lower() == "after" else -1
            for d in scores:
                day = written_day(hits[d].text) if d != anchor else None
                if d != anchor and day is not None and lo <= (day - anchor_day).days * sign <= hi:
                    scores[d] *= 1.0 + DATE_BOOST
    order = {d: i for i, d in enumerate(scores)}
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))
