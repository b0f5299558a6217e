"""Zero-LLM candidate entity names from the tail of a Claude Code transcript (JSONL).

Only the last `max_bytes` of the file are read (the first, partial line is dropped), and only the
conversation's text: user and assistant `text` blocks and compaction summaries — not tool inputs
or outputs, which are mostly file contents and commands. Candidates are slugs (`people/alice`,
`[[companies/acme]]`), capitalized name spans (`Alice Example`, `Acme Corp`, `Émile Durand`,
`Тимур Ахметов`: Latin, Greek, Cyrillic and the other cased scripts) and kebab-case
names (`alice-example`), ranked by how often and how recently they occur. They are only
candidates: the `entity` verb decides what is a known entity.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

DEFAULT_TAIL_BYTES = 64 * 1024

_SLUG = re.compile(r"(?<![\w/.:@-])([a-z0-9][a-z0-9_-]*(?:/[a-z0-9][a-z0-9_-]*){1,2})(?![\w/-]|\.\w)")
_WIKI = re.compile(r"\[\[([^\[\]|]{1,120})(?:\|[^\[\]]*)?\]\]")
#: The blocks of the Basic Multilingual Plane that hold cased letters beyond ASCII (Latin, Greek,
#: Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic, fullwidth Latin).
_CASED_BLOCKS = (
    (0x00C0, 0x058F),
    (0x10A0, 0x10FF),
    (0x13A0, 0x13FF),
    (0x1C80, 0x1CBF),
    (0x1E00, 0x1FFF),
    (0x2C00, 0x2D2F),
    (0xA640, 0xA69F),
    (0xA720, 0xA7FF),
    (0xAB70, 0xABBF),
    (0xFF21, 0xFF5A),
)


def _letters(cased: str) -> str:
    """A character class body of the letters of every script in `_CASED_BLOCKS` (and ASCII) that are
    upper- (or title-) case, or lower-case, as ranges: "Émile", "Łukasz", "Тимур" are names too."""
    wanted = (lambda ch: ch.isupper() or ch.istitle()) if cased == "upper" else str.islower
    points = [c for lo, hi in _CASED_BLOCKS for c in range(lo, hi + 1) if wanted(chr(c))]
    runs: list[list[int]] = []
    for c in points:
        if runs and runs[-1][1] == c - 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    body = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in runs)
    return ("A-Z" if cased == "upper" else "a-z") + body


_UPPER, _LOWER = _letters("upper"), _letters("lower")
_CAP_WORD = rf"[{_UPPER}][\w&'-]*[{_LOWER}][\w&'-]*"
_NAME = re.compile(rf"(?<![\w/.-])({_CAP_WORD}(?:[ \t]+{_CAP_WORD}){{0,3}})(?![\w/-])")
_KEBAB = re.compile(r"(?<![\w/.-])([a-z][a-z0-9]+(?:-[a-z0-9]+){1,4})(?![\w/-]|\.\w)")

#: Capitalized words that start sentences or name no one; dropped as single words and from span edges.
STOPWORDS = frozenset(
    """a about after again all also an and any are as at be because been before being both but by can
    could did do does doing done each either even every few for from had has have having he her here
    hers him his how i if in into is it its just let lets like maybe me more most my no nor not now
    of off ok okay on once only or other our ours out over please same she should so some such than
    thanks thank that the their theirs them then there these they this those though through to too
    under until up us very was we were what when where which while who whom why will with would yes
    yet you your yours sure great good done next first last new note todo fix fixed error warning
    true false none null monday tuesday wednesday thursday friday saturday sunday january february
    march april may june july august september october november december today tomorrow yesterday
    user assistant claude human system file files test tests run running step steps""".split()
)


def read_tail_texts(path: str | os.PathLike[str], max_bytes: int = DEFAULT_TAIL_BYTES) -> list[str]:
    """The conversation text in the last `max_bytes` of a JSONL transcript, oldest first."""
    p = Path(path)
    with p.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read(max_bytes)
    if start > 0:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    texts: list[str] = []
    for line in data.splitlines():
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(record, dict):
            texts += record_texts(record)
    return texts


def record_texts(record: dict[str, Any]) -> list[str]:
    if record.get("type") == "summary" and isinstance(record.get("summary"), str):
        return [record["summary"]]
    message = record.get("message")
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    out = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            out.append(block["text"])
    return out


def _trim_span(span: str) -> str:
    words = span.split()
    while words and words[0].lower().strip("'") in STOPWORDS:
        words.pop(0)
    while words and words[-1].lower().strip("'") in STOPWORDS:
        words.pop()
    return " ".join(words)


def _scores(texts: list[str]) -> dict[str, list[float]]:
    """name -> [tier, count, position of its last mention] (positions grow through the texts)."""
    scores: dict[str, list[float]] = {}
    position = 0

    def seen(name: str, tier: int) -> None:
        name = name.strip()
        if len(name) < 3 or len(name) > 120:
            return
        entry = scores.setdefault(name, [tier, 0, 0])
        entry[0] = min(entry[0], tier)
        entry[1] += 1
        entry[2] = position

    for text in texts:
        for m in _WIKI.finditer(text):
            position += 1
            seen(m.group(1), 0)
        for m in _SLUG.finditer(text):
            position += 1
            seen(m.group(1), 0)
        for m in _NAME.finditer(text):
            position += 1
            span = _trim_span(m.group(1))
            if span and (" " in span or span.lower() not in STOPWORDS):
                seen(span, 1)
        for m in _KEBAB.finditer(text):
            position += 1
            seen(m.group(1), 2)
    return scores


def last_mentions(texts: list[str]) -> dict[str, float]:
    """Each candidate name (case-folded) -> the position of its last mention: larger is newer."""
    out: dict[str, float] = {}
    for name, (_tier, _count, last) in _scores(texts).items():
        out[name.lower()] = max(out.get(name.lower(), 0), last)
    return out


def candidates(texts: list[str], limit: int = 24) -> list[str]:
    """Distinct candidate names, best first: slugs, then names, then kebab-case, each by frequency
    and then recency (a later mention ranks higher)."""
    scores = _scores(texts)
    ranked = sorted(scores.items(), key=lambda kv: (kv[1][0], -kv[1][1], -kv[1][2]))
    out: list[str] = []
    folded: set[str] = set()
    for name, _score in ranked:
        if name.lower() not in folded:
            folded.add(name.lower())
            out.append(name)
        if len(out) >= limit:
            break
    return out
